// Named points where a multi-step operation is most fragile, so tests can prove that a crash
// right there is recovered from. With ROSETCTL_CRASH_AT=<name> in the environment the process
// kills itself with SIGKILL on reaching crash_point("<name>"): exactly what kill -9 at that
// moment would do. ROSETCTL_CRASH_SIGNAL=INT|TERM sends that signal instead (what Ctrl-C or a
// supervisor's stop would do). Without ROSETCTL_CRASH_AT it does nothing.
#pragma once

#include <string_view>

namespace rosetctl {

void crash_point(std::string_view name);

}  // namespace rosetctl
