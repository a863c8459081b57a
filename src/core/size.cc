// Exact integer arithmetic for sizes: no floating point, so "1.5Ti" is exactly 1.5 * 2^40.
#include "core/size.h"

#include <array>
#include <limits>

namespace rosetctl {
namespace {

struct Unit {
  std::string_view suffix;
  int64_t multiplier;
};

constexpr int64_t kKi = 1024;
constexpr std::array<Unit, 13> kUnits = {{
    {"Ki", kKi},
    {"Mi", kKi* kKi},
    {"Gi", kKi* kKi* kKi},
    {"Ti", kKi* kKi* kKi* kKi},
    {"Pi", kKi* kKi* kKi* kKi* kKi},
    {"Ei", kKi* kKi* kKi* kKi* kKi* kKi},
    {"k", 1000},
    {"K", 1000},
    {"M", 1000'000},
    {"G", 1000'000'000},
    {"T", 1000'000'000'000},
    {"P", 1000'000'000'000'000},
    {"E", 1000'000'000'000'000'000},
}};

Status bad_size(std::string_view text) {
  return error(Code::kInvalidArgument,
               "size \"{}\" is not a size; write bytes (4096) or a number with a suffix "
               "(64Mi, 10Gi, 1.5Ti, 500M)",
               text.substr(0, 64));
}

}  // namespace

Expected<int64_t> parse_size(std::string_view text) {
  std::string_view digits = text;
  int64_t multiplier = 1;
  for (const Unit& unit : kUnits) {
    if (digits.size() > unit.suffix.size() && digits.ends_with(unit.suffix)) {
      multiplier = unit.multiplier;
      digits.remove_suffix(unit.suffix.size());
      break;
    }
  }
  if (digits.empty()) return bad_size(text);
  if (digits.front() == '-') {
    return error(Code::kOutOfRange, "size \"{}\" is negative", text.substr(0, 64));
  }

  // value = whole + fraction / 10^fraction_digits, all in 128-bit integers.
  using Wide = unsigned __int128;
  Wide whole = 0, fraction = 0, fraction_scale = 1;
  bool seen_point = false, seen_digit = false;
  for (char c : digits) {
    if (c == '.' && !seen_point) {
      seen_point = true;
      continue;
    }
    if (c < '0' || c > '9') return bad_size(text);
    seen_digit = true;
    Wide& target = seen_point ? fraction : whole;
    target = target * 10 + static_cast<unsigned>(c - '0');
    if (seen_point) fraction_scale *= 10;
    if (whole > Wide(std::numeric_limits<int64_t>::max()) ||
        fraction_scale > Wide(1000000000000000000ULL)) {
      return error(Code::kOutOfRange, "size \"{}\" is too large", text.substr(0, 64));
    }
  }
  if (!seen_digit) return bad_size(text);
  if (seen_point && multiplier == 1 && fraction != 0) {
    return error(Code::kInvalidArgument, "size \"{}\" has a fraction of a byte",
                 text.substr(0, 64));
  }
  Wide bytes = whole * Wide(multiplier);
  bytes += (fraction * Wide(multiplier) + fraction_scale - 1) / fraction_scale;
  if (bytes > Wide(std::numeric_limits<int64_t>::max())) {
    return error(Code::kOutOfRange, "size \"{}\" is too large (the limit is 8Ei)",
                 text.substr(0, 64));
  }
  return static_cast<int64_t>(bytes);
}

std::string format_size(int64_t bytes) {
  if (bytes <= 0) return std::to_string(bytes);
  // The shortest exact form to two decimals, binary or decimal ("500M", never "488281.25Ki"),
  // binary when both are as short; plain bytes when no unit fits exactly.
  std::string best;
  // Largest units first within each family, so "1.25Gi" beats the equally long "1280Mi".
  constexpr std::array<int, 12> kOrder = {5, 4, 3, 2, 1, 0, 12, 11, 10, 9, 8, 6};  // not "K"
  for (int index : kOrder) {
    const Unit& unit = kUnits[index];
    if (bytes < unit.multiplier) continue;
    unsigned __int128 hundredths = static_cast<unsigned __int128>(bytes) * 100;
    if (hundredths % unit.multiplier != 0) continue;
    int64_t h = static_cast<int64_t>(hundredths / unit.multiplier);
    std::string text;
    if (h % 100 == 0) {
      text = fmt::format("{}{}", h / 100, unit.suffix);
    } else if (h % 10 == 0) {
      text = fmt::format("{}.{}{}", h / 100, (h % 100) / 10, unit.suffix);
    } else {
      text = fmt::format("{}.{:02}{}", h / 100, h % 100, unit.suffix);
    }
    if (best.empty() || text.size() < best.size()) best = std::move(text);
  }
  return best.empty() ? std::to_string(bytes) : best;
}

}  // namespace rosetctl
