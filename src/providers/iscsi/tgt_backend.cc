// TgtBackend: each operation reads tgtd's state (`tgtadm --op show`), then changes only what
// differs, so every call is idempotent and repairs a half-done earlier one. CHAP accounts are
// in tgt_chap.cc.
#include "providers/iscsi/tgt_backend.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "core/iscsi_name.h"
#include "core/run_program.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

bool has_item(const std::vector<std::string>& items, std::string_view item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

// What tgtadm's one-line complaints mean (tgtadm exits 22 for all of them; the text is
// tgtadm_strerror's, stable across tgt 1.0.x).
Code tgtadm_code(const ProgramResult& result) {
  const std::string& err = result.err;
  if (result.exit_code == ENOTCONN || result.exit_code == ECONNREFUSED ||
      result.exit_code == ENOENT || err.find("tgt daemon") != std::string::npos) {
    return Code::kUnavailable;
  }
  if (err.find("can't find") != std::string::npos) return Code::kNotFound;
  if (err.find("does not exist") != std::string::npos) return Code::kNotFound;
  if (err.find("already exist") != std::string::npos) return Code::kAlreadyExists;
  if (err.find("too many") != std::string::npos) return Code::kResourceExhausted;
  if (err.find("still active") != std::string::npos) return Code::kFailedPrecondition;
  return Code::kInternal;
}

// How much of tgtadm's output is read: its target report takes about 1 KiB per target (more
// with sessions and ACL entries), and a report cut short would read as fewer targets (a target
// that seems to vanish, a "free" target id that is taken). Past this, tgtadm's answer is refused.
constexpr size_t kMaxTgtadmOutput = 64 * 1024 * 1024;

Status check_image(const TargetSpec& spec) {
  struct stat info {};
  if (::stat(spec.image_path.c_str(), &info) != 0) {
    int err = errno;
    Status status =
        errno_status(err, fmt::format("image file {} of volume \"{}\"",
                                      display_quoted(spec.image_path, 200), spec.volume_id));
    return err == ENOENT ? Status(Code::kNotFound, status.message()) : status;
  }
  if (!S_ISREG(info.st_mode)) {
    return error(Code::kFailedPrecondition,
                 "image file {} of volume \"{}\" is not a regular file; an iSCSI LUN is backed "
                 "by the volume's image file",
                 display_quoted(spec.image_path, 200), spec.volume_id);
  }
  return Status::ok();
}

Status validate_spec(const TargetSpec& spec) {
  ROSETCTL_RETURN_IF_ERROR(validate_target_volume_id(spec.volume_id));
  auto path = normalize_absolute_path(spec.image_path, "image path");
  if (!path) return path.status();
  if (spec.image_path.find(',') != std::string::npos) {
    // tgtd splits its request parameters on commas.
    return error(Code::kInvalidArgument, "image path {} contains ',', which tgt cannot take",
                 display_quoted(spec.image_path, 200));
  }
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<TgtBackend>> TgtBackend::open(TgtOptions options) {
  ROSETCTL_RETURN_IF_ERROR(validate_iqn_prefix(options.iqn_prefix, "the iSCSI IQN prefix"));
  // tgtd and tgtadm keep the control port in a signed short.
  if (options.control_port < 0 || options.control_port > 32767) {
    return error(Code::kInvalidArgument, "tgtd control port {} is out of range (0 to 32767)",
                 options.control_port);
  }
  auto tgtadm = find_program("tgtadm", "tgt");
  if (!tgtadm) return tgtadm.status();
  return std::unique_ptr<TgtBackend>(new TgtBackend(std::move(options), std::move(*tgtadm)));
}

TgtBackend::TgtBackend(TgtOptions options, std::string tgtadm)
    : options_(std::move(options)), tgtadm_path_(std::move(tgtadm)) {}

std::string TgtBackend::iqn(std::string_view volume_id) const {
  return target_iqn(options_.iqn_prefix, volume_id);
}

Expected<std::string> TgtBackend::tgtadm(std::vector<std::string> args, std::string_view what) {
  std::vector<std::string> argv = {tgtadm_path_, "-C", std::to_string(options_.control_port),
                                   "--lld", "iscsi"};
  argv.insert(argv.end(), std::make_move_iterator(args.begin()),
              std::make_move_iterator(args.end()));
  auto result = run_program(argv, options_.timeout, kMaxTgtadmOutput);
  if (!result) return result.status().with_context(what);
  if (result->out_cut) {
    return error(Code::kResourceExhausted,
                 "{}: tgtadm printed more than {} MiB, more than rosetctl reads; tgtd holds more "
                 "targets than one rosetctl can manage",
                 what, kMaxTgtadmOutput / (1024 * 1024));
  }
  // tgtadm exits 0 when tgtd closes the connection before its answer is complete (tgtd died
  // mid-request): empty output that would read as "no targets".
  bool cut_off = result->err.find("closed the socket") != std::string::npos ||
                 result->err.find("partial response") != std::string::npos ||
                 result->err.find("full response") != std::string::npos;
  if (result->succeeded() && !cut_off) return std::move(result->out);
  Code code = cut_off ? Code::kUnavailable : tgtadm_code(*result);
  if (code == Code::kUnavailable) {
    return error(code,
                 "{}: tgtd is not reachable on control port {} (tgtadm {}); start it "
                 "(systemctl start tgt, or tgtd -C {})",
                 what, options_.control_port, result->describe(), options_.control_port);
  }
  return error(code, "{}: tgtadm {}", what, result->describe());
}

Expected<std::vector<TgtTarget>> TgtBackend::show_targets() {
  auto text = tgtadm({"--mode", "target", "--op", "show"}, "cannot list tgtd's targets");
  if (!text) return text.status();
  return parse_tgt_targets(*text);
}

Expected<std::optional<TgtTarget>> TgtBackend::find_target(std::string_view volume_id) {
  auto targets = show_targets();
  if (!targets) return targets.status();
  std::string name = iqn(volume_id);
  for (TgtTarget& target : *targets) {
    if (target.name == name) return std::optional<TgtTarget>(std::move(target));
  }
  return std::optional<TgtTarget>();
}

// A new target, offline until ensure_target has given it its LUN and serial, at the lowest
// free tid. Another tgtadm user may take that tid first: then the list is read again.
Expected<TgtTarget> TgtBackend::create_target(std::string_view volume_id) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto targets = show_targets();
    if (!targets) return targets.status();
    std::set<int> used;
    for (const TgtTarget& target : *targets)
      used.insert(target.tid);
    int tid = 1;
    while (used.contains(tid))
      ++tid;
    auto made = tgtadm({"--mode", "target", "--op", "new", "--tid", std::to_string(tid),
                        "--targetname", iqn(volume_id)},
                       fmt::format("cannot create the iSCSI target of volume \"{}\"", volume_id));
    if (made.status().code() == Code::kAlreadyExists) continue;
    if (!made) return made.status();
    ROSETCTL_RETURN_IF_ERROR(set_state(tid, kTgtOffline, volume_id));
    TgtTarget target;
    target.tid = tid;
    target.name = iqn(volume_id);
    target.state = kTgtOffline;
    return target;
  }
  return error(Code::kAborted,
               "cannot create the iSCSI target of volume \"{}\": other tgtadm users kept taking "
               "the free target ids; try again",
               volume_id);
}

Status TgtBackend::set_state(int tid, std::string_view state, std::string_view volume_id) {
  return tgtadm({"--mode", "target", "--op", "update", "--tid", std::to_string(tid), "--name",
                 "state", "--value", std::string(state)},
                fmt::format("cannot set the iSCSI target of volume \"{}\" {}", volume_id, state))
      .status();
}

// LUN 1 on the image, its serial (VPD page 0x80) and device id (page 0x83) set to the volume
// id: the consumer compares the serial before it touches the disk.
Status TgtBackend::add_lun(int tid, const TargetSpec& spec) {
  std::string what = fmt::format("cannot export the image of volume \"{}\" as LUN {}",
                                 spec.volume_id, kIscsiVolumeLun);
  auto made = tgtadm({"--mode", "logicalunit", "--op", "new", "--tid", std::to_string(tid), "--lun",
                      std::to_string(kIscsiVolumeLun), "--backing-store", spec.image_path},
                     what);
  if (!made && made.status().code() != Code::kAlreadyExists) return made.status();
  return tgtadm({"--mode", "logicalunit", "--op", "update", "--tid", std::to_string(tid), "--lun",
                 std::to_string(kIscsiVolumeLun), "--params",
                 fmt::format("scsi_sn={0},scsi_id={0}", spec.volume_id)},
                what)
      .status();
}

Expected<TargetInfo> TgtBackend::ensure_target(const TargetSpec& spec) {
  ROSETCTL_RETURN_IF_ERROR(validate_spec(spec));
  ROSETCTL_RETURN_IF_ERROR(check_image(spec));
  std::lock_guard lock(mutex_);
  auto found = find_target(spec.volume_id);
  if (!found) return found.status();
  TgtTarget target;
  if (found->has_value()) {
    target = std::move(**found);
  } else {
    auto made = create_target(spec.volume_id);
    if (!made) return made.status();
    target = std::move(*made);
  }
  auto lun = std::find_if(target.luns.begin(), target.luns.end(),
                          [](const TgtLun& l) { return l.lun == kIscsiVolumeLun; });
  if (lun != target.luns.end() && lun->backing_path != spec.image_path) {
    return error(Code::kFailedPrecondition,
                 "the iSCSI target of volume \"{}\" exports {}, not the volume's image {}; "
                 "remove the target and ensure it again",
                 spec.volume_id, display_quoted(lun->backing_path, 200),
                 display_quoted(spec.image_path, 200));
  }
  if (lun == target.luns.end() || lun->serial != spec.volume_id) {
    // Offline meanwhile, so no initiator logs in and sees a LUN without its serial.
    if (target.state != kTgtOffline)
      ROSETCTL_RETURN_IF_ERROR(set_state(target.tid, kTgtOffline, spec.volume_id));
    ROSETCTL_RETURN_IF_ERROR(add_lun(target.tid, spec));
    target.state = kTgtOffline;
  }
  if (target.state != kTgtReady)
    ROSETCTL_RETURN_IF_ERROR(set_state(target.tid, kTgtReady, spec.volume_id));
  auto now = find_target(spec.volume_id);
  if (!now) return now.status();
  if (!now->has_value()) {
    return error(Code::kAborted,
                 "the iSCSI target of volume \"{}\" vanished while it was made "
                 "(did tgtd restart?); try again",
                 spec.volume_id);
  }
  return info_of(**now, spec.volume_id);
}

Status TgtBackend::remove_target(std::string_view volume_id) {
  ROSETCTL_RETURN_IF_ERROR(validate_target_volume_id(volume_id));
  std::lock_guard lock(mutex_);
  auto found = find_target(volume_id);
  if (!found) return found.status();
  if (!found->has_value()) return Status::ok();
  const TgtTarget& target = **found;
  // Offline first: no new login while the sessions are ended and the target deleted.
  ROSETCTL_RETURN_IF_ERROR(set_state(target.tid, kTgtOffline, volume_id));
  auto deleted =
      tgtadm({"--mode", "target", "--op", "delete", "--force", "--tid", std::to_string(target.tid)},
             fmt::format("cannot remove the iSCSI target of volume \"{}\"", volume_id));
  if (!deleted && deleted.status().code() != Code::kNotFound) return deleted.status();
  std::vector<std::string> users = target.incoming_users;
  users.insert(users.end(), target.outgoing_users.begin(), target.outgoing_users.end());
  return delete_unused_accounts(users);
}

Status TgtBackend::bind_initiator(std::string_view volume_id, std::string_view initiator) {
  ROSETCTL_RETURN_IF_ERROR(validate_target_volume_id(volume_id));
  // tgtd compares ACL entries byte for byte: a name goes on an ACL only in its normal form.
  ROSETCTL_RETURN_IF_ERROR(validate_iscsi_name(initiator, "initiator name"));
  std::lock_guard lock(mutex_);
  auto found = find_target(volume_id);
  if (!found) return found.status();
  if (!found->has_value()) {
    return error(Code::kNotFound,
                 "volume \"{}\" has no iSCSI target in tgtd (tgtd restarted?); ensure the target, "
                 "then bind the initiator",
                 volume_id);
  }
  if (has_item((*found)->acl, initiator)) return Status::ok();
  auto bound = tgtadm({"--mode", "target", "--op", "bind", "--tid", std::to_string((*found)->tid),
                       "--initiator-name", std::string(initiator)},
                      fmt::format("cannot allow initiator {} to log into volume \"{}\"",
                                  display_quoted(initiator, 223), volume_id));
  if (bound.status().code() == Code::kAlreadyExists) return Status::ok();
  return bound.status();
}

Status TgtBackend::unbind_initiator(std::string_view volume_id, std::string_view initiator) {
  ROSETCTL_RETURN_IF_ERROR(validate_target_volume_id(volume_id));
  ROSETCTL_RETURN_IF_ERROR(validate_iscsi_name(initiator, "initiator name"));
  std::lock_guard lock(mutex_);
  auto found = find_target(volume_id);
  if (!found) return found.status();
  if (!found->has_value()) return Status::ok();  // no target: nobody can log in
  const TgtTarget& target = **found;
  if (has_item(target.acl, initiator)) {
    auto unbound = tgtadm({"--mode", "target", "--op", "unbind", "--tid",
                           std::to_string(target.tid), "--initiator-name", std::string(initiator)},
                          fmt::format("cannot stop initiator {} from logging into volume \"{}\"",
                                      display_quoted(initiator, 223), volume_id));
    if (!unbound && unbound.status().code() != Code::kNotFound) return unbound.status();
  }
  // The ACL is checked at login only: a session that is still there is ended, or the unmapped
  // host would keep writing.
  return end_sessions_of(target, initiator);
}

Status TgtBackend::end_sessions_of(const TgtTarget& target, std::string_view initiator) {
  for (const TgtSession& session : target.sessions) {
    if (session.initiator != initiator) continue;
    for (const std::string& cid : session.connections) {
      auto ended = tgtadm({"--mode", "connection", "--op", "delete", "--tid",
                           std::to_string(target.tid), "--sid", session.sid, "--cid", cid},
                          fmt::format("cannot end the session of initiator {} on target {}",
                                      display_quoted(initiator, 223), target.name));
      if (!ended && ended.status().code() != Code::kNotFound) return ended.status();
    }
  }
  return Status::ok();
}

// tgt 1.0.85 reads a backing file's size only when the LUN is created and has no request to
// read it again, so LUN 1 is re-created on the same file (serial and all) with the target
// offline meanwhile. Initiators see the new capacity at their next rescan.
Status TgtBackend::resize_lun(const TargetSpec& spec) {
  ROSETCTL_RETURN_IF_ERROR(validate_spec(spec));
  ROSETCTL_RETURN_IF_ERROR(check_image(spec));
  std::lock_guard lock(mutex_);
  auto found = find_target(spec.volume_id);
  if (!found) return found.status();
  if (!found->has_value()) {
    return error(Code::kNotFound,
                 "volume \"{}\" has no iSCSI target in tgtd (tgtd restarted?); ensure the target: "
                 "it reads the image's current size",
                 spec.volume_id);
  }
  const TgtTarget& target = **found;
  auto lun = std::find_if(target.luns.begin(), target.luns.end(),
                          [](const TgtLun& l) { return l.lun == kIscsiVolumeLun; });
  if (lun != target.luns.end() && lun->backing_path != spec.image_path) {
    return error(Code::kFailedPrecondition,
                 "the iSCSI target of volume \"{}\" exports {}, not the volume's image {}",
                 spec.volume_id, display_quoted(lun->backing_path, 200),
                 display_quoted(spec.image_path, 200));
  }
  ROSETCTL_RETURN_IF_ERROR(set_state(target.tid, kTgtOffline, spec.volume_id));
  if (lun != target.luns.end()) {
    auto deleted = tgtadm({"--mode", "logicalunit", "--op", "delete", "--tid",
                           std::to_string(target.tid), "--lun", std::to_string(kIscsiVolumeLun)},
                          fmt::format("cannot re-read the size of volume \"{}\"", spec.volume_id));
    if (!deleted && deleted.status().code() != Code::kNotFound) return deleted.status();
  }
  ROSETCTL_RETURN_IF_ERROR(add_lun(target.tid, spec));
  return set_state(target.tid, kTgtReady, spec.volume_id);
}

Expected<std::vector<TargetInfo>> TgtBackend::list_targets() {
  std::lock_guard lock(mutex_);
  auto targets = show_targets();
  if (!targets) return targets.status();
  std::string prefix = options_.iqn_prefix + ":";
  std::vector<TargetInfo> out;
  for (const TgtTarget& target : *targets) {
    if (!target.name.starts_with(prefix)) continue;  // not ours: another tgtd user's
    out.push_back(info_of(target, std::string_view(target.name).substr(prefix.size())));
  }
  return out;
}

Status TgtBackend::check_health() {
  auto text = tgtadm({"--mode", "system", "--op", "show"}, "tgtd health check");
  if (!text) return text.status();
  auto state = parse_tgt_system_state(*text);
  if (!state) return state.status();
  if (*state != kTgtReady) {
    return error(Code::kUnavailable, "tgtd on control port {} is {}, not ready",
                 options_.control_port, display_quoted(*state));
  }
  return Status::ok();
}

bool TgtBackend::is_complete(const TgtTarget& target) const {
  std::string prefix = options_.iqn_prefix + ":";
  if (!target.name.starts_with(prefix)) return false;
  std::string_view volume_id = std::string_view(target.name).substr(prefix.size());
  return std::any_of(target.luns.begin(), target.luns.end(), [&](const TgtLun& lun) {
    return lun.lun == kIscsiVolumeLun && lun.serial == volume_id;
  });
}

TargetInfo TgtBackend::info_of(const TgtTarget& target, std::string_view volume_id) const {
  TargetInfo info;
  info.volume_id = std::string(volume_id);
  info.iqn = target.name;
  for (const TgtLun& lun : target.luns) {
    if (lun.lun != kIscsiVolumeLun) continue;
    info.has_lun = true;
    info.serial = lun.serial;
    info.backing_path = lun.backing_path;
  }
  info.initiators = target.acl;
  info.chap_users = target.incoming_users;
  info.chap_users_out = target.outgoing_users;
  info.sessions = static_cast<int>(target.sessions.size());
  return info;
}

}  // namespace rosetctl
