// Tests for src/daemon/request_limits.cc: oversized map fields are refused, naming the field and
// never quoting a value.
#include "daemon/request_limits.h"

#include <catch2/catch.hpp>

#include "csi.pb.h"

using rosetctl::Code;

TEST_CASE("a map over the limit is refused naming the field, not its values", "[request_limits]") {
  csi::v1::CreateVolumeRequest request;
  request.set_name("demo");
  (*request.mutable_secrets())["token"] = std::string(rosetctl::kMaxMapBytes, 'S');
  auto refused = rosetctl::check_map_sizes(request);
  CHECK(refused.code() == Code::kInvalidArgument);
  CHECK(refused.message().find("secrets") != std::string::npos);
  CHECK(refused.message().find("SSSS") == std::string::npos);
  CHECK(refused.message().find("token") == std::string::npos);
}

TEST_CASE("many small entries count like one large one", "[request_limits]") {
  csi::v1::NodeStageVolumeRequest request;
  for (int i = 0; i < 100000; ++i)
    (*request.mutable_publish_context())["k" + std::to_string(i)] = "v";
  auto refused = rosetctl::check_map_sizes(request);
  CHECK(refused.code() == Code::kInvalidArgument);
  CHECK(refused.message().find("publish_context") != std::string::npos);
  CHECK(refused.message().find("100000 entries") != std::string::npos);
}

TEST_CASE("maps inside nested messages are named by their path", "[request_limits]") {
  csi::v1::ValidateVolumeCapabilitiesRequest request;
  request.set_volume_id("local-0123456789abcdef");
  (*request.mutable_parameters())["type"] = "dir";
  (*request.mutable_volume_context())["x"] = std::string(rosetctl::kMaxMapBytes + 1, 'x');
  auto refused = rosetctl::check_map_sizes(request);
  CHECK(refused.code() == Code::kInvalidArgument);
  CHECK(refused.message().find("volume_context") != std::string::npos);
}

TEST_CASE("requests within the limits pass, a large non-map field included", "[request_limits]") {
  csi::v1::CreateVolumeRequest request;
  request.set_name(std::string(rosetctl::kMaxMapBytes * 2, 'n'));  // others' job to refuse
  (*request.mutable_parameters())["type"] = "image";
  (*request.mutable_secrets())["token"] = std::string(rosetctl::kMaxMapBytes / 2, 's');
  CHECK(rosetctl::check_map_sizes(request).is_ok());
}
