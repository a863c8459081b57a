// ObjectStore RPCs: answering other nodes' reads of this node's commit store, and pulling a
// snapshot from another node when asked.
#include "cluster/object_store_service.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "cluster/granted_reads.h"
#include "cluster/node_forward.h"
#include "cluster/snapshot_pull.h"
#include "core/commit_store/commit_store.h"
#include "core/commit_store/file_content.h"
#include "core/commit_store/sha256.h"
#include "daemon/call_log.h"
#include "daemon/catalog_convert.h"
#include "daemon/node_state_service.h"
#include "daemon/snapshot_lookup.h"
#include "daemon/stream_reply.h"

namespace rosetctl {
namespace {

constexpr auto kServeStorePatience = std::chrono::seconds(30);
// How often PullSnapshot tells its caller how far it is.
constexpr auto kProgressInterval = std::chrono::milliseconds(100);

// The full method names the proxy and peer_authority.h know them by.
constexpr const char* kLookupSnapshot = "/rosetctl.v1.ObjectStore/LookupSnapshot";
constexpr const char* kFetchObjects = "/rosetctl.v1.ObjectStore/FetchObjects";
constexpr const char* kPullSnapshot = "/rosetctl.v1.ObjectStore/PullSnapshot";

Status check_object_ref(const v1::ObjectRef& ref) {
  if (!is_digest_hex(ref.id())) {
    return error(Code::kInvalidArgument, "\"{}\" is not an object id (64 lowercase hex digits)",
                 ref.id().substr(0, 80));
  }
  if (ref.prefix_sha256().empty()) return Status::ok();
  if (!is_digest_hex(ref.prefix_sha256())) {
    return error(Code::kInvalidArgument,
                 "prefix_sha256 of blob {} is \"{}\", not a SHA-256 (64 lowercase hex digits)",
                 ref.id(), ref.prefix_sha256().substr(0, 80));
  }
  if (ref.kind() != v1::OBJECT_BLOB || ref.offset() <= 0) {
    return error(Code::kInvalidArgument,
                 "prefix_sha256 of object {} needs a blob and an offset past its first byte",
                 ref.id());
  }
  return Status::ok();
}

using ChunkWrite = StreamReply<v1::ObjectChunk>::Write;

Status send_text(v1::ObjectKind kind, const std::string& id, const std::string& text,
                 const ChunkWrite& write) {
  v1::ObjectChunk chunk;
  chunk.set_kind(kind);
  chunk.set_id(id);
  chunk.set_size(static_cast<int64_t>(text.size()));
  std::size_t offset = 0;
  do {
    std::size_t length = std::min<std::size_t>(kObjectChunkBytes, text.size() - offset);
    chunk.set_offset(static_cast<int64_t>(offset));
    chunk.set_data(text.substr(offset, length));
    ROSETCTL_RETURN_IF_ERROR(write(chunk));
    offset += length;
  } while (offset < text.size());
  return Status::ok();
}

// Where to send blob `ref` from: its offset, unless the receiver's first bytes (named by their
// hash) differ from this blob's; then from byte 0. Reading the prefix here is cheaper than
// sending it, and the receiver checks the whole blob against its name either way.
Expected<int64_t> first_byte_to_send(int fd, const v1::ObjectRef& ref, int64_t size) {
  if (ref.prefix_sha256().empty() || ref.offset() > size) return ref.offset();
  ContentBuffer buffer;
  auto prefix = hash_content(fd, ref.offset(), -1, buffer, fmt::format("blob {}", ref.id()));
  if (!prefix) return prefix.status();
  return !prefix->short_read && prefix->sha256 == ref.prefix_sha256() ? ref.offset() : 0;
}

// A blob from `ref`'s offset, as it is on disk: the receiver checks what arrives against its name.
Status send_blob(const CommitStore& store, const v1::ObjectRef& ref, const ChunkWrite& write) {
  const std::string& id = ref.id();
  auto fd = store.open_blob(id);
  if (!fd) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0)
    return errno_status(errno, fmt::format("cannot stat blob {}", id));
  auto first = first_byte_to_send(fd->get(), ref, st.st_size);
  if (!first) return first.status();
  int64_t from = *first;
  if (from < 0 || from > st.st_size) {
    return error(Code::kOutOfRange, "blob {} has {} bytes: cannot send from byte {}", id,
                 st.st_size, from);
  }
  (void)::posix_fadvise(fd->get(), from, 0, POSIX_FADV_SEQUENTIAL);
  v1::ObjectChunk chunk;
  chunk.set_kind(v1::OBJECT_BLOB);
  chunk.set_id(id);
  chunk.set_size(st.st_size);
  int64_t offset = from;
  do {
    std::string* data = chunk.mutable_data();
    data->resize(
        static_cast<std::size_t>(std::min<int64_t>(kObjectChunkBytes, st.st_size - offset)));
    std::size_t filled = 0;
    while (filled < data->size()) {
      ssize_t got = ::pread(fd->get(), data->data() + filled, data->size() - filled,
                            offset + static_cast<int64_t>(filled));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        return errno_status(got < 0 ? errno : EIO, fmt::format("cannot read blob {}", id));
      }
      filled += static_cast<std::size_t>(got);
    }
    chunk.set_offset(offset);
    ROSETCTL_RETURN_IF_ERROR(write(chunk));
    offset += static_cast<int64_t>(data->size());
  } while (offset < st.st_size);
  return Status::ok();
}

Status fetch_objects(const ServiceContext& context, const v1::FetchObjectsRequest& request,
                     const ChunkWrite& write) {
  for (const v1::ObjectRef& ref : request.objects())
    ROSETCTL_RETURN_IF_ERROR(check_object_ref(ref));
  auto store = CommitStore::open(context.layout.commit_store_dir());
  if (!store) return store.status();
  // Nothing being sent is collected meanwhile.
  auto lock = (*store)->lock_shared(kServeStorePatience);
  if (!lock) return lock.status();
  for (const v1::ObjectRef& ref : request.objects()) {
    switch (ref.kind()) {
      case v1::OBJECT_TREE: {
        auto tree = (*store)->read_tree(ref.id());  // a damaged tree is refused here already
        if (!tree) return tree.status();
        ROSETCTL_RETURN_IF_ERROR(send_text(ref.kind(), ref.id(), serialize_tree(*tree), write));
        break;
      }
      case v1::OBJECT_COMMIT: {
        auto commit = (*store)->read_commit(ref.id());
        if (!commit) return commit.status();
        ROSETCTL_RETURN_IF_ERROR(send_text(ref.kind(), ref.id(), serialize_commit(*commit), write));
        break;
      }
      default:
        ROSETCTL_RETURN_IF_ERROR(send_blob(**store, ref, write));
    }
  }
  return Status::ok();
}

Status lookup_snapshot(const ServiceContext& context, const v1::LookupSnapshotRequest& request,
                       v1::LookupSnapshotResponse* response) {
  auto record = find_snapshot_by_reference(context.store, request.reference());
  if (!record) return record.status();
  if (!record->ready) {
    return error(Code::kFailedPrecondition, "snapshot {} is not ready yet", record->id);
  }
  auto store = CommitStore::open(context.layout.commit_store_dir());
  if (!store) return store.status();
  if (!(*store)->has_commit(record->commit_id)) {
    return error(Code::kFailedPrecondition,
                 "snapshot {} (provider \"{}\") is not in this node's commit store: only "
                 "snapshots of the local provider move between nodes",
                 record->id, record->provider);
  }
  auto commit = (*store)->read_commit(record->commit_id);
  if (!commit) return commit.status();
  fill_snapshot_details(*record, response->mutable_snapshot());
  response->set_tree_id(commit->tree);
  response->set_checks_prefix(true);
  return Status::ok();
}

}  // namespace

grpc::ServerUnaryReactor* ObjectStoreService::LookupSnapshot(
    Request* call, const v1::LookupSnapshotRequest* request, v1::LookupSnapshotResponse* response) {
  if (auto node = other_node_named(context_, *call)) {
    return forward_unary(context_, call, kLookupSnapshot, std::move(*node), *request, response);
  }
  return answer(handlers_, call, kLookupSnapshot, request, response, [=, this] {
    ROSETCTL_RETURN_IF_ERROR(check_granted_lookup(context_, *call, request->reference()));
    return lookup_snapshot(context_, *request, response);
  });
}

grpc::ServerWriteReactor<v1::ObjectChunk>* ObjectStoreService::FetchObjects(
    Request* call, const v1::FetchObjectsRequest* request) {
  if (auto node = other_node_named(context_, *call)) {
    return new ForwardedStream<v1::ObjectChunk>(context_, call, kFetchObjects, std::move(*node),
                                                *request);
  }
  return StreamReply<v1::ObjectChunk>::start(
      handlers_, call, kFetchObjects, request, [this, call, request](const ChunkWrite& write) {
        ROSETCTL_RETURN_IF_ERROR(check_granted_fetch(context_, *call, *request));
        return fetch_objects(context_, *request, write);
      });
}

grpc::ServerWriteReactor<v1::PullSnapshotProgress>* ObjectStoreService::PullSnapshot(
    Request* call, const v1::PullSnapshotRequest* request) {
  if (auto node = other_node_named(context_, *call)) {
    return new ForwardedStream<v1::PullSnapshotProgress>(context_, call, kPullSnapshot,
                                                         std::move(*node), *request);
  }
  using Write = StreamReply<v1::PullSnapshotProgress>::Write;
  return StreamReply<v1::PullSnapshotProgress>::start(
      handlers_, call, kPullSnapshot, request, [this, request](const Write& write) -> Status {
        ROSETCTL_RETURN_IF_ERROR(check_this_node(context_, request->node_id()));
        auto last = std::chrono::steady_clock::time_point();
        auto report = [&](const v1::PullSnapshotProgress& now) -> Status {
          auto at = std::chrono::steady_clock::now();
          if (!now.done() && at - last < kProgressInterval) return Status::ok();
          last = at;
          return write(now);
        };
        auto pulled = pull_snapshot(context_, request->from_node_id(), request->reference(),
                                    PullReference::kAny, report);
        if (!pulled) return pulled.status();
        if (request->prepare_restore()) prepare_restore_here(context_, pulled->commit_id());
        return Status::ok();
      });
}

}  // namespace rosetctl
