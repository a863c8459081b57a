// core/size: sizes as people write them. Any text parses or fails with a Status; a parsed size
// is never negative, and format_size() of it parses back to the same number of bytes.
#include "core/size.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  auto parsed = rosetctl::parse_size(rosetctl::fuzz::as_text(data, size));
  if (!parsed) return 0;
  FUZZ_CHECK(*parsed >= 0, "a parsed size is not negative");
  auto again = rosetctl::parse_size(rosetctl::format_size(*parsed));
  FUZZ_CHECK(again && *again == *parsed, "format_size() parses back to the same bytes");
  return 0;
}
