// Tests for src/daemon/host_checks.cc: the rows `rosetctl doctor` reports on a plugin's real
// state, each check put in the state that changes it, and what --fix does about a staging whose
// mount is gone. (Dead FUSE mounts, loop devices and tgtd are in tests/integration.)
#include "daemon/host_checks.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cluster/plugin.h"
#include "csi.grpc.pb.h"
#include "unit/daemon/plugin_fixture.h"
#include "unit/test_provider.h"

namespace {

namespace fs = std::filesystem;
using rosetctl::CheckState;
using rosetctl::HostCheck;
using rosetctl::HostCheckOptions;

const std::vector<std::string> kChecks = {"state-database", "mounts",         "loop-devices",
                                          "fuse-clients",   "iscsi-sessions", "providers",
                                          "certificates",   "free-space",     "commit-store"};

struct Fixture : rosetctl::testing::PluginFixture {
  Fixture() : PluginFixture("host-checks") {}

  std::vector<HostCheck> check(const HostCheckOptions& options = {}) {
    return plugin->check_host(options);
  }

  static const HostCheck& row(const std::vector<HostCheck>& rows, const std::string& name) {
    for (const HostCheck& row : rows)
      if (row.name == name) return row;
    FAIL("no row " << name);
    throw;
  }
};

std::vector<std::string> names(const std::vector<HostCheck>& rows) {
  std::vector<std::string> out;
  for (const HostCheck& row : rows)
    out.push_back(row.name);
  return out;
}

TEST_CASE("host checks: a clean host has every row, in order, ok") {
  Fixture fixture;
  auto rows = fixture.check();
  CHECK(names(rows) == kChecks);
  for (const HostCheck& row : rows) {
    INFO(row.name << ": " << row.message);
    CHECK(row.state == CheckState::kOk);
  }
  CHECK(Fixture::row(rows, "certificates").message == "no TLS files configured");
  CHECK(Fixture::row(rows, "commit-store").message == "no snapshots stored on this host");
  CHECK(Fixture::row(rows, "mounts").message == "0 staging(s) recorded, every mount answers");
  // Checking made no commit store: a host that never took a snapshot stays as it is.
  CHECK_FALSE(fs::exists(fixture.plugin->layout().commit_store_dir()));
}

TEST_CASE("host checks: a staging recorded with nothing mounted warns; --fix forgets it") {
  Fixture fixture;
  std::string id = fixture.create_volume("v");
  std::string path = fixture.dir + "/staging";
  fs::create_directories(path);
  rosetctl::Staging staging;
  staging.volume_id = id;
  staging.staging_path = path;
  REQUIRE(fixture.plugin->store().upsert_staging(staging).is_ok());

  auto rows = fixture.check();
  HostCheck mounts = Fixture::row(rows, "mounts");  // a copy: `rows` is checked again below
  CHECK(mounts.state == CheckState::kWarn);
  CHECK(mounts.message == "volume \"" + id + "\" is recorded as staged at \"" + path +
                              "\" with nothing mounted there; `rosetctl doctor --fix` forgets "
                              "that staging");

  HostCheckOptions fix;
  fix.fix = true;
  rows = fixture.check(fix);
  const HostCheck& fixed = Fixture::row(rows, "mounts");
  CHECK(fixed.state == CheckState::kOk);
  CHECK(fixed.repaired == "repaired: " + mounts.message);
  auto left = fixture.plugin->store().all_stagings();
  REQUIRE(left.has_value());
  CHECK(left->empty());
  CHECK(names(rows) == kChecks);  // no "repair" row: nothing failed
}

TEST_CASE("host checks: a missing certificate or CA fails, naming the file") {
  Fixture fixture;
  HostCheckOptions options;
  options.tls.certificate = fixture.dir + "/nowhere/node.crt";
  options.tls.ca = fixture.dir + "/nowhere/ca.crt";
  auto rows = fixture.check(options);
  const HostCheck& row = Fixture::row(rows, "certificates");
  CHECK(row.state == CheckState::kFail);
  CHECK(row.message == "cannot open certificate \"" + options.tls.certificate +
                           "\": No such file or directory; cannot open CA certificate \"" +
                           options.tls.ca + "\": No such file or directory");
}

TEST_CASE("host checks: a certificate that is no certificate fails") {
  Fixture fixture;
  HostCheckOptions options;
  options.tls.certificate = fixture.dir + "/node.crt";
  std::ofstream(options.tls.certificate) << "not a certificate\n";
  auto rows = fixture.check(options);
  const HostCheck& row = Fixture::row(rows, "certificates");
  CHECK(row.state == CheckState::kFail);
  CHECK(row.message.find(options.tls.certificate) != std::string::npos);
}

TEST_CASE("host checks: a damaged blob fails commit-store, the rest stays ok") {
  Fixture fixture;
  std::string id = fixture.create_volume("v");
  fs::path data = fs::path(fixture.plugin->layout().volumes_dir()) / id;
  fs::create_directories(data);
  std::ofstream(data / "file", std::ios::binary) << std::string(5000, 'x');
  csi::v1::CreateSnapshotRequest request;
  request.set_name("s");
  request.set_source_volume_id(id);
  csi::v1::CreateSnapshotResponse response;
  grpc::ClientContext context;
  REQUIRE(fixture.controller->CreateSnapshot(&context, request, &response).ok());
  CHECK(Fixture::row(fixture.check(), "commit-store").message == "1 snapshot(s) verified");

  for (const auto& entry :
       fs::recursive_directory_iterator(fixture.plugin->layout().commit_store_dir() + "/blobs")) {
    if (!entry.is_regular_file() || entry.file_size() != 5000) continue;
    fs::permissions(entry.path(), fs::perms::owner_write, fs::perm_options::add);
    std::ofstream(entry.path(), std::ios::binary) << "y" << std::string(4999, 'x');
  }
  auto rows = fixture.check();
  const HostCheck& store = Fixture::row(rows, "commit-store");
  CHECK(store.state == CheckState::kFail);
  CHECK(store.message.find("`rosetctl snapshot verify` lists the snapshots it damages") !=
        std::string::npos);
  for (const HostCheck& row : rows) {
    INFO(row.name << ": " << row.message);
    if (row.name != "commit-store") CHECK(row.state == CheckState::kOk);
  }
}

}  // namespace

// The doctor of a host whose providers are this build's and the test provider (one more
// registration line): its rows come from what the providers declare, not from a list here.
struct TestProviderHost {
  explicit TestProviderHost(std::vector<rosetctl::HostFinding> findings) : scratch("host-checks") {
    rosetctl::StateLayout layout{scratch.path};
    REQUIRE(layout.ensure_directories().is_ok());
    auto store = rosetctl::StateStore::open(layout.root);
    REQUIRE(store.has_value());
    store_ = std::move(*store);
    auto providers = rosetctl::ProviderRegistry::create(
        layout, *store_, {}, rosetctl::testing::with_test_provider(std::move(findings)));
    REQUIRE(providers.has_value());
    providers_ = std::move(*providers);
    auto locks = rosetctl::LockSpace::open(layout.lock_file());
    REQUIRE(locks.has_value());
    rosetctl::PluginOptions options;
    options.node_id = "node-a";
    context_.reset(
        new rosetctl::ServiceContext{options, layout, *store_, *providers_, std::move(*locks)});
  }

  std::vector<HostCheck> check(const HostCheckOptions& options = {}) {
    return rosetctl::check_host(*context_, options);
  }

  rosetctl::testing::ScratchDir scratch;
  std::unique_ptr<rosetctl::StateStore> store_;
  std::unique_ptr<rosetctl::ProviderRegistry> providers_;
  std::unique_ptr<rosetctl::ServiceContext> context_;
};

TEST_CASE(
    "host checks: a provider's declared row stands with the host's, ok when it finds "
    "nothing") {
  TestProviderHost host({});
  auto rows = host.check();
  std::vector<std::string> expected = kChecks;
  // Declared with the host state: after the build's own providers' rows, before "providers".
  expected.insert(expected.begin() + 5, rosetctl::testing::kTestProviderRow);
  CHECK(names(rows) == expected);
  const HostCheck& row = Fixture::row(rows, rosetctl::testing::kTestProviderRow);
  CHECK(row.state == CheckState::kOk);
  CHECK(row.message == "nothing the test provider keeps is left over");
}

TEST_CASE(
    "host checks: a provider's findings go under its row; one under no declared row is "
    "told in a row of its own") {
  TestProviderHost host({{rosetctl::testing::kTestProviderRow, false, "a leftover warns"},
                         {rosetctl::testing::kTestProviderRow, true, "a leftover fails"},
                         {"test-undeclared", false, "an undeclared row's finding"}});
  auto rows = host.check();
  const HostCheck& row = Fixture::row(rows, rosetctl::testing::kTestProviderRow);
  CHECK(row.state == CheckState::kFail);
  CHECK(row.message == "a leftover fails; a leftover warns");
  REQUIRE_FALSE(rows.empty());
  CHECK(rows.back().name == "test-undeclared");
  CHECK(rows.back().state == CheckState::kWarn);
  CHECK(rows.back().message == "an undeclared row's finding");
}
