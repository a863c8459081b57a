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

namespace rosetctl::cli {
namespace {

constexpr const char* kDefaultConfig = "/etc/rosetctl/config.toml";

struct RawGlobals {
  std::string output = "table";
};

// The roset provider's flags. The API key has none on purpose (a command line is visible to
// every user): it comes from ROSET_API_KEY, a key file or CSI secrets.
void add_roset_options(CLI::App& app, GlobalOptions& globals) {
  const std::string group = "Roset provider (--provider roset)";
  app.add_option("--roset-api-url", globals.roset_api_url,
                 "Roset API base URL (default https://api.roset.dev; http:// for on-premise)")
      ->envname("ROSET_API_URL")
      ->group(group);
  app.add_option("--roset-api-key-file", globals.roset_api_key_file,
                 "File holding the Roset API key (mode 0600); or set ROSET_API_KEY")
      ->envname("ROSET_API_KEY_FILE")
      ->group(group);
  app.add_option("--roset-mount-id", globals.roset_mount_id,
                 "Roset mount for new volumes when the StorageClass names none (default: the "
                 "account's default mount)")
      ->envname("ROSET_MOUNT_ID")
      ->group(group);
  app.add_option("--roset-ca-bundle", globals.roset_ca_bundle,
                 "PEM CA bundle to verify the API's TLS certificate (default: the system store)")
      ->envname("ROSET_CA_BUNDLE")
      ->group(group);
  app.add_option("--roset-fuse", globals.roset_fuse,
                 "The roset-fuse client to run on nodes (default: roset-fuse on PATH)")
      ->envname("ROSET_FUSE_BINARY")
      ->group(group);
  app.add_option("--fuse-credentials", globals.fuse_credentials,
                 "How roset-fuse gets the key: file (0600 file named by "
                 "ROSET_CREDENTIALS_FILE) or env (ROSET_API_KEY in its environment)")
      ->check(CLI::IsMember({"file", "env"}))
      ->envname("ROSET_FUSE_CREDENTIALS")
      ->capture_default_str()
      ->group(group);
  app.add_option("--roset-fuse-timeout", globals.roset_fuse_timeout_seconds,
                 "Seconds to wait for a roset-fuse mount to appear before giving up")
      ->check(CLI::Range(1, 3600))
      ->envname("ROSET_FUSE_TIMEOUT")
      ->capture_default_str()
      ->group(group);
}

// A controller on another host, and this host's certificate (README: rosetctl across hosts).
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
                 "This host's certificate (PEM), for --controller and serve --listen")
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
  app.add_option("--provider", globals.provider, "Provider for new volumes: local or roset")
      ->envname("ROSETCTL_PROVIDER")
      ->capture_default_str();
  app.add_option("--node-id", globals.node_id, "This node's CSI node id (default: the host name)")
      ->envname("ROSETCTL_NODE_ID");
  app.add_option("--driver-name", globals.driver_name, "CSI driver name (default io.roset.csi)")
      ->envname("ROSETCTL_DRIVER_NAME");
  app.add_flag("--capacity-overcommit", globals.capacity_overcommit,
               "Let image volumes promise more space than is free (README: capacity policy)")
      ->envname("ROSETCTL_CAPACITY_OVERCOMMIT");
  app.add_flag("-v,--verbose", globals.verbose, "Debug logs on stderr (secrets are redacted)");
  app.add_option("--secrets-file", globals.secrets_file,
                 "JSON file (mode 0600) of CSI secrets sent with every call that takes secrets, "
                 "as a CO sends a StorageClass's secret: e.g. {\"api-key\": \"...\"} for roset")
      ->envname("ROSETCTL_SECRETS_FILE");
  add_roset_options(app, globals);
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
  const char* env;
  const char* long_name;
  const char* short_name;  // or nullptr
};
constexpr EnvFlag kEnvFlags[] = {
    {"ROSETCTL_OUTPUT", "--output", "-o"},
    {"ROSETCTL_STATE_DIR", "--state-dir", nullptr},
    {"ROSETCTL_PROVIDER", "--provider", nullptr},
    {"ROSETCTL_NODE_ID", "--node-id", nullptr},
    {"ROSETCTL_DRIVER_NAME", "--driver-name", nullptr},
    {"ROSETCTL_SECRETS_FILE", "--secrets-file", nullptr},
    {"ROSET_API_URL", "--roset-api-url", nullptr},
    {"ROSET_API_KEY_FILE", "--roset-api-key-file", nullptr},
    {"ROSET_MOUNT_ID", "--roset-mount-id", nullptr},
    {"ROSET_CA_BUNDLE", "--roset-ca-bundle", nullptr},
    {"ROSET_FUSE_BINARY", "--roset-fuse", nullptr},
    {"ROSET_FUSE_CREDENTIALS", "--fuse-credentials", nullptr},
    {"ROSET_FUSE_TIMEOUT", "--roset-fuse-timeout", nullptr},
    {"ROSETCTL_CONTROLLER", "--controller", nullptr},
    {"ROSETCTL_TLS_CERT", "--tls-cert", nullptr},
    {"ROSETCTL_TLS_KEY", "--tls-key", nullptr},
    {"ROSETCTL_TLS_CA", "--tls-ca", nullptr},
};

bool given_on_command_line(const std::vector<std::string>& args, const EnvFlag& flag) {
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == flag.long_name || arg.starts_with(std::string(flag.long_name) + "=")) return true;
    if (flag.short_name != nullptr && arg.starts_with(flag.short_name)) return true;
  }
  return false;
}

// CLI11 applies a config file before environment variables; the usual order is flag, then
// environment, then file. Environment values therefore enter as if given first on the command
// line, unless the flag itself was given.
std::vector<std::string> arguments_with_environment(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> from_env;
  for (const EnvFlag& flag : kEnvFlags) {
    const char* value = std::getenv(flag.env);
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

RosetConfig roset_config(const GlobalOptions& options) {
  RosetConfig config;
  config.api_url = options.roset_api_url;
  config.api_key_file = options.roset_api_key_file;
  if (const char* key = std::getenv("ROSET_API_KEY")) config.api_key = key;
  config.mount_id = options.roset_mount_id;
  config.ca_bundle = options.roset_ca_bundle;
  config.fuse_binary = options.roset_fuse;
  config.fuse_credentials =
      options.fuse_credentials == "env" ? FuseCredentials::kEnv : FuseCredentials::kFile;
  config.fuse_ready_timeout = std::chrono::seconds(options.roset_fuse_timeout_seconds);
  return config;
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
  setup_completion(app, action);

  try {
    // CLI11 takes the arguments in reverse order.
    std::vector<std::string> args = arguments_with_environment(argc, argv);
    std::reverse(args.begin(), args.end());
    app.parse(args);
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
