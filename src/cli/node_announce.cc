// Building the registration, and the consumer's touch-or-register.
#include "cli/node_announce.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/initiator_name.h"
#include "core/version.h"
#include "core/x509/certificates.h"
#include "daemon/convert.h"

namespace rosetctl::cli {

Expected<v1::RegisterNodeRequest> node_registration(const std::string& node_id,
                                                    const std::string& address,
                                                    std::optional<std::string> initiator) {
  if (!initiator) {
    auto from_file = read_initiator_name(initiator_name_file());
    if (!from_file) return from_file.status();
    initiator = from_file->value_or("");
  }
  v1::RegisterNodeRequest request;
  request.set_node_id(node_id);
  request.set_address(address);
  request.set_iscsi_initiator(*initiator);
  (*request.mutable_topology())[kTopologyNodeKey] = node_id;
  request.set_version(kVersion);
  return request;
}

bool is_certificate_of_node(const std::string& certificate_file, const std::string& node_id) {
  std::ifstream in(certificate_file);
  std::ostringstream pem;
  pem << in.rdbuf();
  auto identity = read_certificate_identity(pem.str());
  return identity && identity->role == "node" && identity->common_name == node_id;
}

void announce_node(CsiClient& client, const std::string& node_id) {
  v1::TouchNodeRequest touch;
  touch.set_node_id(node_id);
  v1::TouchNodeResponse touched;
  Status status =
      client.registry(&v1::Registry::Stub::TouchNode, touch, &touched, /*patient=*/false);
  if (status.code() != Code::kNotFound) return;
  auto registration = node_registration(node_id, "");
  if (!registration) return;
  v1::RegisterNodeResponse registered;
  Status refused = client.registry(&v1::Registry::Stub::RegisterNode, *registration, &registered,
                                   /*patient=*/false);
  // A controller that does not answer is reported by the verb's own calls; a refusal of what
  // this host says (its initiator name another node holds) would show only as "not registered".
  if (refused.code() == Code::kAlreadyExists || refused.code() == Code::kInvalidArgument) {
    std::fprintf(stderr, "rosetctl: note: this node is not registered with the controller: %s\n",
                 refused.message().c_str());
  }
}

}  // namespace rosetctl::cli
