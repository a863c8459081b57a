// Repair of dead node mounts: a staging whose mount no longer answers (ENOTCONN, as when the
// FUSE process behind it was killed) is revived by its provider, and the publications bound
// from it, dead with it, are bound again. A node plugin's container restart kills its roset-fuse
// processes: start-up (reconcile), a NodeStage or NodePublish retry and `doctor --fix` repair
// what it left, so pods read their volumes again without being restarted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "daemon/service_context.h"

namespace rosetctl {

// Whether the publications of a staging that answers are looked at every time
// (kAlways) or only when they have not all answered before at the staging's current mount
// (daemon/checked_stagings.h says why that is enough): NodePublish's choice, as a fan-out
// to N targets would otherwise stat N² of them.
enum class PublicationCheck { kAlways, kUnlessCheckedAtThisMount };

// Revives the staging when it does not answer, then binds again every recorded publication of
// it that does not answer (with the volume's stored context, when this host has the record;
// else their own NodePublish repairs them). Call with the volume's stage lock held. True when
// the staging was mounted anew (its mount changed). `records_changed`, when given, is set when a
// publication of the staging did not answer (its record may have been rewritten): a caller
// holding records read before must read them again.
Expected<bool> repair_dead_staging(ServiceContext& context, NodeSide& node,
                                   std::string_view volume_id, const std::string& staging_path,
                                   PublicationCheck check = PublicationCheck::kAlways,
                                   bool* records_changed = nullptr);

// repair_dead_staging for every recorded staging of this node with a dead mount (its own or a
// publication's), each under the locks a NodeStage takes; one in use by a call right now is
// left to that call and reported. Returns what failed.
std::vector<std::string> repair_dead_mounts(ServiceContext& context);

// True when `path` is a mount that no longer answers.
bool is_dead_mount(const std::string& path);

}  // namespace rosetctl
