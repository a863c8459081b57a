// cli/config_file: the TOML config file, read into a command tree shaped like rosetctl's (root
// flags of each kind, a section, a nested section). Any text is either applied or refused with
// CLI11's ConfigError (a usage error naming the line); nothing else may escape.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/config_file.h"
#include "fuzz_check.h"

namespace {

// One file per process, rewritten for each input: CLI11 reads the config by its path.
const std::string& config_path() {
  static const std::string path =
      "/tmp/rosetctl-fuzz-config-" + std::to_string(::getpid()) + ".toml";
  // Removed when the fuzzer exits (a crash leaves it, beside the input that caused it).
  static const int removed_at_exit = std::atexit([] { ::unlink(path.c_str()); });
  (void)removed_at_exit;
  return path;
}

void write_file(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0, "the scratch config file can be written");
  FUZZ_CHECK(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()),
             "the scratch config file takes the input");
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  write_file(config_path(), rosetctl::fuzz::as_text(data, size));
  CLI::App app("fuzz");
  app.set_config("--config", config_path());
  rosetctl::cli::read_config_as_toml(app);
  std::string output = "table", state_dir;
  bool verbose = false;
  int timeout = 120;
  std::vector<std::string> params;
  app.add_option("--output,-o", output)->check(CLI::IsMember({"table", "json"}));
  app.add_option("--state-dir", state_dir);
  app.add_flag("--verbose,-v", verbose);
  app.add_option("--timeout", timeout)->check(CLI::Range(1, 3600));
  CLI::App* volume = app.add_subcommand("volume");
  CLI::App* create = volume->add_subcommand("create");
  create->add_option("--param,-p", params);
  create->add_flag("--block");
  try {
    std::vector<std::string> args = {"create", "volume"};  // CLI11 takes them reversed
    app.parse(args);
  } catch (const CLI::ParseError&) {
    // Refused, with a message: what bad input should get.
  }
  return 0;
}
