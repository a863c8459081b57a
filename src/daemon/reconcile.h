// Startup reconcile (run by `serve` before it takes calls): finishes or undoes what a crash
// left half-done on this node. Node records whose mounts are gone are removed (with the
// directories or files the plugin created for them), then each provider releases what no
// staging uses any more (loop devices of local image volumes; roset-fuse processes, started
// again where they died with a node plugin's container), and last dead stagings are revived and
// dead publications bound again (node_repair.h). A volume whose locks are held is in use by
// another process and is left alone.
#pragma once

#include "core/status.h"
#include "daemon/service_context.h"

namespace rosetctl {

Status reconcile_node(ServiceContext& context);

// The locks a NodeStage of the volume takes, without waiting: ABORTED while someone holds them
// (that is, works on the volume right now).
Expected<std::vector<HeldLock>> lock_like_stage(const ServiceContext& context,
                                                std::string_view volume_id);

// A controller starts: each provider brings what it keeps outside the state database (a
// target daemon's targets) back in line with it. A provider that cannot is logged, not fatal:
// its calls say why until it can.
void reconcile_controller(ServiceContext& context);

}  // namespace rosetctl
