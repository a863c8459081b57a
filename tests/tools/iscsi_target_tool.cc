// A test entry point into the iSCSI target backend (src/providers/iscsi), NOT a user tool and
// not installed: tests/integration/test_iscsi_target.py drives TgtBackend through it against a
// real tgtd. One operation per run; results as JSON on stdout; a failure prints
// "<CODE>: <message>" on stderr and exits 1. A CHAP password is read from stdin, never argv;
// set-chap prints the CHAP user initiators log in as ({"chap_user": ...}).
//
//   iscsi_target_tool [--control-port N] [--prefix IQN-PREFIX] COMMAND ARGS...
//   commands: ensure VOLUME IMAGE | resize VOLUME IMAGE | remove VOLUME | bind VOLUME INITIATOR
//             | unbind VOLUME INITIATOR | set-chap VOLUME USER | clear-chap VOLUME | list | health
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "providers/iscsi/tgt_backend.h"

namespace {

using rosetctl::Status;

nlohmann::json to_json(const rosetctl::TargetInfo& info) {
  return {{"volume_id", info.volume_id},       {"iqn", info.iqn},
          {"has_lun", info.has_lun},           {"serial", info.serial},
          {"backing_path", info.backing_path}, {"initiators", info.initiators},
          {"chap_users", info.chap_users}};
}

int fail(const Status& status) {
  std::cerr << rosetctl::code_name(status.code()) << ": " << status.message() << "\n";
  return 1;
}

int usage(std::string_view why) {
  std::cerr << "usage error: " << why << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  rosetctl::TgtOptions options;
  size_t at = 0;
  while (at + 1 < args.size() && args[at].starts_with("--")) {
    if (args[at] == "--control-port") {
      options.control_port = std::stoi(args[at + 1]);
    } else if (args[at] == "--prefix") {
      options.iqn_prefix = args[at + 1];
    } else {
      return usage("unknown option " + args[at]);
    }
    at += 2;
  }
  if (at >= args.size()) return usage("no command");
  std::string command = args[at];
  std::vector<std::string> rest(args.begin() + static_cast<long>(at) + 1, args.end());
  auto need = [&](size_t count) { return rest.size() == count; };

  auto opened = rosetctl::TgtBackend::open(options);
  if (!opened) return fail(opened.status());
  rosetctl::TargetBackend& backend = **opened;

  if (command == "ensure" && need(2)) {
    auto info = backend.ensure_target({rest[0], rest[1]});
    if (!info) return fail(info.status());
    std::cout << to_json(*info).dump() << "\n";
    return 0;
  }
  if (command == "list" && need(0)) {
    auto targets = backend.list_targets();
    if (!targets) return fail(targets.status());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& info : *targets)
      out.push_back(to_json(info));
    std::cout << out.dump() << "\n";
    return 0;
  }
  if (command == "set-chap" && need(2)) {
    rosetctl::ChapCredentials chap{rest[1], {}};
    std::getline(std::cin, chap.password);
    auto account = backend.set_chap(rest[0], chap);
    if (!account) return fail(account.status());
    std::cout << nlohmann::json{{"chap_user", *account}}.dump() << "\n";
    return 0;
  }
  Status status;
  if (command == "resize" && need(2)) {
    status = backend.resize_lun({rest[0], rest[1]});
  } else if (command == "remove" && need(1)) {
    status = backend.remove_target(rest[0]);
  } else if (command == "bind" && need(2)) {
    status = backend.bind_initiator(rest[0], rest[1]);
  } else if (command == "unbind" && need(2)) {
    status = backend.unbind_initiator(rest[0], rest[1]);
  } else if (command == "clear-chap" && need(1)) {
    status = backend.clear_chap(rest[0]);
  } else if (command == "health" && need(0)) {
    status = backend.check_health();
  } else {
    return usage(fmt::format("unknown command or wrong argument count: {}", command));
  }
  if (!status) return fail(status);
  return 0;
}
