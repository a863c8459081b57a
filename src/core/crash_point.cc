// The crash_point test hook (see crash_point.h).
#include "core/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>

namespace rosetctl {

void crash_point(std::string_view name) {
  const char* wanted = std::getenv("ROSETCTL_CRASH_AT");
  if (wanted == nullptr || name != wanted) return;
  ::kill(::getpid(), SIGKILL);
  ::pause();  // SIGKILL is delivered before this returns
}

}  // namespace rosetctl
