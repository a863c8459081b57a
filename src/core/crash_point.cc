// The crash_point test hook (see crash_point.h).
#include "core/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>

namespace rosetctl {

void crash_point(std::string_view name) {
  const char* wanted = std::getenv("ROSETCTL_CRASH_AT");
  if (wanted == nullptr || name != wanted) return;
  const char* signal_name = std::getenv("ROSETCTL_CRASH_SIGNAL");
  std::string_view how = signal_name != nullptr ? signal_name : "KILL";
  int signal_number = how == "INT" ? SIGINT : how == "TERM" ? SIGTERM : SIGKILL;
  ::kill(::getpid(), signal_number);
  ::pause();  // the signal is delivered before this returns (a handler that returns ends it)
}

}  // namespace rosetctl
