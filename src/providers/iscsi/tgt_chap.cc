// TgtBackend's CHAP accounts: creating, replacing, binding and deleting them.
//
// CHAP passwords: tgtadm takes an account's password only as `--password` on its command line
// (tgt 1.0.85 reads no file, descriptor or environment variable for it, and tgtd's control
// socket speaks an unversioned C struct of tgt's own). So the password is on the argv of one
// short-lived tgtadm child, visible in /proc/PID/cmdline to local users for its few
// milliseconds. It is never in a message, a log line or the argv of any other call; hosts that
// must hide it mount /proc with hidepid=2.
#include <algorithm>

#include "core/validate.h"
#include "providers/iscsi/tgt_backend.h"

namespace rosetctl {
namespace {

bool is_listed(const std::vector<std::string>& users, std::string_view user) {
  return std::find(users.begin(), users.end(), user) != users.end();
}

}  // namespace

Status TgtBackend::add_account(const ChapCredentials& chap) {
  // The only tgtadm call with a secret on its argv (see the top of this file); the message
  // names the user only.
  return tgtadm(
             {"--mode", "account", "--op", "new", "--user", chap.user, "--password", chap.password},
             fmt::format("cannot create CHAP account {} in tgtd", display_quoted(chap.user)))
      .status();
}

Status TgtBackend::bind_account(int tid, std::string_view user, std::string_view volume_id,
                                bool outgoing) {
  std::vector<std::string> args = {"--mode", "account",           "--op",   "bind",
                                   "--tid",  std::to_string(tid), "--user", std::string(user)};
  if (outgoing) args.push_back("--outgoing");
  auto bound = tgtadm(std::move(args),
                      fmt::format("cannot require CHAP account {} on the target of volume \"{}\"",
                                  display_quoted(user), volume_id));
  if (bound.status().code() == Code::kAlreadyExists) return Status::ok();
  return bound.status();
}

Status TgtBackend::unbind_account(int tid, std::string_view user, std::string_view volume_id,
                                  bool outgoing) {
  std::vector<std::string> args = {"--mode", "account",           "--op",   "unbind",
                                   "--tid",  std::to_string(tid), "--user", std::string(user)};
  if (outgoing) args.push_back("--outgoing");
  auto unbound =
      tgtadm(std::move(args), fmt::format("cannot drop CHAP account {} from the target of volume "
                                          "\"{}\"",
                                          display_quoted(user), volume_id));
  if (!unbound && unbound.status().code() != Code::kNotFound) return unbound.status();
  return Status::ok();
}

std::string tgt_chap_account(std::string_view volume_id, std::string_view user) {
  return fmt::format("{}:{}", volume_id, user);
}

std::string TgtBackend::chap_account(std::string_view volume_id, std::string_view user) const {
  return tgt_chap_account(volume_id, user);
}

// tgtd keeps one password per account name, shared by every target the account is bound to, and
// cannot tell whether a password matches. An account a caller could name freely would let the
// caller of one volume's map set another volume's password (issue 31, row 9). So a volume's
// accounts are its own, by name: "<volume id>:<user>", which no other volume's account can be
// (a volume id holds no ':'). They are re-created with the passwords given and bound to this
// target alone, which stays offline meanwhile: no initiator logs in without CHAP in between
// (sessions already logged in go on). An account of such a name bound to another target (made
// outside rosetctl) is refused, never taken over: binding an account never changes the password
// another target uses.
Expected<std::vector<std::string>> TgtBackend::set_chap_accounts(
    std::string_view volume_id, const std::vector<ChapCredentials>& incoming,
    const std::optional<ChapCredentials>& outgoing) {
  ROSETCTL_RETURN_IF_ERROR(validate_target_volume_id(volume_id));
  if (incoming.empty()) {
    return error(Code::kInvalidArgument,
                 "CHAP on the target of volume \"{}\" needs at least one incoming account",
                 volume_id);
  }
  std::vector<ChapCredentials> wanted;  // every account, tgtd's names; outgoing last
  for (const ChapCredentials& chap : incoming) {
    ROSETCTL_RETURN_IF_ERROR(validate_chap(chap));
    wanted.push_back({tgt_chap_account(volume_id, chap.user), chap.password});
  }
  if (outgoing) {
    ROSETCTL_RETURN_IF_ERROR(validate_chap(*outgoing));
    wanted.push_back({tgt_chap_account(volume_id, outgoing->user), outgoing->password});
  }
  for (size_t i = 0; i < wanted.size(); ++i) {
    for (size_t j = i + 1; j < wanted.size(); ++j) {
      if (wanted[i].user == wanted[j].user) {
        return error(Code::kInvalidArgument,
                     "CHAP account {} is given twice for the target of volume \"{}\"",
                     display_quoted(wanted[i].user), volume_id);
      }
    }
  }
  std::lock_guard lock(mutex_);
  auto targets = show_targets();
  if (!targets) return targets.status();
  std::string name = iqn(volume_id);
  auto ours = std::find_if(targets->begin(), targets->end(),
                           [&](const TgtTarget& t) { return t.name == name; });
  if (ours == targets->end()) {
    return error(Code::kNotFound,
                 "volume \"{}\" has no iSCSI target in tgtd (tgtd restarted?); ensure the target, "
                 "then set CHAP",
                 volume_id);
  }
  for (const TgtTarget& target : *targets) {
    if (&target == &*ours) continue;
    for (const ChapCredentials& account : wanted) {
      if (is_listed(target.incoming_users, account.user) ||
          is_listed(target.outgoing_users, account.user)) {
        return error(Code::kAlreadyExists,
                     "CHAP account {} of volume \"{}\" is also bound to tgtd's target {}, and "
                     "rosetctl never changes the password of an account another target uses; "
                     "unbind it there (tgtadm --mode account --op unbind) or choose another "
                     "chap-user",
                     display_quoted(account.user), volume_id, display_quoted(target.name, 223));
      }
    }
  }
  if (ours->state != kTgtOffline) {
    ROSETCTL_RETURN_IF_ERROR(set_state(ours->tid, kTgtOffline, volume_id));
  }
  // Every account comes off first, last-bound first: tgtd 1.0.85 corrupts a target that has two
  // accounts when the first is unbound (its next report segfaults).
  std::vector<std::string> replaced;
  for (auto user = ours->incoming_users.rbegin(); user != ours->incoming_users.rend(); ++user) {
    ROSETCTL_RETURN_IF_ERROR(unbind_account(ours->tid, *user, volume_id));
    replaced.push_back(*user);
  }
  for (const std::string& user : ours->outgoing_users) {
    ROSETCTL_RETURN_IF_ERROR(unbind_account(ours->tid, user, volume_id, true));
    replaced.push_back(user);
  }
  auto accounts = tgtadm({"--mode", "account", "--op", "show"}, "cannot list tgtd's CHAP accounts");
  if (!accounts) return accounts.status();
  auto users = parse_tgt_accounts(*accounts);
  if (!users) return users.status();
  for (const ChapCredentials& account : wanted) {
    if (is_listed(*users, account.user)) {
      // Bound to no target now (checked above): replacing it changes only this volume.
      auto deleted = tgtadm(
          {"--mode", "account", "--op", "delete", "--user", account.user},
          fmt::format("cannot replace CHAP account {} in tgtd", display_quoted(account.user)));
      if (!deleted && deleted.status().code() != Code::kNotFound) return deleted.status();
    }
    ROSETCTL_RETURN_IF_ERROR(add_account(account));
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < incoming.size(); ++i) {
    ROSETCTL_RETURN_IF_ERROR(bind_account(ours->tid, wanted[i].user, volume_id));
    names.push_back(wanted[i].user);
  }
  if (outgoing) {
    ROSETCTL_RETURN_IF_ERROR(bind_account(ours->tid, wanted.back().user, volume_id, true));
  }
  // Ready again, also after an earlier call failed half-way; a target still being made (no LUN
  // 1 with its serial yet) is left offline for ensure_target to finish.
  if (is_complete(*ours)) ROSETCTL_RETURN_IF_ERROR(set_state(ours->tid, kTgtReady, volume_id));
  std::erase_if(replaced, [&](const std::string& user) {
    return std::any_of(wanted.begin(), wanted.end(),
                       [&](const ChapCredentials& account) { return account.user == user; });
  });
  ROSETCTL_RETURN_IF_ERROR(delete_unused_accounts(replaced));
  return names;
}

Status TgtBackend::clear_chap(std::string_view volume_id) {
  ROSETCTL_RETURN_IF_ERROR(validate_target_volume_id(volume_id));
  std::lock_guard lock(mutex_);
  auto found = find_target(volume_id);
  if (!found) return found.status();
  if (!found->has_value()) return Status::ok();
  const TgtTarget& target = **found;
  // Last-bound first (see set_chap).
  for (auto user = target.incoming_users.rbegin(); user != target.incoming_users.rend(); ++user) {
    ROSETCTL_RETURN_IF_ERROR(unbind_account(target.tid, *user, volume_id));
  }
  for (const std::string& user : target.outgoing_users) {
    ROSETCTL_RETURN_IF_ERROR(unbind_account(target.tid, user, volume_id, true));
  }
  std::vector<std::string> users = target.incoming_users;
  users.insert(users.end(), target.outgoing_users.begin(), target.outgoing_users.end());
  return delete_unused_accounts(users);
}

Status TgtBackend::delete_unused_accounts(const std::vector<std::string>& users) {
  if (users.empty()) return Status::ok();
  auto targets = show_targets();
  if (!targets) return targets.status();
  for (const std::string& user : users) {
    bool used = std::any_of(targets->begin(), targets->end(), [&](const TgtTarget& t) {
      return is_listed(t.incoming_users, user) || is_listed(t.outgoing_users, user);
    });
    if (used) continue;
    auto deleted =
        tgtadm({"--mode", "account", "--op", "delete", "--user", user},
               fmt::format("cannot delete CHAP account {} from tgtd", display_quoted(user)));
    if (!deleted && deleted.status().code() != Code::kNotFound) return deleted.status();
  }
  return Status::ok();
}

}  // namespace rosetctl
