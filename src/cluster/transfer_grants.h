// Transfer grants: a node's certificate reads another node's commit store (ObjectStore's
// LookupSnapshot and FetchObjects) only for a transfer the controller started (issue 31). When
// the controller starts one (a create from a snapshot placed on another node, a clone across
// nodes, a PullSnapshot it forwards for an admin, itself or this host), it issues a grant naming
// the receiver, the source and the snapshot, and sends its token to the receiver in the call's
// metadata (kTransferGrantKey); the receiver shows it to the source with every read
// (cluster/source_node.h). The source holds each read to the grant: the caller's certificate
// names the receiver, this node is the source, the snapshot asked is the one granted, and only
// that snapshot's objects are sent. A source that is not the controller asks the controller
// about a token it does not know (Registry CheckTransferGrant) on the handler pool, and keeps
// the answer in a book of its own, so the check itself never waits on the network.
//
// A grant is short-lived: the transfer must start within kIdle of its issue, and each use keeps
// it alive for kIdle more (a big pull fetches in many calls), never past kLongest. Tokens are
// capabilities: they travel only in metadata, and no message or log line shows one.
#pragma once

#include <grpcpp/server_context.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "core/status.h"

namespace rosetctl {

// The metadata key that carries a grant's token (to the receiver, and from it to the source).
inline constexpr const char* kTransferGrantKey = "rosetctl-transfer-grant";

struct TransferGrant {
  std::string receiver;   // the node that reads
  std::string source;     // the node read
  std::string reference;  // the snapshot, as the receiver looks it up (LookupSnapshot)
  // When the controller issued it (unix seconds, set by issue()): a grant issued before its
  // receiver's revocation is void (cluster/node_revocations.h).
  int64_t issued_unix = 0;
};

// What a read under a grant is: by whom (nullopt: a caller that needs no grant, the controller
// forwarding a node's read it checked), of which node, for which snapshot (nullopt: objects).
struct GrantedRead {
  std::optional<std::string> receiver;
  std::string source;
  std::optional<std::string> reference;
};

class TransferGrants {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::minutes kIdle{10};
  static constexpr std::chrono::hours kLongest{25};

  // A new grant (the controller's); its token.
  std::string issue(TransferGrant grant, Clock::time_point now = Clock::now());

  // A grant the controller vouched for, valid for `left` from `now` (a source's copy).
  void keep(const std::string& token, TransferGrant grant, Clock::duration left,
            Clock::time_point now = Clock::now());

  // The unexpired grant of `token`, and how long it has left; nullopt when there is none.
  std::optional<TransferGrant> find(const std::string& token, Clock::duration* left = nullptr,
                                    Clock::time_point now = Clock::now());

  // Whether `token` is known here at all (expired or not): a source asks the controller
  // about the others.
  bool knows(const std::string& token);

  // `read` is within `token`'s grant: OK and the grant (kept alive for kIdle more), or
  // PERMISSION_DENIED saying what was wrong (unknown, expired, another receiver, source or
  // snapshot), never the token.
  Expected<TransferGrant> check(const std::string& token, const GrantedRead& read,
                                Clock::time_point now = Clock::now());

  // The objects of the granted snapshot (its commit, tree and blobs), once someone worked them
  // out for this grant; null before.
  std::shared_ptr<const std::set<std::string>> objects(const std::string& token);
  void set_objects(const std::string& token, std::shared_ptr<const std::set<std::string>> ids);

 private:
  struct Entry {
    TransferGrant grant;
    Clock::time_point expires;
    Clock::time_point limit;  // never valid past this
    std::shared_ptr<const std::set<std::string>> objects;
  };
  // Forgets grants expired for kIdle: long enough that a late read is told "expired".
  void forget_old(Clock::time_point now);

  std::mutex mutex_;
  std::map<std::string, Entry> entries_;  // by token; guarded by mutex_
};

// The transfer grant `call` carries in its metadata; "" when none.
std::string carried_grant(const grpc::ServerContextBase& call);

// The grant the call this thread works for carries ("" when none): a handler that starts a
// transfer (a create from another node's snapshot, PullSnapshot) shows it to the source
// (SourceNode::reach takes it). run_logged (daemon/call_log.h) sets it for every handler, through
// the authorization's call gate (authorization.h).
class CarriedGrant {
 public:
  explicit CarriedGrant(std::string token);
  ~CarriedGrant();
  CarriedGrant(const CarriedGrant&) = delete;
  CarriedGrant& operator=(const CarriedGrant&) = delete;

  static const std::string& current();

 private:
  std::string token_;
  const CarriedGrant* previous_;
};

}  // namespace rosetctl
