// SHA-256 via OpenSSL's EVP interface (it picks the SHA-NI/AVX2 code paths at run time).
// libcrypto is loaded with dlopen at the first hash rather than with the program: linked, its
// relocation and initialisation cost every rosetctl run about 100 page faults and kept 3 MiB
// resident in a `serve` that never hashed (bench/README.md).
#include "core/commit_store/sha256.h"

#include <dlfcn.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace rosetctl {
namespace {

// The soname Debian's libssl3 provides, the one the headers describe.
constexpr const char* kSoname = "libcrypto.so.3";

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

template <typename Function>
void bind(void* library, const char* symbol, Function* slot) {
  *slot = reinterpret_cast<Function>(::dlsym(library, symbol));
  if (*slot == nullptr) {
    std::fprintf(stderr, "rosetctl: fatal: %s lacks %s; it is too old\n", kSoname, symbol);
    std::abort();
  }
}

// Loaded once per process, never closed. Without it no content address can be computed, so
// its absence is fatal, with the package to install.
const Crypto& crypto() {
  static Crypto loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    void* library = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = ::dlerror();
      std::fprintf(stderr, "rosetctl: fatal: cannot load %s (%s); install the libssl3 package\n",
                   kSoname, why != nullptr ? why : "unknown error");
      std::abort();
    }
    bind(library, "EVP_MD_CTX_new", &loaded.md_ctx_new);
    bind(library, "EVP_MD_CTX_free", &loaded.md_ctx_free);
    bind(library, "EVP_DigestInit_ex", &loaded.digest_init);
    bind(library, "EVP_DigestUpdate", &loaded.digest_update);
    bind(library, "EVP_DigestFinal_ex", &loaded.digest_final);
    bind(library, "EVP_sha256", &loaded.sha256);
  });
  return loaded;
}

}  // namespace

struct Sha256::Context {
  EVP_MD_CTX* ctx = nullptr;
  ~Context() { crypto().md_ctx_free(ctx); }
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  const Crypto& c = crypto();
  context_->ctx = c.md_ctx_new();
  if (context_->ctx == nullptr || c.digest_init(context_->ctx, c.sha256(), nullptr) != 1) {
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

bool is_digest_hex(std::string_view text) {
  return text.size() == kDigestHexLength && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace rosetctl
