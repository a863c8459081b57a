// iSCSI names (RFC 3720 3.2.6, RFC 3722): which strings are one, and their one normal form. A
// node registers its initiator name and a target's ACL holds it only in that form, and two
// spellings of one name never count as two initiators: names are compared in it.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

// RFC 3720, 3.2.6.1: an iSCSI name is at most 223 bytes.
inline constexpr std::size_t kMaxIscsiNameBytes = 223;

// `name` in its normal form, or INVALID_ARGUMENT naming `field` and saying what is wrong.
// iSCSI names are case-insensitive, and RFC 3722's stringprep profile folds them to lower case;
// rosetctl takes only the ASCII names (what open-iscsi's iscsi-iname and every target make),
// so folding is ASCII lower-casing. The forms (RFC 3720 3.2.6.3, RFC 3980):
//   iqn.YYYY-MM.<reversed domain>[:<anything>]   letters, digits, '.', '-' (and ':' after the
//                                                domain)
//   eui.<16 hex digits>
//   naa.<16 or 32 hex digits>
// For comparing names: two spellings of one name are one initiator.
Expected<std::string> normalize_iscsi_name(std::string_view name, std::string_view field);

// OK when `name` is an iSCSI name written in its normal form, the only form a name is
// registered in or put on an ACL; INVALID_ARGUMENT naming `field` otherwise. A name in capitals
// is refused rather than folded: an initiator sends its name as its configuration writes it
// (open-iscsi reads /etc/iscsi/initiatorname.iscsi verbatim) and tgtd compares ACL entries byte
// for byte, so "iqn.x" on an ACL would not let in the host that sends "IQN.X".
Status validate_iscsi_name(std::string_view name, std::string_view field);

}  // namespace rosetctl
