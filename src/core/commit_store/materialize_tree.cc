// Materialising a tree. Order matters: directories exist before what they hold; files get
// content, then owner (which clears setuid bits and file capabilities), then mode, xattrs and
// times; directories get their metadata last, deepest first, because creating their entries
// changed their mtime.
#include "core/commit_store/materialize_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <unordered_map>
#include <vector>

#include "core/commit_store/open_beneath.h"
#include "core/parallel_for.h"
#include "core/unique_fd.h"

namespace rosetctl {
namespace {

struct Location {
  UniqueFd parent;   // the entry's directory, opened beneath the destination
  std::string leaf;  // the entry's own name in it
};

class Materializer {
 public:
  Materializer(int dest_fd, const MaterializeOptions& options)
      : dest_fd_(dest_fd), options_(options) {
    if (options.reuse_fd >= 0 && options.reuse_tree != nullptr) {
      for (const TreeEntry& entry : options.reuse_tree->entries) {
        if (entry.type == EntryType::kRegular) reusable_.emplace(entry.path, &entry);
      }
    }
  }

  Status create_node(const TreeEntry& entry);
  Status create_file(TreeEntry& entry, const ContentWriter& write_content, ContentBuffer& buffer);
  Status create_hard_link(const TreeEntry& entry);
  Status finish_directory(const TreeEntry& entry);

 private:
  std::string shown(const std::string& path) const {
    return path.empty() ? options_.shown_destination : options_.shown_destination + "/" + path;
  }
  Expected<Location> locate(const std::string& path, int root_fd = -1) const;
  bool take_reused(const TreeEntry& entry);
  Status set_metadata_at(const Location& where, const TreeEntry& entry);
  Status set_metadata_of_fd(int fd, const TreeEntry& entry);

  int dest_fd_;
  const MaterializeOptions& options_;
  std::unordered_map<std::string, const TreeEntry*> reusable_;  // reuse_tree's files by path
};

struct timespec to_timespec(int64_t ns) {
  int64_t seconds = ns / 1'000'000'000;
  int64_t rest = ns % 1'000'000'000;
  if (rest < 0) {
    rest += 1'000'000'000;
    --seconds;
  }
  return {static_cast<time_t>(seconds), static_cast<long>(rest)};
}

Expected<Location> Materializer::locate(const std::string& path, int root_fd) const {
  std::size_t slash = path.rfind('/');
  std::string parent = slash == std::string::npos ? "." : path.substr(0, slash);
  int fd = open_beneath(root_fd >= 0 ? root_fd : dest_fd_, parent, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return errno_status(errno, fmt::format("cannot open \"{}\"", shown(parent)));
  return Location{UniqueFd(fd), slash == std::string::npos ? path : path.substr(slash + 1)};
}

// For entries we hold no descriptor for (symlinks, devices, FIFOs, sockets).
Status Materializer::set_metadata_at(const Location& where, const TreeEntry& entry) {
  const char* leaf = where.leaf.c_str();
  int parent = where.parent.get();
  if (::fchownat(parent, leaf, entry.uid, entry.gid, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno_status(errno, fmt::format("cannot set the owner of \"{}\"", shown(entry.path)));
  }
  if (entry.type != EntryType::kSymlink && ::fchmodat(parent, leaf, entry.mode, 0) != 0) {
    return errno_status(errno, fmt::format("cannot set the mode of \"{}\"", shown(entry.path)));
  }
  std::string proc_path = fmt::format("/proc/self/fd/{}/{}", parent, where.leaf);
  for (const Xattr& xattr : entry.xattrs) {
    if (::lsetxattr(proc_path.c_str(), xattr.name.c_str(), xattr.value.data(), xattr.value.size(),
                    0) != 0) {
      return errno_status(
          errno, fmt::format("cannot set xattr \"{}\" on \"{}\"", xattr.name, shown(entry.path)));
    }
  }
  struct timespec times[2] = {to_timespec(entry.mtime_ns), to_timespec(entry.mtime_ns)};
  if (::utimensat(parent, leaf, times, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno_status(errno, fmt::format("cannot set the times of \"{}\"", shown(entry.path)));
  }
  return Status::ok();
}

Status Materializer::set_metadata_of_fd(int fd, const TreeEntry& entry) {
  if (::fchown(fd, entry.uid, entry.gid) != 0) {
    return errno_status(errno, fmt::format("cannot set the owner of \"{}\"", shown(entry.path)));
  }
  if (::fchmod(fd, entry.mode) != 0) {
    return errno_status(errno, fmt::format("cannot set the mode of \"{}\"", shown(entry.path)));
  }
  for (const Xattr& xattr : entry.xattrs) {
    if (::fsetxattr(fd, xattr.name.c_str(), xattr.value.data(), xattr.value.size(), 0) != 0) {
      return errno_status(
          errno, fmt::format("cannot set xattr \"{}\" on \"{}\"", xattr.name, shown(entry.path)));
    }
  }
  // atime is not recorded (reading a file changes it); a restored file gets atime = mtime.
  struct timespec times[2] = {to_timespec(entry.mtime_ns), to_timespec(entry.mtime_ns)};
  if (::futimens(fd, times) != 0) {
    return errno_status(errno, fmt::format("cannot set the times of \"{}\"", shown(entry.path)));
  }
  return Status::ok();
}

Status Materializer::create_node(const TreeEntry& entry) {
  auto where = locate(entry.path);
  if (!where) return where.status();
  int parent = where->parent.get();
  const char* leaf = where->leaf.c_str();
  int rc = 0;
  switch (entry.type) {
    case EntryType::kDirectory:
      // Private until finish_directory() sets the recorded mode.
      return ::mkdirat(parent, leaf, 0700) == 0
                 ? Status::ok()
                 : errno_status(errno, fmt::format("cannot create \"{}\"", shown(entry.path)));
    case EntryType::kSymlink:
      rc = ::symlinkat(entry.target.c_str(), parent, leaf);
      break;
    case EntryType::kFifo:
      rc = ::mknodat(parent, leaf, S_IFIFO | 0600, 0);
      break;
    case EntryType::kSocket:
      rc = ::mknodat(parent, leaf, S_IFSOCK | 0600, 0);
      break;
    case EntryType::kCharDevice:
    case EntryType::kBlockDevice:
      rc =
          ::mknodat(parent, leaf, (entry.type == EntryType::kCharDevice ? S_IFCHR : S_IFBLK) | 0600,
                    static_cast<dev_t>(entry.rdev));
      break;
    default:
      return error(Code::kInternal, "\"{}\" is not a node", shown(entry.path));
  }
  if (rc != 0) return errno_status(errno, fmt::format("cannot create \"{}\"", shown(entry.path)));
  return set_metadata_at(*where, entry);
}

// The file at `entry`'s path in the reuse directory, moved into place, when it holds the entry's
// content as it was written there (its size and mtime as its own tree gives them).
bool Materializer::take_reused(const TreeEntry& entry) {
  auto found = reusable_.find(entry.path);
  if (found == reusable_.end()) return false;
  const TreeEntry& earlier = *found->second;
  if (earlier.content != entry.content || earlier.size != entry.size) return false;
  auto from = locate(entry.path, options_.reuse_fd);
  struct stat st;
  if (!from || ::fstatat(from->parent.get(), from->leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISREG(st.st_mode) || st.st_size != entry.size || mtime_ns_of(st) != earlier.mtime_ns ||
      st.st_nlink != 1) {
    return false;
  }
  auto to = locate(entry.path);
  if (!to) return false;
  if (::renameat(from->parent.get(), from->leaf.c_str(), to->parent.get(), to->leaf.c_str()) != 0)
    return false;
  if (options_.reused_files != nullptr) ++*options_.reused_files;
  return true;
}

Status Materializer::create_file(TreeEntry& entry, const ContentWriter& write_content,
                                 ContentBuffer& buffer) {
  if (take_reused(entry)) {
    UniqueFd fd(open_beneath(dest_fd_, entry.path, O_RDWR));
    if (!fd.valid())
      return errno_status(errno, fmt::format("cannot open \"{}\"", shown(entry.path)));
    return set_metadata_of_fd(fd.get(), entry);
  }
  UniqueFd fd(open_beneath(dest_fd_, entry.path, O_RDWR | O_CREAT | O_EXCL, 0600));
  if (!fd.valid())
    return errno_status(errno, fmt::format("cannot create \"{}\"", shown(entry.path)));
  ROSETCTL_RETURN_IF_ERROR(write_content(entry, fd.get(), buffer));
  return set_metadata_of_fd(fd.get(), entry);
}

Status Materializer::create_hard_link(const TreeEntry& entry) {
  auto where = locate(entry.path);
  if (!where) return where.status();
  auto target = locate(entry.target);
  if (!target) return target.status();
  if (::linkat(target->parent.get(), target->leaf.c_str(), where->parent.get(), where->leaf.c_str(),
               0) != 0) {
    return errno_status(
        errno, fmt::format("cannot link \"{}\" to \"{}\"", shown(entry.path), shown(entry.target)));
  }
  return Status::ok();
}

Status Materializer::finish_directory(const TreeEntry& entry) {
  UniqueFd opened;
  int fd = dest_fd_;
  if (!entry.path.empty()) {
    opened = UniqueFd(open_beneath(dest_fd_, entry.path, O_RDONLY | O_DIRECTORY));
    if (!opened.valid())
      return errno_status(errno, fmt::format("cannot open \"{}\"", shown(entry.path)));
    fd = opened.get();
  }
  return set_metadata_of_fd(fd, entry);
}

}  // namespace

Status materialize_tree(Tree& tree, int dest_fd, const ContentWriter& write_content,
                        const MaterializeOptions& options) {
  Materializer materializer(dest_fd, options);
  std::vector<std::size_t> files;
  int64_t bytes = 0;
  for (std::size_t i = 0; i < tree.entries.size(); ++i) {
    const TreeEntry& entry = tree.entries[i];
    if (entry.type == EntryType::kRegular) {
      files.push_back(i);
      bytes += entry.size;
    } else if (entry.type != EntryType::kHardlink && !entry.path.empty()) {
      ROSETCTL_RETURN_IF_ERROR(materializer.create_node(entry));
    }
  }
  Progress progress(options.progress);
  progress.start(options.title, files.size(), bytes);
  std::vector<ContentBuffer> buffers(std::max(options.workers, 1));
  Status written = parallel_for(files.size(), options.workers, [&](std::size_t n, int worker) {
    TreeEntry& entry = tree.entries[files[n]];
    ROSETCTL_RETURN_IF_ERROR(materializer.create_file(entry, write_content, buffers[worker]));
    progress.advance(1, entry.size);
    return Status::ok();
  });
  progress.finish();
  ROSETCTL_RETURN_IF_ERROR(written);
  for (const TreeEntry& entry : tree.entries) {
    if (entry.type == EntryType::kHardlink) {
      ROSETCTL_RETURN_IF_ERROR(materializer.create_hard_link(entry));
    }
  }
  for (auto it = tree.entries.rbegin(); it != tree.entries.rend(); ++it) {
    if (it->type == EntryType::kDirectory)
      ROSETCTL_RETURN_IF_ERROR(materializer.finish_directory(*it));
  }
  return Status::ok();
}

}  // namespace rosetctl
