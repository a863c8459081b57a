// core/mountinfo: /proc/self/mountinfo lines. Malformed text fails with a Status; a parsed
// table answers its lookups for every mount point it holds.
#include "core/mountinfo.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  auto table = rosetctl::MountTable::parse(rosetctl::fuzz::as_text(data, size));
  if (!table) return 0;
  for (const auto& entry : table->entries()) {
    FUZZ_CHECK(table->find_by_target(entry.mount_point) != nullptr,
               "every mount point of the table is found");
    FUZZ_CHECK(table->count_at(entry.mount_point) >= 1, "every mount point counts");
    FUZZ_CHECK(!table->under(entry.mount_point).empty(), "a mount is under its own point");
    (void)entry.read_only();
  }
  return 0;
}
