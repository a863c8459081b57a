// Staging iSCSI volumes on a consumer.
#include "providers/iscsi/iscsi_node.h"

#include <algorithm>
#include <charconv>

#include "core/block_staging.h"
#include "core/fs_signature.h"
#include "core/log.h"
#include "core/mount_filesystem.h"
#include "core/mount_ops.h"
#include "core/validate.h"
#include "providers/common/image_filesystem.h"
#include "providers/common/image_volume.h"
#include "providers/iscsi/iscsi_context.h"
#include "providers/iscsi/target_backend.h"

namespace rosetctl::iscsi {
namespace {

std::string lookup(const StringMap& map, std::string_view key) {
  auto it = map.find(std::string(key));
  return it == map.end() ? std::string() : it->second;
}

}  // namespace

Expected<LunAddress> lun_from_publish_context(const StringMap& publish_context) {
  LunAddress lun;
  lun.portal = lookup(publish_context, kPublishPortal);
  lun.target = lookup(publish_context, kPublishTarget);
  lun.serial = lookup(publish_context, kPublishSerial);
  std::string number = lookup(publish_context, kPublishLun);
  for (auto [key, value] :
       {std::pair{kPublishPortal, &lun.portal}, std::pair{kPublishTarget, &lun.target},
        std::pair{kPublishSerial, &lun.serial}, std::pair{kPublishLun, &number}}) {
    if (value->empty()) {
      return error(Code::kInvalidArgument,
                   "publish_context has no \"{}\": an iscsi volume must be published by the "
                   "controller (ControllerPublishVolume) before it is staged",
                   key);
    }
  }
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), lun.lun);
  if (ec != std::errc() || end != number.data() + number.size() || lun.lun < 0) {
    return error(Code::kInvalidArgument, "publish_context \"{}\" is {}: not a LUN number",
                 kPublishLun, display_quoted(number));
  }
  return lun;
}

Expected<std::optional<ChapCredentials>> chap_from_secrets(const StringMap& secrets) {
  std::string user = lookup(secrets, kSecretChapUser);
  std::string password = lookup(secrets, kSecretChapPassword);
  if (user.empty() && password.empty()) return std::optional<ChapCredentials>();
  if (user.empty() || password.empty()) {
    return error(
        Code::kInvalidArgument, "CHAP needs both secrets \"{}\" and \"{}\"; only \"{}\" was given",
        kSecretChapUser, kSecretChapPassword, user.empty() ? kSecretChapPassword : kSecretChapUser);
  }
  return std::optional<ChapCredentials>(ChapCredentials{user, password});
}

Expected<std::optional<LoginChap>> chap_for_login(const StringMap& secrets,
                                                  const StringMap& publish_context) {
  auto chap = chap_from_secrets(secrets);
  if (!chap) return chap.status();
  if (!chap->has_value()) return std::optional<LoginChap>();
  LoginChap login{std::move(**chap), std::nullopt};
  std::string user_in = lookup(secrets, kSecretChapUserIn);
  std::string password_in = lookup(secrets, kSecretChapPasswordIn);
  if (user_in.empty() != password_in.empty()) {
    return error(Code::kInvalidArgument,
                 "mutual CHAP needs both secrets \"{}\" and \"{}\"; only \"{}\" was given",
                 kSecretChapUserIn, kSecretChapPasswordIn,
                 user_in.empty() ? kSecretChapPasswordIn : kSecretChapUserIn);
  }
  if (!user_in.empty()) login.target = ChapCredentials{user_in, password_in};
  std::string account = lookup(publish_context, kPublishChapUser);
  if (account.empty()) return std::optional<LoginChap>(std::move(login));
  // The controller's name for the node's account; it goes through iscsiadm's argv and into
  // the node record, so it is held to the characters a CHAP user may have.
  bool plain = account.size() <= 128 && std::all_of(account.begin(), account.end(), [](char c) {
                 return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') ||
                        std::string_view("._@:-").find(c) != std::string_view::npos;
               });
  if (!plain) {
    return error(Code::kInvalidArgument,
                 "publish_context \"{}\" is {}: not a CHAP user name (letters, digits, '.', '_', "
                 "'@', ':' and '-', at most 128 bytes)",
                 kPublishChapUser, display_quoted(account));
  }
  login.initiator.user = std::move(account);
  return std::optional<LoginChap>(std::move(login));
}

Expected<std::optional<KernelSession>> IscsiNode::session_of(std::string_view volume_id) const {
  auto sessions = initiator_.sessions();
  if (!sessions) return sessions.status();
  std::string suffix = fmt::format(":{}", volume_id);
  for (const KernelSession& session : *sessions) {
    if (session.target.size() > suffix.size() &&
        session.target.compare(session.target.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return std::optional<KernelSession>(session);
    }
  }
  return std::optional<KernelSession>();
}

Status IscsiNode::stage(const StageSpec& spec) const {
  auto lun = lun_from_publish_context(spec.publish_context);
  if (!lun) return lun.status();
  auto chap = chap_for_login(spec.secrets, spec.publish_context);
  if (!chap) return chap.status();
  if (!chap->has_value() && spec.publish_context.contains(std::string(kPublishChapUser))) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" takes CHAP and this node has no secret for it: the controller "
                 "gives it to the node over mutual TLS (serve --controller ADDR with the node's "
                 "certificate), or NodeStage's secrets carry it (\"{}\", \"{}\")",
                 spec.volume_id, kSecretChapUser, kSecretChapPassword);
  }
  auto device = initiator_.attach(*lun, *chap, disk_patience_);
  if (!device) return device.status();
  if (spec.capability.access_type != AccessType::kBlock) return stage_mount(spec, *device);
  auto numbers = device_numbers(*device);
  if (!numbers) return numbers.status();
  return stage_block_device(spec.staging_path, *numbers);
}

Status IscsiNode::stage_mount(const StageSpec& spec, const std::string& device) const {
  std::string wanted = lookup(spec.volume_context, kContextFilesystem);
  auto filesystem = checked_filesystem(wanted);
  if (!filesystem) return filesystem.status();
  if (!spec.capability.fs_type.empty() && spec.capability.fs_type != *filesystem) {
    return error(Code::kInvalidArgument,
                 "volume \"{}\" holds an {} filesystem; volume_capability asks for fs_type {}",
                 spec.volume_id, *filesystem, display_quoted(spec.capability.fs_type));
  }
  auto signature = probe_signature(device);
  if (!signature) return signature.status();
  if (!signature->has_value()) {
    // A blank disk: the volume's first stage anywhere.
    ROSETCTL_RETURN_IF_ERROR(make_filesystem(*filesystem, device));
  } else if (**signature != *filesystem) {
    return error(Code::kFailedPrecondition,
                 "the disk of volume \"{}\" ({}) holds {}, not the {} filesystem it was created "
                 "with; rosetctl never formats a device that carries data",
                 spec.volume_id, device, **signature, *filesystem);
  }
  return mount_device(device, spec.staging_path, *filesystem, MountOptions{},
                      mount_data(*filesystem));
}

Status IscsiNode::unstage(std::string_view volume_id, const std::string& staging_path,
                          bool last) const {
  ROSETCTL_RETURN_IF_ERROR(unmount_topmost(staging_path));
  if (!last) return Status::ok();
  auto session = session_of(volume_id);
  if (!session) return session.status();
  if (!session->has_value()) return Status::ok();
  // The portal the kernel connected to: the device may be gone already, the session is not.
  return initiator_.detach((*session)->portal, (*session)->target);
}

Expected<int64_t> IscsiNode::expand(const NodeExpandSpec& spec, bool block) const {
  auto session = session_of(spec.volume_id);
  if (!session) return session.status();
  if (!session->has_value()) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" has no iSCSI session on this node; stage it first", spec.volume_id);
  }
  LunAddress lun{(*session)->portal, (*session)->target, kIscsiVolumeLun, ""};
  auto bytes = initiator_.rescan(lun);
  if (!bytes) return bytes.status();
  if (block) return bytes;
  auto device = initiator_.find_disk(lun);
  if (!device) return device.status();
  if (!device->has_value()) {
    return error(Code::kFailedPrecondition, "volume \"{}\": its disk is gone from this node",
                 spec.volume_id);
  }
  auto signature = probe_signature(**device);
  if (!signature) return signature.status();
  if (!signature->has_value()) {
    return error(Code::kFailedPrecondition, "volume \"{}\": its disk {} holds no filesystem",
                 spec.volume_id, **device);
  }
  ROSETCTL_RETURN_IF_ERROR(grow_filesystem_online(**signature, **device, spec.volume_path));
  return bytes;
}

Expected<std::vector<KernelSession>> IscsiNode::unstaged_sessions(
    const std::vector<std::string>& staged_volume_ids, std::string_view iqn_prefix) const {
  auto sessions = initiator_.sessions();
  if (!sessions) return sessions.status();
  std::string ours = fmt::format("{}:", iqn_prefix);
  std::vector<KernelSession> unstaged;
  for (const KernelSession& session : *sessions) {
    if (session.target.rfind(ours, 0) != 0) continue;  // not a rosetctl target: not ours
    std::string volume = session.target.substr(ours.size());
    if (std::find(staged_volume_ids.begin(), staged_volume_ids.end(), volume) ==
        staged_volume_ids.end()) {
      unstaged.push_back(session);
    }
  }
  return unstaged;
}

Expected<std::vector<std::string>> IscsiNode::repair(
    const std::vector<std::string>& staged_volume_ids, std::string_view iqn_prefix) const {
  std::vector<std::string> done;
  std::string ours = fmt::format("{}:", iqn_prefix);
  auto volume_of = [&](const std::string& target) {
    return target.rfind(ours, 0) == 0 ? target.substr(ours.size()) : std::string();
  };
  auto unstaged = unstaged_sessions(staged_volume_ids, iqn_prefix);
  if (!unstaged) return unstaged.status();
  for (const KernelSession& session : *unstaged) {
    std::string volume = volume_of(session.target);
    Status left = initiator_.detach(session.portal, session.target);
    done.push_back(left ? fmt::format("logged out of {} at {}: no staging of volume \"{}\" here",
                                      session.target, session.portal, volume)
                        : fmt::format("cannot log out of {}: {}", session.target, left.message()));
  }
  auto records = initiator_.records();
  if (!records) return records.status();
  for (const std::string& volume : staged_volume_ids) {
    auto session = session_of(volume);
    if (!session) return session.status();
    if (session->has_value()) continue;
    for (const KernelSession& record : *records) {
      if (volume_of(record.target) != volume) continue;
      Status back = initiator_.login(record.portal, record.target);
      done.push_back(back ? fmt::format("logged in to {} at {} again for staged volume \"{}\"",
                                        record.target, record.portal, volume)
                          : fmt::format("staged volume \"{}\" has no session and logging in "
                                        "again failed: {}",
                                        volume, back.message()));
    }
  }
  return done;
}

VolumeCondition IscsiNode::condition(std::string_view volume_id) const {
  auto session = session_of(volume_id);
  if (!session) return {true, session.status().message()};
  if (!session->has_value()) {
    return {true, "no iSCSI session to the volume's target on this node"};
  }
  auto disk =
      initiator_.find_disk(LunAddress{(*session)->portal, (*session)->target, kIscsiVolumeLun, ""});
  if (!disk) return {true, disk.status().message()};
  if (!disk->has_value()) {
    return {true, fmt::format("the session to {} has no disk", (*session)->target)};
  }
  return {};
}

}  // namespace rosetctl::iscsi
