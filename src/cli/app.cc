// Root of the CLI11 tree. Global flags are accepted before or after the verb (fallthrough).
#include "cli/app.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/completion_cmd.h"
#include "cli/config_file.h"
#include "cli/doctor_cmd.h"
#include "cli/exit_codes.h"
#include "cli/info_cmd.h"
#include "cli/serve_cmd.h"
#include "cli/snapshot_cmd.h"
#include "cli/tls_cmd.h"
#include "cli/volume_cmd.h"
#include "core/fs_freeze.h"
#include "core/full_filesystem.h"
#include "core/log.h"
#include "core/version.h"
#include "providers/provider_registration.h"

namespace rosetctl::cli {
namespace {

constexpr const char* kDefaultConfig = "/etc/rosetctl/config.toml";

struct RawGlobals {
  std::string output = "table";
};

// Each provider's own flags, under its heading, as its folder declares them
// (providers/provider_registration.h). Env-only settings get no flag: provider_settings()
// reads them.
void add_provider_options(CLI::App& app, GlobalOptions& globals) {
  for (const ProviderRegistration& provider : registered_providers()) {
    ProviderSettings& values = globals.provider_options[provider.name];
    for (const ProviderOption& option : provider.options) {
      if (option.name.empty()) continue;
      std::string& value = values[option.name];
      value = option.default_value;
      CLI::Option* flag = app.add_option("--" + option.name, value, option.help);
      if (!option.type_name.empty()) flag->type_name(option.type_name);
      if (!option.choices.empty()) flag->check(CLI::IsMember(option.choices));
      if (option.max > option.min) flag->check(CLI::Range(option.min, option.max));
      if (!option.env.empty()) flag->envname(option.env);
      if (!option.default_value.empty()) flag->capture_default_str();
      flag->group(provider.option_group);
    }
  }
}

// "local or roset", "local, roset or iscsi": for --provider's help.
std::string provider_names_in_words() {
  std::string words;
  const auto& providers = registered_providers();
  for (size_t i = 0; i < providers.size(); ++i) {
    if (i > 0) words += i + 1 == providers.size() ? " or " : ", ";
    words += providers[i].name;
  }
  return words;
}

// A controller on another host, and this host's certificate (docs/guides/across-hosts.md).
void add_network_options(CLI::App& app, GlobalOptions& globals) {
  const std::string group = "Across hosts (mutual TLS)";
  app.add_option("--controller", globals.controller,
                 "Send controller calls (create, delete, list, map, snapshots...) to the "
                 "controller at HOST:PORT (serve --role controller --listen); node calls stay here")
      ->envname("ROSETCTL_CONTROLLER")
      ->type_name("HOST:PORT")
      ->group(group);
  app.add_option("--on-node", globals.on_node,
                 "Send node calls (volume stats, connect, disconnect...) to NODE through the "
                 "controller's proxy instead of running them here (needs --controller)")
      ->type_name("NODE")
      ->group(group);
  app.add_option("--tls-cert", globals.tls_cert,
                 "This host's certificate (PEM), for --controller and serve --listen; the "
                 "controller's also lets the controller host's CLI reach its nodes")
      ->envname("ROSETCTL_TLS_CERT")
      ->group(group);
  app.add_option("--tls-key", globals.tls_key, "Its private key (PEM, mode 0600)")
      ->envname("ROSETCTL_TLS_KEY")
      ->group(group);
  app.add_option("--tls-ca", globals.tls_ca,
                 "The CA certificate (PEM) every peer's certificate must be signed by")
      ->envname("ROSETCTL_TLS_CA")
      ->group(group);
}

void add_global_options(CLI::App& app, GlobalOptions& globals, RawGlobals& raw) {
  const char* config = std::getenv("ROSETCTL_CONFIG");
  app.set_config("--config", config != nullptr ? config : kDefaultConfig,
                 "TOML file of defaults for these flags (env ROSETCTL_CONFIG, default " +
                     std::string(kDefaultConfig) + " when it exists)");
  read_config_as_toml(app);
  app.add_option("--output,-o", raw.output, "Output format: table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->envname("ROSETCTL_OUTPUT")
      ->capture_default_str();
  app.add_option("--state-dir", globals.state_dir,
                 "Where this host keeps its state and local volumes")
      ->envname("ROSETCTL_STATE_DIR")
      ->capture_default_str();
  app.add_option("--provider", globals.provider,
                 "Provider for new volumes: " + provider_names_in_words() +
                     " (with --controller: asked of the controller)")
      ->envname("ROSETCTL_PROVIDER")
      ->capture_default_str();
  app.add_option("--node-id", globals.node_id, "This node's CSI node id (default: the host name)")
      ->envname("ROSETCTL_NODE_ID");
  app.add_option("--driver-name", globals.driver_name, "CSI driver name (default io.roset.csi)")
      ->envname("ROSETCTL_DRIVER_NAME");
  app.add_flag("--capacity-overcommit", globals.capacity_overcommit,
               "Let image volumes promise more space than is free (docs: capacity policy)")
      ->envname("ROSETCTL_CAPACITY_OVERCOMMIT");
  app.add_flag("-v,--verbose", globals.verbose, "Debug logs on stderr (secrets are redacted)");
  app.add_option("--secrets-file", globals.secrets_file,
                 "JSON file (mode 0600) of CSI secrets sent with every call that takes secrets, "
                 "as a CO sends a StorageClass's secret: e.g. {\"api-key\": \"...\"} for roset")
      ->envname("ROSETCTL_SECRETS_FILE");
  add_provider_options(app, globals);
  add_network_options(app, globals);
}

// CLI11 reports "A subcommand is required" for `rosetctl volume frobnicate`; name the word
// that was not understood and where to look instead.
std::string parse_error_text(CLI::App& app, const CLI::ParseError& error) {
  CLI::App* deepest = &app;
  std::string path = "rosetctl";
  while (!deepest->get_subcommands().empty()) {
    deepest = deepest->get_subcommands().front();
    path += " " + deepest->get_name();
  }
  std::vector<std::string> extras = app.remaining(/*recurse=*/true);
  if (!extras.empty() && !extras.front().starts_with("-")) {
    return fmt::format("unknown command \"{}\" for \"{}\" (see \"{} --help\")", extras.front(),
                       path, path);
  }
  return error.what();
}

// Environment variables of the global flags, so they can outrank the config file.
struct EnvFlag {
  std::string env;
  std::string long_name;
  std::string short_name;  // or ""
};

std::vector<EnvFlag> env_flags() {
  std::vector<EnvFlag> flags = {
      {"ROSETCTL_OUTPUT", "--output", "-o"},
      {"ROSETCTL_STATE_DIR", "--state-dir", ""},
      {"ROSETCTL_PROVIDER", "--provider", ""},
      {"ROSETCTL_NODE_ID", "--node-id", ""},
      {"ROSETCTL_DRIVER_NAME", "--driver-name", ""},
      {"ROSETCTL_SECRETS_FILE", "--secrets-file", ""},
  };
  for (const ProviderRegistration& provider : registered_providers()) {
    for (const ProviderOption& option : provider.options) {
      if (!option.name.empty() && !option.env.empty())
        flags.push_back({option.env, "--" + option.name, ""});
    }
  }
  flags.insert(flags.end(), {
                                {"ROSETCTL_CONTROLLER", "--controller", ""},
                                {"ROSETCTL_TLS_CERT", "--tls-cert", ""},
                                {"ROSETCTL_TLS_KEY", "--tls-key", ""},
                                {"ROSETCTL_TLS_CA", "--tls-ca", ""},
                            });
  return flags;
}

bool given_on_command_line(const std::vector<std::string>& args, const EnvFlag& flag) {
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == flag.long_name || arg.starts_with(flag.long_name + "=")) return true;
    if (!flag.short_name.empty() && arg.starts_with(flag.short_name)) return true;
  }
  return false;
}

// CLI11 applies a config file before environment variables; the usual order is flag, then
// environment, then file. Environment values therefore enter as if given first on the command
// line, unless the flag itself was given.
std::vector<std::string> arguments_with_environment(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> from_env;
  for (const EnvFlag& flag : env_flags()) {
    const char* value = std::getenv(flag.env.c_str());
    if (value == nullptr || given_on_command_line(args, flag)) continue;
    from_env.push_back(fmt::format("{}={}", flag.long_name, value));
  }
  args.insert(args.begin(), from_env.begin(), from_env.end());
  return args;
}

std::string version_text() {
  return fmt::format("rosetctl {} (commit {}, {} build, {})", kVersion, kGitCommit, kBuildType,
                     kCompiler);
}

}  // namespace

std::map<std::string, ProviderSettings> provider_settings(const GlobalOptions& options) {
  std::map<std::string, ProviderSettings> settings = options.provider_options;
  for (const ProviderRegistration& provider : registered_providers()) {
    for (const ProviderOption& option : provider.options) {
      if (!option.name.empty()) continue;
      if (const char* value = std::getenv(option.env.c_str()))
        settings[provider.name][option.env] = value;
    }
  }
  return settings;
}

TlsFiles tls_files(const GlobalOptions& options) {
  return TlsFiles{options.tls_cert, options.tls_key, options.tls_ca};
}

int run(int argc, char** argv) {
  thaw_on_fatal_signals();  // Ctrl-C mid-snapshot must not leave a volume's filesystem frozen
  CLI::App app("rosetctl: provision volumes, attach them to hosts and serve them over CSI.",
               "rosetctl");
  app.fallthrough();  // global flags work after the verb too
  // Unknown keys are refused by the TOML reader (cli/config_file.h), naming their line.
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text());
  app.footer(
      "Exit codes: 0 ok, 1 failed, 2 bad usage or input, 3 not found, 4 exists with other\n"
      "properties, 5 wrong state (e.g. in use), 6 busy (retry), 7 not permitted, 8 out of\n"
      "space/limits, 9 not implemented, 10 timed out.\n\n"
      "Start with:\n  rosetctl volume create demo\n  rosetctl volume connect demo --target "
      "/mnt/demo");

  GlobalOptions globals;
  RawGlobals raw;
  Action action;
  add_global_options(app, globals, raw);
  setup_volume(app, globals, action);
  setup_snapshot(app, globals, action);
  setup_serve(app, globals, action);
  setup_tls(app, globals, action);
  setup_info(app, globals, action);
  setup_doctor(app, globals, action);
  setup_completion(app, action);

  try {
    // CLI11 takes the arguments in reverse order.
    std::vector<std::string> args = arguments_with_environment(argc, argv);
    std::reverse(args.begin(), args.end());
    app.parse(args);
    globals.provider_given = app.get_option("--provider")->count() > 0;
    ConfigFileRead config = config_file_read(app);
    globals.config_file = config.path;
    globals.config_file_read = config.read;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "rosetctl: %s\nRun with --help for usage.\n",
                 parse_error_text(app, e).c_str());
    return kExitUsage;
  }
  globals.output = raw.output == "json" ? OutputFormat::kJson : OutputFormat::kTable;
  // `serve` replaces this with its long-running format.
  setup_logging(globals.verbose ? Verbosity::kDebug : Verbosity::kNormal, /*long_running=*/false);
  if (!action) {
    std::fprintf(stderr, "rosetctl: no command given\nRun with --help for usage.\n");
    return kExitUsage;
  }
  Status status = action();
  // A full disk here is on this host's state directory; one at a controller (--controller)
  // is on that host's, which this host cannot see.
  if (globals.controller.empty()) status = name_full_filesystem(status, globals.state_dir);
  if (!status.is_ok()) {
    std::fprintf(stderr, "rosetctl: %s\n", status.message().c_str());
    return exit_code_for(status.code());
  }
  return kExitOk;
}

}  // namespace rosetctl::cli
