// What a node may say about itself when it registers (rosetctl.v1.Registry.RegisterNode): each
// field checked and bounded, as it is stored and later shown and dialled.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

// Bounds on what a registration may carry.
inline constexpr std::size_t kMaxTopologySegments = 32;
// A topology key: an optional DNS-subdomain prefix (253 bytes) and '/', then a 63-byte name.
inline constexpr std::size_t kMaxTopologyKeyBytes = 317;
inline constexpr std::size_t kMaxTopologyValueBytes = 192;  // node ids are values too
inline constexpr std::size_t kMaxVersionBytes = 64;

// "" (no listener), "host:port" (a host name or IPv4 address) or "[IPv6]:port", port 1-65535.
Status validate_node_address(std::string_view address);

// "" (the node has no initiator) or an iSCSI name in its normal form (core/iscsi_name.h:
// `iqn.`, `eui.` or `naa.`, in lower case), the form it is stored, compared and put on ACLs in.
// INVALID_ARGUMENT naming `iscsi_initiator` otherwise.
Status validate_initiator_name(std::string_view name);

// Keys 1-317 bytes of letters, digits, '.', '_', '-' and '/'; values 1-192 bytes of letters,
// digits, '.', '_' and '-'; at most 32 of them.
Status validate_topology(const std::map<std::string, std::string>& topology);

// "" or up to 64 bytes of printable ASCII without spaces.
Status validate_version(std::string_view version);

}  // namespace rosetctl
