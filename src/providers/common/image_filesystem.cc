// mkfs / e2fsck / resize2fs / xfs_growfs through core/run_program.h.
#include "providers/common/image_filesystem.h"

#include <linux/capability.h>

#include <chrono>
#include <fstream>
#include <vector>

#include "core/run_program.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kExt4 = "ext4";
constexpr std::string_view kXfs = "xfs";
// ext4 could be made smaller, but below 1 MiB its metadata leaves no room for files.
constexpr int64_t kMinExt4Bytes = int64_t{1} << 20;
// mkfs.xfs refuses filesystems smaller than 300 MiB.
constexpr int64_t kMinXfsBytes = int64_t{300} << 20;
// Making or checking a filesystem reads and writes metadata proportional to its size; these
// bounds are far above what a healthy multi-terabyte image needs.
constexpr auto kMakeTimeout = 10min;
constexpr auto kCheckTimeout = 60min;

const char* package_of(std::string_view filesystem) {
  return filesystem == kXfs ? "xfsprogs" : "e2fsprogs";
}

// Runs a helper; OK when it exits with one of `accepted` codes, else an error naming the
// command, the device and what the helper said.
Status run_helper(std::string_view tool, std::string_view package, std::vector<std::string> args,
                  std::chrono::milliseconds timeout, std::initializer_list<int> accepted = {0}) {
  auto program = find_program(tool, package);
  if (!program) return program.status();
  args.insert(args.begin(), *program);
  auto result = run_program(args, timeout);
  if (!result) return result.status();
  for (int code : accepted) {
    if (result->signal == 0 && result->exit_code == code) return Status::ok();
  }
  return error(Code::kInternal, "{} {} failed: {}", tool, args.back(), result->describe());
}

bool have_capability(int capability) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (!line.starts_with("CapEff:")) continue;
    uint64_t mask = std::stoull(line.substr(7), nullptr, 16);
    return (mask >> capability) & 1;
  }
  return false;
}

}  // namespace

Expected<std::string> checked_filesystem(std::string_view requested) {
  if (requested.empty()) return std::string(kDefaultFilesystem);
  if (requested == kExt4 || requested == kXfs) return std::string(requested);
  return error(Code::kInvalidArgument,
               "filesystem {} is not supported for image volumes (supported: ext4, xfs)",
               display_quoted(requested));
}

int64_t minimum_filesystem_bytes(std::string_view filesystem) {
  return filesystem == kXfs ? kMinXfsBytes : kMinExt4Bytes;
}

std::string mount_data(std::string_view filesystem) {
  return filesystem == "xfs" ? "nouuid" : "";
}

Status make_filesystem(std::string_view filesystem, const std::string& device) {
  // -q: quiet. No force flag: both tools stop if they find a filesystem after all.
  return run_helper(fmt::format("mkfs.{}", filesystem), package_of(filesystem), {"-q", device},
                    kMakeTimeout);
}

Status grow_filesystem_offline(std::string_view filesystem, const std::string& device) {
  if (filesystem != kExt4) {
    return error(Code::kInternal, "{} cannot grow unmounted; grow it once mounted", filesystem);
  }
  // resize2fs insists on a freshly checked filesystem. -p repairs only what is safe without
  // asking; 1 means it corrected something, which still leaves a consistent filesystem.
  ROSETCTL_RETURN_IF_ERROR(
      run_helper("e2fsck", "e2fsprogs", {"-f", "-p", device}, kCheckTimeout, {0, 1}));
  return run_helper("resize2fs", "e2fsprogs", {device}, kCheckTimeout);
}

bool can_grow_online(std::string_view filesystem) {
  return filesystem == kXfs || have_capability(CAP_SYS_RESOURCE);
}

Status grow_filesystem_online(std::string_view filesystem, const std::string& device,
                              const std::string& mount_point) {
  if (filesystem == kXfs) {
    return run_helper("xfs_growfs", "xfsprogs", {"-d", mount_point}, kCheckTimeout);
  }
  return run_helper("resize2fs", "e2fsprogs", {device}, kCheckTimeout);
}

}  // namespace rosetctl
