// Tests for src/core/commit_store/store_verify.cc: damage is found and named.
#include "core/commit_store/store_verify.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "core/commit_store/commit_directory.h"
#include "core/commit_store/sha256.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;
using namespace rosetctl::testing;

namespace {

struct Fixture {
  ScratchDir scratch;
  std::unique_ptr<CommitStore> store;
  std::string id;

  Fixture() {
    auto opened = CommitStore::open(scratch / "store");
    REQUIRE(opened.has_value());
    store = std::move(*opened);
    make_dir(scratch / "v");
    write_file(scratch / "v/a", "alpha");
    write_file(scratch / "v/b", "beta");
    auto lock = store->lock_shared(std::chrono::seconds(1));
    auto outcome = commit_directory(*store, {scratch / "v", "local-v", "v", "", "", 1, 1}, *lock);
    REQUIRE(outcome.has_value());
    id = outcome->id;
  }

  VerifyReport verify(const std::vector<std::string>& ids = {}) {
    auto lock = store->lock_shared(std::chrono::seconds(1));
    auto report =
        verify_commits(*store, ids.empty() ? std::vector<std::string>{id} : ids, 2, nullptr, *lock);
    REQUIRE(report.has_value());
    return *report;
  }

  std::string blob_path(const std::string& content) {
    std::string hash = sha256_hex(content);
    return scratch / "store/blobs/" + hash.substr(0, 2) + "/" + hash;
  }
};

}  // namespace

TEST_CASE("verify passes an intact commit", "[commit_store]") {
  Fixture f;
  VerifyReport report = f.verify();
  CHECK(report.problems.empty());
  CHECK(report.commits == 1);
  CHECK(report.blobs == 2);
  CHECK(report.bytes == 9);
}

TEST_CASE("verify reports a missing and a corrupted blob", "[commit_store]") {
  Fixture f;
  REQUIRE(::unlink(f.blob_path("alpha").c_str()) == 0);
  REQUIRE(::chmod(f.blob_path("beta").c_str(), 0644) == 0);
  write_file(f.blob_path("beta"), "BETA");
  VerifyReport report = f.verify();
  REQUIRE(report.problems.size() == 2);
  std::string all = report.problems[0] + "\n" + report.problems[1];
  CHECK(all.find("file \"a\"") != std::string::npos);
  CHECK(all.find("not in the commit store") != std::string::npos);
  CHECK(all.find("is corrupt") != std::string::npos);
}

TEST_CASE("verify reports a commit that no longer hashes to its id", "[commit_store]") {
  Fixture f;
  std::string path = f.scratch / "store/commits/" + f.id;
  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  write_file(path, read_file(path) + "tampered\n");
  VerifyReport report = f.verify();
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].find("is corrupt") != std::string::npos);
}

TEST_CASE("verify names every commit that holds a damaged blob", "[commit_store]") {
  Fixture f;
  make_dir(f.scratch / "w");
  write_file(f.scratch / "w/also-alpha", "alpha");
  write_file(f.scratch / "w/gamma", "gamma");
  std::string other;
  {
    auto lock = f.store->lock_shared(std::chrono::seconds(1));
    auto outcome =
        commit_directory(*f.store, {f.scratch / "w", "local-w", "w", "", "", 1, 1}, *lock);
    REQUIRE(outcome.has_value());
    other = outcome->id;
  }
  REQUIRE(::chmod(f.blob_path("alpha").c_str(), 0644) == 0);
  write_file(f.blob_path("alpha"), "ALPHA");
  VerifyReport report = f.verify({f.id, other});
  REQUIRE(report.problems.size() == 2);
  std::string all = report.problems[0] + "\n" + report.problems[1];
  CHECK(all.find("commit " + f.id + " file \"a\"") != std::string::npos);
  CHECK(all.find("commit " + other + " file \"also-alpha\"") != std::string::npos);
  CHECK(report.blobs == 3);  // alpha, beta, gamma: alpha hashed once for both commits
  std::vector<std::string> expected{f.id, other};
  std::sort(expected.begin(), expected.end());
  CHECK(report.damaged_commits == expected);
}
