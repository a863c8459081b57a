// Flags every verb understands, before or after the verb.
#pragma once

#include <string>

#include "core/state_layout.h"

namespace rosetctl::cli {

enum class OutputFormat { kTable, kJson };

struct GlobalOptions {
  OutputFormat output = OutputFormat::kTable;
  std::string state_dir = kDefaultStateDir;
  std::string provider = "local";
  std::string node_id;      // empty: host name
  std::string driver_name;  // empty: io.roset.csi
  // Image volumes may promise more space than the disk has free (README: capacity policy).
  bool capacity_overcommit = false;
  bool verbose = false;
};

}  // namespace rosetctl::cli
