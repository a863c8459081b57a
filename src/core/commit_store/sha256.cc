// SHA-256 via OpenSSL's EVP interface (it picks the SHA-NI/AVX2 code paths at run time).
// libcrypto is loaded with dlopen at the first hash rather than with the program: linked, its
// relocation and initialisation cost every rosetctl run about 100 page faults and kept 3 MiB
// resident in a `serve` that never hashed (bench/README.md).
#include "core/commit_store/sha256.h"

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "core/shared_library.h"

namespace rosetctl {
namespace {

// The soname Debian's libssl3 provides, the one the headers describe.
constexpr const char* kLibcrypto = "libcrypto.so.3";

[[noreturn]] void openssl_failed(const char* what) {
  // Only allocation failure makes these fail; a wrong digest would be worse than stopping.
  std::fprintf(stderr, "rosetctl: fatal: OpenSSL %s failed\n", what);
  std::abort();
}

struct Crypto {
  decltype(&::EVP_MD_CTX_new) md_ctx_new;
  decltype(&::EVP_MD_CTX_free) md_ctx_free;
  decltype(&::EVP_DigestInit_ex) digest_init;
  decltype(&::EVP_DigestUpdate) digest_update;
  decltype(&::EVP_DigestFinal_ex) digest_final;
  decltype(&::EVP_sha256) sha256;
};

[[noreturn]] void cannot_load(const std::string& why) {
  std::fprintf(stderr, "rosetctl: fatal: %s\n", why.c_str());
  std::abort();
}

std::atomic<bool> crypto_loaded{false};  // set once crypto() has succeeded

// Loaded once per process. Without it no content address can be computed, so its absence is
// fatal, with the package to install.
const Crypto& crypto() {
  static Crypto loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    auto library = open_shared_library(kLibcrypto, "to hash snapshot data", "libssl3");
    if (!library) cannot_load(library.status().message());
    bool complete = bind_symbol(*library, "EVP_MD_CTX_new", &loaded.md_ctx_new) &&
                    bind_symbol(*library, "EVP_MD_CTX_free", &loaded.md_ctx_free) &&
                    bind_symbol(*library, "EVP_DigestInit_ex", &loaded.digest_init) &&
                    bind_symbol(*library, "EVP_DigestUpdate", &loaded.digest_update) &&
                    bind_symbol(*library, "EVP_DigestFinal_ex", &loaded.digest_final) &&
                    bind_symbol(*library, "EVP_sha256", &loaded.sha256);
    if (!complete)
      cannot_load(fmt::format("{} lacks a function rosetctl needs; it is too old", kLibcrypto));
    crypto_loaded = true;
  });
  return loaded;
}

}  // namespace

struct Sha256::Context {
  EVP_MD_CTX* ctx = nullptr;
  ~Context() { crypto().md_ctx_free(ctx); }
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  const Crypto& api = crypto();
  context_->ctx = api.md_ctx_new();
  if (context_->ctx == nullptr || api.digest_init(context_->ctx, api.sha256(), nullptr) != 1) {
    openssl_failed("EVP_DigestInit_ex");
  }
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, std::size_t size) {
  if (crypto().digest_update(context_->ctx, data, size) != 1) openssl_failed("EVP_DigestUpdate");
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
  if (crypto().digest_final(context_->ctx, digest, &length) != 1) {
    openssl_failed("EVP_DigestFinal_ex");
  }
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

std::jthread load_sha256_in_background() {
  static std::atomic<bool> requested{false};
  if (crypto_loaded || requested.exchange(true)) return {};
  // A first digest also initialises OpenSSL's default provider, the other half of the cost.
  return std::jthread([] { (void)sha256_hex(""); });
}

bool is_digest_hex(std::string_view text) {
  return text.size() == kDigestHexLength && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace rosetctl
