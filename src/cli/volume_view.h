// The JSON model of a volume that `volume create|show|list|connect` print. Field names are a
// documented interface (README "JSON output"): add fields, never rename them.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "cli/render.h"
#include "cli/volume_lookup.h"
#include "core/state_store.h"

namespace rosetctl::cli {

// `connections` are this node's mounts of the volume and `mutable_parameters` those in effect
// (both from the local state store: CSI's Volume carries neither).
nlohmann::json volume_json(const VolumeInfo& info, const std::vector<NodePublication>& connections,
                           const std::map<std::string, std::string>& mutable_parameters);

// volume_json with what this host's store knows of the volume.
Expected<nlohmann::json> describe_volume(StateStore& store, const VolumeInfo& info);

std::vector<Column> volume_fields();   // `volume show` (one volume)
std::vector<Column> volume_columns();  // `volume list`

}  // namespace rosetctl::cli
