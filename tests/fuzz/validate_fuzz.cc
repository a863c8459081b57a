// core/validate: names, ids, node ids and absolute paths from callers, and the escaping of
// outside text for messages. A normalised path is stable, absolute and free of "." and ".."
// components; escaped text is one line of printable ASCII.
#include <string>

#include "core/validate.h"
#include "fuzz_check.h"

namespace {

bool printable_ascii(std::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  using namespace rosetctl;
  const std::string_view text = fuzz::as_text(data, size);
  if (validate_name(text, "name").is_ok()) {
    FUZZ_CHECK(!text.empty() && text.size() <= kMaxNameBytes, "a valid name has 1..128 bytes");
    FUZZ_CHECK(text != "." && text != ".." && text.find('/') == std::string_view::npos,
               "a valid name is one path component");
  }
  (void)validate_node_id(text, "node_id");
  auto path = normalize_absolute_path(text, "path");
  if (path) {
    FUZZ_CHECK(!path->empty() && path->front() == '/', "a normalised path is absolute");
    FUZZ_CHECK(path->find("/../") == std::string::npos && path->find("/./") == std::string::npos,
               "a normalised path has no . or .. components");
    auto again = normalize_absolute_path(*path, "path");
    FUZZ_CHECK(again && *again == *path, "normalising is stable");
    FUZZ_CHECK(path_is_within(*path, "/"), "every absolute path is within /");
    FUZZ_CHECK(path_is_within(*path, *path), "a path is within itself");
  }
  FUZZ_CHECK(printable_ascii(escape_text(text)), "escaped text is printable ASCII");
  FUZZ_CHECK(printable_ascii(display_quoted(text)), "quoted text is printable ASCII");
  return 0;
}
