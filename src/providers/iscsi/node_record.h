// Settings written straight into an open-iscsi node record file (/etc/iscsi/nodes/...): a new
// login's settings and passwords in one write instead of an `iscsiadm --op update` run (each
// process start costs hundreds of milliseconds in an emulated guest), the passwords never on a
// command line.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace rosetctl::iscsi {

// Settings of an open-iscsi node record: name, value.
using RecordSettings = std::vector<std::pair<std::string, std::string>>;

// Whether `value` reads back from a record line as it is: one line (iscsiadm's reader takes a
// line feed as the end of a setting, so a value with one would add settings of its own choosing),
// no control characters, no white space at either end (the reader strips it), and at most 255
// bytes (it truncates longer values). INVALID_ARGUMENT naming the setting, never the value
// (passwords go through here).
Status check_record_value(std::string_view name, std::string_view value);

// Rewrites `record`, an existing node record file, with each setting's line replaced (the first
// line of that name; later ones dropped) or, when it has none, added before "# END RECORD".
// Atomic (a private temporary file, fsync'd, renamed over the record): open-iscsi never reads
// half a record.
Status write_record_settings(const std::filesystem::path& record, const RecordSettings& settings);

}  // namespace rosetctl::iscsi
