// The provider table and its settings (providers/registry.cc, provider_registration.h).
#include "providers/registry.h"

#include <catch2/catch.hpp>
#include <set>

#include "unit/scratch_dir.h"
#include "unit/test_provider.h"

using namespace rosetctl;

namespace {

struct Scratch {
  Scratch() {
    layout.root = dir.path;
    REQUIRE(layout.ensure_directories().is_ok());
    auto opened = StateStore::open(layout.root);
    REQUIRE(opened.has_value());
    store = std::move(*opened);
  }
  testing::ScratchDir dir;
  StateLayout layout;
  std::unique_ptr<StateStore> store;
};

}  // namespace

TEST_CASE("every registered provider is built, under its own name", "[registry]") {
  Scratch scratch;
  auto registry = ProviderRegistry::create(scratch.layout, *scratch.store, {});
  REQUIRE(registry.has_value());
  std::vector<std::string> names;
  for (const ProviderRegistration& registration : registered_providers())
    names.push_back(registration.name);
  CHECK((*registry)->names() == names);
  CHECK((*registry)->default_provider().name() == "local");
  // local and roset have every part; their snapshots keep working.
  for (const std::string& name : names) {
    Provider* provider = *(*registry)->by_name(name);
    CHECK(provider->controller() != nullptr);
    CHECK(provider->snapshots() != nullptr);
    CHECK(provider->node() != nullptr);
  }
}

TEST_CASE("provider options are global flags: no two share a name or variable", "[registry]") {
  std::set<std::string> flags;
  std::set<std::string> variables;
  for (const ProviderRegistration& registration : registered_providers()) {
    for (const ProviderOption& option : registration.options) {
      if (!option.name.empty()) CHECK(flags.insert(option.name).second);
      if (!option.env.empty()) CHECK(variables.insert(option.env).second);
      CHECK((!option.name.empty() || !option.env.empty()));
    }
  }
}

TEST_CASE("a provider refuses a setting it cannot use, naming the flag", "[registry]") {
  Scratch scratch;
  ProviderRegistry::Settings settings;
  settings.by_provider["roset"]["roset-fuse-timeout"] = "0";
  auto registry = ProviderRegistry::create(scratch.layout, *scratch.store, settings);
  REQUIRE_FALSE(registry.has_value());
  CHECK(registry.status().code() == Code::kInvalidArgument);
  CHECK_THAT(registry.status().message(), Catch::Contains("--roset-fuse-timeout"));

  settings.by_provider["roset"] = {{"fuse-credentials", "argv"}};
  registry = ProviderRegistry::create(scratch.layout, *scratch.store, settings);
  REQUIRE_FALSE(registry.has_value());
  CHECK_THAT(registry.status().message(), Catch::Contains("--fuse-credentials"));
}

TEST_CASE("an unknown default provider is refused with the ones there are", "[registry]") {
  Scratch scratch;
  ProviderRegistry::Settings settings;
  settings.default_provider = "nfs";
  auto registry = ProviderRegistry::create(scratch.layout, *scratch.store, settings);
  REQUIRE_FALSE(registry.has_value());
  CHECK(registry.status().code() == Code::kInvalidArgument);
  CHECK_THAT(registry.status().message(), Catch::Contains("local, roset"));
}

TEST_CASE("a provider added by one registration line is built, named and owns its ids",
          "[registry]") {
  Scratch scratch;
  ProviderRegistry::Settings settings;
  settings.default_provider = std::string(testing::kTestProviderName);
  auto registry = ProviderRegistry::create(scratch.layout, *scratch.store, settings,
                                           testing::with_test_provider());
  REQUIRE(registry.has_value());
  CHECK((*registry)->names().back() == testing::kTestProviderName);
  CHECK((*registry)->default_provider().name() == testing::kTestProviderName);
  auto owner = (*registry)->for_volume("test-0123");
  REQUIRE(owner.has_value());
  CHECK((*owner)->name() == testing::kTestProviderName);
  // The parts it lacks are refused naming it, not assumed.
  auto node = (*registry)->node_for_volume("test-0123");
  REQUIRE_FALSE(node.has_value());
  CHECK(node.status().code() == Code::kUnimplemented);
  CHECK_THAT(node.status().message(), Catch::Contains("test"));
  // The CLI's table (find_registration) has it too, and the build's own table does not.
  auto all = testing::with_test_provider();
  CHECK(find_registration(testing::kTestProviderName, all) == &all.back());
  CHECK(find_registration(testing::kTestProviderName) == nullptr);
}
