// `rosetctl tls init|issue|show`: the certificates of serve's mutual TLS, made in one command
// each (docs/guides/operating.md: Certificates).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/global_options.h"

namespace rosetctl::cli {

void setup_tls(CLI::App& app, const GlobalOptions& globals, Action& action);

}  // namespace rosetctl::cli
