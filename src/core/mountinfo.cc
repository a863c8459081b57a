// Parsing /proc/self/mountinfo (format in proc(5)) and the MountTable queries.
#include "core/mountinfo.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace rosetctl {
namespace {

// Closes the descriptor on every return path of read().
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Keeps empty fields: an empty source shows up as two spaces in a row.
std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

bool is_octal(char c) {
  return c >= '0' && c <= '7';
}

// The kernel writes space, tab, newline and backslash in paths as \ooo, so that a line is
// always one mount and fields never contain spaces. Any other backslash means we misread.
Expected<std::string> unescape(std::string_view field, std::string_view what) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      out += field[i];
      continue;
    }
    if (i + 3 >= field.size() || field[i + 1] > '3' || !is_octal(field[i + 1]) ||
        !is_octal(field[i + 2]) || !is_octal(field[i + 3])) {
      return error(Code::kInternal, "bad escape in {} \"{}\"", what, field);
    }
    out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                             (field[i + 3] - '0'));
    i += 3;
  }
  return out;
}

template <typename Number>
bool parse_number(std::string_view text, Number* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && !text.empty();
}

Status parse_device(std::string_view text, MountEntry* entry) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos || !parse_number(text.substr(0, colon), &entry->major) ||
      !parse_number(text.substr(colon + 1), &entry->minor)) {
    return error(Code::kInternal, "bad device number \"{}\" (want major:minor)", text);
  }
  return Status::ok();
}

// Fields: id parent major:minor root mount-point options [optional...] - type source super.
Status parse_fields(const std::vector<std::string_view>& fields, MountEntry* entry) {
  constexpr size_t kFirstOptional = 6;
  auto dash = fields.size() < kFirstOptional
                  ? fields.end()
                  : std::find(fields.begin() + kFirstOptional, fields.end(), "-");
  if (dash == fields.end()) {
    return error(Code::kInternal, "expected at least 10 fields with a \"-\" separator, found {}",
                 fields.size());
  }
  if (fields.end() - dash != 4) {
    return error(Code::kInternal, "expected 3 fields after the \"-\" separator, found {}",
                 fields.end() - dash - 1);
  }
  if (!parse_number(fields[0], &entry->mount_id)) {
    return error(Code::kInternal, "bad mount id \"{}\"", fields[0]);
  }
  if (!parse_number(fields[1], &entry->parent_id)) {
    return error(Code::kInternal, "bad parent id \"{}\"", fields[1]);
  }
  ROSETCTL_RETURN_IF_ERROR(parse_device(fields[2], entry));
  entry->mount_options = fields[5];
  entry->optional_fields.assign(fields.begin() + kFirstOptional, dash);
  entry->fs_type = dash[1];
  entry->super_options = dash[3];
  return Status::ok();
}

// Mount points in the table never end in "/" (except "/" itself): the kernel prints none, and one
// read with it would never be found by the lookups below. Callers' paths may.
std::string_view without_trailing_slashes(std::string_view path) {
  while (path.size() > 1 && path.back() == '/')
    path.remove_suffix(1);
  return path;
}

Expected<MountEntry> parse_line(std::string_view line) {
  std::vector<std::string_view> fields = split(line, ' ');
  MountEntry entry;
  ROSETCTL_RETURN_IF_ERROR(parse_fields(fields, &entry));
  auto root = unescape(fields[3], "root");
  if (!root) return root.status();
  auto mount_point = unescape(fields[4], "mount point");
  if (!mount_point) return mount_point.status();
  auto source = unescape(fields[fields.size() - 2], "source");
  if (!source) return source.status();
  entry.root = std::move(*root);
  entry.mount_point = std::string(without_trailing_slashes(*mount_point));
  entry.source = std::move(*source);
  return entry;
}

}  // namespace

bool MountEntry::read_only() const {
  for (std::string_view option : split(mount_options, ',')) {
    if (option == "ro") return true;
  }
  return false;
}

bool same_source(const MountEntry& a, const MountEntry& b) {
  return a.major == b.major && a.minor == b.minor && a.root == b.root;
}

Expected<MountTable> MountTable::read(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    int err = errno;  // read before formatting, which may allocate
    return errno_status(err, fmt::format("cannot open \"{}\"", path));
  }
  // procfs reports a size of 0, so read until EOF rather than trusting fstat.
  std::string text;
  char buffer[16384];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      return errno_status(err, fmt::format("cannot read \"{}\"", path));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  auto table = parse(text);
  if (!table) return table.status().with_context(fmt::format("\"{}\"", path));
  return table;
}

Expected<MountTable> MountTable::parse(std::string_view text) {
  MountTable table;
  std::vector<std::string_view> lines = split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the final newline
  for (size_t i = 0; i < lines.size(); ++i) {
    auto entry = parse_line(lines[i]);
    if (!entry) {
      return entry.status().with_context(fmt::format("mountinfo line {} \"{}\"", i + 1, lines[i]));
    }
    table.entries_.push_back(std::move(*entry));
  }
  return table;
}

const MountEntry* MountTable::find_by_target(std::string_view path) const {
  path = without_trailing_slashes(path);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->mount_point == path) return &*it;
  }
  return nullptr;
}

int MountTable::count_at(std::string_view path) const {
  path = without_trailing_slashes(path);
  return static_cast<int>(std::count_if(entries_.begin(), entries_.end(), [&](const MountEntry& e) {
    return e.mount_point == path;
  }));
}

std::vector<const MountEntry*> MountTable::under(std::string_view dir) const {
  dir = without_trailing_slashes(dir);
  std::vector<const MountEntry*> found;
  for (const MountEntry& entry : entries_) {
    std::string_view point = entry.mount_point;
    bool below = dir == "/" ? point.starts_with('/')
                            : point.starts_with(dir) && point.size() > dir.size() &&
                                  point[dir.size()] == '/';
    if (point == dir || below) found.push_back(&entry);
  }
  return found;
}

}  // namespace rosetctl
