// Call counters and latency histograms (prometheus-cpp keeps them, lock-free per series once
// made) and the scrape-time gauges.
#include "daemon/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <map>
#include <memory>

#include "core/mount_ops.h"
#include "core/mountinfo.h"
#include "core/version.h"

namespace rosetctl {
namespace {

// Calls take from under a millisecond (capabilities) to minutes (a snapshot of a large volume).
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5,    1,     2.5,    5,     10,   30,    60,   120, 300};

struct CallMetrics {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& calls =
      prometheus::BuildCounter()
          .Name("rosetctl_calls_total")
          .Help("Calls answered (CSI and rosetctl's own services), by method and gRPC status code")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& latency =
      prometheus::BuildHistogram()
          .Name("rosetctl_call_duration_seconds")
          .Help("Time from a call's arrival to its answer, by method")
          .Register(*registry);
};

std::atomic<uint64_t> g_staging_repairs{0};
std::atomic<uint64_t> g_publication_repairs{0};

// Made once and never destroyed: a call finishing while serve shuts down may still record.
std::atomic<CallMetrics*> g_call_metrics{nullptr};

prometheus::ClientMetric gauge(double value, std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return metric;
}

prometheus::MetricFamily gauge_family(std::string name, std::string help) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = prometheus::MetricType::Gauge;
  return family;
}

void add_record_counts(ServiceContext& context, std::vector<prometheus::MetricFamily>& out) {
  auto volumes = context.store.count_volumes_by_provider();
  auto snapshots = context.store.count_snapshots_by_provider();
  auto volume_family = gauge_family("rosetctl_volumes", "Volumes this host's database records");
  auto snapshot_family =
      gauge_family("rosetctl_snapshots", "Snapshots this host's database records");
  // Every provider appears, with 0 when it has none: a series that vanishes reads as "unknown".
  for (const std::string& name : context.providers.names()) {
    if (volumes) volume_family.metric.push_back(gauge((*volumes)[name], {{"provider", name}}));
    if (snapshots)
      snapshot_family.metric.push_back(gauge((*snapshots)[name], {{"provider", name}}));
  }
  out.push_back(std::move(volume_family));
  out.push_back(std::move(snapshot_family));
}

// mounted: answers; dead: the mount is there but does not answer (a killed FUSE client);
// unmounted: recorded, yet nothing is mounted there (reconcile or `doctor --fix` forgets it).
void add_stagings(ServiceContext& context, std::vector<prometheus::MetricFamily>& out) {
  auto stagings = context.store.all_stagings();
  auto table = MountTable::read();
  if (!stagings || !table) return;
  std::map<std::string, int64_t> by_condition = {{"mounted", 0}, {"dead", 0}, {"unmounted", 0}};
  for (const Staging& staging : *stagings) {
    if (probe_path(staging.staging_path) == PathHealth::kDisconnected)
      ++by_condition["dead"];
    else if (table->find_by_target(staging.staging_path) != nullptr)
      ++by_condition["mounted"];
    else
      ++by_condition["unmounted"];
  }
  auto family = gauge_family("rosetctl_staged_volumes",
                             "Stagings recorded on this node, by the condition of their mount");
  for (const auto& [condition, count] : by_condition)
    family.metric.push_back(gauge(static_cast<double>(count), {{"condition", condition}}));
  out.push_back(std::move(family));
}

void add_mount_repairs(std::vector<prometheus::MetricFamily>& out) {
  prometheus::MetricFamily family;
  family.name = "rosetctl_mount_repairs_total";
  family.help =
      "Dead mounts (a killed FUSE client's) this process mounted again, by what they were: a "
      "staging, or a publication bound from one";
  family.type = prometheus::MetricType::Counter;
  for (auto [kind, count] : {std::pair{"staging", &g_staging_repairs},
                             std::pair{"publication", &g_publication_repairs}}) {
    prometheus::ClientMetric metric;
    metric.label = {{"kind", kind}};
    metric.counter.value = static_cast<double>(count->load());
    family.metric.push_back(std::move(metric));
  }
  out.push_back(std::move(family));
}

void add_provider_gauges(ServiceContext& context, std::vector<prometheus::MetricFamily>& out) {
  std::map<std::string, prometheus::MetricFamily> families;  // one per name, a series each
  for (const std::string& name : context.providers.names()) {
    auto provider = context.providers.by_name(name);
    if (!provider) continue;
    for (ProviderGauge& measured : (*provider)->gauges()) {
      auto [it, added] = families.try_emplace(measured.name);
      if (added) it->second = gauge_family(measured.name, measured.help);
      it->second.metric.push_back(gauge(measured.value, {{"provider", name}}));
    }
  }
  for (auto& [name, family] : families)
    out.push_back(std::move(family));
}

}  // namespace

void record_mount_repair(MountRepair kind) {
  (kind == MountRepair::kStaging ? g_staging_repairs : g_publication_repairs).fetch_add(1);
}

void enable_call_metrics() {
  if (g_call_metrics.load() != nullptr) return;
  static CallMetrics* metrics = new CallMetrics();  // never destroyed (see g_call_metrics)
  g_call_metrics.store(metrics);
}

void record_call(std::string_view method, Code code, std::chrono::steady_clock::duration elapsed) {
  CallMetrics* metrics = g_call_metrics.load(std::memory_order_acquire);
  if (metrics == nullptr) return;
  std::string name(method);
  metrics->calls.Add({{"method", name}, {"code", std::string(code_name(code))}}).Increment();
  metrics->latency.Add({{"method", name}}, kLatencyBuckets)
      .Observe(std::chrono::duration<double>(elapsed).count());
}

std::string metrics_text(ServiceContext& context) {
  std::vector<prometheus::MetricFamily> families;
  if (CallMetrics* metrics = g_call_metrics.load(std::memory_order_acquire))
    families = metrics->registry->Collect();
  auto build = gauge_family("rosetctl_build_info", "The running rosetctl: always 1");
  build.metric.push_back(gauge(1, {{"version", kVersion}, {"commit", kGitCommit}}));
  families.push_back(std::move(build));
  add_record_counts(context, families);
  add_stagings(context, families);
  add_mount_repairs(families);
  add_provider_gauges(context, families);
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace rosetctl
