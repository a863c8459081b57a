// Percent-encoding for the fields of the store's text formats (tree manifests, commit objects,
// stat caches). File names, link targets and xattrs are arbitrary bytes (newlines and spaces
// included); encoded, every field is one space-free token and every record one line.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rosetctl {

// Printable ASCII other than '%', '=' and space is kept; every other byte becomes %XX.
std::string escape_field(std::string_view raw);

// The inverse; nullopt for a malformed escape ("%G1", a trailing "%").
std::optional<std::string> unescape_field(std::string_view encoded);

}  // namespace rosetctl
