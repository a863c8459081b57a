// Tests for src/core/x509/certificate_directory.cc: modes of the files, no overwriting unless
// asked, nothing written through links, nothing half-written left behind.
#include "core/x509/certificate_directory.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "unit/scratch_dir.h"

using rosetctl::CertificateAndKey;
using rosetctl::CertificateDirectory;
using rosetctl::Code;
using rosetctl::Overwrite;
using rosetctl::SecretText;
using rosetctl::Status;

namespace {

struct ScratchTlsDir : rosetctl::testing::ScratchDir {
  ScratchTlsDir() : ScratchDir("tls") {}
};

// Sets the umask for one scope.
struct UmaskScope {
  mode_t previous;
  explicit UmaskScope(mode_t mask) : previous(::umask(mask)) {}
  ~UmaskScope() { ::umask(previous); }
};

mode_t mode_of(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::string content_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> entries_of(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

CertificateAndKey pair_of(const std::string& certificate, const std::string& key) {
  return {certificate, SecretText(key)};
}

CertificateDirectory open_dir(const std::string& path) {
  auto dir = CertificateDirectory::open(path, /*create=*/true);
  INFO(dir.status().message());
  REQUIRE(dir.has_value());
  return std::move(*dir);
}

}  // namespace

TEST_CASE("keys are written 0600 and certificates 0644 whatever the umask", "[x509]") {
  ScratchTlsDir scratch;
  for (mode_t mask : {mode_t{0}, mode_t{022}, mode_t{077}}) {
    UmaskScope umask(mask);
    std::string sub = scratch.path + "/m" + std::to_string(mask);
    CertificateDirectory dir = open_dir(sub);
    CHECK(mode_of(sub) == 0700);
    REQUIRE(dir.write_pair("node-a", pair_of("CERT", "KEY"), Overwrite::kRefuse).is_ok());
    CHECK(mode_of(sub + "/node-a.key") == 0600);
    CHECK(mode_of(sub + "/node-a.crt") == 0644);
    CHECK(content_of(sub + "/node-a.key") == "KEY");
    CHECK(content_of(sub + "/node-a.crt") == "CERT");
    CHECK(entries_of(sub) == std::set<std::string>{"node-a.crt", "node-a.key"});
  }
}

TEST_CASE("an existing certificate or key is not replaced unless asked", "[x509]") {
  ScratchTlsDir scratch;
  CertificateDirectory dir = open_dir(scratch.path);
  REQUIRE(dir.write_pair("n", pair_of("OLD CERT", "OLD KEY"), Overwrite::kRefuse).is_ok());

  Status refused = dir.write_pair("n", pair_of("NEW CERT", "NEW KEY"), Overwrite::kRefuse);
  CHECK(refused.code() == Code::kAlreadyExists);
  CHECK_THAT(refused.message(), Catch::Contains(scratch.path + "/n.crt"));
  CHECK(content_of(scratch.path + "/n.crt") == "OLD CERT");
  CHECK(content_of(scratch.path + "/n.key") == "OLD KEY");

  // A key alone is enough to refuse (a pair half-made by hand, or a crash).
  REQUIRE(::unlink((scratch.path + "/n.crt").c_str()) == 0);
  CHECK(dir.write_pair("n", pair_of("NEW CERT", "NEW KEY"), Overwrite::kRefuse).code() ==
        Code::kAlreadyExists);
  CHECK(content_of(scratch.path + "/n.key") == "OLD KEY");
  CHECK(entries_of(scratch.path) == std::set<std::string>{"n.key"});

  REQUIRE(dir.write_pair("n", pair_of("NEW CERT", "NEW KEY"), Overwrite::kReplace).is_ok());
  CHECK(content_of(scratch.path + "/n.crt") == "NEW CERT");
  CHECK(content_of(scratch.path + "/n.key") == "NEW KEY");
  CHECK(mode_of(scratch.path + "/n.key") == 0600);
  CHECK(entries_of(scratch.path) == std::set<std::string>{"n.crt", "n.key"});
}

TEST_CASE("a link planted where a key goes is replaced, never written through", "[x509]") {
  ScratchTlsDir scratch;
  CertificateDirectory dir = open_dir(scratch.path + "/tls");
  std::string victim = scratch.path + "/victim";
  std::ofstream(victim) << "precious";
  REQUIRE(::chmod(victim.c_str(), 0644) == 0);
  REQUIRE(::symlink(victim.c_str(), (scratch.path + "/tls/n.key").c_str()) == 0);

  CHECK(dir.presence("n")->key);
  CHECK(dir.write_pair("n", pair_of("C", "K"), Overwrite::kRefuse).code() == Code::kAlreadyExists);
  REQUIRE(dir.write_pair("n", pair_of("C", "K"), Overwrite::kReplace).is_ok());
  CHECK(content_of(victim) == "precious");
  CHECK(mode_of(victim) == 0644);
  struct stat st;
  REQUIRE(::lstat((scratch.path + "/tls/n.key").c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK(content_of(scratch.path + "/tls/n.key") == "K");
}

TEST_CASE("the directory is made 0700 and refused when others may write to it", "[x509]") {
  ScratchTlsDir scratch;
  std::string path = scratch.path + "/a/b/tls";
  CHECK(CertificateDirectory::open(path, /*create=*/false).status().code() == Code::kNotFound);
  CHECK_FALSE(std::filesystem::exists(path));
  UmaskScope umask(022);
  CertificateDirectory dir = open_dir(path);
  CHECK(mode_of(path) == 0700);
  CHECK(dir.path() == path);

  REQUIRE(::chmod(path.c_str(), 0770) == 0);
  auto shared = CertificateDirectory::open(path, /*create=*/false);
  CHECK(shared.status().code() == Code::kFailedPrecondition);
  CHECK_THAT(shared.status().message(), Catch::Contains("0770"));
  REQUIRE(::chmod(path.c_str(), 0755) == 0);
  CHECK(CertificateDirectory::open(path, /*create=*/false).has_value());
}

TEST_CASE("a key others can read is refused, and its content is never in the message", "[x509]") {
  ScratchTlsDir scratch;
  CertificateDirectory dir = open_dir(scratch.path);
  REQUIRE(dir.write_pair("ca", pair_of("CERT", "SECRET-KEY-TEXT"), Overwrite::kRefuse).is_ok());
  auto key = dir.read_key("ca");
  REQUIRE(key.has_value());
  CHECK(key->view() == "SECRET-KEY-TEXT");
  REQUIRE(::chmod((scratch.path + "/ca.key").c_str(), 0640) == 0);
  auto refused = dir.read_key("ca");
  CHECK(refused.status().code() == Code::kPermissionDenied);
  CHECK(refused.status().message().find("SECRET") == std::string::npos);
  CHECK(*dir.read_certificate("ca") == "CERT");
}

TEST_CASE("a pair set aside never replaces another", "[x509]") {
  ScratchTlsDir scratch;
  CertificateDirectory dir = open_dir(scratch.path);
  REQUIRE(dir.write_pair("ca", pair_of("CA1", "K1"), Overwrite::kRefuse).is_ok());
  REQUIRE(dir.write_pair("old", pair_of("CA0", "K0"), Overwrite::kRefuse).is_ok());
  REQUIRE(::unlink((scratch.path + "/old.crt").c_str()) == 0);  // old.key alone still blocks
  CHECK(dir.rename_pair("ca", "old").code() == Code::kAlreadyExists);
  CHECK(entries_of(scratch.path) == std::set<std::string>{"ca.crt", "ca.key", "old.key"});

  REQUIRE(dir.rename_pair("ca", "kept").is_ok());
  CHECK(entries_of(scratch.path) == std::set<std::string>{"kept.crt", "kept.key", "old.key"});
  CHECK(content_of(scratch.path + "/kept.key") == "K1");
  CHECK(mode_of(scratch.path + "/kept.key") == 0600);
}
