// Directory traversal with openat() relative to directory descriptors, so a path renamed or
// replaced by a symlink mid-walk can never lead outside the tree.
#include "core/commit_store/tree_walk.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "core/directory_listing.h"
#include "core/unique_fd.h"

namespace rosetctl {
namespace {

// A path that reaches `name` inside the directory open at `dir_fd` without following `name`
// itself (for the l*xattr calls, which have no *at variants).
std::string proc_path(int dir_fd, const std::string& name) {
  return fmt::format("/proc/self/fd/{}/{}", dir_fd, name);
}

bool xattrs_unsupported(int err) {
  return err == ENOTSUP || err == ENOSYS;
}

Expected<std::string> read_link(int dir_fd, const std::string& name, const std::string& shown) {
  std::string target(256, '\0');
  while (true) {
    ssize_t length = ::readlinkat(dir_fd, name.c_str(), target.data(), target.size());
    if (length < 0) return errno_status(errno, fmt::format("cannot read link \"{}\"", shown));
    if (static_cast<std::size_t>(length) < target.size()) {
      target.resize(static_cast<std::size_t>(length));
      return target;
    }
    target.resize(target.size() * 2);
  }
}

EntryType type_of(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR:
      return EntryType::kDirectory;
    case S_IFLNK:
      return EntryType::kSymlink;
    case S_IFIFO:
      return EntryType::kFifo;
    case S_IFSOCK:
      return EntryType::kSocket;
    case S_IFCHR:
      return EntryType::kCharDevice;
    case S_IFBLK:
      return EntryType::kBlockDevice;
    default:
      return EntryType::kRegular;
  }
}

class Walker {
 public:
  Walker(dev_t root_device, std::string shown_root, const KnownXattrs& known)
      : root_device_(root_device), shown_root_(std::move(shown_root)), known_(known) {}

  Status visit_directory(int dir_fd, const std::string& relative);
  std::vector<WalkedEntry> take() { return std::move(entries_); }

 private:
  std::string shown(const std::string& relative) const {
    return relative.empty() ? shown_root_ : shown_root_ + "/" + relative;
  }
  Status visit_child(int dir_fd, const std::string& parent, const std::string& name);

  dev_t root_device_;
  std::string shown_root_;
  const KnownXattrs& known_;
  std::vector<WalkedEntry> entries_;
};

WalkedEntry entry_from_stat(const std::string& relative, const struct stat& st) {
  WalkedEntry walked;
  TreeEntry& entry = walked.entry;
  entry.path = relative;
  entry.type = type_of(st.st_mode);
  entry.mode = st.st_mode & 07777;
  entry.uid = st.st_uid;
  entry.gid = st.st_gid;
  entry.mtime_ns = mtime_ns_of(st);
  if (entry.type == EntryType::kRegular) entry.size = st.st_size;
  if (entry.type == EntryType::kCharDevice || entry.type == EntryType::kBlockDevice) {
    entry.rdev = st.st_rdev;
  }
  walked.version = FileVersion::of(st);
  return walked;
}

Status Walker::visit_child(int dir_fd, const std::string& parent, const std::string& name) {
  std::string relative = parent.empty() ? name : parent + "/" + name;
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Status::ok();  // deleted while we walked
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", shown(relative)));
  }
  if (S_ISDIR(st.st_mode)) {
    int child = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) {
      if (errno == ENOENT) return Status::ok();
      return errno_status(errno, fmt::format("cannot open \"{}\"", shown(relative)));
    }
    UniqueFd child_fd(child);
    if (st.st_dev != root_device_) {
      // Another filesystem mounted inside the volume: not part of its content.
      entries_.push_back(entry_from_stat(relative, st));
      return Status::ok();
    }
    return visit_directory(child_fd.get(), relative);
  }
  WalkedEntry walked = entry_from_stat(relative, st);
  if (walked.entry.type == EntryType::kSymlink) {
    auto target = read_link(dir_fd, name, shown(relative));
    if (!target) return target.status().code() == Code::kNotFound ? Status::ok() : target.status();
    walked.entry.target = std::move(*target);
  }
  const std::vector<Xattr>* known = nullptr;
  if (walked.entry.type == EntryType::kRegular && known_) known = known_(relative, walked.version);
  if (known != nullptr) {
    walked.entry.xattrs = *known;
  } else {
    auto xattrs = read_xattrs(dir_fd, name, shown(relative));
    if (!xattrs) return xattrs.status().code() == Code::kNotFound ? Status::ok() : xattrs.status();
    walked.entry.xattrs = std::move(*xattrs);
  }
  entries_.push_back(std::move(walked));
  return Status::ok();
}

Status Walker::visit_directory(int dir_fd, const std::string& relative) {
  struct stat st;
  if (::fstat(dir_fd, &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", shown(relative)));
  }
  WalkedEntry self = entry_from_stat(relative, st);
  auto xattrs = read_xattrs(dir_fd, "", shown(relative));
  if (!xattrs) return xattrs.status();
  self.entry.xattrs = std::move(*xattrs);
  entries_.push_back(std::move(self));
  auto names = list_directory_at(dir_fd, shown(relative));
  if (!names) return names.status();
  // Room for the children at once (keeping the vector's doubling): moving entries is not free.
  if (std::size_t needed = entries_.size() + names->size(); needed > entries_.capacity())
    entries_.reserve(std::max(needed, 2 * entries_.capacity()));
  for (const std::string& name : *names) {
    ROSETCTL_RETURN_IF_ERROR(visit_child(dir_fd, relative, name));
  }
  return Status::ok();
}

// The first name (in tree order) of a multiply linked file keeps the content; the others
// become hard links to it.
void mark_hard_links(std::vector<WalkedEntry>& entries) {
  std::map<uint64_t, std::string> first_name;  // inode -> path; one filesystem, so inode suffices
  for (WalkedEntry& walked : entries) {
    TreeEntry& entry = walked.entry;
    if (entry.type != EntryType::kRegular) continue;
    auto [it, inserted] = first_name.emplace(walked.version.inode, entry.path);
    if (inserted) continue;
    entry.type = EntryType::kHardlink;
    entry.target = it->second;
    entry.size = 0;
  }
}

}  // namespace

Expected<std::vector<Xattr>> read_xattrs(int dir_fd, const std::string& name,
                                         const std::string& shown) {
  // The directory itself through its descriptor; a child through a /proc path to it.
  std::string path = proc_path(dir_fd, name);
  auto list = [&](char* buffer, std::size_t size) {
    return name.empty() ? ::flistxattr(dir_fd, buffer, size)
                        : ::llistxattr(path.c_str(), buffer, size);
  };
  auto get = [&](const std::string& key, void* buffer, std::size_t size) {
    return name.empty() ? ::fgetxattr(dir_fd, key.c_str(), buffer, size)
                        : ::lgetxattr(path.c_str(), key.c_str(), buffer, size);
  };
  std::vector<Xattr> xattrs;
  ssize_t length = list(nullptr, 0);
  if (length < 0) {
    if (xattrs_unsupported(errno)) return xattrs;
    return errno_status(errno, fmt::format("cannot list the xattrs of \"{}\"", shown));
  }
  std::string names(static_cast<std::size_t>(length), '\0');
  length = list(names.data(), names.size());
  if (length < 0) {
    return errno_status(errno, fmt::format("cannot list the xattrs of \"{}\"", shown));
  }
  names.resize(static_cast<std::size_t>(length));
  for (std::size_t start = 0; start < names.size();) {
    std::size_t end = names.find('\0', start);
    if (end == std::string::npos) end = names.size();
    Xattr xattr{names.substr(start, end - start), ""};
    start = end + 1;
    ssize_t size = get(xattr.name, nullptr, 0);
    if (size < 0 && errno == ENODATA) continue;  // removed meanwhile
    if (size >= 0) {
      xattr.value.resize(static_cast<std::size_t>(size));
      size = get(xattr.name, xattr.value.data(), xattr.value.size());
    }
    if (size < 0) {
      return errno_status(errno,
                          fmt::format("cannot read xattr \"{}\" of \"{}\"", xattr.name, shown));
    }
    xattr.value.resize(static_cast<std::size_t>(size));
    xattrs.push_back(std::move(xattr));
  }
  std::sort(xattrs.begin(), xattrs.end(),
            [](const Xattr& a, const Xattr& b) { return a.name < b.name; });
  return xattrs;
}

Expected<std::vector<WalkedEntry>> walk_tree(int root_fd, const std::string& shown_root,
                                             const KnownXattrs& known) {
  struct stat st;
  if (::fstat(root_fd, &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", shown_root));
  }
  Walker walker(st.st_dev, shown_root, known);
  ROSETCTL_RETURN_IF_ERROR(walker.visit_directory(root_fd, ""));
  std::vector<WalkedEntry> entries = walker.take();
  std::sort(entries.begin(), entries.end(),
            [](const WalkedEntry& a, const WalkedEntry& b) { return a.entry.path < b.entry.path; });
  mark_hard_links(entries);
  return entries;
}

}  // namespace rosetctl
