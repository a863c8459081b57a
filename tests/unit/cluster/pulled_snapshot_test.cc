// Tests for src/cluster/pulled_snapshot.cc: a node's answer is taken only when it is the snapshot
// asked for and holds nothing a local CreateSnapshot would refuse.
#include "cluster/pulled_snapshot.h"

#include <catch2/catch.hpp>

#include "daemon/request_limits.h"

using namespace rosetctl;

namespace {

constexpr const char* kId = "snap-0000000000000001aabbccdd";

SnapshotRecord honest() {
  SnapshotRecord record;
  record.id = kId;
  record.name = "nightly";
  record.commit_id = std::string(64, 'c');
  record.provider = "local";
  record.source_volume_id = "local-1";
  record.source_volume_name = "db";
  record.message = "before the upgrade";
  record.ready = true;
  return record;
}

}  // namespace

TEST_CASE("a restore's pull takes only the snapshot id it asked for", "[pulled_snapshot]") {
  SnapshotRecord answer = honest();
  CHECK(check_answer_is_the_one_asked(answer, kId, PullReference::kSnapshotId, "a").is_ok());
  // A name, commit or prefix that matches is not enough when an id was asked for: a node asked
  // for "x" must not answer with another node's snapshot id under the name "x".
  answer.name = "x";
  Status lied = check_answer_is_the_one_asked(answer, "x", PullReference::kSnapshotId, "evil");
  CHECK(lied.code() == Code::kDataLoss);
  CHECK_THAT(lied.message(), Catch::Contains("node \"evil\" was asked for snapshot \"x\"") &&
                                 Catch::Contains(kId) && Catch::Contains("nothing was stored"));
}

TEST_CASE("a pull by reference takes a snapshot the reference names", "[pulled_snapshot]") {
  SnapshotRecord answer = honest();
  for (std::string reference :
       {std::string(kId), std::string("nightly"), std::string(64, 'c'), std::string("cccc")}) {
    CHECK(check_answer_is_the_one_asked(answer, reference, PullReference::kAny, "a").is_ok());
  }
  for (std::string reference : {std::string("other"), std::string("ccc"), std::string(64, 'd'),
                                std::string("snap-0000000000000002aabbccdd")}) {
    CHECK(check_answer_is_the_one_asked(answer, reference, PullReference::kAny, "a").code() ==
          Code::kDataLoss);
  }
}

TEST_CASE("a pulled record is held to the rules of a local one", "[pulled_snapshot]") {
  CHECK(check_pulled_record(honest(), "a").is_ok());
  SnapshotRecord control = honest();
  control.message = "a message\nwith\x1b[2J control characters";  // as a local one may hold
  CHECK(check_pulled_record(control, "a").is_ok());

  auto refused = [](void (*change)(SnapshotRecord&)) {
    SnapshotRecord record = honest();
    change(record);
    return check_pulled_record(record, "evil");
  };
  Status name = refused([](SnapshotRecord& r) { r.name = "evil\n\x1b[2J"; });
  CHECK(name.code() == Code::kDataLoss);
  CHECK_THAT(name.message(), Catch::Contains("node \"evil\"") &&
                                 Catch::Contains("name \"evil\\x0a\\x1b[2J\"") &&
                                 Catch::Contains("nothing was stored"));
  CHECK(name.message().find('\n') == std::string::npos);
  CHECK(name.message().find('\x1b') == std::string::npos);
  CHECK(refused([](SnapshotRecord& r) { r.name = "snap-0000000000000002aabbccdd"; }).code() ==
        Code::kDataLoss);
  CHECK(refused([](SnapshotRecord& r) { r.id = "../x"; }).code() == Code::kDataLoss);
  CHECK(refused([](SnapshotRecord& r) { r.source_volume_name = "a b"; }).code() == Code::kDataLoss);
  CHECK(refused([](SnapshotRecord& r) { r.source_volume_id = "x/y"; }).code() == Code::kDataLoss);
  CHECK(refused([](SnapshotRecord& r) { r.parent_id = "HEAD"; }).code() == Code::kDataLoss);
  CHECK(refused([](SnapshotRecord& r) { r.size_bytes = -1; }).code() == Code::kDataLoss);
  CHECK(refused([](SnapshotRecord& r) { r.failure_code = 13; }).code() == Code::kDataLoss);
  CHECK(refused([](SnapshotRecord& r) { r.message = std::string(kMaxMapBytes + 1, 'm'); }).code() ==
        Code::kDataLoss);
  CHECK(refused([](SnapshotRecord& r) {
          r.context["k"] = std::string(kMaxMapBytes, 'v');
        }).code() == Code::kDataLoss);
}
