// What `serve --metrics-listen` measures: every call's count by status code and its latency
// (recorded by run_logged, daemon/call_log.h), and gauges read at each scrape from the state
// database, the mount table and the providers. Text in Prometheus' exposition format.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/status.h"
#include "daemon/service_context.h"

namespace rosetctl {

// From now on, calls of this process are counted (serve with a metrics endpoint). Until then
// record_call does nothing: a CLI run's in-process calls pay nothing for metrics.
void enable_call_metrics();
void record_call(std::string_view method, Code code, std::chrono::steady_clock::duration elapsed);

// A dead mount repaired (node_repair.h): counted from the process's start, metrics endpoint or
// not, so the repairs of the start-up reconcile are counted too.
enum class MountRepair { kStaging, kPublication };
void record_mount_repair(MountRepair kind);

// The page served at /metrics: the call metrics, then the gauges `context` gives now. The
// gauges take no lock a call holds for long: database reads, the mount table, stat(2) of
// each staging, and the providers' own counts (Provider::gauges).
std::string metrics_text(ServiceContext& context);

}  // namespace rosetctl
