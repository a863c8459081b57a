// The replica schedule (replica_schedule.h).
#include "cluster/replica_schedule.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

namespace rosetctl::replica {

Status check_every(int64_t seconds, std::string_view what) {
  if (seconds < kMinEverySeconds || seconds > kMaxEverySeconds) {
    return error(Code::kInvalidArgument, "{} {} is out of range: {} to {} (7 days)", what,
                 every_text(seconds), every_text(kMinEverySeconds), every_text(kMaxEverySeconds));
  }
  return Status::ok();
}

Expected<int64_t> parse_every(std::string_view text, std::string_view what) {
  auto refuse = [&] {
    return error(Code::kInvalidArgument,
                 "{} \"{}\" is no interval: a whole number with s, m, h or d (\"90s\", \"10m\", "
                 "\"1h\"), or of seconds",
                 what, text.substr(0, 32));
  };
  if (text.empty() || text.size() > 16) return refuse();
  // A bare number is seconds; otherwise its last letter says the unit.
  constexpr std::pair<char, int64_t> kUnits[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
  int64_t unit = 1;
  std::string_view digits = text;
  for (auto [suffix, seconds] : kUnits) {
    if (text.back() == suffix) {
      unit = seconds;
      digits.remove_suffix(1);
    }
  }
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return refuse();
  }
  int64_t count = 0;
  auto [end, failed] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
  if (failed != std::errc() || end != digits.data() + digits.size() ||
      count > std::numeric_limits<int64_t>::max() / unit) {
    return refuse();
  }
  ROSETCTL_RETURN_IF_ERROR(check_every(count * unit, what));
  return count * unit;
}

std::string every_text(int64_t seconds) {
  if (seconds > 0 && seconds % 86400 == 0) return fmt::format("{}d", seconds / 86400);
  if (seconds > 0 && seconds % 3600 == 0) return fmt::format("{}h", seconds / 3600);
  if (seconds > 0 && seconds % 60 == 0) return fmt::format("{}m", seconds / 60);
  return fmt::format("{}s", seconds);
}

std::vector<std::string> due_replicas(const std::vector<VolumeReplicaRecord>& replicas,
                                      int64_t now) {
  std::vector<const VolumeReplicaRecord*> due;
  for (const VolumeReplicaRecord& replica : replicas)
    if (replica.next_due_unix <= now) due.push_back(&replica);
  std::sort(due.begin(), due.end(), [](const auto* a, const auto* b) {
    if (a->next_due_unix != b->next_due_unix) return a->next_due_unix < b->next_due_unix;
    return a->volume_id < b->volume_id;
  });
  std::vector<std::string> ids;
  for (const VolumeReplicaRecord* replica : due)
    ids.push_back(replica->volume_id);
  return ids;
}

int64_t next_due_after(int64_t started, int64_t every_seconds) {
  return started + std::max<int64_t>(every_seconds, kMinEverySeconds);
}

}  // namespace rosetctl::replica
