// providers/roset/api_json: Roset API response bodies, each read as every kind of answer the
// provider expects. A body of another shape fails with a Status, never an exception.
#include "fuzz_check.h"
#include "providers/roset/api_json.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  using namespace rosetctl;
  const std::string_view text = fuzz::as_text(data, size);
  (void)parse_timestamp_ns(text);
  auto body = parse_json_body(text, "fuzzed body");
  if (!body) return 0;
  (void)parse_node(*body, "node");
  (void)parse_commit(*body, "commit");
  (void)parse_resolved(*body, "/a/b", "resolve");
  (void)parse_page(*body, "page");
  return 0;
}
