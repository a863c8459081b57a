// A line-by-line reader of tgtadm's reports, keyed on indentation depth and "Key: value".
#include "providers/iscsi/tgt_show.h"

#include <fmt/format.h>

#include <charconv>
#include <set>

#include "core/validate.h"

namespace rosetctl {
namespace {

struct ReportLine {
  int depth = 0;  // leading spaces / 4
  std::string_view text;
};

std::vector<ReportLine> split_lines(std::string_view text) {
  std::vector<ReportLine> out;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? "" : text.substr(newline + 1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '\t'))
      line.remove_suffix(1);
    size_t spaces = line.find_first_not_of(' ');
    if (spaces == std::string_view::npos) continue;
    out.push_back({static_cast<int>(spaces / 4), line.substr(spaces)});
  }
  return out;
}

// The value of "Key: value" when the line has that key, else nullopt-like empty + false.
bool value_of(std::string_view line, std::string_view key, std::string_view* value) {
  if (!line.starts_with(key) || line.size() < key.size() + 1 || line[key.size()] != ':') {
    return false;
  }
  std::string_view rest = line.substr(key.size() + 1);
  if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  *value = rest;
  return true;
}

bool parse_int(std::string_view text, int* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

Status unreadable_report(std::string_view report, std::string_view line) {
  return error(Code::kInternal,
               "cannot read tgtadm's {} report at line {}: this version of tgt prints something "
               "rosetctl does not know",
               report, display_quoted(line, 120));
}

// "Target 3: iqn...." -> tid 3, name.
bool parse_target_header(std::string_view line, TgtTarget* target) {
  if (!line.starts_with("Target ")) return false;
  std::string_view rest = line.substr(7);
  size_t colon = rest.find(": ");
  if (colon == std::string_view::npos || !parse_int(rest.substr(0, colon), &target->tid)) {
    return false;
  }
  target->name = std::string(rest.substr(colon + 2));
  return !target->name.empty();
}

// tgtd prints each session's initiator alias as the initiator sent it, line breaks included,
// so a host allowed to log in to one target can add lines that read as another target of the
// report. Such lines cannot be told from tgtd's own, but a forged target that names a real
// target's id or IQN makes that target appear twice: then no line of the report is trusted.
Status forged_report_check(const std::vector<TgtTarget>& targets) {
  std::set<int> tids;
  std::set<std::string_view> names;
  for (const TgtTarget& target : targets) {
    bool new_tid = tids.insert(target.tid).second;
    if (new_tid && names.insert(target.name).second) continue;
    return error(Code::kInternal,
                 "tgtadm's target report names {} twice: a session's initiator alias can add "
                 "lines to that report (tgtd prints it as the initiator sent it), so rosetctl "
                 "trusts none of it; end the session whose alias holds line breaks "
                 "(`tgtadm --lld iscsi --mode target --op show` lists the sessions)",
                 new_tid ? fmt::format("target {}", display_quoted(target.name, 120))
                         : fmt::format("target id {}", target.tid));
  }
  return Status();
}

}  // namespace

Expected<std::vector<TgtTarget>> parse_tgt_targets(std::string_view text) {
  std::vector<TgtTarget> targets;
  std::string_view section;  // the depth-1 heading we are in
  for (const ReportLine& line : split_lines(text)) {
    if (line.depth == 0) {
      TgtTarget target;
      if (!parse_target_header(line.text, &target)) return unreadable_report("target", line.text);
      targets.push_back(std::move(target));
      section = {};
      continue;
    }
    if (targets.empty()) return unreadable_report("target", line.text);
    TgtTarget& target = targets.back();
    if (line.depth == 1) {
      section = line.text;
      continue;
    }
    std::string_view value;
    if (section == "System information:") {
      if (value_of(line.text, "State", &value)) target.state = std::string(value);
    } else if (section == "I_T nexus information:") {
      if (line.depth == 2 && value_of(line.text, "I_T nexus", &value)) {
        target.sessions.push_back({std::string(value), {}, {}});
      } else if (target.sessions.empty()) {
        return unreadable_report("target", line.text);
      } else if (line.depth == 3 && value_of(line.text, "Initiator", &value)) {
        // "Initiator: iqn.... alias: host"
        target.sessions.back().initiator = std::string(value.substr(0, value.find(" alias:")));
      } else if (line.depth == 3 && value_of(line.text, "Connection", &value)) {
        target.sessions.back().connections.emplace_back(value);
      }
    } else if (section == "LUN information:") {
      if (line.depth == 2 && value_of(line.text, "LUN", &value)) {
        TgtLun lun;
        if (!parse_int(value, &lun.lun)) return unreadable_report("target", line.text);
        target.luns.push_back(std::move(lun));
      } else if (target.luns.empty()) {
        return unreadable_report("target", line.text);
      } else if (value_of(line.text, "SCSI SN", &value)) {
        target.luns.back().serial = std::string(value);
      } else if (value_of(line.text, "Backing store path", &value)) {
        target.luns.back().backing_path = std::string(value);
      }
    } else if (section == "Account information:" && line.depth == 2) {
      constexpr std::string_view kOutgoing = " (outgoing)";
      if (line.text.ends_with(kOutgoing)) {
        std::string_view user = line.text.substr(0, line.text.size() - kOutgoing.size());
        target.outgoing_users.emplace_back(user);
      } else {
        target.incoming_users.emplace_back(line.text);
      }
    } else if (section == "ACL information:" && line.depth == 2) {
      target.acl.emplace_back(line.text);
    }
  }
  if (Status forged = forged_report_check(targets); !forged) return forged;
  return targets;
}

Expected<std::vector<std::string>> parse_tgt_accounts(std::string_view text) {
  std::vector<std::string> users;
  bool in_list = false;
  for (const ReportLine& line : split_lines(text)) {
    if (line.depth == 0) {
      if (line.text != "Account list:") return unreadable_report("account", line.text);
      in_list = true;
    } else if (in_list && line.depth == 1) {
      users.emplace_back(line.text);
    } else {
      return unreadable_report("account", line.text);
    }
  }
  return users;
}

Expected<std::string> parse_tgt_system_state(std::string_view text) {
  std::string_view section;
  for (const ReportLine& line : split_lines(text)) {
    std::string_view value;
    if (line.depth == 0) {
      section = line.text;
    } else if (section == "System:" && line.depth == 1 && value_of(line.text, "State", &value)) {
      return std::string(value);
    }
  }
  return error(Code::kInternal, "tgtadm's system report names no State under \"System:\"");
}

}  // namespace rosetctl
