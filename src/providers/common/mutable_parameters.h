// The parameters of local volumes that may change after creation (CSI mutable_parameters and
// ControllerModifyVolume): which keys there are, which volumes they suit, and the refusals,
// each naming the key. Pure logic; image_node.cc applies a change to loop devices.
//
// directIO=true|false (image and block volumes): whether the loop device reads and writes the
// image with direct I/O, bypassing the host's page cache, or buffered through it. Unset, a
// volume gets direct I/O where the image's filesystem allows it, else buffered.
#pragma once

#include <string_view>

#include "core/status.h"
#include "providers/provider.h"

namespace rosetctl {

inline constexpr const char* kParameterDirectIo = "directIO";

enum class DirectIo { kDefault, kOn, kOff };

// INVALID_ARGUMENT naming the first key that cannot be changed on a volume of this kind
// (`image`: an image or block volume; else a directory volume): a creation-time parameter
// (type, the filesystem, the provider, the size), an unknown key, a value that is not one of
// the key's values, or directIO on a directory volume. `volume` names it in the message.
Status check_mutable_parameters(const StringMap& changes, bool image, std::string_view volume);

// The mutable parameters a new volume starts with: those among its CreateVolume `parameters`,
// overridden by its `mutable_parameters` (the spec says they win).
StringMap initial_mutable_parameters(const CreateVolumeSpec& spec);

// The direct I/O setting recorded in a volume's mutable parameters.
DirectIo direct_io_setting(const StringMap& mutable_parameters);

}  // namespace rosetctl
