// NodeState RPCs: this node's records of a volume, the targets connect and disconnect name,
// and the attach lock held for as long as the caller keeps the call open.
#include "daemon/node_state_service.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/validate.h"
#include "daemon/call_log.h"
#include "daemon/node_mounts.h"
#include "daemon/node_paths.h"

namespace rosetctl {
namespace {

void fill_condition(const std::string& problem, v1::MountCondition* condition) {
  condition->set_abnormal(!problem.empty());
  condition->set_message(problem);
}

// The parent resolved through symlinks as the kernel resolves it ("." and ".." too), the leaf
// kept: the form NodePublishVolume checks and records.
Expected<std::string> resolve_parent(const std::string& absolute, const std::string& shown_as) {
  std::string trimmed = absolute;
  while (trimmed.size() > 1 && trimmed.back() == '/')
    trimmed.pop_back();
  std::filesystem::path path(trimmed);
  std::string leaf = path.filename().string();
  std::filesystem::path parent =
      leaf.empty() || leaf == "." || leaf == ".." ? path : path.parent_path();
  if (leaf == "." || leaf == "..") leaf.clear();
  char resolved[PATH_MAX];
  if (::realpath(parent.c_str(), resolved) == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return error(Code::kInvalidArgument, "--target \"{}\": directory \"{}\" does not exist",
                   escape_text(shown_as), escape_text(parent.string()));
    }
    return errno_status(errno, fmt::format("--target \"{}\": cannot resolve \"{}\"",
                                           escape_text(shown_as), escape_text(parent.string())));
  }
  return leaf.empty() ? std::string(resolved) : fmt::format("{}/{}", resolved, leaf);
}

// HoldAttachLock: waits for the lock on a handler thread, answers `held`, then keeps the lock
// until the call is cancelled (the client ended it, went away, or the server shuts down).
class AttachLockReactor final : public grpc::ServerWriteReactor<v1::HoldAttachLockResponse> {
 public:
  AttachLockReactor(ServiceContext& context, HandlerPool& handlers,
                    grpc::CallbackServerContext* call, const v1::HoldAttachLockRequest* request)
      : context_(context), call_(call), request_(*request) {
    handlers.run([this] { take_turn(); });
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    write_failed_ = !ok;
    written_.notify_all();
  }

  void OnCancel() override {
    bool finish_now = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
      finish_now = holding_;
      holding_ = false;
    }
    if (!finish_now) return;  // the waiting thread sees it and finishes
    held_ = HeldLock();       // released before the call ends, so the next run goes at once
    Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override { delete this; }

 private:
  void take_turn() {
    auto start = std::chrono::steady_clock::now();
    log_call_start("HoldAttachLock", request_);
    CallAdmission admitted = admission_of(*call_);
    Status status = admitted.status;
    if (status.is_ok()) status = wait_for_lock();
    v1::HoldAttachLockResponse none;
    log_call_end("HoldAttachLock", admitted, request_, none, status,
                 std::chrono::steady_clock::now() - start);
    if (!status.is_ok()) {
      held_ = HeldLock();
      mark_answered(*call_);
      Finish(to_grpc(status));  // the last use of this reactor on this thread
      return;
    }
    bool finish_now = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finish_now = cancelled_;
      holding_ = !cancelled_;
    }
    if (!finish_now) return;  // OnCancel finishes the call when it comes
    held_ = HeldLock();
    Finish(grpc::Status::CANCELLED);
  }

  Status wait_for_lock() {
    ROSETCTL_RETURN_IF_ERROR(check_this_node(context_, request_.node_id()));
    ROSETCTL_RETURN_IF_ERROR(validate_id(request_.volume_id(), "volume_id"));
    std::string key = fmt::format("attach:{}", request_.volume_id());
    std::string busy = fmt::format(
        "another rosetctl run is connecting or disconnecting volume \"{}\"", request_.volume_id());
    auto give_up = std::chrono::steady_clock::now() + kAttachPatience;
    auto pause = std::chrono::milliseconds(5);
    bool said_waiting = false;
    while (true) {
      if (call_->IsCancelled()) return error(Code::kCancelled, "the caller went away");
      auto held = context_.locks.try_lock(key, LockMode::kExclusive, busy);
      if (held) {
        held_ = std::move(*held);
        v1::HoldAttachLockResponse answer;
        answer.set_held(true);
        return write(answer);
      }
      if (held.status().code() != Code::kAborted || std::chrono::steady_clock::now() >= give_up) {
        return held.status();
      }
      if (!said_waiting) {
        v1::HoldAttachLockResponse waiting;
        waiting.set_waiting(busy);
        ROSETCTL_RETURN_IF_ERROR(write(waiting));
        said_waiting = true;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
  }

  // One message, waited for: a write reactor takes one write at a time.
  Status write(const v1::HoldAttachLockResponse& message) {
    std::unique_lock<std::mutex> lock(mutex_);
    message_ = message;
    writing_ = true;
    StartWrite(&message_);
    written_.wait(lock, [this] { return !writing_; });
    if (write_failed_) return error(Code::kCancelled, "the caller went away");
    return Status::ok();
  }

  ServiceContext& context_;
  grpc::CallbackServerContext* call_;
  const v1::HoldAttachLockRequest request_;
  HeldLock held_;  // touched by the waiting thread, then (once holding_) by OnCancel only
  v1::HoldAttachLockResponse message_;
  std::mutex mutex_;
  std::condition_variable written_;
  bool writing_ = false;       // guarded by mutex_
  bool write_failed_ = false;  // guarded by mutex_
  bool cancelled_ = false;     // guarded by mutex_
  bool holding_ = false;       // guarded by mutex_: held, and the call is OnCancel's to finish
};

}  // namespace

Status check_this_node(const ServiceContext& context, std::string_view node_id) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(node_id, "node_id"));
  if (node_id == context.options.node_id) return Status::ok();
  return error(Code::kInvalidArgument,
               "node_id \"{}\" is not this node (\"{}\"): a node answers only for itself (a "
               "server with a Node service of its own answers node calls rather than forwarding "
               "them: reach other nodes through one serving --role controller)",
               node_id, context.options.node_id);
}

grpc::ServerUnaryReactor* NodeStateService::GetNodeVolumes(Request* call,
                                                           const v1::GetNodeVolumesRequest* request,
                                                           v1::GetNodeVolumesResponse* response) {
  return answer(handlers_, call, "GetNodeVolumes", request, response,
                [=, this] { return get_node_volumes(*request, response); });
}

grpc::ServerUnaryReactor* NodeStateService::ResolveTarget(Request* call,
                                                          const v1::ResolveTargetRequest* request,
                                                          v1::ResolveTargetResponse* response) {
  return answer(handlers_, call, "ResolveTarget", request, response,
                [=, this] { return resolve_target(*request, response); });
}

grpc::ServerWriteReactor<v1::HoldAttachLockResponse>* NodeStateService::HoldAttachLock(
    Request* call, const v1::HoldAttachLockRequest* request) {
  return new AttachLockReactor(context_, handlers_, call, request);
}

Status NodeStateService::get_node_volumes(const v1::GetNodeVolumesRequest& request,
                                          v1::GetNodeVolumesResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_this_node(context_, request.node_id()));
  for (const std::string& id : request.volume_ids())
    ROSETCTL_RETURN_IF_ERROR(validate_id(id, "volume_ids"));
  for (const std::string& id : request.volume_ids())
    ROSETCTL_RETURN_IF_ERROR(describe(id, response->add_volumes()));
  return Status::ok();
}

Status NodeStateService::describe(const std::string& id, v1::NodeVolume* response) {
  response->set_volume_id(id);
  auto publications = context_.store.node_publications(id);
  if (!publications) return publications.status();
  for (const NodePublication& publication : *publications) {
    v1::NodePublication* out = response->add_publications();
    out->set_target_path(publication.target_path);
    out->set_staging_path(publication.staging_path);
    out->set_readonly(publication.readonly);
    fill_condition(recorded_mount_problem(publication.target_path, publication.mount),
                   out->mutable_condition());
  }
  auto stagings = context_.store.stagings(id);
  if (!stagings) return stagings.status();
  for (const Staging& staging : *stagings) {
    v1::NodeStaging* out = response->add_stagings();
    out->set_staging_path(staging.staging_path);
    fill_condition(recorded_mount_problem(staging.staging_path, staging.mount),
                   out->mutable_condition());
  }
  response->set_own_staging_path(fmt::format("{}/{}", context_.layout.staging_dir(), id));
  return Status::ok();
}

Status NodeStateService::resolve_target(const v1::ResolveTargetRequest& request,
                                        v1::ResolveTargetResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_this_node(context_, request.node_id()));
  const std::string& id = request.volume_id();
  ROSETCTL_RETURN_IF_ERROR(validate_id(id, "volume_id"));
  std::string path = request.path();
  std::string shown_as = request.shown_as().empty() ? path : request.shown_as();
  if (path.empty()) {
    ROSETCTL_RETURN_IF_ERROR(validate_name(request.volume_name(), "volume_name"));
    path = fmt::format("{}/{}", request.block() ? kBlockDeviceDir : context_.layout.mounts_dir(),
                       request.volume_name());
    shown_as = path;
  } else if (path.front() != '/') {
    return error(Code::kInvalidArgument, "target \"{}\" is not an absolute path",
                 escape_text(path));
  }
  if (request.block() && std::filesystem::path(path).parent_path() == kBlockDeviceDir &&
      ::mkdir(kBlockDeviceDir, 0755) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create \"{}\"", kBlockDeviceDir));
  }
  auto joined = resolve_parent(path, shown_as);
  if (!joined) return joined.status();
  auto target =
      checked_mount_path(context_.layout, *joined, "--target", context_.layout.mounts_dir());
  if (!target) return target.status();
  response->set_path(*target);
  auto existing = context_.store.find_node_publication(*target);
  if (!existing) return existing.status();
  bool already = existing->has_value() && (*existing)->volume_id == id;
  response->set_already_published(already);
  if (request.check() && !already) {
    ROSETCTL_RETURN_IF_ERROR(request.block() ? check_block_target(*target)
                                             : check_publish_target(*target));
  }
  return Status::ok();
}

}  // namespace rosetctl
