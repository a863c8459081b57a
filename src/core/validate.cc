// Rules for names, ids and paths; see validate.h for why each rule exists.
#include "core/validate.h"

#include <climits>

namespace rosetctl {
namespace {

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool is_name_char(char c) {
  return is_alnum(c) || c == '.' || c == '_' || c == '-';
}

}  // namespace

std::string escape_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (byte >= 0x20 && byte < 0x7f) {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  return out;
}

std::string display_quoted(std::string_view value, std::size_t max_bytes) {
  std::string out = "\"" + escape_text(value.substr(0, max_bytes));
  if (value.size() > max_bytes) out.append("...");
  out.push_back('"');
  return out;
}

namespace {

Status validate_token(std::string_view value, std::string_view what, std::size_t max_bytes) {
  if (value.empty()) return error(Code::kInvalidArgument, "{} is required", what);
  if (value.size() > max_bytes) {
    return error(Code::kInvalidArgument, "{} is {} bytes long; the limit is {} bytes", what,
                 value.size(), max_bytes);
  }
  if (!is_alnum(value.front())) {
    return error(Code::kInvalidArgument, "{} {} must start with a letter or digit", what,
                 display_quoted(value));
  }
  for (char c : value) {
    if (!is_name_char(c)) {
      return error(Code::kInvalidArgument,
                   "{} {} may only contain letters, digits, '.', '_' and '-'", what,
                   display_quoted(value));
    }
  }
  return Status::ok();
}

}  // namespace

Status validate_name(std::string_view value, std::string_view what) {
  return validate_token(value, what, kMaxNameBytes);
}

Status validate_node_id(std::string_view value, std::string_view what) {
  return validate_token(value, what, kMaxNodeIdBytes);
}

Expected<std::string> normalize_absolute_path(std::string_view path, std::string_view what) {
  if (path.empty()) return error(Code::kInvalidArgument, "{} is required", what);
  if (path.size() >= PATH_MAX) {
    return error(Code::kInvalidArgument, "{} is {} bytes long; the limit is {} bytes", what,
                 path.size(), PATH_MAX - 1);
  }
  if (path.front() != '/') {
    return error(Code::kInvalidArgument, "{} {} must be an absolute path", what,
                 display_quoted(path));
  }
  std::string out;
  std::size_t pos = 0;
  while (pos < path.size()) {
    std::size_t next = path.find('/', pos);
    if (next == std::string_view::npos) next = path.size();
    std::string_view part = path.substr(pos, next - pos);
    pos = next + 1;
    if (part.empty()) continue;
    // The kernel's own answer (ENAMETOOLONG) would come later, from whichever call meets it
    // first, and name neither the field nor the component.
    if (part.size() > NAME_MAX) {
      return error(Code::kInvalidArgument,
                   "{} {} has a component of {} bytes; the limit is {} bytes", what,
                   display_quoted(path), part.size(), NAME_MAX);
    }
    if (part == "." || part == "..") {
      return error(Code::kInvalidArgument, "{} {} must not contain \".\" or \"..\" components",
                   what, display_quoted(path));
    }
    for (char c : part) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return error(Code::kInvalidArgument, "{} {} contains a control character", what,
                     display_quoted(path));
      }
    }
    out += '/';
    out += part;
  }
  if (out.empty()) out.push_back('/');
  return out;
}

bool path_is_within(std::string_view path, std::string_view dir) {
  if (dir == "/") return !path.empty() && path.front() == '/';
  if (path.size() < dir.size() || path.substr(0, dir.size()) != dir) return false;
  return path.size() == dir.size() || path[dir.size()] == '/';
}

}  // namespace rosetctl
