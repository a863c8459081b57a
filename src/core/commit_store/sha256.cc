// SHA-256 via OpenSSL's EVP interface (it picks the SHA-NI/AVX2 code paths at run time).
#include "core/commit_store/sha256.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace rosetctl {
namespace {

[[noreturn]] void openssl_failed(const char* what) {
  // Only allocation failure makes these fail; a wrong digest would be worse than stopping.
  std::fprintf(stderr, "rosetctl: fatal: OpenSSL %s failed\n", what);
  std::abort();
}

}  // namespace

struct Sha256::Context {
  EVP_MD_CTX* ctx = nullptr;
  ~Context() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  context_->ctx = EVP_MD_CTX_new();
  if (context_->ctx == nullptr || EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr) != 1) {
    openssl_failed("EVP_DigestInit_ex");
  }
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, std::size_t size) {
  if (EVP_DigestUpdate(context_->ctx, data, size) != 1) openssl_failed("EVP_DigestUpdate");
}

void Sha256::update_zeros(uint64_t count) {
  static const unsigned char kZeros[64 * 1024] = {};
  while (count > 0) {
    std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(count, sizeof(kZeros)));
    update(kZeros, chunk);
    count -= chunk;
  }
}

std::string Sha256::finish_hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_->ctx, digest, &length) != 1) openssl_failed("EVP_DigestFinal_ex");
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kDigits[digest[i] >> 4];
    hex += kDigits[digest[i] & 0xf];
  }
  return hex;
}

std::string sha256_hex(std::string_view data) {
  Sha256 hash;
  hash.update(data);
  return hash.finish_hex();
}

bool is_digest_hex(std::string_view text) {
  return text.size() == kDigestHexLength && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace rosetctl
