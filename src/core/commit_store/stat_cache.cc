// Stat cache text format, version 1: a header line, then one line per file:
//   <inode> <size> <mtime ns> <ctime ns> <sha256> <escaped path>
#include "core/commit_store/stat_cache.h"

#include <charconv>
#include <cstdio>
#include <fstream>

#include "core/commit_store/field_escape.h"
#include "core/commit_store/sha256.h"
#include "core/random_id.h"

namespace rosetctl {
namespace {

constexpr std::string_view kHeader = "rosetctl-stat-cache 1";

template <typename Integer>
bool take_integer(std::string_view& line, Integer* out) {
  std::size_t space = line.find(' ');
  if (space == std::string_view::npos) return false;
  auto [end, ec] = std::from_chars(line.data(), line.data() + space, *out);
  line.remove_prefix(space + 1);
  return ec == std::errc() && space > 0;
}

bool parse_line(std::string_view line, std::string* path, CachedFile* file) {
  FileVersion& v = file->version;
  if (!take_integer(line, &v.inode) || !take_integer(line, &v.size) ||
      !take_integer(line, &v.mtime_ns) || !take_integer(line, &v.ctime_ns)) {
    return false;
  }
  std::size_t space = line.find(' ');
  if (space == std::string_view::npos || !is_digest_hex(line.substr(0, space))) return false;
  file->content = std::string(line.substr(0, space));
  auto unescaped = unescape_field(line.substr(space + 1));
  if (!unescaped || unescaped->empty()) return false;
  *path = std::move(*unescaped);
  return true;
}

}  // namespace

StatCache StatCache::load(const std::string& path) {
  StatCache cache;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != kHeader) return cache;
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

Status StatCache::save(const std::string& path) const {
  std::string text(kHeader);
  text += '\n';
  for (const auto& [file_path, file] : files_) {
    const FileVersion& v = file.version;
    text += fmt::format("{} {} {} {} {} {}\n", v.inode, v.size, v.mtime_ns, v.ctime_ns,
                        file.content, escape_field(file_path));
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
