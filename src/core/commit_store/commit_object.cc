// The commit text format, version 1: "key value" lines in a fixed order, values escaped.
#include "core/commit_store/commit_object.h"

#include <charconv>
#include <vector>

#include "core/commit_store/field_escape.h"
#include "core/commit_store/sha256.h"

namespace rosetctl {
namespace {

constexpr std::string_view kCommitHeader = "rosetctl-commit 1";

bool parse_int64(std::string_view text, int64_t* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

// Splits "key value\n" lines; false when a line lacks its space or newline.
bool split_lines(std::string_view text,
                 std::vector<std::pair<std::string_view, std::string_view>>* out) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) return false;
    std::string_view line = text.substr(start, end - start);
    std::size_t space = line.find(' ');
    if (space == std::string_view::npos) return false;
    out->emplace_back(line.substr(0, space), line.substr(space + 1));
    start = end + 1;
  }
  return true;
}

Status malformed(std::string_view why) {
  return error(Code::kDataLoss, "commit object is malformed: {}", why);
}

}  // namespace

std::string serialize_commit(const CommitObject& commit) {
  std::string out = fmt::format("{}\ntree {}\n", kCommitHeader, commit.tree);
  if (!commit.parent.empty()) out += fmt::format("parent {}\n", commit.parent);
  if (!commit.image.empty()) out += fmt::format("image {}\n", escape_field(commit.image));
  out += fmt::format("volume {}\nvolume-name {}\ntime {}\nfiles {}\nbytes {}\nmessage {}\n",
                     escape_field(commit.volume_id), escape_field(commit.volume_name),
                     commit.time_ns, commit.files, commit.bytes, escape_field(commit.message));
  return out;
}

Expected<CommitObject> parse_commit(std::string_view text) {
  if (!text.starts_with(kCommitHeader) || text.size() <= kCommitHeader.size() ||
      text[kCommitHeader.size()] != '\n') {
    return malformed("the header line is missing");
  }
  std::vector<std::pair<std::string_view, std::string_view>> lines;
  if (!split_lines(text.substr(kCommitHeader.size() + 1), &lines))
    return malformed("a line is cut");
  std::size_t i = 0;
  auto take = [&](std::string_view key) -> std::optional<std::string_view> {
    if (i >= lines.size() || lines[i].first != key) return std::nullopt;
    return lines[i++].second;
  };
  CommitObject commit;
  auto tree = take("tree");
  if (!tree || !is_digest_hex(*tree)) return malformed("bad tree line");
  commit.tree = std::string(*tree);
  if (auto parent = take("parent")) {
    if (!is_digest_hex(*parent)) return malformed("bad parent line");
    commit.parent = std::string(*parent);
  }
  if (auto image = take("image")) {
    auto kind = unescape_field(*image);
    if (!kind || kind->empty()) return malformed("bad image line");
    commit.image = std::move(*kind);
  }
  auto text_field = [&](std::string_view key, std::string* out) {
    auto value = take(key);
    auto unescaped = value ? unescape_field(*value) : std::nullopt;
    if (unescaped) *out = std::move(*unescaped);
    return unescaped.has_value();
  };
  auto int_field = [&](std::string_view key, int64_t* out) {
    auto value = take(key);
    return value && parse_int64(*value, out);
  };
  if (!text_field("volume", &commit.volume_id) || !text_field("volume-name", &commit.volume_name) ||
      !int_field("time", &commit.time_ns) || !int_field("files", &commit.files) ||
      !int_field("bytes", &commit.bytes) || !text_field("message", &commit.message) ||
      i != lines.size()) {
    return malformed("fields are missing, out of order or unreadable");
  }
  return commit;
}

}  // namespace rosetctl
