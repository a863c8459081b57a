// Log setup: one stderr logger for the whole process (spdlog), one line per log call.
#pragma once

#include <spdlog/spdlog.h>

namespace rosetctl {

enum class Verbosity { kQuiet, kNormal, kDebug };

// CLI runs log warnings only unless -v; `serve` logs one line per call at info.
void setup_logging(Verbosity verbosity, bool long_running);

}  // namespace rosetctl
