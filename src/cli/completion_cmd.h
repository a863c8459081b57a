// `rosetctl completion bash|zsh|fish`: shell completion scripts generated from the command tree
// itself, so they can never drift from the real flags (completions/ holds the generated files;
// a test checks they are current).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/command.h"

namespace rosetctl::cli {

void setup_completion(CLI::App& app, Action& action);

// The script for `shell` ("bash", "zsh" or "fish") describing every verb and flag under `app`.
std::string completion_script(const CLI::App& app, const std::string& shell);

}  // namespace rosetctl::cli
