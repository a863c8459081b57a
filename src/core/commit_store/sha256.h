// SHA-256 through OpenSSL: the content address of every object in the commit store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

namespace rosetctl {

inline constexpr std::size_t kDigestHexLength = 64;

// Incremental hashing; finish() returns lowercase hex.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  void update(const void* data, std::size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  // Hashes `count` zero bytes (the holes of a sparse file) without materialising them.
  void update_zeros(uint64_t count);
  std::string finish_hex();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

std::string sha256_hex(std::string_view data);

// Loads OpenSSL (about 6 ms of page faults and provider set-up here) on a new thread, unless a
// hash was taken or the load requested already, so that a later first hash need not wait for
// it. The returned thread (maybe empty) joins when destroyed.
std::jthread load_sha256_in_background();

// 64 lowercase hex digits: the shape of every object name and commit id.
bool is_digest_hex(std::string_view text);

}  // namespace rosetctl
