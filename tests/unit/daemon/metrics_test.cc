// Tests for src/daemon/metrics.cc: the call counters and latency buckets record_call keeps, and
// each scrape-time gauge read from the plugin's real state (database, mount table, commit store).
#include "daemon/metrics.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "cluster/plugin.h"
#include "core/version.h"
#include "csi.grpc.pb.h"
#include "unit/daemon/plugin_fixture.h"
#include "unit/root_tests.h"

namespace {

namespace fs = std::filesystem;
using rosetctl::Code;

// The value of the series written exactly as `series` (name{labels} in the serializer's order),
// or nothing when the page lacks it.
std::optional<double> value_of(const std::string& page, const std::string& series) {
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

struct Fixture : rosetctl::testing::PluginFixture {
  Fixture() : PluginFixture("metrics") {}

  void snapshot(const std::string& name, const std::string& volume_id) {
    csi::v1::CreateSnapshotRequest request;
    request.set_name(name);
    request.set_source_volume_id(volume_id);
    csi::v1::CreateSnapshotResponse response;
    grpc::ClientContext context;
    auto status = controller->CreateSnapshot(&context, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
  }

  void stage(const std::string& volume_id, const std::string& path) {
    rosetctl::Staging staging;
    staging.volume_id = volume_id;
    staging.staging_path = path;
    REQUIRE(plugin->store().upsert_staging(staging).is_ok());
  }

  int64_t blob_bytes() const {
    int64_t bytes = 0;
    for (const auto& entry :
         fs::recursive_directory_iterator(plugin->layout().commit_store_dir() + "/blobs")) {
      struct stat st;
      if (entry.is_regular_file() && ::stat(entry.path().c_str(), &st) == 0)
        bytes += static_cast<int64_t>(st.st_blocks) * 512;
    }
    return bytes;
  }
};

TEST_CASE("metrics: calls are counted by method and code, their latency in its bucket") {
  Fixture fixture;
  rosetctl::enable_call_metrics();
  rosetctl::record_call("MetricsTestCall", Code::kNotFound, std::chrono::milliseconds(3));
  rosetctl::record_call("MetricsTestCall", Code::kNotFound, std::chrono::milliseconds(4));
  rosetctl::record_call("MetricsTestCall", Code::kOk, std::chrono::microseconds(200));
  std::string page = fixture.plugin->metrics_text();
  CHECK(value_of(page, R"(rosetctl_calls_total{code="NOT_FOUND",method="MetricsTestCall"})") == 2);
  CHECK(value_of(page, R"(rosetctl_calls_total{code="OK",method="MetricsTestCall"})") == 1);
  CHECK(value_of(page, R"(rosetctl_call_duration_seconds_count{method="MetricsTestCall"})") == 3);
  // 0.2 ms falls in the first bucket; 3 and 4 ms above 2.5 ms and within 5 ms.
  CHECK(value_of(
            page,
            R"(rosetctl_call_duration_seconds_bucket{method="MetricsTestCall",le="0.0005"})") == 1);
  CHECK(value_of(
            page,
            R"(rosetctl_call_duration_seconds_bucket{method="MetricsTestCall",le="0.0025"})") == 1);
  CHECK(value_of(page,
                 R"(rosetctl_call_duration_seconds_bucket{method="MetricsTestCall",le="0.005"})") ==
        3);
}

TEST_CASE("metrics: build_info is 1, labelled with this build's version and commit") {
  Fixture fixture;
  std::string page = fixture.plugin->metrics_text();
  std::string series = std::string("rosetctl_build_info{version=\"") + rosetctl::kVersion +
                       "\",commit=\"" + rosetctl::kGitCommit + "\"}";
  INFO(page);
  CHECK(value_of(page, series) == 1);
}

TEST_CASE("metrics: volumes and snapshots are counted by provider, 0 where none") {
  Fixture fixture;
  std::string page = fixture.plugin->metrics_text();
  CHECK(value_of(page, R"(rosetctl_volumes{provider="local"})") == 0);
  CHECK(value_of(page, R"(rosetctl_snapshots{provider="local"})") == 0);
  std::string a = fixture.create_volume("a");
  fixture.create_volume("b");
  fixture.snapshot("a-1", a);
  fixture.snapshot("a-2", a);
  fixture.snapshot("a-3", a);
  page = fixture.plugin->metrics_text();
  INFO(page);
  CHECK(value_of(page, R"(rosetctl_volumes{provider="local"})") == 2);
  CHECK(value_of(page, R"(rosetctl_snapshots{provider="local"})") == 3);
}

TEST_CASE("metrics: the commit store's bytes appear once a snapshot made the store") {
  Fixture fixture;
  std::string id = fixture.create_volume("data");
  std::string page = fixture.plugin->metrics_text();
  CHECK(page.find("rosetctl_commit_store_bytes") == std::string::npos);
  CHECK_FALSE(fs::exists(fixture.plugin->layout().commit_store_dir()));  // a scrape made nothing
  fs::path data = fs::path(fixture.plugin->layout().volumes_dir()) / id;
  fs::create_directories(data);
  std::ofstream(data / "file", std::ios::binary) << std::string(100000, 'x');
  fixture.snapshot("s", id);
  page = fixture.plugin->metrics_text();
  INFO(page);
  REQUIRE(fixture.blob_bytes() >= 100000);
  CHECK(value_of(page, R"(rosetctl_commit_store_bytes{provider="local"})") == fixture.blob_bytes());
}

TEST_CASE("metrics: stagings by condition: unmounted when nothing is mounted, mounted when it is") {
  Fixture fixture;
  std::string id = fixture.create_volume("v");
  std::string empty = fixture.dir + "/empty";
  fs::create_directories(empty);
  fixture.stage(id, empty);
  fixture.stage(id, fixture.dir + "/gone");  // its directory is not even there
  std::string page = fixture.plugin->metrics_text();
  INFO(page);
  CHECK(value_of(page, R"(rosetctl_staged_volumes{condition="unmounted"})") == 2);
  CHECK(value_of(page, R"(rosetctl_staged_volumes{condition="mounted"})") == 0);
  CHECK(value_of(page, R"(rosetctl_staged_volumes{condition="dead"})") == 0);

  if (!rosetctl::testing::have_root("to mount a tmpfs at a staging")) return;
  REQUIRE(::mount("metrics-test", empty.c_str(), "tmpfs", 0, "size=1m") == 0);
  page = fixture.plugin->metrics_text();
  CHECK(value_of(page, R"(rosetctl_staged_volumes{condition="mounted"})") == 1);
  CHECK(value_of(page, R"(rosetctl_staged_volumes{condition="unmounted"})") == 1);
  CHECK(::umount2(empty.c_str(), MNT_DETACH) == 0);
}

}  // namespace
