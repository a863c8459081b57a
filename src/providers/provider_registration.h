// What a provider folder declares about itself so that rosetctl can build it and offer its
// settings: its options (each a global flag, a key of the config file and, where it says so, an
// environment variable) and a factory. The CLI turns the options into flags (cli/app.cc) without
// knowing any provider; registry.cc lists the registrations, one line per provider.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/state_layout.h"
#include "core/state_store.h"
#include "core/status.h"
#include "providers/provider.h"

namespace rosetctl {

// One setting of a provider. Its flag is global (rosetctl --NAME VALUE verb ...), so NAME
// carries the provider's name as a prefix ("roset-api-url", "iscsi-portal").
struct ProviderOption {
  // The flag without "--", also its config file key. Empty: the setting is read from `env`
  // only and never is a flag (a secret: a command line is visible to every user).
  std::string name;
  std::string env;                   // environment variable that sets it, or ""
  std::string help;                  // one line for --help
  std::string default_value;         // "" when there is none; otherwise shown in --help
  std::string type_name;             // what --help shows for the value; "": TEXT
  std::vector<std::string> choices;  // when given, the only values accepted
  int min = 0;                       // an integer in [min, max] when max > min
  int max = 0;
};

// A provider's settings as given (flag, environment, config file) or defaulted, by the option's
// name (its env name for an env-only option). The factory sees every option of its provider.
using ProviderSettings = std::map<std::string, std::string>;

// What a factory builds its provider from.
struct ProviderContext {
  const StateLayout& layout;
  StateStore& store;
  const ProviderSettings& settings;  // this provider's options (ProviderRegistration::options)
  // Settings every provider shares: image-backed volumes may promise more space than is free
  // (--capacity-overcommit), this provider is the one --provider names, and this process
  // serves the node side (serve --role controller does not).
  bool capacity_overcommit = false;
  bool is_default = false;
  bool node_role = true;
  bool controller_role = true;  // this process serves the controller side (not serve --role node
                                // nor a CLI run with --controller)
};

struct ProviderRegistration {
  std::string name;          // Provider::name(): the --provider word and the volume id prefix
  std::string option_group;  // the heading of its flags in --help
  std::vector<ProviderOption> options;
  // INVALID_ARGUMENT naming the option when a setting is unusable.
  std::function<Expected<std::unique_ptr<Provider>>(const ProviderContext&)> create;
  // What the CLI needs to know of the provider's volumes without building it (cli/), so that
  // no provider's name is tested outside its folder:
  // every node that attaches one of its volumes may write to it at once (a shared filesystem):
  // attached MULTI_NODE_MULTI_WRITER, not SINGLE_NODE_WRITER;
  bool shared_by_nodes = false;
  // added to an UNAVAILABLE CreateVolume of a CLI that sees only its own host ("" : nothing),
  // when the provider makes its volumes on one host, which may be another.
  std::string only_this_host_hint = "";
  // Why its volumes never move between nodes (`volume move`), "" when they do: what the
  // refusal says after "volume \"NAME\" is a PROVIDER volume: ".
  std::string not_moved_because = "";
};

// Every provider this binary has, in the order --help and Probe list them (registry.cc).
const std::vector<ProviderRegistration>& registered_providers();
// The registration named `name` among `providers`; null when none is.
const ProviderRegistration* find_registration(
    std::string_view name,
    const std::vector<ProviderRegistration>& providers = registered_providers());

}  // namespace rosetctl
