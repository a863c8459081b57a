// Tests for src/cli/volume_lookup.cc: the capability the CLI attaches a volume with, which
// asks the volume's provider's registration (not its name) whether nodes share it; when
// FindVolume's answer tells the volume's name.
#include "cli/volume_lookup.h"

#include <catch2/catch.hpp>

#include "providers/volume_context.h"
#include "unit/test_provider.h"

using namespace rosetctl;
using Mode = csi::v1::VolumeCapability::AccessMode;

namespace {

csi::v1::Volume volume_of(std::string_view provider) {
  csi::v1::Volume volume;
  volume.set_volume_id(std::string(provider) + "-0123");
  (*volume.mutable_volume_context())[kContextProvider] = std::string(provider);
  return volume;
}

}  // namespace

TEST_CASE(
    "volume lookup: a provider that shares its volumes between nodes is attached "
    "multi-writer, as its registration says") {
  auto shared = testing::with_test_provider({}, true);
  auto own = testing::with_test_provider({}, false);
  csi::v1::Volume volume = volume_of(testing::kTestProviderName);
  CHECK(cli::attach_capability(volume, shared).access_mode().mode() ==
        Mode::MULTI_NODE_MULTI_WRITER);
  CHECK(cli::attach_capability(volume, own).access_mode().mode() == Mode::SINGLE_NODE_WRITER);
  CHECK(cli::attach_capability(volume, shared).has_mount());
  // Read-only wins over shared.
  (*volume.mutable_volume_context())[kContextReadOnly] = "true";
  CHECK(cli::attach_capability(volume, shared).access_mode().mode() ==
        Mode::MULTI_NODE_READER_ONLY);
}

TEST_CASE(
    "volume lookup: this build's providers attach as before (roset shared, the rest "
    "single-node), and an unknown provider single-node") {
  CHECK(cli::attach_capability(volume_of("roset")).access_mode().mode() ==
        Mode::MULTI_NODE_MULTI_WRITER);
  CHECK(cli::attach_capability(volume_of("local")).access_mode().mode() ==
        Mode::SINGLE_NODE_WRITER);
  CHECK(cli::attach_capability(volume_of("iscsi")).access_mode().mode() ==
        Mode::SINGLE_NODE_WRITER);
  CHECK(cli::attach_capability(volume_of("nfs")).access_mode().mode() == Mode::SINGLE_NODE_WRITER);
}

TEST_CASE(
    "volume lookup: FindVolume's answer is taken for a match by name only when it cannot be the "
    "id asked for in another form") {
  CHECK(cli::found_by_name("iscsi-0123456789abcdef", "data"));
  CHECK(cli::found_by_name("n6.node-a.local-0123456789abcdef", "data"));
  // The id itself, or a name that cannot be told from one: the volume is asked for its name.
  CHECK_FALSE(cli::found_by_name("iscsi-0123456789abcdef", "iscsi-0123456789abcdef"));
  CHECK_FALSE(
      cli::found_by_name("local-0123456789abcdef", "n10.controller.local-0123456789abcdef"));
  CHECK_FALSE(cli::found_by_name("n6.node-a.local-0123456789abcdef", "local-0123456789abcdef"));
}
