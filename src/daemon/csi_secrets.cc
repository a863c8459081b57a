// CSI secrets as the providers get them (see csi_secrets.h).
#include "daemon/csi_secrets.h"

namespace rosetctl {

StringMap csi_secrets(const google::protobuf::Map<std::string, std::string>& secrets) {
  StringMap out;
  for (const auto& [key, value] : secrets) {
    std::string_view text = value;
    if (text.ends_with("\r\n")) {
      text.remove_suffix(2);
    } else if (text.ends_with('\n')) {
      text.remove_suffix(1);
    }
    out.emplace(key, std::string(text));
  }
  return out;
}

}  // namespace rosetctl
