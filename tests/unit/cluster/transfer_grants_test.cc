// Tests for src/cluster/transfer_grants.cc: a grant binds the receiver, the source and the
// snapshot, expires unused, lives on while used (never past its limit), and no message shows
// its token. Over the wire: tests/security/test_transfer_grants.py.
#include "cluster/transfer_grants.h"

#include <catch2/catch.hpp>

namespace {

using rosetctl::Code;
using rosetctl::GrantedRead;
using rosetctl::TransferGrant;
using rosetctl::TransferGrants;
using Clock = TransferGrants::Clock;
using std::chrono::minutes;

const TransferGrant kGrant{.receiver = "node-b", .source = "node-a", .reference = "snap-1"};
const GrantedRead kRead{.receiver = "node-b", .source = "node-a", .reference = "snap-1"};

}  // namespace

TEST_CASE("transfer grants: a grant lets its receiver read its snapshot of its source",
          "[grants]") {
  TransferGrants book;
  Clock::time_point now{};
  std::string token = book.issue(kGrant, now);
  CHECK(token.size() == 64);
  CHECK(book.issue(kGrant, now) != token);  // one per transfer, unpredictable
  auto granted = book.check(token, kRead, now);
  REQUIRE(granted);
  CHECK(granted->reference == "snap-1");
  // A fetch of objects names no snapshot; a caller forwarding for the receiver names nobody.
  CHECK(book.check(token, {.receiver = "node-b", .source = "node-a"}, now));
  CHECK(book.check(token, {.source = "node-a", .reference = "snap-1"}, now));
}

TEST_CASE("transfer grants: another receiver, source or snapshot is refused, naming it",
          "[grants]") {
  TransferGrants book;
  Clock::time_point now{};
  std::string token = book.issue(kGrant, now);
  auto refused = [&](GrantedRead read, std::string_view says) {
    auto checked = book.check(token, read, now);
    REQUIRE_FALSE(checked);
    CHECK(checked.status().code() == Code::kPermissionDenied);
    CHECK_THAT(checked.status().message(), Catch::Contains(std::string(says)));
    CHECK_THAT(checked.status().message(), !Catch::Contains(token));
  };
  GrantedRead read = kRead;
  read.receiver = "node-c";
  refused(read, "is not node \"node-c\"'s");
  read = kRead;
  read.source = "node-c";
  refused(read, "is not for node \"node-c\"'s store");
  read = kRead;
  read.reference = "snap-2";
  refused(read, "is not for snapshot \"snap-2\"");
  auto unknown = book.check(std::string(64, 'a'), kRead, now);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.status().code() == Code::kPermissionDenied);
  CHECK_THAT(unknown.status().message(), Catch::Contains("not one the controller issued"));
}

TEST_CASE("transfer grants: unused, a grant expires; in use, it lives on up to its limit",
          "[grants]") {
  TransferGrants book;
  Clock::time_point start{};
  std::string token = book.issue(kGrant, start);
  SECTION("unused past kIdle: expired, and said so") {
    auto late = book.check(token, kRead, start + TransferGrants::kIdle + minutes(1));
    REQUIRE_FALSE(late);
    CHECK(late.status().code() == Code::kPermissionDenied);
    CHECK_THAT(late.status().message(), Catch::Contains("expired"));
    CHECK_FALSE(book.find(token, nullptr, start + TransferGrants::kIdle + minutes(1)));
  }
  SECTION("each use keeps it alive for kIdle more") {
    Clock::time_point now = start;
    for (int i = 0; i < 6; ++i) {
      now += TransferGrants::kIdle - minutes(1);
      REQUIRE(book.check(token, kRead, now));
    }
    CHECK(now - start > TransferGrants::kIdle * 5);
  }
  SECTION("never past kLongest") {
    Clock::time_point now = start;
    while (now + minutes(9) < start + TransferGrants::kLongest) {
      now += minutes(9);
      REQUIRE(book.check(token, {.source = "node-a"}, now));
    }
    CHECK_FALSE(book.check(token, kRead, start + TransferGrants::kLongest + minutes(1)));
  }
  SECTION("long forgotten: unknown") {
    // Another issue later sweeps grants expired for a while.
    (void)book.issue(kGrant, start + TransferGrants::kIdle * 3);
    CHECK_FALSE(book.knows(token));
  }
}

TEST_CASE("transfer grants: a source keeps what the controller told it, for as long as it said",
          "[grants]") {
  TransferGrants book;
  Clock::time_point now{};
  book.keep("t0k3n", kGrant, minutes(2), now);
  CHECK(book.knows("t0k3n"));
  Clock::duration left{};
  REQUIRE(book.find("t0k3n", &left, now));
  CHECK(left == minutes(2));
  CHECK(book.check("t0k3n", kRead, now + minutes(1)));
  // Used at minute 1: alive until minute 11, not minute 2.
  CHECK(book.check("t0k3n", kRead, now + minutes(10)));
  CHECK_FALSE(book.check("t0k3n", kRead, now + minutes(25)));
}

TEST_CASE("transfer grants: a handler's transfers carry the grant of its call", "[grants]") {
  CHECK(rosetctl::CarriedGrant::current().empty());
  {
    rosetctl::CarriedGrant outer("one");
    CHECK(rosetctl::CarriedGrant::current() == "one");
    {
      rosetctl::CarriedGrant inner("");
      CHECK(rosetctl::CarriedGrant::current().empty());
    }
    CHECK(rosetctl::CarriedGrant::current() == "one");
  }
  CHECK(rosetctl::CarriedGrant::current().empty());
}
