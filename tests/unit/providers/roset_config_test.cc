// Which endpoint and key a roset call uses (providers/roset/roset_config.cc).
#include "providers/roset/roset_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

using namespace rosetctl;

namespace {

std::string key_file(const std::string& content, mode_t mode) {
  char path[] = "/tmp/roset-key-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  ::close(fd);
  REQUIRE(::chmod(path, mode) == 0);
  return path;
}

}  // namespace

TEST_CASE("API URLs are normalised and checked", "[roset]") {
  CHECK(*normalize_api_url("https://api.roset.dev/", "x") == "https://api.roset.dev");
  CHECK(*normalize_api_url(" http://10.0.0.1:8080/prefix ", "x") == "http://10.0.0.1:8080/prefix");
  CHECK(normalize_api_url("ftp://x", "--roset-api-url").status().code() == Code::kInvalidArgument);
  CHECK(normalize_api_url("https://user:pw@x", "x").status().message().find("credentials") !=
        std::string::npos);
  CHECK_FALSE(normalize_api_url("https://x/?a=b", "x"));
  CHECK_FALSE(normalize_api_url("https://", "x"));
}

TEST_CASE("secrets beat the key file, which beats ROSET_API_KEY", "[roset]") {
  std::string file = key_file("from-file\n", 0600);
  RosetConfig config;
  config.api_key = "from-env";
  config.api_key_file = file;
  config.api_url = "http://config";
  config.mount_id = "m-config";

  auto from_secret = resolve_endpoint(config, {{"api-key", "from-secret"}}, "", "");
  REQUIRE(from_secret);
  CHECK(from_secret->api_key == "from-secret");
  CHECK(from_secret->api_url == "http://config");
  CHECK(from_secret->mount_id == "m-config");
  CHECK(resolve_endpoint(config, {{"apiKey", "camel"}}, "", "")->api_key == "camel");
  CHECK(resolve_endpoint(config, {}, "", "")->api_key == "from-file");
  config.api_key_file.clear();
  CHECK(resolve_endpoint(config, {}, "", "")->api_key == "from-env");
  ::unlink(file.c_str());
}

TEST_CASE("the URL comes from the secret, then the volume, then the config", "[roset]") {
  RosetConfig config;
  config.api_key = "k";
  CHECK(resolve_endpoint(config, {}, "", "")->api_url == "https://api.roset.dev");
  config.api_url = "http://config";
  CHECK(resolve_endpoint(config, {}, "http://volume/", "m")->api_url == "http://volume");
  CHECK(resolve_endpoint(config, {}, "http://volume/", "m")->mount_id == "m");
  CHECK(resolve_endpoint(config, {{"api-url", "https://secret"}}, "http://volume", "")->api_url ==
        "https://secret");
}

TEST_CASE("no key anywhere is UNAUTHENTICATED naming where to put one", "[roset]") {
  auto missing = resolve_endpoint(RosetConfig{}, {}, "", "");
  REQUIRE_FALSE(missing);
  CHECK(missing.status().code() == Code::kUnauthenticated);
  CHECK(missing.status().message().find("ROSET_API_KEY") != std::string::npos);
}

TEST_CASE("a key file others can read is refused; an empty one too", "[roset]") {
  std::string open_file = key_file("secret\n", 0644);
  auto refused = read_api_key_file(open_file);
  REQUIRE_FALSE(refused);
  CHECK(refused.status().code() == Code::kPermissionDenied);
  CHECK(refused.status().message().find("secret") == std::string::npos);
  ::unlink(open_file.c_str());
  std::string empty = key_file("\n", 0600);
  CHECK(read_api_key_file(empty).status().code() == Code::kUnauthenticated);
  ::unlink(empty.c_str());
  CHECK(read_api_key_file("/nonexistent/key").status().code() == Code::kNotFound);
}
