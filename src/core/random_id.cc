// Random hex strings from the kernel's CSPRNG (getrandom): ids need no more, and serve then
// loads libcrypto only when it first hashes (core/commit_store/sha256.cc).
#include "core/random_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace rosetctl {

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  std::size_t filled = 0;
  while (filled < buffer.size()) {
    ssize_t got = ::getrandom(buffer.data() + filled, buffer.size() - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      // Only a kernel without getrandom (before 3.17) fails here; a guessable id is worse.
      std::fputs("rosetctl: fatal: getrandom failed\n", stderr);
      std::abort();
    }
    filled += static_cast<std::size_t>(got);
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char b : buffer) {
    out += kDigits[b >> 4];
    out += kDigits[b & 0xf];
  }
  return out;
}

}  // namespace rosetctl
