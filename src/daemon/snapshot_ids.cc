#include "daemon/snapshot_ids.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/commit_store/sha256.h"
#include "core/random_id.h"

namespace rosetctl {
namespace {

constexpr std::string_view kPrefix = "snap-";
constexpr std::size_t kHexDigits = 24;

bool is_lower_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

std::string new_snapshot_id(int64_t created_at_ns) {
  return fmt::format("{}{:016x}{}", kPrefix, static_cast<uint64_t>(created_at_ns), random_hex(4));
}

bool is_snapshot_id(std::string_view text) {
  if (is_digest_hex(text)) return true;
  return text.size() == kPrefix.size() + kHexDigits && text.starts_with(kPrefix) &&
         is_lower_hex(text.substr(kPrefix.size()));
}

}  // namespace rosetctl
