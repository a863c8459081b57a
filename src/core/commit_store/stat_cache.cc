// Stat cache text format, version 2: a header line naming the anchor commit, then one line per
// file, every field escaped (field_escape.h):
//   rosetctl-stat-cache 2 <anchor commit id, or - for none>
//   <inode> <size> <mtime ns> <ctime ns> <sha256> <path>[ <xattr name>=<xattr value>]...
// Version 1 files (no anchor, no xattrs) load as empty: the next commit reads every file once.
#include "core/commit_store/stat_cache.h"

#include <charconv>
#include <cstdio>
#include <fstream>

#include "core/commit_store/field_escape.h"
#include "core/commit_store/sha256.h"
#include "core/random_id.h"

namespace rosetctl {
namespace {

constexpr std::string_view kStatCacheHeader = "rosetctl-stat-cache 2";
constexpr std::string_view kNoAnchor = "-";

template <typename Integer>
bool take_integer(std::string_view& line, Integer* out) {
  std::size_t space = line.find(' ');
  if (space == std::string_view::npos) return false;
  auto [end, ec] = std::from_chars(line.data(), line.data() + space, *out);
  line.remove_prefix(space + 1);
  return ec == std::errc() && space > 0;
}

// The next space-separated token of `line`, consumed.
std::string_view take_token(std::string_view& line) {
  std::size_t space = line.find(' ');
  std::string_view token = line.substr(0, space);
  line.remove_prefix(space == std::string_view::npos ? line.size() : space + 1);
  return token;
}

bool parse_xattr(std::string_view token, Xattr* xattr) {
  std::size_t equals = token.find('=');
  if (equals == std::string_view::npos || equals == 0) return false;
  auto name = unescape_field(token.substr(0, equals));
  auto value = unescape_field(token.substr(equals + 1));
  if (!name || !value) return false;
  *xattr = Xattr{std::move(*name), std::move(*value)};
  return true;
}

bool parse_line(std::string_view line, std::string* path, CachedFile* file) {
  FileVersion& v = file->version;
  if (!take_integer(line, &v.inode) || !take_integer(line, &v.size) ||
      !take_integer(line, &v.mtime_ns) || !take_integer(line, &v.ctime_ns)) {
    return false;
  }
  std::string_view content = take_token(line);
  if (!is_digest_hex(content)) return false;
  file->content = std::string(content);
  auto unescaped = unescape_field(take_token(line));
  if (!unescaped || unescaped->empty()) return false;
  *path = std::move(*unescaped);
  while (!line.empty()) {
    Xattr xattr;
    if (!parse_xattr(take_token(line), &xattr)) return false;
    file->xattrs.push_back(std::move(xattr));
  }
  return true;
}

}  // namespace

StatCache StatCache::load(const std::string& path) {
  StatCache cache;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || !line.starts_with(kStatCacheHeader)) return cache;
  std::string_view anchor = std::string_view(line).substr(kStatCacheHeader.size());
  if (!anchor.starts_with(' ')) return cache;
  anchor.remove_prefix(1);
  if (anchor != kNoAnchor && !is_digest_hex(anchor)) return cache;
  if (anchor != kNoAnchor) cache.anchor_ = std::string(anchor);
  while (std::getline(in, line)) {
    std::string file_path;
    CachedFile file;
    if (!parse_line(line, &file_path, &file)) return StatCache();
    cache.files_.emplace(std::move(file_path), std::move(file));
  }
  return cache;
}

const CachedFile* StatCache::find(const std::string& path) const {
  auto it = files_.find(path);
  return it == files_.end() ? nullptr : &it->second;
}

const CachedFile* StatCache::find_unchanged(const std::string& path,
                                            const FileVersion& version) const {
  const CachedFile* cached = find(path);
  return cached != nullptr && cached->version == version ? cached : nullptr;
}

Status StatCache::save(const std::string& path) const {
  std::string text = fmt::format("{} {}\n", kStatCacheHeader,
                                 anchor_.empty() ? kNoAnchor : std::string_view(anchor_));
  for (const auto& [file_path, file] : files_) {
    const FileVersion& v = file.version;
    text += fmt::format("{} {} {} {} {} {}", v.inode, v.size, v.mtime_ns, v.ctime_ns, file.content,
                        escape_field(file_path));
    for (const Xattr& xattr : file.xattrs)
      text += fmt::format(" {}={}", escape_field(xattr.name), escape_field(xattr.value));
    text += '\n';
  }
  std::string temporary = fmt::format("{}.{}.tmp", path, random_hex(4));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      return error(Code::kInternal, "cannot write the stat cache \"{}\"", temporary);
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    Status status = errno_status(errno, fmt::format("cannot replace \"{}\"", path));
    std::remove(temporary.c_str());
    return status;
  }
  return Status::ok();
}

}  // namespace rosetctl
