// Tests for src/core/lock_space.cc: try-locks shared by threads and processes.
#include "core/lock_space.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

namespace {

struct TempFile {
  std::string path;
  TempFile() {
    char pattern[] = "/tmp/rosetctl-lock-XXXXXX";
    int fd = ::mkstemp(pattern);
    REQUIRE(fd >= 0);
    ::close(fd);
    path = pattern;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

}  // namespace

using rosetctl::Code;
using rosetctl::LockMode;

TEST_CASE("an exclusive lock excludes everyone else in the same process", "[lock]") {
  TempFile file;
  auto space = rosetctl::LockSpace::open(file.path);
  REQUIRE(space.has_value());
  auto first = space->try_lock("volume:a", LockMode::kExclusive, "busy a");
  REQUIRE(first.has_value());
  auto second = space->try_lock("volume:a", LockMode::kExclusive, "busy a");
  REQUIRE_FALSE(second.has_value());
  CHECK(second.status().code() == Code::kAborted);
  CHECK(second.status().message() == "busy a");
  CHECK(space->try_lock("volume:a", LockMode::kShared, "busy").status().code() == Code::kAborted);
  // Other keys are independent.
  CHECK(space->try_lock("volume:b", LockMode::kExclusive, "busy b").has_value());
}

TEST_CASE("shared locks coexist and block an exclusive one", "[lock]") {
  TempFile file;
  auto space = rosetctl::LockSpace::open(file.path);
  REQUIRE(space.has_value());
  auto one = space->try_lock("stage:v", LockMode::kShared, "busy");
  auto two = space->try_lock("stage:v", LockMode::kShared, "busy");
  REQUIRE(one.has_value());
  REQUIRE(two.has_value());
  CHECK_FALSE(space->try_lock("stage:v", LockMode::kExclusive, "busy").has_value());
}

TEST_CASE("releasing a lock makes the key available again", "[lock]") {
  TempFile file;
  auto space = rosetctl::LockSpace::open(file.path);
  REQUIRE(space.has_value());
  {
    auto held = space->try_lock("name:x", LockMode::kExclusive, "busy");
    REQUIRE(held.has_value());
  }
  CHECK(space->try_lock("name:x", LockMode::kExclusive, "busy").has_value());
}

TEST_CASE("locks conflict across processes and die with their holder", "[lock]") {
  TempFile file;
  auto space = rosetctl::LockSpace::open(file.path);
  REQUIRE(space.has_value());
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto held = space->try_lock("volume:shared", LockMode::kExclusive, "busy");
    char byte = held.has_value() ? 'y' : 'n';
    (void)!::write(ready[1], &byte, 1);
    ::pause();  // holds the lock until killed
    std::_Exit(0);
  }
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  REQUIRE(byte == 'y');
  CHECK(space->try_lock("volume:shared", LockMode::kExclusive, "busy").status().code() ==
        Code::kAborted);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK(space->try_lock("volume:shared", LockMode::kExclusive, "busy").has_value());
  ::close(ready[0]);
  ::close(ready[1]);
}

// Released descriptors serve later locks (no open(2) per lock): each must come back holding
// nothing, whatever mode and key it held before.
TEST_CASE("a descriptor released from one lock holds nothing when the next lock reuses it",
          "[lock]") {
  TempFile file;
  auto space = rosetctl::LockSpace::open(file.path);
  REQUIRE(space.has_value());
  for (int round = 0; round < 3; ++round) {
    {
      auto a = space->try_lock("volume:a", LockMode::kExclusive, "busy a");
      auto s = space->try_lock("stage:s", LockMode::kShared, "busy s");
      REQUIRE(a.has_value());
      REQUIRE(s.has_value());
      // Refused: its descriptor goes back too, and must not hold the key afterwards.
      CHECK_FALSE(space->try_lock("volume:a", LockMode::kShared, "busy").has_value());
    }
    auto b = space->try_lock("volume:b", LockMode::kExclusive, "busy b");
    REQUIRE(b.has_value());
    CHECK(space->try_lock("volume:b", LockMode::kExclusive, "busy b").status().code() ==
          Code::kAborted);
    // Neither old key is held any more by the reused descriptors.
    auto a_again = space->try_lock("volume:a", LockMode::kExclusive, "busy a");
    auto s_again = space->try_lock("stage:s", LockMode::kExclusive, "busy s");
    CHECK(a_again.has_value());
    CHECK(s_again.has_value());
  }
}

TEST_CASE("a lock released in one process is free for another at once", "[lock]") {
  TempFile file;
  auto space = rosetctl::LockSpace::open(file.path);
  REQUIRE(space.has_value());
  auto held = space->try_lock("volume:x", LockMode::kExclusive, "busy");
  REQUIRE(held.has_value());
  *held = rosetctl::HeldLock();  // released: its descriptor stays open for reuse
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child's own lock space: a fresh open file description.
    auto mine = rosetctl::LockSpace::open(file.path);
    bool got = mine && mine->try_lock("volume:x", LockMode::kExclusive, "busy").has_value();
    std::_Exit(got ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}
