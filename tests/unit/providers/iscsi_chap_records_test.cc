// The CHAP credentials the controller keeps (providers/iscsi/chap_records.cc): private files that
// come back whole, one per node and one for the target.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "providers/iscsi/chap_records.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;
using namespace rosetctl::iscsi;
namespace fs = std::filesystem;

namespace {

mode_t mode_of(const fs::path& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("a node's CHAP record comes back as written, in a 0600 file under 0700 directories",
          "[iscsi]") {
  testing::ScratchDir scratch;
  const fs::path dir = scratch.path;
  ChapRecords records((dir / "iscsi" / "chap").string());
  auto none = records.of_node("iscsi-0123", "node-a");
  REQUIRE(none);
  CHECK(!none->has_value());
  ChapCredentials made = random_chap();
  CHECK(made.user.size() == 13);
  CHECK(made.password.size() == 32);
  CHECK(validate_chap(made).is_ok());
  CHECK(random_chap().password != made.password);
  REQUIRE(records.put_node("iscsi-0123", "node-a", made).is_ok());
  auto kept = records.of_node("iscsi-0123", "node-a");
  REQUIRE(kept);
  REQUIRE(kept->has_value());
  CHECK(**kept == made);
  CHECK(mode_of(dir / "iscsi") == 0700);
  CHECK(mode_of(dir / "iscsi" / "chap" / "iscsi-0123") == 0700);
  CHECK(mode_of(dir / "iscsi" / "chap" / "iscsi-0123" / "node.node-a") == 0600);

  // The target's own account is made once and kept; no node id names its file.
  auto target = records.target("iscsi-0123");
  REQUIRE(target);
  CHECK(target->user == kTargetChapUser);
  auto again = records.target("iscsi-0123");
  REQUIRE(again);
  CHECK(*again == *target);
  REQUIRE(records.put_node("iscsi-0123", "target", random_chap()).is_ok());
  CHECK(*records.target("iscsi-0123") == *target);

  auto all = records.of_volume("iscsi-0123");
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK((*all)[0].first == "node-a");
  CHECK((*all)[1].first == "target");

  REQUIRE(records.remove_node("iscsi-0123", "node-a").is_ok());
  REQUIRE(records.remove_node("iscsi-0123", "node-a").is_ok());  // idempotent
  CHECK(records.of_volume("iscsi-0123")->size() == 1);
  REQUIRE(records.remove_volume("iscsi-0123").is_ok());
  CHECK(!fs::exists(dir / "iscsi" / "chap" / "iscsi-0123"));
}

TEST_CASE("a damaged or readable CHAP record is refused without quoting it", "[iscsi]") {
  testing::ScratchDir scratch;
  const fs::path dir = scratch.path;
  ChapRecords records(dir.string());
  REQUIRE(
      records.put_node("iscsi-0123", "node-a", {"n1", "a-password-of-32-characters-long"}).is_ok());
  fs::path file = dir / "iscsi-0123" / "node.node-a";
  std::ofstream(file) << "only-one-line-SECRET";
  auto damaged = records.of_node("iscsi-0123", "node-a");
  REQUIRE(!damaged);
  CHECK(damaged.status().code() == Code::kDataLoss);
  CHECK(damaged.status().message().find("SECRET") == std::string::npos);
  ::chmod(file.c_str(), 0644);
  auto readable = records.of_node("iscsi-0123", "node-a");
  REQUIRE(!readable);
  CHECK(readable.status().code() == Code::kPermissionDenied);
}
