// Tests for the mount records of stagings and node publications in src/core/state_store.cc:
// the mount namespace and fingerprint of schema 10, and records from before it.
#include <catch2/catch.hpp>

#include "core/sqlite.h"
#include "core/state_store.h"
#include "unit/core/open_state_store.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;

namespace {

const RecordedMount kMount{0x1'0000'0042, 0x1'0000'0001, {7, 3, "ext4", "/sub dir/x"}};

}  // namespace

TEST_CASE("state store: a mount's id, namespace and fingerprint are kept", "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_store(dir.path);
  REQUIRE(store->upsert_staging({"v", "/stage/v", "c", true}).is_ok());
  REQUIRE(store->set_staging_mount("v", "/stage/v", kMount).is_ok());
  CHECK((*store->find_staging("v", "/stage/v"))->mount == kMount);
  NodePublication publication{"v", "/t", "/stage/v", false, "c", false, kMount};
  REQUIRE(store->upsert_node_publication(publication).is_ok());
  CHECK(*store->find_node_publication("/t") == publication);
  REQUIRE(store->set_node_publication_mount("/t", RecordedMount{9, 0, {}}).is_ok());
  CHECK((*store->find_node_publication("/t"))->mount == RecordedMount{9, 0, {}});
}

TEST_CASE("state store: records from schema 9 keep their mount id, with no namespace",
          "[state_store]") {
  testing::ScratchDir dir;
  {
    auto store = open_store(dir.path);
    REQUIRE(store->upsert_staging({"v", "/stage/v", "c", true, kMount}).is_ok());
    auto connection = sqlite::Connection::open(dir.path + "/state.db");
    REQUIRE(connection.has_value());
    REQUIRE(connection
                ->exec("ALTER TABLE stagings DROP COLUMN mount_ns; ALTER TABLE stagings DROP "
                       "COLUMN mount_fingerprint; ALTER TABLE node_publications DROP COLUMN "
                       "mount_ns; ALTER TABLE node_publications DROP COLUMN mount_fingerprint; "
                       "ALTER TABLE node_publications DROP COLUMN volume_context; "
                       "DROP TABLE volume_moves; ALTER TABLE nodes DROP COLUMN cordoned_at_ns; "
                       "PRAGMA user_version = 9")
                .is_ok());
  }
  auto store = open_store(dir.path);
  auto staged = store->find_staging("v", "/stage/v");
  REQUIRE(staged->has_value());
  CHECK((*staged)->mount == RecordedMount{kMount.id, 0, {}});
}

TEST_CASE("recorded mount: the fingerprint's text form", "[state_store]") {
  CHECK(MountFingerprint::from_text(kMount.fingerprint.to_text()) == kMount.fingerprint);
  CHECK(kMount.fingerprint.to_text() == "7:3 ext4 /sub dir/x");
  CHECK(MountFingerprint().to_text().empty());
  CHECK(MountFingerprint::from_text("").empty());
  CHECK(MountFingerprint::from_text("7:x ext4 /").empty());
  CHECK(MountFingerprint::from_text("7:3 ext4").empty());
}
