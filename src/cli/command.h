// How verb files hand their work to main: parsing fills an options struct and selects an
// Action; main runs it once parsing is complete and all global flags are known.
#pragma once

#include <functional>

#include "core/status.h"

namespace rosetctl::cli {

using Action = std::function<Status()>;

}  // namespace rosetctl::cli
