// The rosetctl command line: global flags, the verb tree, and exit codes.
#pragma once

namespace rosetctl::cli {

// Parses argv, runs the chosen verb, prints errors as "rosetctl: <message>" and returns the
// exit code documented in docs/reference/exit-codes.md.
int run(int argc, char** argv);

}  // namespace rosetctl::cli
