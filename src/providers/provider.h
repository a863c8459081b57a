// The contract between the CSI services and a storage provider, in domain terms (no protobuf).
//
// The daemon validates requests, takes locks, keeps idempotency and records state; a provider
// only makes storage exist and appear on this node. Adding a provider = a folder under
// src/providers/ and one line in registry.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/commit_store/tree_diff.h"
#include "core/lock_space.h"
#include "core/mount_ops.h"
#include "core/progress.h"
#include "core/state_store.h"
#include "core/status.h"

namespace rosetctl {

using StringMap = std::map<std::string, std::string>;

// Parameter keys the CSI sidecars add (csi.storage.k8s.io/pvc/name, ...): accepted everywhere,
// never interpreted.
inline constexpr std::string_view kKubernetesParameterPrefix = "csi.storage.k8s.io/";

enum class AccessType { kMount, kBlock };

// Same numbers as csi.v1.VolumeCapability.AccessMode.Mode.
enum class AccessMode : int {
  kUnknown = 0,
  kSingleNodeWriter = 1,
  kSingleNodeReaderOnly = 2,
  kMultiNodeReaderOnly = 3,
  kMultiNodeSingleWriter = 4,
  kMultiNodeMultiWriter = 5,
  kSingleNodeSingleWriter = 6,
  kSingleNodeMultiWriter = 7,
};

struct Capability {
  AccessType access_type = AccessType::kMount;
  AccessMode access_mode = AccessMode::kUnknown;
  std::string fs_type;
  std::vector<std::string> mount_flags;
  std::string mount_group;
};

// Keeps NodeStage, NodeUnstage and NodePublish of the volume away on this node while the lock
// is held (the daemon's stage lock), waiting a while for one in flight, then ABORTED. A provider
// copying a volume's data takes it so that the volume is not staged or unstaged mid-copy.
using StagingLocker = std::function<Expected<HeldLock>(std::string_view volume_id)>;

// What a new volume starts with (CSI volume_content_source). The daemon has checked that the
// snapshot or volume exists and belongs to the same provider.
struct VolumeSource {
  enum class Kind { kNone, kSnapshot, kVolume };
  Kind kind = Kind::kNone;
  std::string id;  // the snapshot's commit id (SnapshotRecord::commit_id), or the volume id
  // A snapshot pulled from another node: what it holds is that node's word, so setuid bits,
  // device nodes and privileged xattrs are not restored (core/commit_store/tree.h).
  bool from_another_host = false;
};

struct CreateVolumeSpec {
  std::string name;
  int64_t required_bytes = 0;  // 0: not given
  int64_t limit_bytes = 0;     // 0: no limit
  StringMap parameters;
  std::vector<Capability> capabilities;
  StringMap secrets;
  VolumeSource source;
  ProgressSink* progress = nullptr;  // filling from a source may take a while
  StagingLocker hold_stagings;       // unset: nothing is locked
  StringMap mutable_parameters;      // CSI mutable_parameters: they win over `parameters`
};

struct SnapshotSpec {
  std::string name;  // the CSI snapshot name (the caller's idempotency key)
  std::string volume_id;
  std::string volume_name;
  std::string parent_id;  // the volume's latest snapshot, or ""
  std::string message;
  ProgressSink* progress = nullptr;
  StringMap secrets;            // CreateSnapshot's secrets (a remote provider's credentials)
  StagingLocker hold_stagings;  // unset: nothing is locked
  // A move's pre-copy round: files written to while read are kept as read (a directory volume's
  // commit; an image is held still for its copy anyway). Providers that move nothing ignore it.
  bool pre_copy = false;
};

struct ProvisionedSnapshot {
  std::string id;
  int64_t size_bytes = 0;  // bytes of the files it holds
  int64_t file_count = 0;
  int64_t new_bytes = 0;  // storage it added
  int64_t created_at_ns = 0;
  StringMap context;  // what it holds, for SnapshotRecord::context
};

// Records a finished snapshot (the daemon's state store insert). create_snapshot calls it while
// the snapshot is still protected from garbage collection; if it fails, the snapshot is dropped.
using RecordSnapshot = std::function<Status(const ProvisionedSnapshot&)>;
// Removes the daemon's record of a snapshot being deleted.
using ForgetSnapshot = std::function<Status()>;

// `snapshot verify`: problems make the command fail; notes are harmless leftovers.
struct SnapshotVerification {
  int64_t snapshots = 0;
  int64_t objects = 0;
  int64_t bytes = 0;
  std::vector<std::string> problems;
  std::vector<std::string> notes;
  std::vector<std::string> damaged;  // names of the snapshots a problem makes unrestorable
};

// `snapshot gc` and the collection after DeleteSnapshot.
struct StorageCollection {
  bool ran = false;  // false: the storage was busy and nothing was collected this time
  int64_t snapshots = 0;
  int64_t unrecorded_removed = 0;  // snapshot data no record refers to (interrupted operations)
  int64_t objects_removed = 0;
  int64_t bytes_reclaimed = 0;
};

struct ProvisionedVolume {
  std::string id;
  int64_t capacity_bytes = 0;
  StringMap context;             // becomes the CSI volume_context (never changes)
  StringMap mutable_parameters;  // the mutable parameters in effect, as recorded for the volume
};

struct StageSpec {
  std::string volume_id;
  std::string staging_path;  // normalised, exists, not yet mounted by us
  Capability capability;
  StringMap publish_context;
  StringMap volume_context;
  StringMap secrets;
};

struct PublishSpec {
  std::string volume_id;
  std::string staging_path;
  std::string target_path;  // normalised; a directory for mount volumes
  Capability capability;
  bool readonly = false;
  StringMap volume_context;
  // The volume's record on this host as the caller read it for this call, so that the provider
  // need not read it again; null: not read (or not held here).
  const VolumeRecord* volume = nullptr;
  // Given to bind_mount (core/mount_ops.h) for the target's mount: the caller records the
  // publication there, before the mount exists and with its identity. Empty: no record.
  BeforeAttach before_attach = {};
};

struct VolumeCondition {
  bool abnormal = false;
  std::string message;
};

struct ExpandedVolume {
  int64_t capacity_bytes = 0;
  bool node_expansion_required = false;  // NodeExpandVolume must grow what is staged
};

struct NodeExpandSpec {
  std::string volume_id;
  std::string volume_path;   // where it is published: a directory, or a block device file
  std::string staging_path;  // "" when the CO gave none
  int64_t required_bytes = 0;
};

// Takes the locks a NodeStage of the volume would take; ABORTED while one is in flight.
using VolumeLocker = std::function<Expected<std::vector<HeldLock>>(std::string_view volume_id)>;

// A provider is split by side, because the sides share nothing on a provider such as iSCSI
// (tgtadm on the controller; login and device discovery on the node): ControllerSide,
// SnapshotSide and NodeSide below. A provider object hands out the parts it has; one class may
// implement several (local and roset implement all three), or each part may be its own object.

// --- controller side: making and removing storage ---
class ControllerSide {
 public:
  virtual ~ControllerSide() = default;

  // The provider's name, for messages (Provider::name()).
  virtual std::string_view name() const = 0;

  // Parameters and capabilities this provider accepts; INVALID_ARGUMENT otherwise.
  virtual Status validate_create(const CreateVolumeSpec& spec) const = 0;
  // Must be safe to call again after a crash; the daemon records the result.
  virtual Expected<ProvisionedVolume> create_volume(const CreateVolumeSpec& spec) = 0;
  // Called after the daemon verified the volume is not in use; removes the data.
  virtual Status delete_volume(const VolumeRecord& volume) = 0;
  // DeleteVolume with the request's CSI secrets (a remote provider's credentials). Default:
  // delete_volume(volume).
  virtual Status delete_volume_with(const VolumeRecord& volume, const StringMap& secrets);
  // Free bytes for new volumes (GetCapacity).
  virtual Expected<int64_t> available_capacity() const = 0;
  // Health as the controller sees it (ListVolumes / ControllerGetVolume).
  virtual VolumeCondition volume_condition(const VolumeRecord& volume) const = 0;
  // What makes `existing` unfit for a repeated CreateVolume beyond the parameters, size and
  // access type the daemon compares (another filesystem, say); "" when it fits.
  virtual std::string incompatibility(const VolumeRecord& existing,
                                      const CreateVolumeSpec& spec) const;
  // Why an existing volume cannot be used with `capability` beyond its access type, which the
  // daemon checks (a filesystem other than the one it holds, say); "" when it can. Default: "".
  virtual std::string capability_mismatch(const VolumeRecord& volume,
                                          const Capability& capability) const;
  // Grows the volume to at least `required_bytes`, at most `limit_bytes` (0: no limit); the
  // daemon records the capacity returned. Never shrinks. Default: the new size is only
  // recorded, as for volumes whose size is not enforced.
  virtual Expected<ExpandedVolume> expand_volume(const VolumeRecord& volume, int64_t required_bytes,
                                                 int64_t limit_bytes);

  // --- mutable parameters (CreateVolume's mutable_parameters, ControllerModifyVolume) ---
  // INVALID_ARGUMENT naming the key when spec.mutable_parameters holds one this provider cannot
  // change after creation, or a value that does not suit the volume the spec asks for. Default:
  // nothing is mutable, so any key is refused.
  virtual Status validate_mutable(const CreateVolumeSpec& spec) const;
  // The same check for an existing volume (ValidateVolumeCapabilities, ModifyVolume): whether
  // `parameters` suit it as it is, whatever its record's creation parameters said (a restore
  // or clone is the kind of volume its source was).
  virtual Status check_mutable(const VolumeRecord& volume, const StringMap& parameters) const;
  // Applies `changes` (only the keys given; an absent key changes nothing) to the volume, live
  // where it is in use on this node. The daemon records the result once this succeeded.
  // INVALID_ARGUMENT naming the key as above. Default: nothing is mutable.
  virtual Status modify_volume(const VolumeRecord& volume, const StringMap& changes);

  // --- map and unmap (ControllerPublish / ControllerUnpublish) ---
  // Lets `node` reach the volume (`node` is its registry record; for this plugin's own node
  // when it never registered, only its id); returns what the node needs to attach it, added to
  // the publish context. Called before the publication is recorded and on every retry, so it
  // must be idempotent. Default: nothing to do (the volume is reachable as it is).
  virtual Expected<StringMap> map_to_node(const VolumeRecord& volume, const NodeRecord& node,
                                          const StringMap& secrets);
  // The reverse, before the publication record goes; idempotent. Default: nothing to do.
  virtual Status unmap_from_node(const VolumeRecord& volume, const NodeRecord& node);
  // Whether map_to_node and unmap_from_node read the node's record (a provider that overrides
  // them says true); when false the daemon hands them only the node's id, without reading the
  // registry: one read transaction less per ControllerPublish and ControllerUnpublish.
  virtual bool maps_use_node_record() const { return false; }
  // The secrets map_to_node made for `node` (an iscsi volume's CHAP credentials), which the
  // node asks for at NodeStage when the publish context names them
  // (kPublishSecretsFromController) and only over its own mutual TLS: they never travel in the
  // publish context. The daemon has checked the volume is published to the node. Default: none.
  virtual Expected<StringMap> publish_secrets(const VolumeRecord& volume, const NodeRecord& node);
  // A controller starts: external state the provider keeps (targets of a target daemon) is
  // brought in line with the state database. Default: nothing to do.
  virtual Status reconcile_controller();
};

// --- snapshots (optional: without this part, snapshot calls are UNIMPLEMENTED) ---
class SnapshotSide {
 public:
  virtual ~SnapshotSide() = default;

  // The provider's name, for messages (Provider::name()).
  virtual std::string_view name() const = 0;

  // Takes a snapshot of the volume and calls `record` before returning.
  virtual Expected<ProvisionedSnapshot> create_snapshot(const SnapshotSpec& spec,
                                                        const RecordSnapshot& record) = 0;
  // Called after the daemon removed the record; frees what no other snapshot or volume needs
  // (now, or at the next collection when the storage is busy).
  virtual Status delete_snapshot(const SnapshotRecord& snapshot) = 0;
  // DeleteSnapshot with the request's CSI secrets. Calls `forget` where a crash leaves the
  // least behind. Default: forget, then delete_snapshot (data no record names is found by
  // garbage collection; a record whose data is gone would be a lie).
  virtual Status delete_snapshot_with(const SnapshotRecord& snapshot, const StringMap& secrets,
                                      const ForgetSnapshot& forget);
  // The maintenance below is for snapshots whose data this host stores; a provider whose
  // snapshots live elsewhere (roset's commits) keeps the defaults: UNIMPLEMENTED.
  // What changed from `from` to `to`, path by path.
  virtual Expected<std::vector<TreeChange>> diff_snapshots(const SnapshotRecord& from,
                                                           const SnapshotRecord& to);
  virtual Expected<SnapshotVerification> verify_snapshots(
      const std::vector<SnapshotRecord>& snapshots, ProgressSink* progress);
  // Waits up to `patience` for the storage to be free, then collects.
  virtual Expected<StorageCollection> collect_garbage(std::chrono::milliseconds patience);
  // Restores commit `commit_id` ahead, so that a volume made later from it or from a commit whose
  // parent it is moves the files that did not change instead of copying them (a move's last
  // round, restored before its pause). `from_another_host`: as the later restore will be.
  // UNIMPLEMENTED where there is no commit store.
  virtual Status prepare_restore(std::string_view commit_id, bool from_another_host);
};

// --- node side: making a volume appear on this host ---
class NodeSide {
 public:
  virtual ~NodeSide() = default;

  // NOT_FOUND when this node cannot reach a volume with that id.
  virtual Status check_volume_on_node(std::string_view volume_id) const = 0;
  // The same for a caller that has just read the volume's record on this host (`here`; null
  // when this host holds none), which a provider that would read it takes instead.
  // Default: check_volume_on_node.
  virtual Status check_volume_on_node_given(std::string_view volume_id,
                                            const VolumeRecord* here) const;
  // Makes the volume appear at spec.staging_path. Leaves nothing behind on failure.
  virtual Status stage_volume(const StageSpec& spec) = 0;
  // Undoes stage_volume; a path that is not mounted is fine (idempotent). The daemon has
  // checked that a mount at the path is the recorded staging, so only the topmost one goes.
  virtual Status unstage_volume(std::string_view volume_id, const std::string& staging_path) = 0;
  // Default: bind mount staging → target, read-only and with mount flags when asked. The
  // target's mount is made by bind_mount with spec.before_attach.
  virtual Status publish_volume(const PublishSpec& spec);
  // Default: unmount the topmost mount at the target, which the daemon has checked is the
  // recorded publication (core/mount_ownership.h).
  virtual Status unpublish_volume(std::string_view volume_id, const std::string& target_path);
  // NodeExpandVolume: grows what is staged here to the volume's size; returns the capacity.
  // Default: nothing on the node to grow.
  virtual Expected<int64_t> expand_on_node(const NodeExpandSpec& spec);
  // Health as this node sees it (NodeGetVolumeStats). Default: healthy.
  virtual VolumeCondition node_condition(std::string_view volume_id) const;
  // A staging of the volume here is dead (stat says ENOTCONN: the process behind its mount is
  // gone). Brings it back. Default: FAILED_PRECONDITION saying it must be staged again.
  virtual Status revive_staging(std::string_view volume_id, const std::string& staging_path);
  // Startup reconcile: releases what a crash left on this node (devices no staging uses).
  // Each volume is touched only under `lock`; a busy one is in use and is left alone.
  virtual Status reconcile_node(const VolumeLocker& lock);
};

// One measurement a provider takes for `serve --metrics-listen` (daemon/metrics.h), which
// adds the provider's name as a label. `name` is a Prometheus metric name.
struct ProviderGauge {
  std::string name;
  std::string help;
  double value = 0;
};

// A row of `rosetctl doctor` (daemon/host_checks.h) that a provider declares for its findings:
// the report has the row whether or not anything is found, and says `ok_message` when nothing
// is.
struct DoctorRow {
  std::string name;  // "loop-devices", "fuse-clients": what HostFinding::check names
  std::string ok_message;
  // Where it stands: with what the providers keep on this host (after the mounts), or with the
  // space checks (after the certificates).
  enum class Place { kHostState, kSpace };
  Place place = Place::kHostState;
};

// One thing `rosetctl doctor` should tell (daemon/host_checks.h): `check` names the row it
// belongs to, one its provider declares (Provider::doctor_rows); the message says what is
// wrong and what to do about it.
struct HostFinding {
  std::string check;
  bool failed = true;  // false: a warning
  std::string message;
};

class Provider {
 public:
  virtual ~Provider() = default;

  // "local", "roset", "iscsi": also the prefix of every volume id the provider hands out.
  virtual std::string_view name() const = 0;

  // True when a volume can only be used on the node that holds it (reported as topology).
  virtual bool volumes_are_node_local() const = 0;

  // True when ControllerPublish needs what the node registered (an iSCSI initiator name), so
  // publishing to a node the registry does not hold is NOT_FOUND. False where publishing is
  // bookkeeping only and every node reaches the volumes by itself (roset: its own roset-fuse),
  // so node ids from the CO (Kubernetes' spec.nodeName) need no `node register`.
  virtual bool publish_needs_registered_node() const { return true; }

  // Ready to serve? (Probe.) A not-OK status says what is missing.
  virtual Status check_health() const = 0;
  // Whether check_health() may wait: on the network, a child process. Then Probe runs on a
  // handler thread; when no provider's check waits, on gRPC's own thread, without the hop.
  virtual bool health_check_may_block() const { return true; }

  // What it measures of itself, at each scrape of the metrics endpoint: counts it can take
  // without waiting for what calls hold for long (a scrape must not stall behind a copy). A
  // measurement it cannot take now is left out. Default: none.
  virtual std::vector<ProviderGauge> gauges() { return {}; }

  // `doctor`: what is wrong with what this provider keeps on this host that no call would
  // notice: a loop device, a FUSE client or an iSCSI session no record accounts for, space
  // promised beyond what is free. Reads only; the startup reconcile (NodeSide::reconcile_node)
  // is what repairs. Default: nothing to report.
  virtual std::vector<HostFinding> inspect_host() { return {}; }
  // The rows of the doctor's report its findings go under, each in the report even when
  // nothing is found. A finding under a row no provider declares gets a row of its own at the
  // end. Default: none.
  virtual std::vector<DoctorRow> doctor_rows() const { return {}; }

  // The parts this provider has, owned by it; null for a part it lacks.
  virtual ControllerSide* controller() = 0;
  virtual SnapshotSide* snapshots() { return nullptr; }
  virtual NodeSide* node() = 0;
};

// The part of `provider` a call needs; UNIMPLEMENTED naming the provider when it lacks it.
Expected<ControllerSide*> controller_side(Provider& provider);
Expected<SnapshotSide*> snapshot_side(Provider& provider);
Expected<NodeSide*> node_side(Provider& provider);

}  // namespace rosetctl
