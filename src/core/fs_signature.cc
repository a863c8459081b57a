// Signature probing through libblkid's low-level probe (superblocks and partition tables),
// the same code blkid(8) and wipefs(8) use.
#include "core/fs_signature.h"

#include <blkid/blkid.h>

#include <cerrno>
#include <memory>

namespace rosetctl {
namespace {

struct ProbeDeleter {
  void operator()(blkid_struct_probe* probe) const { blkid_free_probe(probe); }
};
using Probe = std::unique_ptr<blkid_struct_probe, ProbeDeleter>;

std::optional<std::string> lookup(blkid_probe probe, const char* name) {
  const char* value = nullptr;
  if (blkid_probe_lookup_value(probe, name, &value, nullptr) != 0 || value == nullptr) {
    return std::nullopt;
  }
  return std::string(value);
}

}  // namespace

Expected<std::optional<std::string>> probe_signature(const std::string& path) {
  errno = 0;
  Probe probe(blkid_new_probe_from_filename(path.c_str()));
  if (!probe) {
    return errno_status(errno != 0 ? errno : EIO,
                        fmt::format("cannot open \"{}\" to look for a filesystem", path));
  }
  blkid_probe_enable_superblocks(probe.get(), 1);
  blkid_probe_set_superblocks_flags(probe.get(), BLKID_SUBLKS_TYPE);
  blkid_probe_enable_partitions(probe.get(), 1);
  blkid_probe_set_partitions_flags(probe.get(), BLKID_PARTS_MAGIC);

  // Safe probing: several signatures that contradict each other are reported, not resolved.
  switch (blkid_do_safeprobe(probe.get())) {
    case 0:
      break;
    case 1:
      return std::optional<std::string>();
    case -2:
      return std::optional<std::string>("several conflicting signatures");
    default:
      return errno_status(errno != 0 ? errno : EIO,
                          fmt::format("cannot read \"{}\" to look for a filesystem", path));
  }
  if (auto type = lookup(probe.get(), "TYPE")) return std::optional<std::string>(*type);
  if (auto table = lookup(probe.get(), "PTTYPE")) {
    return std::optional<std::string>("partition table " + *table);
  }
  return std::optional<std::string>("an unnamed signature");
}

}  // namespace rosetctl
