// Tests for src/core/fs_signature.cc on image files made by the real mkfs tools (e2fsprogs,
// xfsprogs: scripts/install-deps.sh installs them). No root needed: libblkid reads files too.
#include "core/fs_signature.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>

#include "core/run_program.h"

using namespace std::chrono_literals;
using rosetctl::find_program;
using rosetctl::probe_signature;
using rosetctl::run_program;

namespace {

class ScratchFile {
 public:
  explicit ScratchFile(off_t size) {
    char pattern[] = "/tmp/rosetctl-signature-test-XXXXXX";
    int fd = ::mkstemp(pattern);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, size) == 0);  // sparse: reads as zeros
    ::close(fd);
    path_ = pattern;
  }
  ~ScratchFile() { std::filesystem::remove(path_); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void format(const std::string& tool, const std::string& package, const std::string& path) {
  auto program = find_program(tool, package);
  REQUIRE(program);
  auto result = run_program({*program, "-q", path}, 60s);
  REQUIRE(result);
  INFO(result->describe());
  REQUIRE(result->succeeded());
}

}  // namespace

TEST_CASE("probe_signature finds nothing on a zeroed image", "[fs_signature]") {
  ScratchFile image(64 << 20);
  auto found = probe_signature(image.path());
  REQUIRE(found);
  CHECK_FALSE(found->has_value());
}

TEST_CASE("probe_signature names an ext4 filesystem", "[fs_signature]") {
  ScratchFile image(64 << 20);
  format("mkfs.ext4", "e2fsprogs", image.path());
  auto found = probe_signature(image.path());
  REQUIRE(found);
  CHECK(found->value_or("") == "ext4");
}

TEST_CASE("probe_signature names an xfs filesystem", "[fs_signature]") {
  ScratchFile image(320 << 20);  // mkfs.xfs refuses less than 300 MiB
  format("mkfs.xfs", "xfsprogs", image.path());
  auto found = probe_signature(image.path());
  REQUIRE(found);
  CHECK(found->value_or("") == "xfs");
}

TEST_CASE("probe_signature reports a partition table as data", "[fs_signature]") {
  ScratchFile image(8 << 20);
  // A DOS partition table: one Linux partition from sector 2048, and the 0x55AA boot mark.
  unsigned char sector[512] = {};
  unsigned char* entry = sector + 446;
  entry[4] = 0x83;
  entry[8] = 0x00;
  entry[9] = 0x08;  // start LBA 2048
  entry[12] = 0x00;
  entry[13] = 0x20;  // 8192 sectors
  sector[510] = 0x55;
  sector[511] = 0xAA;
  int fd = ::open(image.path().c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, sector, sizeof(sector), 0) == static_cast<ssize_t>(sizeof(sector)));
  ::close(fd);
  auto found = probe_signature(image.path());
  REQUIRE(found);
  CHECK(found->value_or("") == "partition table dos");
}

TEST_CASE("probe_signature fails on a missing file rather than report it empty", "[fs_signature]") {
  auto found = probe_signature("/nonexistent/rosetctl/image");
  REQUIRE_FALSE(found);
  CHECK_THAT(found.status().message(), Catch::Contains("/nonexistent/rosetctl/image"));
}
