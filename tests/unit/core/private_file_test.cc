// Tests for src/core/private_file.cc: the one opener of secret files (the Roset API key file,
// the CLI's secrets file) refuses what is not a regular file without waiting on it, and says
// exactly which access is wrong.
#include "core/private_file.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>

#include "unit/scratch_dir.h"

using rosetctl::Code;
using rosetctl::read_private_file;
using rosetctl::testing::ScratchDir;
using rosetctl::testing::write_file;

namespace {

constexpr size_t kMax = 4096;

std::string file_with_mode(const ScratchDir& dir, mode_t mode) {
  std::string path = dir / "key";
  write_file(path, "rsk_secret\n");
  REQUIRE(::chmod(path.c_str(), mode) == 0);
  return path;
}

}  // namespace

TEST_CASE("a private regular file is read") {
  ScratchDir dir;
  auto content = read_private_file(file_with_mode(dir, 0600), "the key file", kMax);
  REQUIRE(content);
  CHECK(*content == "rsk_secret\n");
  CHECK(read_private_file(file_with_mode(dir, 0400), "the key file", kMax));
}

TEST_CASE("a FIFO is refused at once, not waited on") {
  ScratchDir dir;
  std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto reading =
      std::async(std::launch::async, [&] { return read_private_file(fifo, "the key file", kMax); });
  if (reading.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Let the stuck open return (a writer appears) so the test ends, then fail.
    int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    reading.wait();
    if (writer >= 0) ::close(writer);
    FAIL("opening a FIFO as a secret file waited for a writer");
  }
  auto refused = reading.get();
  REQUIRE_FALSE(refused);
  CHECK(refused.status().code() == Code::kPermissionDenied);
  CHECK_THAT(refused.status().message(), Catch::Contains("named pipe (FIFO)"));
  CHECK_THAT(refused.status().message(), Catch::Contains("not a regular file"));
}

TEST_CASE("a symlink is refused as a symlink, not as an errno") {
  ScratchDir dir;
  std::string real = file_with_mode(dir, 0600);
  std::string link = dir / "link";
  REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
  auto refused = read_private_file(link, "the key file", kMax);
  REQUIRE_FALSE(refused);
  CHECK(refused.status().code() == Code::kPermissionDenied);
  CHECK_THAT(refused.status().message(), Catch::Contains("is a symbolic link"));
  CHECK_THAT(refused.status().message(), !Catch::Contains("Too many levels"));
}

TEST_CASE("a directory and a socket are refused, saying what they are") {
  ScratchDir dir;
  auto directory = read_private_file(dir.path, "the key file", kMax);
  REQUIRE_FALSE(directory);
  CHECK(directory.status().code() == Code::kPermissionDenied);
  CHECK_THAT(directory.status().message(), Catch::Contains("is a directory"));

  std::string path = dir / "sock";
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  auto socket = read_private_file(path, "the key file", kMax);
  ::close(fd);
  REQUIRE_FALSE(socket);
  CHECK(socket.status().code() == Code::kPermissionDenied);
  CHECK_THAT(socket.status().message(), Catch::Contains("is a socket"));
}

TEST_CASE("the access that is wrong is named exactly") {
  ScratchDir dir;
  struct Case {
    mode_t mode;
    const char* says;
  };
  for (Case c :
       {Case{0602, "has mode 0602: other users can write it; chmod 600 it"},
        Case{0604, "other users can read it;"}, Case{0640, "its group can read it;"},
        Case{0660, "its group can read and write it;"}, Case{0710, "its group can execute it;"},
        Case{0677,
             "its group can read, write and execute it and other users can read, "
             "write and execute it;"}}) {
    auto refused = read_private_file(file_with_mode(dir, c.mode), "the key file", kMax);
    REQUIRE_FALSE(refused);
    CHECK(refused.status().code() == Code::kPermissionDenied);
    CHECK_THAT(refused.status().message(), Catch::Contains(c.says));
    CHECK_THAT(refused.status().message(), !Catch::Contains("rsk_secret"));
  }
  auto refused = read_private_file(file_with_mode(dir, 0602), "the key file", kMax);
  CHECK_THAT(refused.status().message(), !Catch::Contains("read it"));
}
