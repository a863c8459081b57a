// The mutual-TLS material of a host (its certificate, its key, the CA both sides trust) and the
// gRPC credentials made from it: a TCP listener of `serve`, and a client's channel to a
// controller or node. There is no plaintext TCP: every TCP connection is TLS (1.2 at least, 1.3
// preferred: gRPC's defaults) and both sides show a certificate of the same CA.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "core/status.h"

namespace rosetctl {

struct TlsFiles {
  std::string certificate;  // PEM: this host's certificate (rosetctl tls init / issue)
  std::string key;          // PEM private key, mode 0600
  std::string ca;           // PEM: the CA that signed every peer's certificate

  bool any() const { return !certificate.empty() || !key.empty() || !ca.empty(); }
};

// How often a running server or client looks at the files again: a replaced certificate or key
// (rotation) is used for new connections within this time, without a restart.
inline constexpr unsigned kTlsReloadSeconds = 10;

// Checks the three files before anything uses them, so a mistake is named now rather than as a
// failed handshake later: each is given and readable, the certificates are PEM certificates,
// and the key is a private file (core/private_file.h: a regular file only its owner can read).
// `purpose` says what needs them ("--listen", "--controller"). INVALID_ARGUMENT or
// PERMISSION_DENIED naming the flag and file; the key's content never appears in a message.
Status check_tls_files(const TlsFiles& files, std::string_view purpose);

// Server side: client certificates are required and verified against the CA.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const TlsFiles& files);

// The controller's enrollment listener (serve --enroll-listen): it shows its certificate and
// asks for none, so a node plugin without a certificate yet can ask for one
// (cluster/enrollment_service.h); the authorization table lets such a peer make that call alone.
std::shared_ptr<grpc::ServerCredentials> enrollment_server_credentials(const TlsFiles& files);

// A node's channel to that listener: no certificate of its own; the server's must verify
// against the CA in `ca_file`, name the address dialled and be OU=controller (a node's
// certificate of the same CA answering there would otherwise be shown the node's token).
std::shared_ptr<grpc::ChannelCredentials> enrollment_channel_credentials(
    const std::string& ca_file);

// Client side: the server's certificate is verified against the CA and must name the address
// dialled (a SAN), and this host's certificate is shown.
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const TlsFiles& files);

// The same, and the server's certificate must also say who it is: OU=`role` ("node",
// "controller") and, unless `name` is empty, CN=`name`. So the controller dialling node A at
// the address A registered reaches A or nobody (not a node that registered A's address, nor
// one that took it over), and a node reaches a controller. A mismatch fails the handshake (the
// call UNAVAILABLE) and is logged naming both certificates' subjects.
std::shared_ptr<grpc::ChannelCredentials> peer_channel_credentials(const TlsFiles& files,
                                                                   std::string role,
                                                                   std::string name);

// A channel kept for many calls to a peer that may restart (the controller's to its nodes, a
// node's to its controller). gRPC fails a call at once while the channel waits to reconnect,
// and by default waits up to two minutes after a peer was down for long; here at most
// kReconnectBackoffMs, so a restarted peer is answered again within seconds.
inline constexpr int kReconnectBackoffMs = 1000;
std::shared_ptr<grpc::Channel> kept_channel(const std::string& address,
                                            const std::shared_ptr<grpc::ChannelCredentials>& tls);

}  // namespace rosetctl
