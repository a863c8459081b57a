// Tests for src/core/secret_volume_file.cc through read_private_file: a Kubernetes Secret
// volume's key is read by its plain name through exactly kubelet's atomic-writer links
// (KEY -> ..data/KEY, ..data -> ..TIMESTAMP), and every other layout of links is still refused,
// saying which link is wrong.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "core/private_file.h"
#include "unit/root_tests.h"
#include "unit/scratch_dir.h"

using rosetctl::Code;
using rosetctl::read_private_file;
using rosetctl::testing::ScratchDir;
using rosetctl::testing::write_file;

namespace {

constexpr size_t kMax = 4096;
constexpr const char* kStamp = "..2026_11_28_16_00_00.123456789";

// A Secret volume as kubelet writes it in `dir`: ..TIMESTAMP/<key> (mode `mode`), ..data ->
// ..TIMESTAMP, <key> -> ..data/<key>.
void kubelet_layout(const ScratchDir& dir, const std::string& key, mode_t mode = 0400) {
  std::string stamp = dir / kStamp;
  ::mkdir(stamp.c_str(), 0755);
  write_file(stamp + "/" + key, "secret of " + key + "\n");
  REQUIRE(::chmod((stamp + "/" + key).c_str(), mode) == 0);
  ::symlink(kStamp, (dir / "..data").c_str());
  REQUIRE(::symlink(("..data/" + key).c_str(), (dir / key).c_str()) == 0);
}

void refused_with(const rosetctl::Expected<std::string>& read, const std::string& says) {
  REQUIRE_FALSE(read);
  CHECK(read.status().code() == Code::kPermissionDenied);
  CHECK_THAT(read.status().message(), Catch::Contains(says));
  CHECK_THAT(read.status().message(), !Catch::Contains("secret of"));
}

}  // namespace

TEST_CASE("a Secret volume's key is read by its plain name through kubelet's links") {
  ScratchDir dir;
  kubelet_layout(dir, "controller.key");
  kubelet_layout(dir, "ca.key");
  auto content = read_private_file(dir / "controller.key", "the TLS key file", kMax);
  REQUIRE(content);
  CHECK(*content == "secret of controller.key\n");
  CHECK(read_private_file(dir / "ca.key", "the CA key", kMax));
  // The ..data path the manifests used before works as it did.
  CHECK(read_private_file(dir / "..data/ca.key", "the CA key", kMax));
}

TEST_CASE("a Secret volume's key keeps the mode check: kubelet's default 0644 is refused") {
  ScratchDir dir;
  kubelet_layout(dir, "controller.key", 0644);
  refused_with(read_private_file(dir / "controller.key", "the TLS key file", kMax),
               "has mode 0644: its group can read it and other users can read it");
}

TEST_CASE("a Secret volume's links in a directory other users may change are refused") {
  ScratchDir dir;
  kubelet_layout(dir, "controller.key");
  REQUIRE(::chmod(dir.path.c_str(), 0777) == 0);
  refused_with(read_private_file(dir / "controller.key", "the TLS key file", kMax),
               "is in a directory other users may change (mode 0777)");
  REQUIRE(::chmod(dir.path.c_str(), 0700) == 0);
  CHECK(read_private_file(dir / "controller.key", "the TLS key file", kMax));
}

TEST_CASE("a key's link out of the volume is refused") {
  ScratchDir dir, elsewhere;
  write_file(elsewhere / "key", "secret of elsewhere\n");
  REQUIRE(::chmod((elsewhere / "key").c_str(), 0600) == 0);
  REQUIRE(::symlink((elsewhere / "key").c_str(), (dir / "key").c_str()) == 0);
  refused_with(read_private_file(dir / "key", "the key file", kMax), "not \"..data/key\"");
  // Relative, climbing out:
  REQUIRE(::symlink("../key", (dir / "up").c_str()) == 0);
  refused_with(read_private_file(dir / "up", "the key file", kMax), "points at \"../key\"");
}

TEST_CASE("..data pointing anywhere but a ..TIMESTAMP directory beside it is refused") {
  ScratchDir outside;
  ::mkdir((outside / "..x").c_str(), 0755);
  write_file(outside / "..x/key", "secret of outside\n");
  REQUIRE(::chmod((outside / "..x/key").c_str(), 0600) == 0);
  for (std::string target : {outside / "..x", std::string("../") + "..x", std::string("stamp")}) {
    ScratchDir dir;
    REQUIRE(::symlink(target.c_str(), (dir / "..data").c_str()) == 0);
    REQUIRE(::symlink("..data/key", (dir / "key").c_str()) == 0);
    refused_with(read_private_file(dir / "key", "the key file", kMax),
                 "not a ..TIMESTAMP directory beside it");
  }
}

TEST_CASE("loops of links are refused, not followed") {
  ScratchDir dir;
  // ..data -> ..data
  REQUIRE(::symlink("..data", (dir / "..data").c_str()) == 0);
  REQUIRE(::symlink("..data/key", (dir / "key").c_str()) == 0);
  refused_with(read_private_file(dir / "key", "the key file", kMax), "not a ..TIMESTAMP directory");
  // ..data -> ..a, ..a a link back to ..data
  ScratchDir other;
  REQUIRE(::symlink("..a", (other / "..data").c_str()) == 0);
  REQUIRE(::symlink("..data", (other / "..a").c_str()) == 0);
  REQUIRE(::symlink("..data/key", (other / "key").c_str()) == 0);
  refused_with(read_private_file(other / "key", "the key file", kMax),
               "goes through \"..a\", which is not a directory");
  // The key's own file a link (back to the key's name)
  ScratchDir third;
  ::mkdir((third / kStamp).c_str(), 0755);
  REQUIRE(::symlink("../key", (third / kStamp + std::string("/key")).c_str()) == 0);
  REQUIRE(::symlink(kStamp, (third / "..data").c_str()) == 0);
  REQUIRE(::symlink("..data/key", (third / "key").c_str()) == 0);
  refused_with(read_private_file(third / "key", "the key file", kMax), "another link");
}

TEST_CASE("a key's link to another key, or a link named like kubelet's own, is refused") {
  ScratchDir dir;
  kubelet_layout(dir, "ca.key");
  REQUIRE(::symlink("..data/ca.key", (dir / "controller.key").c_str()) == 0);
  refused_with(read_private_file(dir / "controller.key", "the key file", kMax),
               "not \"..data/controller.key\"");
  refused_with(read_private_file(dir / "..data", "the key file", kMax), "is not a key's name");
}

TEST_CASE("a Secret layout leading to another user's file is refused") {
  if (!rosetctl::testing::have_root("(chown to another user)")) return;
  ScratchDir dir;
  kubelet_layout(dir, "key", 0600);
  REQUIRE(::chown((dir / kStamp + std::string("/key")).c_str(), 4321, 4321) == 0);
  refused_with(read_private_file(dir / "key", "the key file", kMax),
               "the file owned by user 4321 (neither root nor this process's user");
  // Links made by another user than the one owning the file (root here):
  ScratchDir mixed;
  kubelet_layout(mixed, "key", 0600);
  REQUIRE(::lchown((mixed / "..data").c_str(), 4321, 4321) == 0);
  refused_with(read_private_file(mixed / "key", "the key file", kMax), "..data owned by user 4321");
}
