// The iscsi provider's settings: where consumers log in, the targets' names, and how tgtd is
// reached. Only a controller uses them; a consumer learns all it needs from the publish context.
#include "providers/iscsi/iscsi_registration.h"

#include <charconv>

#include "core/map_lookup.h"
#include "core/validate.h"
#include "providers/iscsi/iscsi_provider.h"
#include "providers/iscsi/tgt_backend.h"

namespace rosetctl {
namespace {

constexpr const char* kPortal = "iscsi-portal";
constexpr const char* kIqnPrefix = "iscsi-iqn-prefix";
constexpr const char* kControlPort = "iscsi-tgt-control-port";
constexpr int kMaxControlPort = 32767;  // tgt keeps it in a signed short

std::vector<ProviderOption> iscsi_options() {
  return {
      {.name = kPortal,
       .env = "ROSETCTL_ISCSI_PORTAL",
       .help = "The iSCSI portal (ADDR:PORT of tgtd) consumers are told to log in to; needed to "
               "map iscsi volumes",
       .type_name = "ADDR:PORT"},
      {.name = kIqnPrefix,
       .env = "ROSETCTL_ISCSI_IQN_PREFIX",
       .help = "Prefix of the targets' names: each volume is <prefix>:<volume id>",
       .default_value = std::string(kDefaultIscsiIqnPrefix)},
      {.name = kControlPort,
       .env = "ROSETCTL_ISCSI_TGT_CONTROL_PORT",
       .help = "tgtd's control port (tgtd -C N); 0 is tgtd's default",
       .default_value = "0",
       .type_name = "INT",
       .min = 0,
       .max = kMaxControlPort},
  };
}

// "ADDR:PORT" (an IPv6 address in brackets) with a port from 1 to 65535.
Status check_portal(const std::string& portal) {
  size_t colon = portal.rfind(':');
  int port = 0;
  if (colon != std::string::npos && colon > 0) {
    const char* begin = portal.data() + colon + 1;
    const char* end = portal.data() + portal.size();
    auto [stop, parsed] = std::from_chars(begin, end, port);
    if (parsed == std::errc() && stop == end && port >= 1 && port <= 65535) return Status::ok();
  }
  return error(Code::kInvalidArgument,
               "--{} must be ADDR:PORT with a port from 1 to 65535 (the address consumers reach "
               "tgtd at), not {}",
               kPortal, display_quoted(portal));
}

Expected<std::unique_ptr<Provider>> create_iscsi(const ProviderContext& context) {
  iscsi::IscsiSettings settings;
  settings.portal = value_or_empty(context.settings, kPortal);
  settings.iqn_prefix = value_or_empty(context.settings, kIqnPrefix);
  settings.controller_role = context.controller_role;
  settings.node_role = context.node_role;
  settings.is_default = context.is_default;
  if (!settings.portal.empty()) ROSETCTL_RETURN_IF_ERROR(check_portal(settings.portal));
  ROSETCTL_RETURN_IF_ERROR(validate_iqn_prefix(settings.iqn_prefix, "--iscsi-iqn-prefix"));
  std::string port_text = value_or_empty(context.settings, kControlPort);
  int port = 0;
  auto [end, parsed] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (parsed != std::errc() || end != port_text.data() + port_text.size() || port < 0 ||
      port > kMaxControlPort) {
    return error(Code::kInvalidArgument, "--{} must be a port from 0 to {}, not {}", kControlPort,
                 kMaxControlPort, display_quoted(port_text));
  }
  std::unique_ptr<TargetBackend> backend;
  Status backend_problem;
  if (context.controller_role) {
    auto tgt = TgtBackend::open({.iqn_prefix = settings.iqn_prefix, .control_port = port});
    if (tgt) {
      backend = std::move(*tgt);
    } else if (tgt.status().code() == Code::kFailedPrecondition) {
      // tgt not installed: only iscsi volumes' calls fail, saying so.
      backend_problem = tgt.status();
    } else {
      return tgt.status();
    }
  }
  return std::unique_ptr<Provider>(std::make_unique<iscsi::IscsiProvider>(
      context.layout, context.store, context.capacity_overcommit, std::move(settings),
      std::move(backend), std::move(backend_problem)));
}

}  // namespace

ProviderRegistration iscsi_registration() {
  return {.name = "iscsi",
          .option_group = "iSCSI provider (controller)",
          .options = iscsi_options(),
          .create = create_iscsi,
          // Made on the host whose tgtd exports it, the controller host: one that does not
          // answer is most often the wrong host.
          .only_this_host_hint =
              "without --controller this CLI makes iscsi volumes on this host, with this "
              "host's tgtd: where tgtd runs on the controller host, run it with --controller "
              "ADDRESS (or `controller` in the configuration file)",
          .not_moved_because =
              "it lives on the controller host and any node connects to it "
              "over iSCSI; only volumes placed on a node move"};
}

}  // namespace rosetctl
