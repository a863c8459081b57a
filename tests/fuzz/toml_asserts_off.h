// Forced into cli/config_file.cc by the fuzz build only (tests/fuzz/CMakeLists.txt says why):
// toml++'s internal assertions compiled out, as NDEBUG does in the release build.
#pragma once

#define TOML_ASSERT(expr) static_cast<void>(0)
