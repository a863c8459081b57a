// Random hex strings via RAND_bytes.
#include "core/random_id.h"

#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace rosetctl {

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  if (RAND_bytes(buffer.data(), static_cast<int>(buffer.size())) != 1) {
    std::fputs("rosetctl: fatal: OpenSSL RAND_bytes failed\n", stderr);
    std::abort();
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
