// Flags of `tls init|issue|show` and what they do with a certificate directory
// (core/x509/certificate_directory.h) and the certificates in it (core/x509/certificates.h).
#include "cli/tls_cmd.h"

#include <cstdio>
#include <ctime>

#include "cli/render.h"
#include "core/host_addresses.h"
#include "core/x509/certificate_directory.h"
#include "core/x509/certificates.h"

namespace rosetctl::cli {
namespace {

constexpr const char* kCaFiles = "ca";
constexpr const char* kControllerFiles = "controller";
// `init --new-ca` keeps the CA it replaces as ca-replaced-<time>.crt/.key.
constexpr std::string_view kReplacedCaPrefix = "ca-replaced-";

struct InitOptions {
  std::string dir;
  std::string name;  // empty: the host name
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  int days = kDefaultLeafValidityDays;
  bool force = false;
  bool new_ca = false;
};

struct IssueOptions {
  std::string dir;
  std::string name;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  int days = kDefaultLeafValidityDays;
  bool admin = false;
  bool force = false;
};

struct ShowOptions {
  std::string file;
};

// The JSON model of one certificate file of the directory.
Expected<nlohmann::json> pair_json(const CertificateDirectory& dir, std::string_view name) {
  auto text = dir.read_certificate(name);
  if (!text) return text.status();
  auto facts = read_certificate_facts(*text, dir.certificate_path(name));
  if (!facts) return facts.status();
  return nlohmann::json{{"path", dir.certificate_path(name)}, {"key", dir.key_path(name)},
                        {"subject", facts->subject},          {"role", facts->role},
                        {"common_name", facts->common_name},  {"sans", facts->sans},
                        {"not_after", facts->not_after}};
}

// `message` and a table of the CA and the certificate, or {"ca", "certificate", "changed"}.
Status print_pair_result(const GlobalOptions& globals, const CertificateDirectory& dir,
                         std::string_view certificate, bool changed, const std::string& message) {
  auto ca = pair_json(dir, kCaFiles);
  if (!ca) return ca.status();
  auto issued = pair_json(dir, certificate);
  if (!issued) return issued.status();
  nlohmann::json out = {{"ca", *ca}, {"certificate", *issued}, {"changed", changed}};
  if (globals.output == OutputFormat::kJson) {
    print_object(globals.output, out, {});
    return Status::ok();
  }
  std::printf("%s\n", message.c_str());
  auto joined = [](const nlohmann::json& v) {
    std::string text;
    for (const auto& san : v["sans"])
      text += (text.empty() ? "" : ", ") + san.get<std::string>();
    return text.empty() ? "-" : text;
  };
  print_list(globals.output, nlohmann::json::array({*ca, *issued}),
             {{"ROLE", [](const nlohmann::json& v) { return text_of(v["role"]); }},
              {"CERTIFICATE", [](const nlohmann::json& v) { return text_of(v["path"]); }},
              {"KEY", [](const nlohmann::json& v) { return text_of(v["key"]); }},
              {"NOT AFTER", [](const nlohmann::json& v) { return text_of(v["not_after"]); }},
              {"SUBJECT", [](const nlohmann::json& v) { return text_of(v["subject"]); }},
              {"SANS", joined}});
  return Status::ok();
}

std::string utc_stamp() {
  time_t now = ::time(nullptr);
  struct tm broken_down = {};
  ::gmtime_r(&now, &broken_down);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &broken_down);
  return text;
}

// The controller's request: its name (default the host name), the names and addresses clients
// may reach this host by, and those given.
Expected<LeafRequest> controller_request(const InitOptions& options) {
  LeafRequest request{CertificateRole::kController, options.name, options.dns_names,
                      options.ip_addresses, options.days};
  auto host = host_name();
  if (!host) return host.status();
  if (request.common_name.empty()) {
    request.common_name = *host;
    if (Status valid = validate_common_name(request.role, *host); !valid) {
      return valid.with_context("the host name cannot name the controller (give --name)");
    }
  }
  auto addresses = host_addresses();
  if (!addresses) return addresses.status();
  request.dns_names.insert(request.dns_names.begin(), {*host, "localhost"});
  std::vector<std::string> ips = {"127.0.0.1", "::1"};
  ips.insert(ips.end(), addresses->begin(), addresses->end());
  request.ip_addresses.insert(request.ip_addresses.begin(), ips.begin(), ips.end());
  ROSETCTL_RETURN_IF_ERROR(validate_leaf_request(request));
  return request;
}

// What `tls init` does with a directory, from what is in it and the flags.
struct InitPlan {
  bool unchanged = false;  // a CA and a controller certificate are there; nothing asked to change
  bool make_ca = false;
  bool set_aside_ca = false;  // --new-ca: keep the old CA as ca-replaced-<time>.*
  bool replace_controller = false;
  bool controller_existed = false;
};

Expected<InitPlan> plan_init(const CertificateDirectory& dir, const InitOptions& options) {
  auto ca_found = dir.presence(kCaFiles);
  if (!ca_found) return ca_found.status();
  auto controller_found = dir.presence(kControllerFiles);
  if (!controller_found) return controller_found.status();
  if (!options.new_ca && ca_found->any() && !ca_found->both()) {
    return error(Code::kFailedPrecondition,
                 "\"{}\" has {} but not {}: restore the missing file, or make a new CA with "
                 "--new-ca (every certificate the old one issued then stops being trusted)",
                 dir.path(), ca_found->certificate ? "ca.crt" : "ca.key",
                 ca_found->certificate ? "ca.key" : "ca.crt");
  }
  InitPlan plan;
  plan.make_ca = options.new_ca || !ca_found->any();
  plan.set_aside_ca = options.new_ca && ca_found->any();
  plan.replace_controller = options.force || options.new_ca;
  plan.controller_existed = controller_found->any();
  plan.unchanged = !plan.make_ca && controller_found->both() && !plan.replace_controller;
  if (!plan.unchanged && controller_found->any() && !plan.replace_controller) {
    return error(Code::kAlreadyExists, "\"{}\" already exists{}; --force replaces it",
                 controller_found->certificate ? dir.certificate_path(kControllerFiles)
                                               : dir.key_path(kControllerFiles),
                 plan.make_ca ? " but there is no CA that issued it" : "");
  }
  return plan;
}

// A new CA, or the directory's.
Expected<CertificateAndKey> ca_for_init(const CertificateDirectory& dir, bool make_ca) {
  if (make_ca) return make_certificate_authority();
  auto certificate = dir.read_certificate(kCaFiles);
  if (!certificate) return certificate.status();
  auto key = dir.read_key(kCaFiles);
  if (!key) return key.status();
  return CertificateAndKey{std::move(*certificate), std::move(*key)};
}

Status run_init(const GlobalOptions& globals, const InitOptions& options) {
  auto request = controller_request(options);
  if (!request) return request.status();
  auto dir = CertificateDirectory::open(options.dir, /*create=*/true);
  if (!dir) return dir.status();
  auto plan = plan_init(*dir, options);
  if (!plan) return plan.status();
  if (plan->unchanged) {
    return print_pair_result(globals, *dir, kControllerFiles, /*changed=*/false,
                             fmt::format("\"{}\" already has a CA and a controller certificate; "
                                         "nothing changed (--force re-issues the controller's "
                                         "certificate, --new-ca replaces the CA)",
                                         dir->path()));
  }
  // Everything is made in memory before the first file changes.
  auto ca = ca_for_init(*dir, plan->make_ca);
  if (!ca) return ca.status();
  auto controller = issue_certificate(*request, ca->certificate_pem, ca->key_pem);
  if (!controller) return controller.status();

  std::string message =
      plan->make_ca
          ? fmt::format("Made a CA and the controller's certificate in \"{}\"", dir->path())
          : fmt::format("{} the controller's certificate with the CA in \"{}\"",
                        plan->controller_existed ? "Re-issued" : "Issued", dir->path());
  if (plan->set_aside_ca) {
    std::string kept = std::string(kReplacedCaPrefix) + utc_stamp();
    ROSETCTL_RETURN_IF_ERROR(dir->rename_pair(kCaFiles, kept));
    message = fmt::format(
        "Made a new CA in \"{}\" and the controller's certificate. The old CA is now {}.crt/.key; "
        "certificates it issued are no longer trusted: re-issue them with `rosetctl tls issue "
        "NAME --force`",
        dir->path(), kept);
  }
  if (plan->make_ca) ROSETCTL_RETURN_IF_ERROR(dir->write_pair(kCaFiles, *ca, Overwrite::kRefuse));
  ROSETCTL_RETURN_IF_ERROR(
      dir->write_pair(kControllerFiles, *controller,
                      plan->replace_controller ? Overwrite::kReplace : Overwrite::kRefuse));
  return print_pair_result(globals, *dir, kControllerFiles, /*changed=*/true, message);
}

// NAME becomes NAME.crt and NAME.key next to the CA's and controller's files.
Status check_issuable_name(std::string_view name) {
  if (name == kCaFiles || name == kControllerFiles || name.starts_with(kReplacedCaPrefix)) {
    return error(Code::kInvalidArgument,
                 "\"{}\" names files of the CA or the controller in the certificate directory; "
                 "the controller's certificate is made by `rosetctl tls init`",
                 name);
  }
  return Status::ok();
}

Status run_issue(const GlobalOptions& globals, const IssueOptions& options) {
  LeafRequest request{options.admin ? CertificateRole::kAdmin : CertificateRole::kNode,
                      options.name, options.dns_names, options.ip_addresses, options.days};
  ROSETCTL_RETURN_IF_ERROR(validate_leaf_request(request));
  ROSETCTL_RETURN_IF_ERROR(check_issuable_name(options.name));
  auto dir = CertificateDirectory::open(options.dir, /*create=*/false);
  if (!dir && dir.status().code() == Code::kNotFound) {
    return error(Code::kNotFound,
                 "certificate directory \"{}\" does not exist: run `rosetctl tls init --dir {}` "
                 "first",
                 options.dir, options.dir);
  }
  if (!dir) return dir.status();
  auto ca_found = dir->presence(kCaFiles);
  if (!ca_found) return ca_found.status();
  if (!ca_found->both()) {
    return error(Code::kFailedPrecondition,
                 "\"{}\" has no CA (ca.crt and ca.key): run `rosetctl tls init --dir {}` first",
                 dir->path(), dir->path());
  }
  auto found = dir->presence(options.name);
  if (!found) return found.status();
  if (found->any() && !options.force) {
    return error(
        Code::kAlreadyExists,
        "\"{}\" already exists; --force replaces it (to rotate a certificate)",
        found->certificate ? dir->certificate_path(options.name) : dir->key_path(options.name));
  }
  auto ca_certificate = dir->read_certificate(kCaFiles);
  if (!ca_certificate) return ca_certificate.status();
  auto ca_key = dir->read_key(kCaFiles);
  if (!ca_key) return ca_key.status();
  auto issued = issue_certificate(request, *ca_certificate, *ca_key);
  if (!issued) return issued.status();
  ROSETCTL_RETURN_IF_ERROR(dir->write_pair(
      options.name, *issued, options.force ? Overwrite::kReplace : Overwrite::kRefuse));
  return print_pair_result(
      globals, *dir, options.name, /*changed=*/true,
      fmt::format("{} {}'s certificate in \"{}\"; copy ca.crt, {}.crt and {}.key to its host",
                  found->any() ? "Re-issued" : "Issued", options.name, dir->path(), options.name,
                  options.name));
}

Status run_show(const GlobalOptions& globals, const ShowOptions& options) {
  std::string what = fmt::format("certificate file \"{}\"", options.file);
  auto text = read_certificate_file(options.file, what);
  if (!text) return text.status();
  auto facts = read_certificate_facts(*text, what);
  if (!facts) return facts.status();
  nlohmann::json out = {{"path", options.file},
                        {"subject", facts->subject},
                        {"issuer", facts->issuer},
                        {"role", facts->role},
                        {"common_name", facts->common_name},
                        {"sans", facts->sans},
                        {"not_before", facts->not_before},
                        {"not_after", facts->not_after},
                        {"serial", facts->serial},
                        {"ca", facts->is_ca},
                        {"extended_key_usage", facts->extended_key_usage}};
  auto field = [](const char* key) {
    return [key](const nlohmann::json& v) { return text_of(v[key]); };
  };
  auto joined = [](const char* key) {
    return [key](const nlohmann::json& v) {
      std::string text;
      for (const auto& item : v[key])
        text += (text.empty() ? "" : ", ") + item.get<std::string>();
      return text.empty() ? "-" : text;
    };
  };
  print_object(globals.output, out,
               {{"Subject", field("subject")},
                {"Role", field("role")},
                {"Issuer", field("issuer")},
                {"SANs", joined("sans")},
                {"Not before", field("not_before")},
                {"Not after", field("not_after")},
                {"Serial", field("serial")},
                {"CA", field("ca")},
                {"Key usage", joined("extended_key_usage")}});
  return Status::ok();
}

// --dns and --ip: repeatable, one value each (a list option would swallow the NAME after it).
void add_name_options(CLI::App* command, std::vector<std::string>& dns,
                      std::vector<std::string>& ips) {
  command->add_option("--dns", dns, "Another DNS name for the certificate, repeatable")
      ->allow_extra_args(false);
  command->add_option("--ip", ips, "Another IP address (IPv4 or IPv6), repeatable")
      ->allow_extra_args(false);
}

constexpr const char* kTlsFooter =
    "Files in DIR (made 0700 if missing):\n"
    "  ca.crt, ca.key                  the CA; ca.key never needs to leave DIR\n"
    "  controller.crt, controller.key  the controller's (tls init)\n"
    "  NAME.crt, NAME.key              a node's or an admin's (tls issue NAME)\n"
    "Copy ca.crt, NAME.crt and NAME.key to the host that uses them. Keys are unencrypted\n"
    "PKCS#8 PEM with mode 0600: serve starts unattended, so file permissions protect them.\n"
    "Roles are in the subject: O=rosetctl, OU=ca|controller|node|admin, CN=<name>.\n\n"
    "Rotation: `tls issue NAME --force` (or `tls init --force` for the controller) writes a\n"
    "new certificate and key in place; a running serve uses them within 10 s, no restart,\n"
    "or at once on SIGHUP (kill -HUP <serve's pid>).\n"
    "`tls init --new-ca` replaces the CA: every certificate the old one issued stops being\n"
    "trusted until re-issued (the old CA is kept as ca-replaced-<time>.crt/.key).";

void setup_init(CLI::App* tls, const GlobalOptions& globals, Action& action) {
  auto options = std::make_shared<InitOptions>();
  CLI::App* init = tls->add_subcommand("init", "Make a CA and the controller's certificate");
  init->add_option("--dir", options->dir, "Directory of the certificates")->required();
  init->add_option("--name", options->name,
                   "The controller's name, its certificate's CN (default: the host name)");
  add_name_options(init, options->dns_names, options->ip_addresses);
  init->add_option("--days", options->days, "Validity of the controller's certificate")
      ->check(CLI::Range(1, kCaValidityDays))
      ->capture_default_str();
  init->add_flag("--force", options->force, "Re-issue the controller's certificate (keeps the CA)");
  init->add_flag("--new-ca", options->new_ca,
                 "Replace the CA too: every certificate it issued stops being trusted");
  init->footer(
      "The CA is valid for 10 years. The controller's certificate names, besides --dns and\n"
      "--ip: its name, the host name, localhost, 127.0.0.1, ::1 and every address of this host\n"
      "(not link-local ones). On a DIR that already has a CA and a controller certificate it\n"
      "changes nothing.");
  init->callback([&globals, &action, options] {
    action = [&globals, options] { return run_init(globals, *options); };
  });
}

void setup_issue(CLI::App* tls, const GlobalOptions& globals, Action& action) {
  auto options = std::make_shared<IssueOptions>();
  CLI::App* issue =
      tls->add_subcommand("issue", "Issue a node's (or with --admin an admin's) certificate");
  issue
      ->add_option("name", options->name,
                   "Node id (or admin name): the certificate's CN and file name, 1-64 letters, "
                   "digits, '.', '_' or '-'")
      ->required();
  issue->add_option("--dir", options->dir, "Directory of the certificates (with the CA)")
      ->required();
  issue->add_flag("--admin", options->admin, "An admin's certificate (OU=admin), not a node's");
  add_name_options(issue, options->dns_names, options->ip_addresses);
  issue->add_option("--days", options->days, "Validity (never past the CA's)")
      ->check(CLI::Range(1, kCaValidityDays))
      ->capture_default_str();
  issue->add_flag("--force", options->force, "Replace NAME.crt and NAME.key if they exist");
  issue->footer(
      "The certificate names DNS:NAME plus every --dns and --ip: give the addresses the\n"
      "controller reaches this node by. It is good for both serving and calling (serverAuth,\n"
      "clientAuth).");
  issue->callback([&globals, &action, options] {
    action = [&globals, options] { return run_issue(globals, *options); };
  });
}

}  // namespace

void setup_tls(CLI::App& app, const GlobalOptions& globals, Action& action) {
  CLI::App* tls = app.add_subcommand(
      "tls", "Certificates for serve's mutual TLS: a CA, the controller, nodes and admins");
  tls->require_subcommand(1);
  tls->footer(kTlsFooter);
  setup_init(tls, globals, action);
  setup_issue(tls, globals, action);

  auto show_options = std::make_shared<ShowOptions>();
  CLI::App* show =
      tls->add_subcommand("show", "Subject, role, SANs, issuer and validity of a certificate");
  show->add_option("file", show_options->file, "A PEM certificate file")->required();
  show->callback([&globals, &action, show_options] {
    action = [&globals, show_options] { return run_show(globals, *show_options); };
  });
}

}  // namespace rosetctl::cli
