// Tests for src/daemon/redact.cc: csi_secret fields never reach a log line.
#include "daemon/redact.h"

#include <catch2/catch.hpp>

#include "csi.pb.h"
#include "rosetctl.pb.h"

TEST_CASE("secrets maps keep their keys and lose their values", "[redact]") {
  csi::v1::CreateVolumeRequest request;
  request.set_name("demo");
  (*request.mutable_secrets())["api-key"] = "rk_live_TOPSECRET";
  (*request.mutable_parameters())["type"] = "dir";
  std::string text = rosetctl::redacted_text(request);
  CHECK(text.find("TOPSECRET") == std::string::npos);
  CHECK(text.find("api-key") != std::string::npos);
  CHECK(text.find(rosetctl::kRedacted) != std::string::npos);
  CHECK(text.find("demo") != std::string::npos);
  CHECK(text.find("dir") != std::string::npos);
  // The original is untouched.
  CHECK(request.secrets().at("api-key") == "rk_live_TOPSECRET");
}

TEST_CASE("our own secret fields are redacted as CSI's are", "[redact]") {
  // The CHAP secrets a controller hands a node (issue 31, row 8) are logged at debug level too.
  rosetctl::v1::GetPublishSecretsResponse response;
  (*response.mutable_secrets())["chap-password"] = "0123456789abcdef-SECRET";
  std::string text = rosetctl::redacted_text(response);
  CHECK(text.find("SECRET") == std::string::npos);
  CHECK(text.find("chap-password") != std::string::npos);
}

TEST_CASE("every request type with secrets is covered by the descriptor walk", "[redact]") {
  csi::v1::NodeStageVolumeRequest stage;
  (*stage.mutable_secrets())["chap-password"] = "hunter2hunter2";
  csi::v1::NodePublishVolumeRequest publish;
  (*publish.mutable_secrets())["token"] = "hunter2hunter2";
  csi::v1::ListSnapshotsRequest list;
  (*list.mutable_secrets())["token"] = "hunter2hunter2";
  csi::v1::NodeExpandVolumeRequest expand;
  (*expand.mutable_secrets())["token"] = "hunter2hunter2";
  for (const google::protobuf::Message* message :
       std::initializer_list<const google::protobuf::Message*>{&stage, &publish, &list, &expand}) {
    INFO(message->GetTypeName());
    CHECK(rosetctl::redacted_text(*message).find("hunter2") == std::string::npos);
  }
}

TEST_CASE("unknown fields are dropped: they could be secrets of a newer spec", "[redact]") {
  csi::v1::CreateVolumeRequest newer;
  newer.set_name("demo");
  newer.GetReflection()->MutableUnknownFields(&newer)->AddLengthDelimited(99, "future-secret");
  std::string text = rosetctl::redacted_text(newer);
  CHECK(text.find("future-secret") == std::string::npos);
  CHECK(text.find("demo") != std::string::npos);
}
