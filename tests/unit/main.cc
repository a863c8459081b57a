// Catch2 entry point for the unit test binaries. Call logs are kept to warnings so failures
// stand out; ROSETCTL_TEST_LOGS=1 shows everything.
#define CATCH_CONFIG_RUNNER
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <cstdlib>

int main(int argc, char* argv[]) {
  const char* verbose = std::getenv("ROSETCTL_TEST_LOGS");
  spdlog::set_level(verbose != nullptr && *verbose == '1' ? spdlog::level::debug
                                                          : spdlog::level::warn);
  return Catch::Session().run(argc, argv);
}
