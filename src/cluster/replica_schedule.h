// When a volume's replica is due (`volume replicate --every`), and the interval's text: the
// schedule alone, without the store or the network, so it can be tested on its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/state_store.h"
#include "core/status.h"

namespace rosetctl::replica {

// The shortest interval: a round takes a snapshot and a pull; shorter ones only make sense in
// tests, and a round never overlaps the next (the loop runs one at a time).
inline constexpr int64_t kMinEverySeconds = 2;
inline constexpr int64_t kMaxEverySeconds = 7 * 24 * 3600;

// "90s", "10m", "1h", "2d" or plain seconds ("600"); INVALID_ARGUMENT naming `what` otherwise,
// or outside kMinEverySeconds..kMaxEverySeconds.
Expected<int64_t> parse_every(std::string_view text, std::string_view what = "--every");
// INVALID_ARGUMENT when `seconds` is outside the range.
Status check_every(int64_t seconds, std::string_view what = "--every");
// The shortest text that parse_every reads back: "10m", "90s", "1h".
std::string every_text(int64_t seconds);

// The volume ids due at `now`, the longest overdue first (ties by id).
std::vector<std::string> due_replicas(const std::vector<VolumeReplicaRecord>& replicas,
                                      int64_t now);
// When a round that started at `started` makes the replica due again: one interval after its
// start, so a slow round does not push the schedule back (a round over the interval is followed
// at once by the next).
int64_t next_due_after(int64_t started, int64_t every_seconds);

}  // namespace rosetctl::replica
