// Loads the metrics endpoint's HTTP module (metrics_http/metrics_http.h), which the build puts
// inside the binary: its bytes go into a memfd, which dlopen maps like any library file. So the
// binary needs no second file beside it (the container image, the Debian package), and a CLI
// run never loads cpp-httplib nor what it links.
#pragma once

#include "core/status.h"
#include "metrics_http/metrics_http.h"

namespace rosetctl {

// The module's entry point, loaded once per process (never unloaded). UNAVAILABLE saying why
// when it cannot be loaded (libcpp-httplib missing: the package to install is named).
Expected<MetricsHttpListen> load_metrics_http();

}  // namespace rosetctl
