// The tree text format, version 1. One header line, then one line per entry:
//
//   <type> <path> <mode octal> <uid> <gid> <mtime ns> [f: <size> <sha256>] [l, h: <target>]
//   [c, b: <rdev>] [<xattr name>=<xattr value>]...
//
// Byte-string fields are percent-encoded (field_escape.h); the root's path is written ".".
#include "core/commit_store/tree.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "core/commit_store/field_escape.h"
#include "core/commit_store/sha256.h"

namespace rosetctl {
namespace {

constexpr std::string_view kTreeHeader = "rosetctl-tree 1";
constexpr std::string_view kRootToken = ".";

bool is_entry_type(char c) {
  return std::string_view("dflhpscb").find(c) != std::string_view::npos;
}

void append_entry(std::string& out, const TreeEntry& entry) {
  out += static_cast<char>(entry.type);
  out += ' ';
  out += entry.path.empty() ? std::string(kRootToken) : escape_field(entry.path);
  out += fmt::format(" {:o} {} {} {}", entry.mode, entry.uid, entry.gid, entry.mtime_ns);
  switch (entry.type) {
    case EntryType::kRegular:
      out += fmt::format(" {} {}", entry.size, entry.content);
      break;
    case EntryType::kSymlink:
    case EntryType::kHardlink:
      out += ' ';
      out += escape_field(entry.target);
      break;
    case EntryType::kCharDevice:
    case EntryType::kBlockDevice:
      out += fmt::format(" {}", entry.rdev);
      break;
    default:
      break;
  }
  for (const Xattr& xattr : entry.xattrs) {
    out += ' ';
    out += escape_field(xattr.name);
    out += '=';
    out += escape_field(xattr.value);
  }
  out += '\n';
}

std::vector<std::string_view> split_tokens(std::string_view line) {
  std::vector<std::string_view> tokens;
  std::size_t start = 0;
  while (start <= line.size()) {
    std::size_t space = line.find(' ', start);
    if (space == std::string_view::npos) space = line.size();
    tokens.push_back(line.substr(start, space - start));
    start = space + 1;
  }
  return tokens;
}

template <typename Integer>
bool parse_integer(std::string_view token, Integer* out, int base = 10) {
  if (token.empty()) return false;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), *out, base);
  return ec == std::errc() && end == token.data() + token.size();
}

// Relative, normalised and free of NUL bytes: restore opens paths beneath the destination,
// but a tree should not even be able to name a way out.
bool is_tree_path(std::string_view path) {
  if (path.empty() || path.find('\0') != std::string_view::npos) return false;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view component = path.substr(start, slash - start);
    if (component.empty() || component == "." || component == "..") return false;
    start = slash + 1;
  }
  return true;
}

bool parse_text(std::string_view token, std::string* out) {
  auto text = unescape_field(token);
  if (!text) return false;
  *out = std::move(*text);
  return true;
}

bool parse_xattrs(const std::vector<std::string_view>& tokens, std::size_t first,
                  TreeEntry* entry) {
  for (std::size_t i = first; i < tokens.size(); ++i) {
    std::size_t equals = tokens[i].find('=');
    if (equals == std::string_view::npos) return false;
    Xattr xattr;
    if (!parse_text(tokens[i].substr(0, equals), &xattr.name) ||
        !parse_text(tokens[i].substr(equals + 1), &xattr.value) || xattr.name.empty()) {
      return false;
    }
    entry->xattrs.push_back(std::move(xattr));
  }
  return true;
}

// The fields after the common six, by type; returns the index of the first xattr token.
bool parse_type_fields(const std::vector<std::string_view>& tokens, TreeEntry* entry,
                       std::size_t* next) {
  std::size_t i = 6;
  switch (entry->type) {
    case EntryType::kRegular:
      if (tokens.size() < 8 || !parse_integer(tokens[6], &entry->size) || entry->size < 0 ||
          !is_digest_hex(tokens[7])) {
        return false;
      }
      entry->content = std::string(tokens[7]);
      i = 8;
      break;
    case EntryType::kSymlink:
    case EntryType::kHardlink:
      if (tokens.size() < 7 || !parse_text(tokens[6], &entry->target) || entry->target.empty() ||
          (entry->type == EntryType::kHardlink && !is_tree_path(entry->target))) {
        return false;
      }
      i = 7;
      break;
    case EntryType::kCharDevice:
    case EntryType::kBlockDevice:
      if (tokens.size() < 7 || !parse_integer(tokens[6], &entry->rdev)) return false;
      i = 7;
      break;
    default:
      break;
  }
  *next = i;
  return true;
}

bool parse_entry(std::string_view line, TreeEntry* entry) {
  std::vector<std::string_view> tokens = split_tokens(line);
  if (tokens.size() < 6 || tokens[0].size() != 1 || !is_entry_type(tokens[0][0])) return false;
  entry->type = static_cast<EntryType>(tokens[0][0]);
  if (tokens[1] == kRootToken) {
    entry->path.clear();
  } else if (!parse_text(tokens[1], &entry->path) || !is_tree_path(entry->path)) {
    return false;
  }
  if (!parse_integer(tokens[2], &entry->mode, 8) || entry->mode > 07777 ||
      !parse_integer(tokens[3], &entry->uid) || !parse_integer(tokens[4], &entry->gid) ||
      !parse_integer(tokens[5], &entry->mtime_ns)) {
    return false;
  }
  std::size_t next = 0;
  return parse_type_fields(tokens, entry, &next) && parse_xattrs(tokens, next, entry);
}

}  // namespace

void sort_tree(Tree& tree) {
  std::sort(tree.entries.begin(), tree.entries.end(),
            [](const TreeEntry& a, const TreeEntry& b) { return a.path < b.path; });
}

std::string serialize_tree(const Tree& tree) {
  std::string out(kTreeHeader);
  out += '\n';
  for (const TreeEntry& entry : tree.entries)
    append_entry(out, entry);
  return out;
}

Expected<Tree> parse_tree(std::string_view text) {
  if (!text.starts_with(kTreeHeader) || text.size() <= kTreeHeader.size() ||
      text[kTreeHeader.size()] != '\n') {
    return error(Code::kDataLoss, "not a rosetctl tree (version 1): the header line is missing");
  }
  Tree tree;
  std::size_t start = kTreeHeader.size() + 1;
  int line_number = 1;
  // Every reader adds the files' sizes up (tree_totals, verification, restore progress): a tree
  // whose sizes do not add up in 64 bits names more bytes than any volume holds.
  int64_t bytes = 0;
  while (start < text.size()) {
    ++line_number;
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      return error(Code::kDataLoss, "tree line {} is not terminated", line_number);
    }
    TreeEntry entry;
    if (!parse_entry(text.substr(start, end - start), &entry)) {
      return error(Code::kDataLoss, "tree line {} is malformed", line_number);
    }
    if (!tree.entries.empty() && !(tree.entries.back().path < entry.path)) {
      return error(Code::kDataLoss, "tree line {} is out of order", line_number);
    }
    if (entry.type == EntryType::kRegular && __builtin_add_overflow(bytes, entry.size, &bytes)) {
      return error(Code::kDataLoss, "tree line {}: the files' sizes add up to more than {} bytes",
                   line_number, std::numeric_limits<int64_t>::max());
    }
    tree.entries.push_back(std::move(entry));
    start = end + 1;
  }
  return tree;
}

TreeTotals tree_totals(const Tree& tree) {
  TreeTotals totals;
  for (const TreeEntry& entry : tree.entries) {
    if (entry.type != EntryType::kRegular) continue;
    ++totals.files;
    totals.bytes += entry.size;
  }
  return totals;
}

int64_t strip_privileged_metadata(Tree& tree) {
  int64_t changed = 0;
  std::vector<std::string> devices;  // paths left out, which hard links may name
  std::erase_if(tree.entries, [&](const TreeEntry& entry) {
    bool device = entry.type == EntryType::kCharDevice || entry.type == EntryType::kBlockDevice ||
                  (entry.type == EntryType::kHardlink &&
                   std::find(devices.begin(), devices.end(), entry.target) != devices.end());
    if (device) {
      devices.push_back(entry.path);
      ++changed;
    }
    return device;
  });
  for (TreeEntry& entry : tree.entries) {
    bool touched = false;
    if (entry.type != EntryType::kDirectory && (entry.mode & (S_ISUID | S_ISGID)) != 0) {
      entry.mode &= ~static_cast<uint32_t>(S_ISUID | S_ISGID);
      touched = true;
    }
    auto privileged = [](const Xattr& xattr) {
      return xattr.name.starts_with("security.") || xattr.name.starts_with("trusted.");
    };
    touched = std::erase_if(entry.xattrs, privileged) > 0 || touched;
    changed += touched ? 1 : 0;
  }
  return changed;
}

}  // namespace rosetctl
