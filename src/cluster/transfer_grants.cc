// The book of transfer grants (transfer_grants.h).
#include "cluster/transfer_grants.h"

#include <algorithm>

#include "core/clock.h"
#include "core/random_id.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

thread_local const CarriedGrant* t_carried_grant = nullptr;

// Which grant is meant, for a message: what it names, never its token.
std::string grant_described(const TransferGrant& grant) {
  return fmt::format("its grant lets node {} read snapshot {} of node {}",
                     display_quoted(grant.receiver), display_quoted(grant.reference),
                     display_quoted(grant.source));
}

}  // namespace

std::string TransferGrants::issue(TransferGrant grant, Clock::time_point now) {
  std::string token = random_hex(32);
  grant.issued_unix = unix_now_seconds();
  std::lock_guard<std::mutex> lock(mutex_);
  forget_old(now);
  entries_[token] = Entry{std::move(grant), now + kIdle, now + kLongest, nullptr};
  return token;
}

void TransferGrants::keep(const std::string& token, TransferGrant grant, Clock::duration left,
                          Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  forget_old(now);
  auto found = entries_.find(token);
  if (found != entries_.end() && found->second.expires >= now) return;  // ours is as good
  entries_[token] = Entry{std::move(grant), now + std::min<Clock::duration>(left, kIdle),
                          now + kLongest, nullptr};
}

std::optional<TransferGrant> TransferGrants::find(const std::string& token, Clock::duration* left,
                                                  Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = entries_.find(token);
  if (found == entries_.end() || found->second.expires < now) return std::nullopt;
  if (left != nullptr) *left = found->second.expires - now;
  return found->second.grant;
}

bool TransferGrants::knows(const std::string& token) {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.contains(token);
}

Expected<TransferGrant> TransferGrants::check(const std::string& token, const GrantedRead& read,
                                              Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = entries_.find(token);
  if (found == entries_.end()) {
    return error(Code::kPermissionDenied,
                 "the transfer grant it carried is not one the controller issued, or it expired "
                 "long ago");
  }
  Entry& entry = found->second;
  const TransferGrant& grant = entry.grant;
  if (entry.expires < now) {
    return error(Code::kPermissionDenied,
                 "the transfer grant it carried expired ({}); the controller issues a new one "
                 "when the transfer is started again",
                 grant_described(grant));
  }
  if (read.receiver && *read.receiver != grant.receiver) {
    return error(Code::kPermissionDenied, "the transfer grant it carried is not node {}'s ({})",
                 display_quoted(*read.receiver), grant_described(grant));
  }
  if (read.source != grant.source) {
    return error(Code::kPermissionDenied,
                 "the transfer grant it carried is not for node {}'s store ({})",
                 display_quoted(read.source), grant_described(grant));
  }
  if (read.reference && *read.reference != grant.reference) {
    return error(Code::kPermissionDenied,
                 "the transfer grant it carried is not for snapshot {} ({})",
                 display_quoted(*read.reference), grant_described(grant));
  }
  entry.expires = std::min(entry.limit, std::max(entry.expires, now + kIdle));
  return grant;
}

std::shared_ptr<const std::set<std::string>> TransferGrants::objects(const std::string& token) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = entries_.find(token);
  return found == entries_.end() ? nullptr : found->second.objects;
}

void TransferGrants::set_objects(const std::string& token,
                                 std::shared_ptr<const std::set<std::string>> ids) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = entries_.find(token);
  if (found != entries_.end()) found->second.objects = std::move(ids);
}

void TransferGrants::forget_old(Clock::time_point now) {
  std::erase_if(entries_, [now](const auto& entry) { return entry.second.expires + kIdle < now; });
}

std::string carried_grant(const grpc::ServerContextBase& call) {
  auto found = call.client_metadata().find(kTransferGrantKey);
  if (found == call.client_metadata().end()) return "";
  return std::string(found->second.data(), found->second.size());
}

CarriedGrant::CarriedGrant(std::string token)
    : token_(std::move(token)), previous_(t_carried_grant) {
  t_carried_grant = this;
}

CarriedGrant::~CarriedGrant() {
  t_carried_grant = previous_;
}

const std::string& CarriedGrant::current() {
  static const std::string kNone;
  return t_carried_grant == nullptr ? kNone : t_carried_grant->token_;
}

}  // namespace rosetctl
