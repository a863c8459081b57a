// Tests for src/providers/common/mutable_parameters.cc: which keys local volumes can change after
// creation, the refusals naming the key, and the settings a new volume starts with.
#include "providers/common/mutable_parameters.h"

#include <catch2/catch.hpp>

using namespace rosetctl;

namespace {

bool mentions(const Status& status, std::string_view text) {
  return status.message().find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("mutable parameters: directIO takes true or false on image volumes", "[mutable]") {
  CHECK(check_mutable_parameters({{"directIO", "true"}}, true, "v").is_ok());
  CHECK(check_mutable_parameters({{"directIO", "false"}}, true, "v").is_ok());
  CHECK(check_mutable_parameters({}, false, "v").is_ok());  // nothing asked, nothing refused

  Status bad_value = check_mutable_parameters({{"directIO", "yes"}}, true, "v");
  CHECK(bad_value.code() == Code::kInvalidArgument);
  CHECK(mentions(bad_value, "directIO"));
  CHECK(mentions(bad_value, "\"yes\""));

  Status on_dir = check_mutable_parameters({{"directIO", "false"}}, false, "notes");
  CHECK(on_dir.code() == Code::kInvalidArgument);
  CHECK(mentions(on_dir, "directory volume"));
  CHECK(mentions(on_dir, "notes"));
}

TEST_CASE("mutable parameters: creation-time and unknown keys are refused by name", "[mutable]") {
  for (const char* key : {"type", "fsType", "fs", "provider", "csi.storage.k8s.io/fstype"}) {
    Status fixed = check_mutable_parameters({{key, "x"}}, true, "db");
    INFO(fixed.message());
    CHECK(fixed.code() == Code::kInvalidArgument);
    CHECK(mentions(fixed, std::string("\"") + key + "\""));
    CHECK(mentions(fixed, "fixed at creation"));
  }
  Status size = check_mutable_parameters({{"size", "2Gi"}}, true, "db");
  CHECK(size.code() == Code::kInvalidArgument);
  CHECK(mentions(size, "ControllerExpandVolume"));

  Status unknown = check_mutable_parameters({{"directIO", "true"}, {"iops", "100"}}, true, "db");
  CHECK(unknown.code() == Code::kInvalidArgument);
  CHECK(mentions(unknown, "\"iops\""));
  CHECK(mentions(unknown, "directIO"));  // says what is mutable
}

TEST_CASE("mutable parameters: mutable_parameters win over parameters at creation", "[mutable]") {
  CreateVolumeSpec spec;
  spec.parameters = {{"type", "image"}, {"directIO", "true"}};
  CHECK(initial_mutable_parameters(spec) == StringMap{{"directIO", "true"}});
  spec.mutable_parameters = {{"directIO", "false"}};
  CHECK(initial_mutable_parameters(spec) == StringMap{{"directIO", "false"}});
  spec.parameters.clear();
  CHECK(initial_mutable_parameters(spec) == StringMap{{"directIO", "false"}});

  CHECK(direct_io_setting({}) == DirectIo::kDefault);
  CHECK(direct_io_setting({{"directIO", "true"}}) == DirectIo::kOn);
  CHECK(direct_io_setting({{"directIO", "false"}}) == DirectIo::kOff);
}
