// The parts of a provider and the answer for a part it lacks (providers/provider.cc).
#include "providers/provider.h"

#include <catch2/catch.hpp>

using namespace rosetctl;

namespace {

// A provider with no parts at all: the smallest thing the contract allows.
class PartlessProvider final : public Provider {
 public:
  std::string_view name() const override { return "bare"; }
  bool volumes_are_node_local() const override { return true; }
  Status check_health() const override { return Status::ok(); }
  ControllerSide* controller() override { return nullptr; }
  NodeSide* node() override { return nullptr; }
};

}  // namespace

TEST_CASE("a part a provider lacks is UNIMPLEMENTED, naming the provider", "[provider]") {
  PartlessProvider provider;
  auto controller = controller_side(provider);
  REQUIRE_FALSE(controller.has_value());
  CHECK(controller.status().code() == Code::kUnimplemented);
  CHECK_THAT(controller.status().message(), Catch::Contains("\"bare\" has no controller side"));

  auto node = node_side(provider);
  REQUIRE_FALSE(node.has_value());
  CHECK(node.status().code() == Code::kUnimplemented);
  CHECK_THAT(node.status().message(), Catch::Contains("\"bare\" has no node side"));

  // The same words as before snapshots became a part of their own.
  auto snapshots = snapshot_side(provider);
  REQUIRE_FALSE(snapshots.has_value());
  CHECK(snapshots.status().code() == Code::kUnimplemented);
  CHECK(snapshots.status().message() == "provider \"bare\" does not support snapshots");
}
