// providers/iscsi/tgt_show: what `tgtadm --op show` prints, read by all three parsers. Text of
// another shape fails with a Status, never a crash or a misread.
#include "fuzz_check.h"
#include "providers/iscsi/tgt_show.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  const std::string_view text = rosetctl::fuzz::as_text(data, size);
  (void)rosetctl::parse_tgt_targets(text);
  (void)rosetctl::parse_tgt_accounts(text);
  (void)rosetctl::parse_tgt_system_state(text);
  return 0;
}
