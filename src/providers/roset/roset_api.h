// The Roset API calls rosetctl makes (roset-api.md): folders as nodes, commits, refs, and a
// check that the key is accepted. One RosetApi is a cheap view of a client and an endpoint.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "providers/roset/api_json.h"
#include "providers/roset/http_client.h"
#include "providers/roset/roset_config.h"

namespace rosetctl {

class RosetApi {
 public:
  RosetApi(HttpClient& http, RosetEndpoint endpoint)
      : http_(http), endpoint_(std::move(endpoint)) {}

  const RosetEndpoint& endpoint() const { return endpoint_; }

  // The key is accepted and the mount (when one is named) exists: GET /v1/mounts[/{id}].
  Status check_access();

  // POST /v1/nodes {name, type: folder, parentPath, mountId}. ALREADY_EXISTS on 409 (with the
  // existing node's id in `existing_id` when the server names it).
  Expected<RosetNode> create_folder(const std::string& name, const std::string& parent_path,
                                    const std::string& idempotency_key,
                                    std::string* existing_id = nullptr);
  // POST /v1/resolve {paths: [path]}: the node at `path`, or nullopt.
  Expected<std::optional<RosetNode>> resolve(const std::string& path);
  Expected<RosetNode> get_node(const std::string& id);  // NOT_FOUND when gone
  // DELETE /v1/nodes/{id} (to the trash) or …/permanent. A node already gone is OK.
  Status delete_node(const std::string& id, bool permanent);

  // POST /v1/nodes/{id}/commit (202), falling back to POST /v1/commits on 404/405 for servers
  // of the older form. Returns the commit as far as the server told (status may be "").
  Expected<RosetCommit> create_commit(const std::string& node_id, const std::string& message,
                                      const std::string& idempotency_key);
  Expected<RosetCommit> get_commit(const std::string& id);
  // Every commit of a node, following pages.
  Expected<std::vector<RosetCommit>> list_commits(const std::string& node_id);

  // PUT /v1/refs/{name} {commit_id}; DELETE /v1/refs/{name} (a missing ref is OK).
  Status put_ref(const std::string& name, const std::string& commit_id);
  Status delete_ref(const std::string& name);

 private:
  Expected<HttpResponse> call(const std::string& method, const std::string& path,
                              const nlohmann::json* body, const std::string& what,
                              const std::string& idempotency_key = "");
  // call() and, unless the status is 2xx, the mapped error.
  Expected<nlohmann::json> call_ok(const std::string& method, const std::string& path,
                                   const nlohmann::json* body, const std::string& what,
                                   const std::string& idempotency_key = "");

  HttpClient& http_;
  RosetEndpoint endpoint_;
};

// Path segments are percent-encoded for URLs ("k8s/restore/x" → "k8s%2Frestore%2Fx").
std::string url_encode(std::string_view segment);

}  // namespace rosetctl
