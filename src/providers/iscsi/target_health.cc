// IscsiExports's look at the target daemon: what the watcher restores, and what a volume's
// condition and Probe say while a target is missing (issue 31, row 10).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/validate.h"
#include "providers/iscsi/iscsi_exports.h"

namespace rosetctl::iscsi {
namespace {

// A volume's condition and Probe use a look this recent; the watcher looks every 2 s.
constexpr auto kLookTtl = std::chrono::seconds(3);

}  // namespace

Expected<IscsiExports::Look> IscsiExports::look() {
  auto volumes = store_.list_volumes("", 0);
  if (!volumes) return volumes.status();
  std::erase_if(*volumes,
                [&](const VolumeRecord& volume) { return volume.provider != provider_name_; });
  Look found;
  if (volumes->empty()) return found;  // nothing to watch: the daemon is not asked
  auto targets = backend_->list_targets();
  if (!targets) {
    found.reachable = false;
    for (const VolumeRecord& volume : *volumes) {
      found.wrong[volume.id] =
          fmt::format("its iSCSI target cannot be checked: {}", targets.status().message());
    }
    return found;
  }
  for (const VolumeRecord& volume : *volumes) {
    auto target = std::find_if(targets->begin(), targets->end(),
                               [&](const TargetInfo& t) { return t.volume_id == volume.id; });
    if (target == targets->end()) {
      found.wrong[volume.id] = fmt::format(
          "its iSCSI target is missing from {} (restarted?); the controller makes it again from "
          "its records",
          backend_->name());
      continue;
    }
    if (!target->has_lun) {
      found.wrong[volume.id] =
          fmt::format("its iSCSI target in {} has no LUN {}", backend_->name(), kIscsiVolumeLun);
      continue;
    }
    auto publications = store_.controller_publications(volume.id);
    if (!publications) return publications.status();
    if (!publications->empty() && target->initiators.empty()) {
      found.wrong[volume.id] =
          fmt::format("its iSCSI target in {} lets none of the {} node(s) it is published to in",
                      backend_->name(), publications->size());
    }
  }
  return found;
}

void IscsiExports::remember(const Look& look) {
  std::lock_guard lock(looked_mutex_);
  looked_ = look;
  looked_at_ = std::chrono::steady_clock::now();
}

Expected<IscsiExports::Look> IscsiExports::recent_look() {
  {
    std::lock_guard lock(looked_mutex_);
    if (looked_ && std::chrono::steady_clock::now() - looked_at_ < kLookTtl) return *looked_;
  }
  auto now = look();
  if (now) remember(*now);
  return now;
}

void IscsiExports::check_targets() {
  auto found = look();
  if (!found) {
    spdlog::warn("iscsi: cannot check the targets: {}", escape_text(found.status().message()));
    return;
  }
  remember(*found);
  if (!found->reachable) {
    // Said once per reason, not every interval while tgtd stays down.
    const std::string& why = found->wrong.begin()->second;
    if (why != reported_down_) {
      spdlog::warn("iscsi: {} does not answer ({}); its targets are made again once it does",
                   backend_->name(), escape_text(why));
    }
    reported_down_ = why;
    return;
  }
  reported_down_.clear();
  if (found->wrong.empty()) return;
  for (const auto& [volume_id, what] : found->wrong)
    spdlog::warn("iscsi: volume {}: {}", escape_text(volume_id), escape_text(what));
  auto restored = restore();
  if (!restored) {
    spdlog::error("iscsi: restoring the targets failed: {}",
                  escape_text(restored.status().message()));
    return;
  }
  for (const std::string& line : *restored)
    spdlog::info("iscsi: {}", escape_text(line));
  if (auto after = look()) remember(*after);
}

VolumeCondition IscsiExports::target_condition(std::string_view volume_id) {
  auto found = recent_look();
  if (!found) return {true, found.status().message()};
  auto wrong = found->wrong.find(std::string(volume_id));
  if (wrong == found->wrong.end()) return {};
  return {true, wrong->second};
}

Status IscsiExports::targets_problem() {
  auto found = recent_look();
  if (!found) return found.status();
  if (found->wrong.empty()) return Status::ok();
  std::string volumes;
  for (const auto& [volume_id, what] : found->wrong)
    volumes += (volumes.empty() ? "" : ", ") + volume_id;
  return error(Code::kUnavailable, "{} of {}'s iSCSI targets are not as recorded ({}: {})",
               found->wrong.size(), backend_->name(), volumes, found->wrong.begin()->second);
}

}  // namespace rosetctl::iscsi
