// Validation of everything a caller can hand us that later becomes a path component, a key
// or a mount point: volume names and ids, node ids, absolute paths, key=value parameters.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

// CSI leaves these lengths to the plugin; 128 bytes is what the spec recommends for names/ids.
inline constexpr std::size_t kMaxNameBytes = 128;
inline constexpr std::size_t kMaxNodeIdBytes = 192;

// A volume or snapshot name: 1..128 bytes of [A-Za-z0-9._-], starting with a letter or digit.
// That rules out "", ".", "..", separators, whitespace and control characters by construction.
// `what` names the field in the error ("name", "volume_id", ...).
Status validate_name(std::string_view value, std::string_view what);

// Ids share the rules of names (they also become path components and lock keys).
inline Status validate_id(std::string_view value, std::string_view what) {
  return validate_name(value, what);
}

// Node ids: like names but up to 192 bytes (hostnames, FQDNs).
Status validate_node_id(std::string_view value, std::string_view what);

// An absolute path with no "." or ".." components and no control characters (they would
// corrupt mount tables and log lines); returns it normalised
// (duplicate and trailing slashes removed) so it compares equal to mountinfo entries.
Expected<std::string> normalize_absolute_path(std::string_view path, std::string_view what);

// The one rule for showing text that came from outside (a caller's field, a server's answer, a
// file, a helper program's output) in a message or a log line: printable ASCII is kept, `"` and
// `\` become `\"` and `\\`, and every other byte (newline, escape sequences, non-ASCII) becomes
// \xNN. So the text stays on one line, cannot close a quote it sits in, and reads back exactly.
// Names, ids and normalised paths may be shown without it: their rules above already exclude
// control characters.
std::string escape_text(std::string_view text);

// escape_text() of `value` in double quotes, at most `max_bytes` of it shown (then "..."): how a
// message quotes what a caller sent.
std::string display_quoted(std::string_view value, std::size_t max_bytes = 64);

// True when `path` is `dir` itself or lies below it (component-aware: /a/bc is not under /a/b).
bool path_is_within(std::string_view path, std::string_view dir);

}  // namespace rosetctl
