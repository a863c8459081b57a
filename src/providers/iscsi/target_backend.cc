// Names and secrets every target backend shares: IQNs, initiator names, CHAP credentials.
#include "providers/iscsi/target_backend.h"

#include "core/validate.h"

namespace rosetctl {
namespace {

constexpr size_t kMaxIqnPrefixBytes = 160;
constexpr size_t kMaxSerialBytes = 36;  // what tgt keeps of a SCSI serial
constexpr size_t kMaxChapUserBytes = 64;
constexpr size_t kMinChapPasswordBytes = 12;  // RFC 3720, 8.2.1: at least 96 bits
constexpr size_t kMaxChapPasswordBytes = 255;

bool is_lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// Lowercase letters, digits and the punctuation an iSCSI name may hold.
bool all_iscsi_name_chars(std::string_view text, std::string_view punctuation) {
  for (char c : text) {
    if (!is_lower_alnum(c) && punctuation.find(c) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace

Expected<std::string> TargetBackend::set_chap(std::string_view volume_id,
                                              const ChapCredentials& chap) {
  auto accounts = set_chap_accounts(volume_id, {chap}, std::nullopt);
  if (!accounts) return accounts.status();
  return accounts->front();
}

std::string target_iqn(std::string_view prefix, std::string_view volume_id) {
  return fmt::format("{}:{}", prefix, volume_id);
}

Status validate_iqn_prefix(std::string_view prefix, std::string_view what) {
  if (prefix.size() > kMaxIqnPrefixBytes) {
    return error(Code::kInvalidArgument, "{} is {} bytes long; the limit is {} bytes", what,
                 prefix.size(), kMaxIqnPrefixBytes);
  }
  // "iqn." + "YYYY-MM." + a reversed domain name.
  bool dated = prefix.size() > 12 && prefix.starts_with("iqn.") && prefix[8] == '-' &&
               prefix[11] == '.' && all_iscsi_name_chars(prefix.substr(4, 4), "") &&
               all_iscsi_name_chars(prefix.substr(9, 2), "");
  if (!dated || !all_iscsi_name_chars(prefix, ".-") || prefix.back() == '.') {
    return error(Code::kInvalidArgument,
                 "{} {} is not an IQN prefix: write it as iqn.YYYY-MM.reversed.domain in "
                 "lowercase letters, digits, '.' and '-' (the default is {})",
                 what, display_quoted(prefix), kDefaultIscsiIqnPrefix);
  }
  return Status::ok();
}

Status validate_target_volume_id(std::string_view volume_id) {
  if (volume_id.empty()) return error(Code::kInvalidArgument, "volume_id is required");
  if (volume_id.size() > kMaxSerialBytes || !is_lower_alnum(volume_id.front()) ||
      !all_iscsi_name_chars(volume_id, ".-")) {
    return error(Code::kInvalidArgument,
                 "volume_id {} cannot name an iSCSI target: it must be 1 to {} bytes of "
                 "lowercase letters, digits, '.' and '-', starting with a letter or digit (it "
                 "becomes part of the IQN and the LUN's SCSI serial)",
                 display_quoted(volume_id), kMaxSerialBytes);
  }
  return Status::ok();
}

Status validate_chap(const ChapCredentials& chap) {
  const std::string& user = chap.user;
  bool user_ok = !user.empty() && user.size() <= kMaxChapUserBytes;
  for (char c : user) {
    bool allowed = (c >= 'A' && c <= 'Z') || is_lower_alnum(c) ||
                   std::string_view("._@:-").find(c) != std::string_view::npos;
    user_ok = user_ok && allowed;
  }
  if (!user_ok) {
    return error(Code::kInvalidArgument,
                 "chap-user {} is not valid: it must be 1 to {} bytes of letters, digits, '.', "
                 "'_', '@', ':' and '-'",
                 display_quoted(user), kMaxChapUserBytes);
  }
  // The password is checked without ever being quoted back.
  const std::string& password = chap.password;
  if (password.size() < kMinChapPasswordBytes || password.size() > kMaxChapPasswordBytes) {
    return error(Code::kInvalidArgument,
                 "chap-password for chap-user {} is {} bytes long; it must be {} to {} bytes "
                 "(RFC 3720 asks for at least 96 bits)",
                 display_quoted(user), password.size(), kMinChapPasswordBytes,
                 kMaxChapPasswordBytes);
  }
  for (char c : password) {
    if (c <= ' ' || c > '~' || c == ',') {
      return error(Code::kInvalidArgument,
                   "chap-password for chap-user {} may only contain printable ASCII characters "
                   "other than space and ','",
                   display_quoted(user));
    }
  }
  return Status::ok();
}

}  // namespace rosetctl
