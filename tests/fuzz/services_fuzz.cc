// daemon: CSI requests (and rosetctl.v1 requests from peers and the CLI) into the real services,
// as `serve` registers them (cluster/plugin.h), called through gRPC's in-process channel against
// a scratch state directory with the local provider. Whatever the bytes, every call ends with a
// status: no crash, no sanitizer report, no hang past its deadline, and nothing mounted.
//
// An input is up to kMaxCalls records, each
//
//   <kind byte> <length: 2 bytes, little-endian> <that many bytes: the request, protobuf-encoded>
//
// The kind picks the method from methods() (modulo its size). Ids the plugin makes cannot be
// guessed, so a string field "@v<byte>" becomes the id of a volume an earlier call of the same
// input created (the byte, modulo how many, picks which), "@s<byte>" a snapshot's, "@n" this
// node's id.
//
// Left out, and why: NodeStageVolume, NodePublishVolume and their undoing mount (bind mounts,
// loop devices, filesystems) at paths the request names; a fuzzer as root must not mount over
// the host, and a harness that rewrote every path into a scratch directory would still leave
// mounts behind whenever an input stops halfway. HoldAttachLock and PullSnapshot are streams
// that wait on other nodes. RegisterNode is called, but a node address that passes validation
// is replaced by 127.0.0.1:1 (nothing listens there), so that calls the controller makes to a
// registered node never leave the host.
//
// After each input what it made is deleted (volumes, snapshots, nodes); when that fails, or
// every kFreshStateEvery inputs, the plugin and its state directory are made anew, so the state
// stays small and each input starts from nearly the same place.
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cluster/node_registration.h"
#include "cluster/plugin.h"
#include "csi.grpc.pb.h"
#include "fuzz_check.h"
#include "rosetctl.grpc.pb.h"

namespace {

using namespace rosetctl;
namespace fs = std::filesystem;
namespace pb = google::protobuf;

constexpr int kMaxCalls = 6;
constexpr int kFreshStateEvery = 2000;
constexpr auto kCallDeadline = std::chrono::seconds(4);
constexpr const char* kNodeId = "node-a";

const std::string& scratch() {
  return fuzz::scratch_directory("services");
}

// Nothing the fuzzed calls do may mount anything: checked before the state dir is removed
// (remove_all would also descend into a mount).
void check_nothing_mounted() {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::stringstream text;
  text << mountinfo.rdbuf();
  FUZZ_CHECK(text.str().find(scratch()) == std::string::npos,
             "no call mounts anything under the state directory");
}

// What an input made, for the next calls of the same input to name and for the clean-up.
struct Made {
  std::vector<std::string> volumes;
  std::vector<std::string> snapshots;
  std::vector<std::string> nodes;
};

// The plugin and a stub of each service; public, so that the method table below can reach them.
struct Harness {
  Harness() { start(); }
  ~Harness() { stop(); }

  void start();
  void stop();
  // Runs one input; then deletes what it made.
  void run(const unsigned char* data, std::size_t size);
  void clean_up();
  template <typename Request>
  bool decode(std::string_view bytes, Request* request);
  void substitute(pb::Message& message, int depth);
  std::optional<std::string> made_id(const std::string& value) const;
  std::unique_ptr<grpc::ClientContext> call_context() const;

  std::unique_ptr<Plugin> plugin;
  std::unique_ptr<csi::v1::Identity::Stub> identity;
  std::unique_ptr<csi::v1::Controller::Stub> controller;
  std::unique_ptr<csi::v1::Node::Stub> node;
  std::unique_ptr<v1::Registry::Stub> registry;
  std::unique_ptr<v1::Catalog::Stub> catalog;
  std::unique_ptr<v1::NodeState::Stub> node_state;
  std::unique_ptr<v1::ObjectStore::Stub> objects;
  Made made;
  bool dirty = false;  // the clean-up failed: start afresh
  int inputs = 0;
};

void Harness::start() {
  PluginOptions options;
  options.state_dir = scratch() + "/state";
  options.node_id = kNodeId;
  // A control port no tgtd listens on: the iscsi provider's calls to tgtadm fail, never reach
  // a tgtd another test on this host runs.
  options.provider_settings["iscsi"]["iscsi-tgt-control-port"] = "32123";
  options.snapshot_wait = std::chrono::milliseconds(500);
  auto opened = Plugin::open(options);
  FUZZ_CHECK(opened.has_value(), "the plugin opens a scratch state directory");
  plugin = std::move(*opened);
  FUZZ_CHECK(plugin->start(std::nullopt).is_ok(), "the plugin starts in-process");
  auto channel = plugin->in_process_channel();
  identity = csi::v1::Identity::NewStub(channel);
  controller = csi::v1::Controller::NewStub(channel);
  node = csi::v1::Node::NewStub(channel);
  registry = v1::Registry::NewStub(channel);
  catalog = v1::Catalog::NewStub(channel);
  node_state = v1::NodeState::NewStub(channel);
  objects = v1::ObjectStore::NewStub(channel);
}

void Harness::stop() {
  identity.reset();
  controller.reset();
  node.reset();
  registry.reset();
  catalog.reset();
  node_state.reset();
  objects.reset();
  plugin.reset();
  check_nothing_mounted();
  fs::remove_all(scratch() + "/state");
}

std::unique_ptr<grpc::ClientContext> Harness::call_context() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  return context;
}

template <typename Request>
bool Harness::decode(std::string_view bytes, Request* request) {
  if (!request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return false;
  substitute(*request, 0);
  return true;
}

// "@v<byte>", "@s<byte>" and "@n" in any string field, at any depth (map values too).
void Harness::substitute(pb::Message& message, int depth) {
  if (depth > 8) return;
  const pb::Reflection* reflection = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(message, field); ++i)
          substitute(*reflection->MutableRepeatedMessage(&message, field, i), depth + 1);
      } else {
        substitute(*reflection->MutableMessage(&message, field), depth + 1);
      }
      continue;
    }
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        std::string value = reflection->GetRepeatedString(message, field, i);
        if (auto id = made_id(value)) reflection->SetRepeatedString(&message, field, i, *id);
      }
    } else if (auto id = made_id(reflection->GetString(message, field))) {
      reflection->SetString(&message, field, *id);
    }
  }
}

std::optional<std::string> Harness::made_id(const std::string& value) const {
  if (value.size() < 2 || value[0] != '@') return std::nullopt;
  if (value[1] == 'n') return kNodeId;
  const std::vector<std::string>& ids = value[1] == 'v' ? made.volumes : made.snapshots;
  if ((value[1] != 'v' && value[1] != 's') || ids.empty()) return std::nullopt;
  std::size_t pick = value.size() > 2 ? static_cast<unsigned char>(value[2]) : 0;
  return ids[pick % ids.size()];
}

using Method = std::function<void(Harness&, std::string_view)>;

// A unary call of `call` on the stub `stub` of the harness, with the request decoded from the
// bytes. `prepare` may adjust the request first; `made` sees the answer of a call that succeeded.
template <typename Stub, typename Request, typename Response>
Method unary(std::unique_ptr<Stub> Harness::*stub,
             grpc::Status (Stub::*call)(grpc::ClientContext*, const Request&, Response*),
             std::function<void(Harness&, Request&)> prepare = {},
             std::function<void(Harness&, const Request&, const Response&)> made = {}) {
  return [=](Harness& harness, std::string_view bytes) {
    Request request;
    if (!harness.decode(bytes, &request)) return;
    if (prepare) prepare(harness, request);
    Response response;
    auto context = harness.call_context();
    grpc::Status status = ((*(harness.*stub)).*call)(context.get(), request, &response);
    if (status.ok() && made) made(harness, request, response);
  };
}

// FetchObjects answers with a stream: read to its end.
void fetch_objects(Harness& harness, std::string_view bytes) {
  v1::FetchObjectsRequest request;
  if (!harness.decode(bytes, &request)) return;
  auto context = harness.call_context();
  auto reader = harness.objects->FetchObjects(context.get(), request);
  v1::ObjectChunk chunk;
  while (reader->Read(&chunk)) {
  }
  (void)reader->Finish();
}

// The methods an input picks from, by its kind byte. The seed generator
// (tests/fuzz/seeds/services.py) lists the same names in the same order: append only.
const std::vector<Method>& methods() {
  using csi::v1::Controller;
  using csi::v1::Identity;
  using csi::v1::Node;
  static const std::vector<Method> table = {
      // 0-2: Identity
      unary(&Harness::identity, &Identity::Stub::GetPluginInfo),
      unary(&Harness::identity, &Identity::Stub::GetPluginCapabilities),
      unary(&Harness::identity, &Identity::Stub::Probe),
      // 3-16: Controller
      unary(&Harness::controller, &Controller::Stub::CreateVolume, {},
            std::function<void(Harness&, const csi::v1::CreateVolumeRequest&,
                               const csi::v1::CreateVolumeResponse&)>(
                [](Harness& h, const auto&, const auto& response) {
                  h.made.volumes.push_back(response.volume().volume_id());
                })),
      unary(&Harness::controller, &Controller::Stub::DeleteVolume),
      unary(&Harness::controller, &Controller::Stub::ControllerPublishVolume),
      unary(&Harness::controller, &Controller::Stub::ControllerUnpublishVolume),
      unary(&Harness::controller, &Controller::Stub::ValidateVolumeCapabilities),
      unary(&Harness::controller, &Controller::Stub::ListVolumes),
      unary(&Harness::controller, &Controller::Stub::GetCapacity),
      unary(&Harness::controller, &Controller::Stub::ControllerGetCapabilities),
      unary(&Harness::controller, &Controller::Stub::ControllerGetVolume),
      unary(&Harness::controller, &Controller::Stub::ControllerExpandVolume),
      unary(&Harness::controller, &Controller::Stub::CreateSnapshot, {},
            std::function<void(Harness&, const csi::v1::CreateSnapshotRequest&,
                               const csi::v1::CreateSnapshotResponse&)>(
                [](Harness& h, const auto&, const auto& response) {
                  h.made.snapshots.push_back(response.snapshot().snapshot_id());
                })),
      unary(&Harness::controller, &Controller::Stub::DeleteSnapshot),
      unary(&Harness::controller, &Controller::Stub::ListSnapshots),
      unary(&Harness::controller, &Controller::Stub::ControllerModifyVolume),
      // 17-20: Node, the calls that do not mount
      unary(&Harness::node, &Node::Stub::NodeGetInfo),
      unary(&Harness::node, &Node::Stub::NodeGetCapabilities),
      unary(&Harness::node, &Node::Stub::NodeGetVolumeStats),
      unary(&Harness::node, &Node::Stub::NodeExpandVolume),
      // 21-25: rosetctl.v1.Registry
      unary(&Harness::registry, &v1::Registry::Stub::RegisterNode,
            std::function<void(Harness&, v1::RegisterNodeRequest&)>(
                [](Harness&, v1::RegisterNodeRequest& request) {
                  if (validate_node_address(request.address())) {
                    request.set_address("127.0.0.1:1");
                  }
                }),
            std::function<void(Harness&, const v1::RegisterNodeRequest&,
                               const v1::RegisterNodeResponse&)>(
                [](Harness& h, const auto& request, const auto&) {
                  h.made.nodes.push_back(request.node_id());
                })),
      unary(&Harness::registry, &v1::Registry::Stub::GetNode),
      unary(&Harness::registry, &v1::Registry::Stub::TouchNode),
      unary(&Harness::registry, &v1::Registry::Stub::ListNodes),
      unary(&Harness::registry, &v1::Registry::Stub::RemoveNode),
      // 26-32: rosetctl.v1.Catalog
      unary(&Harness::catalog, &v1::Catalog::Stub::FindVolume),
      unary(&Harness::catalog, &v1::Catalog::Stub::GetVolumeDetails),
      unary(&Harness::catalog, &v1::Catalog::Stub::FindSnapshot),
      unary(&Harness::catalog, &v1::Catalog::Stub::ListSnapshotDetails),
      unary(&Harness::catalog, &v1::Catalog::Stub::DiffSnapshots),
      unary(&Harness::catalog, &v1::Catalog::Stub::VerifySnapshots),
      unary(&Harness::catalog, &v1::Catalog::Stub::CollectGarbage),
      // 33-34: rosetctl.v1.NodeState (HoldAttachLock waits on purpose: left out)
      unary(&Harness::node_state, &v1::NodeState::Stub::GetNodeVolumes),
      unary(&Harness::node_state, &v1::NodeState::Stub::ResolveTarget),
      // 35-36: rosetctl.v1.ObjectStore (PullSnapshot calls another node: left out)
      unary(&Harness::objects, &v1::ObjectStore::Stub::LookupSnapshot),
      fetch_objects,
  };
  return table;
}

void Harness::run(const unsigned char* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int calls = 0; calls < kMaxCalls && rest.size() >= 3; ++calls) {
    std::size_t kind = static_cast<unsigned char>(rest[0]) % methods().size();
    std::size_t length = static_cast<unsigned char>(rest[1]) |
                         (static_cast<std::size_t>(static_cast<unsigned char>(rest[2])) << 8);
    rest.remove_prefix(3);
    length = std::min(length, rest.size());
    methods()[kind](*this, rest.substr(0, length));
    rest.remove_prefix(length);
  }
  clean_up();
  if (dirty || ++inputs % kFreshStateEvery == 0) {
    stop();
    start();
    dirty = false;
  }
}

// Deletes what the input made; anything that will not go (a snapshot still being taken, a
// volume published to a node) marks the state dirty, and the next input gets a fresh one.
void Harness::clean_up() {
  auto gone = [&](const grpc::Status& status) {
    if (!status.ok() && status.error_code() != grpc::StatusCode::NOT_FOUND) dirty = true;
  };
  for (const std::string& id : made.volumes) {
    csi::v1::DeleteVolumeRequest request;
    request.set_volume_id(id);
    csi::v1::DeleteVolumeResponse response;
    gone(controller->DeleteVolume(call_context().get(), request, &response));
  }
  for (const std::string& id : made.snapshots) {
    csi::v1::DeleteSnapshotRequest request;
    request.set_snapshot_id(id);
    csi::v1::DeleteSnapshotResponse response;
    gone(controller->DeleteSnapshot(call_context().get(), request, &response));
  }
  for (const std::string& id : made.nodes) {
    v1::RemoveNodeRequest request;
    request.set_node_id(id);
    v1::RemoveNodeResponse response;
    gone(registry->RemoveNode(call_context().get(), request, &response));
  }
  made = Made{};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  // Never destroyed: a plugin torn down by exit handlers would race its own threads.
  static Harness* const harness = [] {
    // Every call's log line is still formatted (redaction, quoting of what the input sent),
    // then dropped: on the terminal it would drown libFuzzer's own lines and slow each input.
    spdlog::set_default_logger(
        std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>()));
    spdlog::set_level(spdlog::level::info);
    // Requests whose strings are not UTF-8 fail to parse (proto3), as they would in gRPC's
    // server; protobuf's line about each would be most of the output.
    pb::SetLogHandler(nullptr);
    return new Harness();
  }();
  harness->run(data, size);
  return 0;
}
