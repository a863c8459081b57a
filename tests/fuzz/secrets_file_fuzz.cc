// cli/secrets_file: the JSON file of CSI secrets. Any content is read into a map of strings or
// refused with INVALID_ARGUMENT; no exception escapes.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "cli/secrets_file.h"
#include "fuzz_check.h"

namespace {

const std::string& secrets_path() {
  static const std::string path =
      "/tmp/rosetctl-fuzz-secrets-" + std::to_string(::getpid()) + ".json";
  // Removed when the fuzzer exits (a crash leaves it, beside the input that caused it).
  static const int removed_at_exit = std::atexit([] { ::unlink(path.c_str()); });
  (void)removed_at_exit;
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  const std::string_view text = rosetctl::fuzz::as_text(data, size);
  const int fd = ::open(secrets_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0, "the scratch secrets file can be written");
  FUZZ_CHECK(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()),
             "the scratch secrets file takes the input");
  ::close(fd);
  auto secrets = rosetctl::cli::read_secrets_file(secrets_path());
  if (secrets) return 0;
  FUZZ_CHECK(secrets.status().code() == rosetctl::Code::kInvalidArgument,
             "a bad secrets file is refused as bad input");
  return 0;
}
