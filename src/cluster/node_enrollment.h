// A node plugin in Kubernetes getting its node certificate from its controller
// (cluster/enrollment_service.h is the controller's side): a new key that never leaves this
// host, a certificate request for it, and the pod's projected ServiceAccount token, sent over
// TLS that checks the controller's certificate (the node has none of its own yet). The key and
// the certificate are written where --tls-key and --tls-cert name, which the node's listeners
// and its channel to the controller read (and re-read within kTlsReloadSeconds). Before half of
// the certificate's life has passed, NodeCertificateRenewal gets the next one the same way.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"

namespace rosetctl {

struct NodeEnrollment {
  std::string address;           // the controller's enrollment listener, HOST:PORT
  std::string token_file;        // the projected ServiceAccount token (kubelet refreshes it)
  std::string ca_file;           // --tls-ca: the CA the controller's certificate verifies with
  std::string certificate_file;  // --tls-cert: written
  std::string key_file;          // --tls-key: written, mode 0600
  std::string node_id;           // this node's id (spec.nodeName)
};

// Gets a certificate once and writes both files; returns its end (unix seconds). The
// controller's refusal is its status (UNAUTHENTICATED, PERMISSION_DENIED naming why);
// UNAVAILABLE when it cannot be reached within `deadline`.
Expected<int64_t> enroll_node(const NodeEnrollment& enrollment, std::chrono::seconds deadline);

// enroll_node, trying again every 2 s while the controller is UNAVAILABLE (it may start after
// this node plugin), for up to `patience`. A refusal ends it at once.
Expected<int64_t> enroll_node_patiently(const NodeEnrollment& enrollment,
                                        std::chrono::seconds patience);

// Renews the certificate in the background: at half of its remaining life, then every 30 s
// while that fails (logged once per change between working and failing).
class NodeCertificateRenewal {
 public:
  NodeCertificateRenewal(NodeEnrollment enrollment, int64_t not_after);
  ~NodeCertificateRenewal();
  NodeCertificateRenewal(const NodeCertificateRenewal&) = delete;
  NodeCertificateRenewal& operator=(const NodeCertificateRenewal&) = delete;

 private:
  void run();

  const NodeEnrollment enrollment_;
  int64_t not_after_;  // only the thread uses it
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace rosetctl
