// `rosetctl doctor`: checks of this host that say what is wrong and what to do about it, and
// the repair of what is safe to repair, which is serve's startup reconcile (daemon/reconcile.h)
// and its revival of dead stagings (daemon/node_repair.h): the same code, not a second one.
#pragma once

#include <string>
#include <vector>

#include "daemon/service_context.h"

namespace rosetctl {

enum class CheckState { kOk, kWarn, kFail };
std::string_view check_state_name(CheckState state);  // "ok", "warn", "fail"

// One row of the report. `repaired` says what --fix did about it ("" when nothing).
struct HostCheck {
  std::string name;
  CheckState state = CheckState::kOk;
  std::string message;
  std::string repaired;
};

// The configured TLS files whose certificates are checked (paths; empty: none). Only paths:
// the doctor reads them as files of this host, whatever dials with them.
struct CertificateFiles {
  std::string certificate;  // this host's certificate
  std::string ca;           // the CA's
};

struct HostCheckOptions {
  CertificateFiles tls;
  int certificate_warn_days = 30;
  bool fix = false;
};

// Every check, in a fixed order. With `fix`, repairs first and checks again; each row that was
// not ok before says what was done in `repaired`.
std::vector<HostCheck> check_host(ServiceContext& context, const HostCheckOptions& options);

}  // namespace rosetctl
