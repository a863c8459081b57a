// The daemon's unit tests' common ground: a plugin in a scratch state directory, started on its
// in-process channel, with a Controller stub; everything removed at the end.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>

#include "cluster/plugin.h"
#include "csi.grpc.pb.h"
#include "unit/scratch_dir.h"

namespace rosetctl::testing {

struct PluginFixture {
  // `name` tells the scratch directories of different test files apart.
  explicit PluginFixture(const std::string& name) : scratch(name), dir(scratch.path) {
    PluginOptions options;
    options.state_dir = dir + "/state";
    options.node_id = "node-a";
    auto opened = Plugin::open(options);
    REQUIRE(opened.has_value());
    plugin = std::move(*opened);
    REQUIRE(plugin->start(std::nullopt).is_ok());
    controller = csi::v1::Controller::NewStub(plugin->in_process_channel());
  }
  PluginFixture(const PluginFixture&) = delete;

  // A directory volume made through CreateVolume, as a CO makes one; its id.
  std::string create_volume(const std::string& name) {
    csi::v1::CreateVolumeRequest request;
    request.set_name(name);
    auto* capability = request.add_volume_capabilities();
    capability->mutable_mount();
    capability->mutable_access_mode()->set_mode(
        csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    csi::v1::CreateVolumeResponse response;
    grpc::ClientContext context;
    auto status = controller->CreateVolume(&context, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    return response.volume().volume_id();
  }
  PluginFixture& operator=(const PluginFixture&) = delete;

  // Declared first, so removed last: after the plugin that writes in it has stopped.
  ScratchDir scratch;
  std::string dir;
  std::unique_ptr<Plugin> plugin;
  std::unique_ptr<csi::v1::Controller::Stub> controller;
};

}  // namespace rosetctl::testing
