// A provider that exists only in the unit tests: what adding a provider takes is its own code
// (this file standing for its folder) and one line in the table of registrations
// (providers/registry.cc; here, the list a test passes to ProviderRegistry::create). The tests
// of the registry, the doctor and the CLI's lookups use it through those tables alone.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "providers/provider.h"
#include "providers/provider_registration.h"

namespace rosetctl::testing {

inline constexpr std::string_view kTestProviderName = "test";
// The doctor's row the test provider declares for its findings.
inline constexpr const char* kTestProviderRow = "test-leftovers";

// No controller, snapshot or node side: calls for its volumes are UNIMPLEMENTED.
class TestProvider final : public Provider {
 public:
  explicit TestProvider(std::vector<HostFinding> findings) : findings_(std::move(findings)) {}

  std::string_view name() const override { return kTestProviderName; }
  bool volumes_are_node_local() const override { return true; }
  Status check_health() const override { return Status::ok(); }
  bool health_check_may_block() const override { return false; }
  std::vector<HostFinding> inspect_host() override { return findings_; }
  std::vector<DoctorRow> doctor_rows() const override {
    return {{kTestProviderRow, "nothing the test provider keeps is left over"}};
  }
  ControllerSide* controller() override { return nullptr; }
  NodeSide* node() override { return nullptr; }

 private:
  std::vector<HostFinding> findings_;
};

// Its registration: `findings` are what its doctor inspection reports; `shared_by_nodes` as
// ProviderRegistration's.
inline ProviderRegistration test_registration(std::vector<HostFinding> findings = {},
                                              bool shared_by_nodes = false) {
  return {.name = std::string(kTestProviderName),
          .option_group = "",
          .options = {},
          .create = [findings = std::move(findings)](
                        const ProviderContext&) -> Expected<std::unique_ptr<Provider>> {
            return std::unique_ptr<Provider>(std::make_unique<TestProvider>(findings));
          },
          .shared_by_nodes = shared_by_nodes};
}

// The registrations of this build with the test provider's line added.
inline std::vector<ProviderRegistration> with_test_provider(std::vector<HostFinding> findings = {},
                                                            bool shared_by_nodes = false) {
  std::vector<ProviderRegistration> all = registered_providers();
  all.push_back(test_registration(std::move(findings), shared_by_nodes));
  return all;
}

}  // namespace rosetctl::testing
