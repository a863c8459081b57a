// Flags of `doctor`, the plugin it checks through, and the report.
#include "cli/doctor_cmd.h"

#include <fmt/ranges.h>

#include "cli/config_file.h"
#include "cli/render.h"
#include "cli/session.h"
#include "cluster/plugin.h"

namespace rosetctl::cli {
namespace {

struct DoctorOptions {
  bool fix = false;
  int certificate_warn_days = 30;
};

nlohmann::json report_of(const std::vector<HostCheck>& checks) {
  nlohmann::json rows = nlohmann::json::array();
  for (const HostCheck& check : checks) {
    nlohmann::json row = {{"name", check.name},
                          {"status", check_state_name(check.state)},
                          {"message", check.message}};
    if (!check.repaired.empty()) row["repaired"] = check.repaired;
    rows.push_back(std::move(row));
  }
  return rows;
}

// A host whose database does not open is one row: nothing else can be checked through it.
std::vector<HostCheck> unopened(const GlobalOptions& globals, const Status& why) {
  return {{"state-database", CheckState::kFail,
           fmt::format("cannot open the state in \"{}\": {}", globals.state_dir, why.message())}};
}

Status run_doctor(const GlobalOptions& globals, const DoctorOptions& options) {
  PluginOptions plugin_options = plugin_options_of(globals);
  plugin_options.one_command = true;
  // A consumer host (its controller elsewhere) has only the node side to check and repair.
  if (!globals.controller.empty()) plugin_options.role = PluginRole::kNode;

  std::vector<HostCheck> checks;
  auto plugin = Plugin::open(std::move(plugin_options));
  if (!plugin) {
    checks = unopened(globals, plugin.status());
  } else {
    HostCheckOptions check_options;
    TlsFiles files = tls_files(globals);
    check_options.tls = {files.certificate, files.ca};
    check_options.certificate_warn_days = options.certificate_warn_days;
    check_options.fix = options.fix;
    checks = (*plugin)->check_host(check_options);
  }
  // Which settings this run checked with: the file it read (a stray one changes defaults).
  checks.insert(checks.begin(), {"config-file", CheckState::kOk,
                                 config_file_text(globals.config_file, globals.config_file_read)});
  nlohmann::json rows = report_of(checks);
  std::vector<Column> columns = {
      {"CHECK", [](const nlohmann::json& v) { return text_of(v["name"]); }},
      {"STATUS", [](const nlohmann::json& v) { return text_of(v["status"]); }},
      {"MESSAGE", [](const nlohmann::json& v) { return text_of(v["message"]); }}};
  if (options.fix) {
    columns.push_back({"REPAIRED", [](const nlohmann::json& v) {
                         return v.contains("repaired") ? text_of(v["repaired"]) : "-";
                       }});
  }
  print_list(globals.output, rows, columns);
  std::vector<std::string> failed;
  for (const HostCheck& check : checks)
    if (check.state == CheckState::kFail) failed.push_back(check.name);
  if (failed.empty()) return Status::ok();
  return error(Code::kUnknown, "doctor: {} failed", fmt::join(failed, ", "));
}

}  // namespace

void setup_doctor(CLI::App& app, const GlobalOptions& globals, Action& action) {
  auto options = std::make_shared<DoctorOptions>();
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "Check this host (state database, mounts, devices, certificates, space) and say "
      "what to fix");
  doctor->add_flag("--fix", options->fix,
                   "Repair what is safe to repair (what serve's startup reconcile does, and "
                   "dead stagings revived), then check again and say what was done");
  doctor
      ->add_option("--certificate-warn-days", options->certificate_warn_days,
                   "Warn about a certificate that expires within this many days")
      ->check(CLI::Range(0, 3650))
      ->capture_default_str();
  doctor->footer(
      "Each check is ok, warn or fail, with a message saying what to do. Exit 0 when nothing "
      "failed\n(warnings alone included), 1 when a check failed. -o json prints the rows as a "
      "JSON array.\n\nExamples:\n  rosetctl doctor\n  rosetctl doctor --fix -o json");
  doctor->callback([&globals, &action, options] {
    action = [&globals, options] { return run_doctor(globals, *options); };
  });
}

}  // namespace rosetctl::cli
