// Tests for src/daemon/controller_snapshots.cc and the content sources of CreateVolume
// (src/daemon/content_source.cc), through the real in-process gRPC channel and the local
// provider: idempotency by name, paging, filters, error codes, restore and clone.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cluster/plugin.h"
#include "csi.grpc.pb.h"
#include "unit/daemon/plugin_fixture.h"

namespace {

namespace fs = std::filesystem;
using grpc::StatusCode;

csi::v1::VolumeCapability mount_capability() {
  csi::v1::VolumeCapability capability;
  capability.mutable_mount();
  capability.mutable_access_mode()->set_mode(
      csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  return capability;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Fixture : rosetctl::testing::PluginFixture {
  Fixture() : PluginFixture("snapshots") {}

  fs::path data_dir(const std::string& volume_id) const {
    return fs::path(plugin->layout().volumes_dir()) / volume_id;
  }

  // A volume whose data directory holds `files` (name -> content).
  std::string volume_with(const std::string& name, const std::map<std::string, std::string>& files,
                          int64_t bytes = 0) {
    csi::v1::CreateVolumeRequest request;
    request.set_name(name);
    if (bytes > 0) request.mutable_capacity_range()->set_required_bytes(bytes);
    *request.add_volume_capabilities() = mount_capability();
    csi::v1::CreateVolumeResponse response;
    grpc::ClientContext context;
    REQUIRE(controller->CreateVolume(&context, request, &response).ok());
    std::string id = response.volume().volume_id();
    fs::create_directories(data_dir(id));
    for (const auto& [file, content] : files)
      std::ofstream(data_dir(id) / file, std::ios::binary) << content;
    return id;
  }

  grpc::Status snapshot(const std::string& name, const std::string& volume_id,
                        csi::v1::CreateSnapshotResponse* out,
                        std::map<std::string, std::string> parameters = {}) {
    csi::v1::CreateSnapshotRequest request;
    request.set_name(name);
    request.set_source_volume_id(volume_id);
    request.mutable_parameters()->insert(parameters.begin(), parameters.end());
    grpc::ClientContext context;
    return controller->CreateSnapshot(&context, request, out);
  }

  std::string snapshot_id(const std::string& name, const std::string& volume_id) {
    csi::v1::CreateSnapshotResponse response;
    auto status = snapshot(name, volume_id, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    return response.snapshot().snapshot_id();
  }

  grpc::Status list(const csi::v1::ListSnapshotsRequest& request,
                    csi::v1::ListSnapshotsResponse* out) {
    grpc::ClientContext context;
    return controller->ListSnapshots(&context, request, out);
  }

  grpc::Status remove(const std::string& id) {
    csi::v1::DeleteSnapshotRequest request;
    request.set_snapshot_id(id);
    csi::v1::DeleteSnapshotResponse response;
    grpc::ClientContext context;
    return controller->DeleteSnapshot(&context, request, &response);
  }

  grpc::Status create_from(const std::string& name, const csi::v1::VolumeContentSource& source,
                           csi::v1::CreateVolumeResponse* out, int64_t bytes = 0) {
    csi::v1::CreateVolumeRequest request;
    request.set_name(name);
    if (bytes > 0) request.mutable_capacity_range()->set_required_bytes(bytes);
    *request.add_volume_capabilities() = mount_capability();
    *request.mutable_volume_content_source() = source;
    grpc::ClientContext context;
    return controller->CreateVolume(&context, request, out);
  }
};

csi::v1::VolumeContentSource from_snapshot(const std::string& id) {
  csi::v1::VolumeContentSource source;
  source.mutable_snapshot()->set_snapshot_id(id);
  return source;
}

csi::v1::VolumeContentSource from_volume(const std::string& id) {
  csi::v1::VolumeContentSource source;
  source.mutable_volume()->set_volume_id(id);
  return source;
}

}  // namespace

TEST_CASE("CreateSnapshot returns a ready commit and is idempotent by name", "[snapshots]") {
  Fixture f;
  std::string volume = f.volume_with("data", {{"a", "alpha"}, {"b", "beta!"}});
  csi::v1::CreateSnapshotResponse first;
  REQUIRE(f.snapshot("snap-1", volume, &first, {{"message", "epoch 1"}}).ok());
  const csi::v1::Snapshot& snap = first.snapshot();
  CHECK(snap.snapshot_id().starts_with("snap-"));
  CHECK(snap.snapshot_id().size() == 29);
  CHECK(snap.source_volume_id() == volume);
  CHECK(snap.ready_to_use());
  CHECK(snap.size_bytes() == 10);
  CHECK(snap.creation_time().seconds() > 1'600'000'000);

  std::ofstream(f.data_dir(volume) / "a") << "changed";
  csi::v1::CreateSnapshotResponse again;
  REQUIRE(f.snapshot("snap-1", volume, &again).ok());
  CHECK(again.snapshot().snapshot_id() == snap.snapshot_id());  // same name: same snapshot

  std::string other = f.volume_with("other", {});
  csi::v1::CreateSnapshotResponse clash;
  auto status = f.snapshot("snap-1", other, &clash);
  CHECK(status.error_code() == StatusCode::ALREADY_EXISTS);
}

TEST_CASE("CreateSnapshot names what is wrong", "[snapshots]") {
  Fixture f;
  std::string volume = f.volume_with("data", {});
  csi::v1::CreateSnapshotResponse response;
  CHECK(f.snapshot("", volume, &response).error_code() == StatusCode::INVALID_ARGUMENT);
  auto no_source = f.snapshot("s", "", &response);
  CHECK(no_source.error_code() == StatusCode::INVALID_ARGUMENT);
  CHECK(no_source.error_message() == "source_volume_id is required");
  CHECK(f.snapshot("s", "local-0000000000000000", &response).error_code() == StatusCode::NOT_FOUND);
  CHECK(f.snapshot(std::string(64, 'a'), volume, &response).error_code() ==
        StatusCode::INVALID_ARGUMENT);  // a name that looks like a commit id
  CHECK(f.snapshot("snap-00000000000000000000abcd", volume, &response).error_code() ==
        StatusCode::INVALID_ARGUMENT);  // or like a snapshot id
  auto bad_parameter = f.snapshot("s", volume, &response, {{"colour", "red"}});
  CHECK(bad_parameter.error_code() == StatusCode::INVALID_ARGUMENT);
  CHECK(bad_parameter.error_message().find("colour") != std::string::npos);
}

TEST_CASE("ListSnapshots pages, filters and rejects foreign tokens", "[snapshots]") {
  Fixture f;
  std::string a = f.volume_with("a", {{"x", "1"}});
  std::string b = f.volume_with("b", {{"y", "2"}});
  std::set<std::string> of_a;
  for (int i = 0; i < 5; ++i)
    of_a.insert(f.snapshot_id("a-" + std::to_string(i), a));
  std::string of_b = f.snapshot_id("b-0", b);

  std::set<std::string> seen;
  csi::v1::ListSnapshotsRequest request;
  request.set_max_entries(4);
  int pages = 0;
  do {
    csi::v1::ListSnapshotsResponse response;
    REQUIRE(f.list(request, &response).ok());
    CHECK(response.entries_size() <= 4);
    for (const auto& entry : response.entries())
      seen.insert(entry.snapshot().snapshot_id());
    request.set_starting_token(response.next_token());
    ++pages;
  } while (!request.starting_token().empty());
  CHECK(seen.size() == 6);
  CHECK(pages == 2);

  csi::v1::ListSnapshotsRequest by_volume;
  by_volume.set_source_volume_id(a);
  csi::v1::ListSnapshotsResponse filtered;
  REQUIRE(f.list(by_volume, &filtered).ok());
  std::set<std::string> ids;
  for (const auto& entry : filtered.entries())
    ids.insert(entry.snapshot().snapshot_id());
  CHECK(ids == of_a);

  csi::v1::ListSnapshotsRequest by_id;
  by_id.set_snapshot_id(of_b);
  csi::v1::ListSnapshotsResponse one;
  REQUIRE(f.list(by_id, &one).ok());
  REQUIRE(one.entries_size() == 1);
  CHECK(one.entries(0).snapshot().source_volume_id() == b);
  by_id.set_snapshot_id(std::string(64, '0'));
  csi::v1::ListSnapshotsResponse none;
  REQUIRE(f.list(by_id, &none).ok());
  CHECK(none.entries_size() == 0);

  csi::v1::ListSnapshotsRequest bad;
  bad.set_starting_token("invalid-token");
  csi::v1::ListSnapshotsResponse ignored;
  CHECK(f.list(bad, &ignored).error_code() == StatusCode::ABORTED);
  bad.set_starting_token("");
  bad.set_max_entries(-1);
  CHECK(f.list(bad, &ignored).error_code() == StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("DeleteSnapshot is idempotent and reclaims the content", "[snapshots]") {
  Fixture f;
  std::string volume = f.volume_with("data", {{"only-here", std::string(5000, 'q')}});
  std::string id = f.snapshot_id("s", volume);
  fs::path blobs = fs::path(f.plugin->layout().commit_store_dir()) / "blobs";
  auto count_blobs = [&] {
    int count = 0;
    for (const auto& entry : fs::recursive_directory_iterator(blobs))
      count += entry.is_regular_file() ? 1 : 0;
    return count;
  };
  CHECK(count_blobs() == 1);
  CHECK(f.remove(id).ok());
  CHECK(f.remove(id).ok());
  CHECK(f.remove("no-such-snapshot").ok());
  CHECK(f.remove("../../etc").ok());
  CHECK(count_blobs() == 0);
  csi::v1::ListSnapshotsResponse listed;
  REQUIRE(f.list({}, &listed).ok());
  CHECK(listed.entries_size() == 0);
}

TEST_CASE("CreateVolume restores a snapshot, and snapshots outlive their volume", "[snapshots]") {
  Fixture f;
  std::string volume = f.volume_with("data", {{"weights", "w1"}}, 1 << 20);
  std::string id = f.snapshot_id("s", volume);
  std::ofstream(f.data_dir(volume) / "weights") << "w2";

  csi::v1::DeleteVolumeRequest delete_request;
  delete_request.set_volume_id(volume);
  csi::v1::DeleteVolumeResponse deleted;
  grpc::ClientContext context;
  REQUIRE(f.controller->DeleteVolume(&context, delete_request, &deleted).ok());

  csi::v1::CreateVolumeResponse restored;
  REQUIRE(f.create_from("restored", from_snapshot(id), &restored).ok());
  CHECK(restored.volume().content_source().snapshot().snapshot_id() == id);
  CHECK(read_file(f.data_dir(restored.volume().volume_id()) / "weights") == "w1");

  csi::v1::CreateVolumeResponse again;
  REQUIRE(f.create_from("restored", from_snapshot(id), &again).ok());
  CHECK(again.volume().volume_id() == restored.volume().volume_id());
  csi::v1::CreateVolumeRequest plain;  // same name, but without a source
  plain.set_name("restored");
  *plain.add_volume_capabilities() = mount_capability();
  csi::v1::CreateVolumeResponse empty;
  grpc::ClientContext plain_context;
  auto status = f.controller->CreateVolume(&plain_context, plain, &empty);
  CHECK(status.error_code() == StatusCode::ALREADY_EXISTS);
  CHECK(status.error_message().find("created from snapshot " + id) != std::string::npos);
}

TEST_CASE("CreateVolume from a source checks that it exists and fits", "[snapshots]") {
  Fixture f;
  std::string volume = f.volume_with("data", {{"big", std::string(4096, 'b')}}, 1 << 20);
  std::string id = f.snapshot_id("s", volume);
  csi::v1::CreateVolumeResponse response;
  CHECK(f.create_from("x", from_snapshot(std::string(64, 'f')), &response).error_code() ==
        StatusCode::NOT_FOUND);
  CHECK(f.create_from("x", from_volume("local-0000000000000000"), &response).error_code() ==
        StatusCode::NOT_FOUND);
  CHECK(f.create_from("x", from_snapshot(id), &response, 100).error_code() ==
        StatusCode::OUT_OF_RANGE);
  CHECK(f.create_from("x", from_volume(volume), &response, 100).error_code() ==
        StatusCode::OUT_OF_RANGE);
  CHECK(f.create_from("x", csi::v1::VolumeContentSource(), &response).error_code() ==
        StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("a restore gets its snapshot's source size; a smaller one is OUT_OF_RANGE",
          "[snapshots]") {
  Fixture f;
  std::string volume = f.volume_with("sized", {{"f", "content"}}, 8 << 20);
  std::string id = f.snapshot_id("s", volume);
  csi::v1::ListSnapshotsRequest by_id;
  by_id.set_snapshot_id(id);
  csi::v1::ListSnapshotsResponse listed;
  REQUIRE(f.list(by_id, &listed).ok());
  REQUIRE(listed.entries_size() == 1);
  CHECK(listed.entries(0).snapshot().size_bytes() == 8 << 20);  // what a restore needs

  csi::v1::CreateVolumeResponse restored;
  REQUIRE(f.create_from("unsized", from_snapshot(id), &restored).ok());
  CHECK(restored.volume().capacity_bytes() == 8 << 20);
  csi::v1::CreateVolumeResponse bigger;
  REQUIRE(f.create_from("bigger", from_snapshot(id), &bigger, 16 << 20).ok());
  CHECK(bigger.volume().capacity_bytes() == 16 << 20);
  csi::v1::CreateVolumeResponse smaller;
  auto status = f.create_from("smaller", from_snapshot(id), &smaller, 4 << 20);
  CHECK(status.error_code() == StatusCode::OUT_OF_RANGE);
  CHECK(status.error_message().find(std::to_string(8 << 20)) != std::string::npos);

  // A volume created without a size passes "unknown" (0) on to its restores.
  std::string unsized = f.volume_with("unsized-source", {{"f", "abc"}});
  csi::v1::CreateVolumeResponse from_unsized;
  REQUIRE(f.create_from("r2", from_snapshot(f.snapshot_id("s2", unsized)), &from_unsized).ok());
  CHECK(from_unsized.volume().capacity_bytes() == 0);
}

TEST_CASE("CreateVolume clones a volume with its capacity", "[snapshots]") {
  Fixture f;
  std::string volume = f.volume_with("data", {{"f", "original"}}, 1 << 20);
  csi::v1::CreateVolumeResponse clone;
  REQUIRE(f.create_from("copy", from_volume(volume), &clone).ok());
  CHECK(clone.volume().capacity_bytes() == 1 << 20);
  CHECK(clone.volume().content_source().volume().volume_id() == volume);
  fs::path copy = f.data_dir(clone.volume().volume_id());
  CHECK(read_file(copy / "f") == "original");
  std::ofstream(copy / "f") << "changed";
  CHECK(read_file(f.data_dir(volume) / "f") == "original");
}

TEST_CASE("the controller advertises snapshots and clones", "[snapshots]") {
  Fixture f;
  csi::v1::ControllerGetCapabilitiesResponse response;
  grpc::ClientContext context;
  REQUIRE(f.controller->ControllerGetCapabilities(&context, {}, &response).ok());
  std::set<int> types;
  for (const auto& capability : response.capabilities())
    types.insert(capability.rpc().type());
  using Rpc = csi::v1::ControllerServiceCapability::RPC;
  CHECK(types.contains(Rpc::CREATE_DELETE_SNAPSHOT));
  CHECK(types.contains(Rpc::LIST_SNAPSHOTS));
  CHECK(types.contains(Rpc::CLONE_VOLUME));
}

TEST_CASE("image volumes: snapshots, restores and clones copy the image and keep its kind",
          "[snapshots]") {
  Fixture f;
  constexpr int64_t kBytes = 8 << 20;
  csi::v1::CreateVolumeRequest create;
  create.set_name("img");
  create.mutable_capacity_range()->set_required_bytes(kBytes);
  (*create.mutable_parameters())["type"] = "image";
  *create.add_volume_capabilities() = mount_capability();
  csi::v1::CreateVolumeResponse created;
  {
    grpc::ClientContext context;
    REQUIRE(f.controller->CreateVolume(&context, create, &created).ok());
  }
  std::string volume = created.volume().volume_id();
  auto image = [&](const std::string& id) {
    return fs::path(f.plugin->layout().root) / "images" / (id + ".img");
  };
  {  // never staged, so never formatted: any bytes will do
    std::fstream out(image(volume), std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(1 << 20);
    out << "image content";
  }

  csi::v1::CreateSnapshotResponse snapshot;
  REQUIRE(f.snapshot("img-snap", volume, &snapshot).ok());
  CHECK(snapshot.snapshot().ready_to_use());
  CHECK(snapshot.snapshot().size_bytes() == kBytes);

  csi::v1::CreateVolumeResponse restored;
  auto status =
      f.create_from("img-restored", from_snapshot(snapshot.snapshot().snapshot_id()), &restored);
  INFO(status.error_message());
  REQUIRE(status.ok());
  CHECK(restored.volume().capacity_bytes() == kBytes);
  CHECK(restored.volume().volume_context().at("type") == "image");
  CHECK(restored.volume().volume_context().at("fs") == "ext4");
  CHECK(read_file(image(restored.volume().volume_id())) == read_file(image(volume)));

  csi::v1::CreateVolumeResponse cloned;
  REQUIRE(f.create_from("img-clone", from_volume(volume), &cloned).ok());
  CHECK(read_file(image(cloned.volume().volume_id())) == read_file(image(volume)));

  csi::v1::CreateVolumeRequest as_dir;
  as_dir.set_name("img-as-dir");
  (*as_dir.mutable_parameters())["type"] = "dir";
  *as_dir.add_volume_capabilities() = mount_capability();
  *as_dir.mutable_volume_content_source() = from_snapshot(snapshot.snapshot().snapshot_id());
  csi::v1::CreateVolumeResponse refused;
  grpc::ClientContext context;
  status = f.controller->CreateVolume(&context, as_dir, &refused);
  CHECK(status.error_code() == StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message().find("image volume") != std::string::npos);
}
