// iSCSI names: their forms and normal form (see iscsi_name.h).
#include "core/iscsi_name.h"

#include <algorithm>

#include "core/validate.h"

namespace rosetctl {
namespace {

bool is_iscsi_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_iscsi_hex(char c) {
  return is_iscsi_digit(c) || (c >= 'a' && c <= 'f');
}

// Letters and digits (already folded), '.', '-' and, where `colon` says so, ':'.
bool is_iscsi_name_char(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || is_iscsi_digit(c) || c == '.' || c == '-' || (colon && c == ':');
}

bool all_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(), is_iscsi_hex);
}

// Why an iqn. name (folded, "iqn." included) is not one, or "" when it is.
std::string_view iqn_problem(std::string_view name) {
  constexpr std::string_view kForm =
      "an iqn. name is iqn.YYYY-MM.reversed.domain, then optionally ':' and more";
  // "iqn." "YYYY-MM" "." and at least one character of the naming authority.
  if (name.size() < 13 || name[8] != '-' || name[11] != '.') return kForm;
  std::string_view year = name.substr(4, 4);
  std::string_view month = name.substr(9, 2);
  if (!std::all_of(year.begin(), year.end(), is_iscsi_digit) ||
      !std::all_of(month.begin(), month.end(), is_iscsi_digit) || month < "01" || month > "12") {
    return kForm;
  }
  std::string_view rest = name.substr(12);
  std::size_t colon = rest.find(':');
  std::string_view authority = rest.substr(0, colon);
  if (authority.empty() || authority.front() == '.' || authority.front() == '-' ||
      authority.back() == '.') {
    return kForm;
  }
  for (char c : authority) {
    if (!is_iscsi_name_char(c, false)) return kForm;
  }
  if (colon == std::string_view::npos) return "";
  for (char c : rest.substr(colon + 1)) {
    if (!is_iscsi_name_char(c, true)) {
      return "after the domain an iqn. name holds only letters, digits, '.', '-' and ':'";
    }
  }
  return "";
}

std::string_view form_problem(std::string_view name) {
  if (name.starts_with("iqn.")) return iqn_problem(name);
  std::string_view digits = name.substr(std::min<std::size_t>(4, name.size()));
  if (name.starts_with("eui.")) {
    if (digits.size() == 16 && all_hex(digits)) return "";
    return "an eui. name is eui. and 16 hex digits";
  }
  if (name.starts_with("naa.")) {
    if ((digits.size() == 16 || digits.size() == 32) && all_hex(digits)) return "";
    return "a naa. name is naa. and 16 or 32 hex digits";
  }
  return "it must start with iqn., eui. or naa.";
}

}  // namespace

Expected<std::string> normalize_iscsi_name(std::string_view name, std::string_view field) {
  if (name.empty()) return error(Code::kInvalidArgument, "{} is required", field);
  if (name.size() > kMaxIscsiNameBytes) {
    return error(Code::kInvalidArgument, "{} is {} bytes long; iSCSI names have at most {} bytes",
                 field, name.size(), kMaxIscsiNameBytes);
  }
  std::string folded(name);
  for (char& c : folded) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  std::string_view problem = form_problem(folded);
  if (!problem.empty()) {
    return error(Code::kInvalidArgument,
                 "{} {} is not an iSCSI name: {} (e.g. iqn.1993-08.org.debian:01:5e1f2a3b4c; "
                 "see /etc/iscsi/initiatorname.iscsi on the node)",
                 field, display_quoted(name, kMaxIscsiNameBytes), problem);
  }
  return folded;
}

Status validate_iscsi_name(std::string_view name, std::string_view field) {
  auto normal = normalize_iscsi_name(name, field);
  if (!normal) return normal.status();
  if (*normal == name) return Status::ok();
  return error(Code::kInvalidArgument,
               "{} {} is not written in lower case, the normal form of iSCSI names: initiators "
               "send their name as written and tgtd compares names byte for byte, so write it "
               "as {} (in /etc/iscsi/initiatorname.iscsi on the node, then restart iscsid)",
               field, display_quoted(name, kMaxIscsiNameBytes),
               display_quoted(*normal, kMaxIscsiNameBytes));
}

}  // namespace rosetctl
