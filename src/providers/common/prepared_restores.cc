// Restores made ahead (prepared_restores.h).
#include "providers/common/prepared_restores.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <chrono>

#include "core/commit_store/sha256.h"
#include "core/directory_listing.h"
#include "core/log.h"
#include "core/remove_tree.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

constexpr std::string_view kPreparedPrefix = ".prepared-";
// The restores of abandoned partial directories (storage_snapshots.cc) sweep this prefix too:
// a claimed directory whose restore died is removed like any other partial one.
constexpr std::string_view kClaimedPrefix = ".restore-reuse-";
// A move restores its last round ahead and makes the volume from the next commit within
// seconds to minutes; an hour later nobody will.
constexpr auto kPreparedLifetime = std::chrono::hours(1);

}  // namespace

std::string prepared_restore_dir(const std::string& volumes_dir, std::string_view commit_id) {
  return fmt::format("{}/{}{}", volumes_dir, kPreparedPrefix, commit_id);
}

std::optional<ClaimedRestore> ClaimedRestore::claim(const std::string& volumes_dir,
                                                    std::string_view volume_id,
                                                    const std::vector<std::string>& commits) {
  for (const std::string& commit : commits) {
    if (!is_digest_hex(commit)) continue;
    std::string claimed = fmt::format("{}/{}{}", volumes_dir, kClaimedPrefix, volume_id);
    if (::rename(prepared_restore_dir(volumes_dir, commit).c_str(), claimed.c_str()) != 0) continue;
    UniqueFd held(::open(claimed.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!held.valid() || ::flock(held.get(), LOCK_EX | LOCK_NB) != 0) {
      (void)remove_tree(claimed);
      continue;
    }
    return ClaimedRestore(std::move(claimed), commit, std::move(held));
  }
  return std::nullopt;
}

ClaimedRestore::~ClaimedRestore() {
  if (path_.empty()) return;  // moved from
  if (Status removed = remove_tree(path_); !removed) {
    spdlog::warn("cannot remove \"{}\", a restore made ahead: {}", path_,
                 escape_text(removed.message()));
  }
}

void remove_stale_prepared_restores(const std::string& volumes_dir, const CommitStore& store) {
  auto names = list_directory(volumes_dir);
  if (!names) return;
  const auto now = std::chrono::system_clock::now();
  for (const std::string& name : *names) {
    if (!name.starts_with(kPreparedPrefix)) continue;
    std::string path = volumes_dir + "/" + name;
    std::string commit = name.substr(kPreparedPrefix.size());
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    // ctime: the restore gave the directory its recorded mtime, often old.
    auto made = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_ctime));
    if (is_digest_hex(commit) && store.has_commit(commit) && now - made < kPreparedLifetime)
      continue;
    if (Status removed = remove_tree(path); !removed) {
      spdlog::warn("cannot remove \"{}\", a restore made ahead: {}", path,
                   escape_text(removed.message()));
    }
  }
}

}  // namespace rosetctl
