// Opening the in-process plugin for a CLI run.
#include "cli/session.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/node_announce.h"
#include "cli/secrets_file.h"
#include "cluster/placed_id.h"
#include "cluster/tls_files.h"
#include "core/validate.h"
#include "core/x509/certificates.h"
#include "daemon/server.h"

namespace rosetctl::cli {

bool state_exists(const GlobalOptions& options) {
  if (!options.controller.empty()) return true;  // the controller's state is what answers
  struct stat st;
  return ::stat(StateLayout{options.state_dir}.database().c_str(), &st) == 0;
}

namespace {

// Whether CERTIFICATE_FILE is a controller's certificate (tls issue's OU "controller").
bool is_controller_certificate(const std::string& certificate_file) {
  std::ifstream in(certificate_file);
  std::ostringstream pem;
  pem << in.rdbuf();
  auto identity = read_certificate_identity(pem.str());
  return identity && identity->role == "controller";
}

// Without --controller: the certificate the in-process plugin reaches registered nodes with.
// On the controller host, whose configuration names serve's certificate (tls-cert, tls-key,
// tls-ca), that is serve's: the CLI then sees and acts on volumes and snapshots placed on nodes
// as serve does, by the same calls over the same channels (cluster/node_controllers.h). Any other
// certificate (a node's, an admin's) is none: nodes take Controller calls from a controller only.
Expected<TlsFiles> certificate_for_nodes(const GlobalOptions& options) {
  TlsFiles tls = tls_files(options);
  if (!options.controller.empty() || tls.certificate.empty() ||
      !is_controller_certificate(tls.certificate)) {
    return TlsFiles{};
  }
  ROSETCTL_RETURN_IF_ERROR(
      check_tls_files(tls, "reaching nodes with the controller's certificate"));
  return tls;
}

}  // namespace

PluginOptions plugin_options_of(const GlobalOptions& options) {
  PluginOptions plugin_options;
  plugin_options.state_dir = options.state_dir;
  plugin_options.default_provider = options.provider;
  plugin_options.node_id = options.node_id;
  plugin_options.capacity_overcommit = options.capacity_overcommit;
  plugin_options.provider_settings = provider_settings(options);
  if (!options.driver_name.empty()) plugin_options.driver_name = options.driver_name;
  return plugin_options;
}

Expected<std::unique_ptr<Session>> Session::open(const GlobalOptions& options) {
  PluginOptions plugin_options = plugin_options_of(options);
  plugin_options.one_command = true;

  std::map<std::string, std::string> secrets;
  if (!options.secrets_file.empty()) {
    auto read = read_secrets_file(options.secrets_file);
    if (!read) return read.status();
    secrets = std::move(*read);
  }

  auto session = std::make_unique<Session>();
  if (options.output != OutputFormat::kJson && ::isatty(STDERR_FILENO) == 1) {
    session->progress_ = std::make_unique<TerminalProgress>();
    plugin_options.progress = session->progress_.get();
  }
  std::shared_ptr<grpc::Channel> controller;
  if (!options.on_node.empty() && options.controller.empty()) {
    return error(Code::kInvalidArgument,
                 "--on-node {} needs --controller: node calls reach another node through the "
                 "controller's proxy",
                 display_quoted(options.on_node));
  }
  std::string certificate;  // this host's, with --controller: whether it is a node's
  if (!options.controller.empty()) {
    // A consumer host: controller calls go to the remote controller over mutual TLS, node calls
    // stay with this host's plugin, which offers the node service only.
    ROSETCTL_RETURN_IF_ERROR(check_tcp_address(options.controller, "--controller", false));
    TlsFiles tls = tls_files(options);
    ROSETCTL_RETURN_IF_ERROR(check_tls_files(tls, "--controller"));
    // The controller must show a controller certificate (tls_files.h); other nodes are
    // checked by name once they answer (cluster/source_node.h).
    controller =
        grpc::CreateChannel(options.controller, peer_channel_credentials(tls, "controller", ""));
    plugin_options.role = PluginRole::kNode;
    // A snapshot pull reaches other nodes directly with the same certificate, or through it.
    plugin_options.controller_channel = controller;
    plugin_options.node_credentials = channel_credentials(tls);
    certificate = tls.certificate;
  }
  auto for_nodes = certificate_for_nodes(options);
  if (!for_nodes) return for_nodes.status();
  auto plugin = Plugin::open(std::move(plugin_options));
  if (!plugin) return plugin.status();
  ROSETCTL_RETURN_IF_ERROR((*plugin)->start(std::nullopt, {}, *for_nodes));

  session->client_ = controller ? std::make_unique<CsiClient>((*plugin)->in_process_channel(),
                                                              controller, options.controller)
                                : std::make_unique<CsiClient>((*plugin)->in_process_channel());
  session->client_->set_secrets(std::move(secrets));
  // Only a node's own certificate registers its host: an admin's CLI is no node.
  if (controller && is_certificate_of_node(certificate, (*plugin)->options().node_id)) {
    announce_node(*session->client_, (*plugin)->options().node_id);
  }
  if (!options.on_node.empty()) {
    ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.on_node, "--on-node"));
    session->client_->set_proxy_node(options.on_node);
  }
  if (!controller && for_nodes->certificate.empty())
    session->node_of_ = read_node_marker((*plugin)->layout().root);
  session->plugin_ = std::move(*plugin);
  return session;
}

std::string only_this_host_text(const Session& session, const char* hint) {
  const auto& node_of = session.node_of();
  if (!node_of) return "";
  // Both fields were validated when read (a node id, a HOST:PORT): nothing to escape.
  return fmt::format("this host is node \"{}\" of controller {}; {}", node_of->node_id,
                     node_of->controller, hint);
}

std::string nothing_to_delete(const Session& session, std::string_view what,
                              std::string_view name) {
  if (!session.sees_only_this_host())
    return fmt::format("{} \"{}\" does not exist; nothing to delete", what, name);
  note_only_this_host(session);
  return fmt::format("{} \"{}\" does not exist on this host; nothing deleted here", what, name);
}

Status with_only_this_host_hint(const Session& session, Status status, const char* hint) {
  if (status.code() != Code::kNotFound || is_ambiguous_name(status) ||
      !session.sees_only_this_host()) {
    return status;
  }
  return error(Code::kNotFound, "{} ({})", status.message(), only_this_host_text(session, hint));
}

void note_only_this_host(const Session& session, const char* hint) {
  if (session.sees_only_this_host())
    std::fprintf(stderr, "rosetctl: note: %s\n", only_this_host_text(session, hint).c_str());
}

}  // namespace rosetctl::cli
