// The config file (--config, ROSETCTL_CONFIG, /etc/rosetctl/config.toml): read as TOML by a real
// TOML parser (toml++), checked against the command tree, and handed to CLI11 as settings.
//
// CLI11's own reader is INI-like: it accepted a string without its closing quote as a value
// with the quote in it and reported unknown keys as "INI was not able to parse". Here every
// error names the file, the line and column, and what is wrong (a usage error, exit 2).
#pragma once

#include <CLI/CLI.hpp>

namespace rosetctl::cli {

// Makes `app` read the file of its --config option (declared with set_config) as TOML. Top-level
// keys set the root's flags; a table such as [serve] or [volume.create] sets that verb's flags.
// Unknown keys and tables, values of the wrong kind and values a flag's check refuses are errors.
void read_config_as_toml(CLI::App& app);

// The file of `app`'s --config option after parsing (given, else its default), and whether it
// exists (CLI11 reads a default file only when it does).
struct ConfigFileRead {
  std::string path;
  bool read = false;
};
ConfigFileRead config_file_read(const CLI::App& app);

// One line saying which configuration file this run read, for `serve`'s log and `doctor`.
std::string config_file_text(const std::string& path, bool read);

}  // namespace rosetctl::cli
