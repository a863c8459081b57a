// The checks of `rosetctl doctor` and its --fix (see host_checks.h).
#include "daemon/host_checks.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "core/mount_ops.h"
#include "core/mountinfo.h"
#include "core/x509/certificate_directory.h"
#include "core/x509/certificates.h"
#include "daemon/node_repair.h"
#include "daemon/reconcile.h"

namespace rosetctl {
namespace {

// Row names of the host's own checks, in report order. The providers declare the rows of their
// findings (Provider::doctor_rows), which stand after the mounts or after the certificates.
constexpr const char* kDatabase = "state-database";
constexpr const char* kMounts = "mounts";
constexpr const char* kProviders = "providers";
constexpr const char* kCertificates = "certificates";
constexpr const char* kCommitStore = "commit-store";

// Problems of one row: the row fails on any failure, warns on warnings alone.
struct Problems {
  std::vector<std::string> failures;
  std::vector<std::string> warnings;

  HostCheck row(std::string name, std::string ok_message) const {
    if (failures.empty() && warnings.empty()) return {std::move(name), CheckState::kOk, ok_message};
    std::vector<std::string> all = failures;
    all.insert(all.end(), warnings.begin(), warnings.end());
    return {std::move(name), failures.empty() ? CheckState::kWarn : CheckState::kFail,
            fmt::format("{}", fmt::join(all, "; "))};
  }
};

HostCheck check_database(ServiceContext& context) {
  std::string database = context.layout.database();
  auto problems = context.store.integrity_problems();
  if (!problems)
    return {kDatabase, CheckState::kFail,
            fmt::format("cannot check \"{}\": {}", database, problems.status().message())};
  if (problems->empty())
    return {kDatabase, CheckState::kOk,
            fmt::format("\"{}\" passes SQLite's integrity check", database)};
  if (problems->size() > 3) problems->resize(3);
  return {kDatabase, CheckState::kFail,
          fmt::format("\"{}\" is damaged ({}); stop rosetctl and restore it, with its -wal file, "
                      "from a backup",
                      database, fmt::join(*problems, "; "))};
}

// Dead mounts (stat says ENOTCONN, as when the FUSE process behind one was killed) at what the
// records name and anywhere under the state directory, and stagings recorded without a mount.
HostCheck check_mounts(ServiceContext& context) {
  Problems problems;
  auto stagings = context.store.all_stagings();
  auto table = MountTable::read();
  if (!stagings || !table) {
    Status why = !stagings ? stagings.status() : table.status();
    problems.failures.push_back(fmt::format("cannot read the mounts: {}", why.message()));
    return problems.row(kMounts, "");
  }
  std::set<std::string> recorded;
  for (const Staging& staging : *stagings) {
    recorded.insert(staging.staging_path);
    if (is_dead_mount(staging.staging_path)) {
      problems.failures.push_back(fmt::format(
          "volume \"{}\": staging \"{}\" does not answer (dead mount); `rosetctl doctor --fix` "
          "revives it",
          staging.volume_id, staging.staging_path));
    } else if (table->find_by_target(staging.staging_path) == nullptr) {
      problems.warnings.push_back(
          fmt::format("volume \"{}\" is recorded as staged at \"{}\" with nothing mounted there; "
                      "`rosetctl doctor --fix` forgets that staging",
                      staging.volume_id, staging.staging_path));
    }
    auto publications =
        context.store.node_publications_of_staging(staging.volume_id, staging.staging_path);
    if (!publications) continue;
    for (const NodePublication& publication : *publications) {
      recorded.insert(publication.target_path);
      if (!is_dead_mount(publication.target_path)) continue;
      problems.failures.push_back(fmt::format(
          "volume \"{}\": target \"{}\" does not answer (dead mount); `rosetctl doctor --fix` "
          "binds it again with its staging",
          publication.volume_id, publication.target_path));
    }
  }
  for (const MountEntry* entry : table->under(context.layout.root)) {
    if (recorded.contains(entry->mount_point) || !is_dead_mount(entry->mount_point)) continue;
    recorded.insert(entry->mount_point);  // stacked mounts: one line each place
    problems.failures.push_back(
        fmt::format("\"{}\" under the state directory does not answer (dead mount); `rosetctl "
                    "doctor --fix` repairs it when a provider's record knows it, else unmount it "
                    "(umount -l)",
                    entry->mount_point));
  }
  return problems.row(kMounts,
                      fmt::format("{} staging(s) recorded, every mount answers", stagings->size()));
}

// Each provider's readiness, as Probe sees it: a controller with iscsi volumes needs its
// target daemon (tgtd) to answer.
HostCheck check_providers(ServiceContext& context) {
  Problems problems;
  for (const std::string& name : context.providers.names()) {
    auto provider = context.providers.by_name(name);
    Status health = provider ? (*provider)->check_health() : provider.status();
    if (!health)
      problems.failures.push_back(fmt::format("provider \"{}\": {}", name, health.message()));
  }
  return problems.row(kProviders,
                      fmt::format("{} ready", fmt::join(context.providers.names(), ", ")));
}

void check_certificate(const std::string& path, std::string_view what, int warn_days,
                       Problems& problems) {
  // Named with its path: "cannot open certificate" alone does not say which of the files.
  auto text = read_certificate_file(path, fmt::format("{} \"{}\"", what, path));
  if (!text) {
    problems.failures.push_back(std::string(text.status().message()));
    return;
  }
  auto facts = read_certificate_facts(*text, path);
  if (!facts) {
    problems.failures.push_back(std::string(facts.status().message()));
    return;
  }
  int64_t left = facts->not_after_unix - static_cast<int64_t>(std::time(nullptr));
  if (left <= 0) {
    problems.failures.push_back(fmt::format(
        "{} \"{}\" expired at {}; issue a new one (rosetctl tls issue --force) and reload serve "
        "(SIGHUP)",
        what, path, facts->not_after));
  } else if (left < int64_t{warn_days} * 86400) {
    problems.warnings.push_back(fmt::format(
        "{} \"{}\" expires at {} (in {} day(s)); issue a new one (rosetctl tls issue --force) "
        "and reload serve (SIGHUP)",
        what, path, facts->not_after, left / 86400));
  }
}

HostCheck check_certificates(const HostCheckOptions& options) {
  if (options.tls.certificate.empty() && options.tls.ca.empty())
    return {kCertificates, CheckState::kOk, "no TLS files configured"};
  Problems problems;
  if (!options.tls.certificate.empty())
    check_certificate(options.tls.certificate, "certificate", options.certificate_warn_days,
                      problems);
  if (!options.tls.ca.empty())
    check_certificate(options.tls.ca, "CA certificate", options.certificate_warn_days, problems);
  return problems.row(kCertificates,
                      fmt::format("valid for more than {} days", options.certificate_warn_days));
}

// The commit stores' own verification, for the providers that keep snapshots on this host.
HostCheck check_commit_stores(ServiceContext& context) {
  auto snapshots = context.store.list_snapshots("", 0);
  if (!snapshots)
    return {kCommitStore, CheckState::kFail, std::string(snapshots.status().message())};
  std::map<std::string, std::vector<SnapshotRecord>> by_provider;
  for (const SnapshotRecord& snapshot : *snapshots)
    if (snapshot.ready) by_provider[snapshot.provider].push_back(snapshot);
  // Checking opens the store, which makes it: a host that never took a snapshot stays as it is.
  if (by_provider.empty() && ::access(context.layout.commit_store_dir().c_str(), F_OK) != 0)
    return {kCommitStore, CheckState::kOk, "no snapshots stored on this host"};
  Problems problems;
  int64_t checked = 0;
  for (const std::string& name : context.providers.names()) {
    auto provider = context.providers.by_name(name);
    if (!provider || (*provider)->snapshots() == nullptr) continue;
    auto verified = (*provider)->snapshots()->verify_snapshots(by_provider[name], nullptr);
    if (!verified) {
      if (verified.status().code() == Code::kUnimplemented) continue;  // stored elsewhere
      problems.failures.push_back(
          fmt::format("provider \"{}\": {}", name, verified.status().message()));
      continue;
    }
    checked += verified->snapshots;
    for (const std::string& problem : verified->problems)
      problems.failures.push_back(
          fmt::format("{} (`rosetctl snapshot verify` lists the snapshots it damages)", problem));
  }
  return problems.row(kCommitStore, fmt::format("{} snapshot(s) verified", checked));
}

// The providers' rows at `place` in the order they declare them (registry order), once each,
// with their findings; `found` keeps the findings no declared row took. A row two providers
// declare (`shown`) is shown once.
void add_provider_rows(ServiceContext& context, DoctorRow::Place place,
                       std::map<std::string, Problems>& found, std::set<std::string>& shown,
                       std::vector<HostCheck>& rows) {
  for (const std::string& name : context.providers.names()) {
    auto provider = context.providers.by_name(name);
    if (!provider) continue;
    for (const DoctorRow& declared : (*provider)->doctor_rows()) {
      if (declared.place != place || !shown.insert(declared.name).second) continue;
      auto problems = found.extract(declared.name);
      rows.push_back(problems ? problems.mapped().row(declared.name, declared.ok_message)
                              : HostCheck{declared.name, CheckState::kOk, declared.ok_message});
    }
  }
}

std::vector<HostCheck> run_checks(ServiceContext& context, const HostCheckOptions& options) {
  std::map<std::string, Problems> found;  // the providers' findings by row
  for (const std::string& name : context.providers.names()) {
    auto provider = context.providers.by_name(name);
    if (!provider) continue;
    for (HostFinding& finding : (*provider)->inspect_host()) {
      Problems& problems = found[finding.check];
      (finding.failed ? problems.failures : problems.warnings).push_back(finding.message);
    }
  }
  std::vector<HostCheck> rows;
  std::set<std::string> shown;
  rows.push_back(check_database(context));
  rows.push_back(check_mounts(context));
  add_provider_rows(context, DoctorRow::Place::kHostState, found, shown, rows);
  rows.push_back(check_providers(context));
  rows.push_back(check_certificates(options));
  add_provider_rows(context, DoctorRow::Place::kSpace, found, shown, rows);
  rows.push_back(check_commit_stores(context));
  // Findings under a row no provider declared are still told, not dropped.
  for (const auto& [name, problems] : found)
    rows.push_back(problems.row(name, ""));
  return rows;
}

// What serve does at its start (reconcile_node), which revives dead stagings and binds dead
// publications again (node_repair.h). Volumes in use by a call right now are left to it.
// Returns what failed.
std::vector<std::string> repair(ServiceContext& context) {
  std::vector<std::string> failed;
  if (context.options.role != PluginRole::kNode) reconcile_controller(context);
  if (Status reconciled = reconcile_node(context); !reconciled)
    failed.push_back(std::string(reconciled.message()));
  return failed;
}

}  // namespace

std::string_view check_state_name(CheckState state) {
  switch (state) {
    case CheckState::kOk:
      return "ok";
    case CheckState::kWarn:
      return "warn";
    case CheckState::kFail:
      return "fail";
  }
  return "fail";
}

std::vector<HostCheck> check_host(ServiceContext& context, const HostCheckOptions& options) {
  std::vector<HostCheck> before = run_checks(context, options);
  if (!options.fix) return before;
  std::vector<std::string> failed = repair(context);
  std::vector<HostCheck> after = run_checks(context, options);
  // By name: a row of an undeclared finding (run_checks) is there only while it is found.
  for (const HostCheck& was : before) {
    if (was.state == CheckState::kOk) continue;
    auto now = std::find_if(after.begin(), after.end(),
                            [&](const HostCheck& row) { return row.name == was.name; });
    if (now == after.end()) {
      after.push_back({was.name, CheckState::kOk, "", fmt::format("repaired: {}", was.message)});
      continue;
    }
    now->repaired = now->state == CheckState::kOk
                        ? fmt::format("repaired: {}", was.message)
                        : "not repaired: what is left needs a person (see the message)";
  }
  if (!failed.empty()) {
    after.push_back({"repair", CheckState::kFail,
                     fmt::format("--fix could not finish: {}", fmt::join(failed, "; "))});
  }
  return after;
}

}  // namespace rosetctl
