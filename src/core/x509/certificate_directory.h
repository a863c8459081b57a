// The directory `rosetctl tls` keeps certificates in (README: Certificates): for each
// certificate NAME the files NAME.crt (0644) and NAME.key (0600, PKCS#8 PEM); `ca` is the CA and
// `controller` the controller. Files appear whole or not at all, and a key is never readable by
// other users, not even for a moment.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"
#include "core/unique_fd.h"
#include "core/x509/certificates.h"
#include "core/x509/secret_text.h"

namespace rosetctl {

enum class Overwrite { kRefuse, kReplace };

struct PairPresence {
  bool certificate = false;
  bool key = false;
  bool any() const { return certificate || key; }
  bool both() const { return certificate && key; }
};

class CertificateDirectory {
 public:
  // Opens `path`. With `create`, makes it when missing (0700; missing parents as mkdir -p).
  // NOT_FOUND when it is missing otherwise; FAILED_PRECONDITION when group or others may write
  // to it (they could swap the CA certificate every host trusts).
  static Expected<CertificateDirectory> open(const std::string& path, bool create);

  const std::string& path() const { return path_; }
  std::string certificate_path(std::string_view name) const;  // <dir>/<name>.crt
  std::string key_path(std::string_view name) const;          // <dir>/<name>.key

  // Which of NAME.crt and NAME.key exist (a symlink counts: it would be replaced).
  Expected<PairPresence> presence(std::string_view name) const;

  Expected<std::string> read_certificate(std::string_view name) const;
  // PERMISSION_DENIED when the key file is not a regular file only its owner can read.
  Expected<SecretText> read_key(std::string_view name) const;

  // Writes NAME.key and NAME.crt, each through a new temporary file in the directory
  // (O_CREAT|O_EXCL|O_NOFOLLOW with its final mode), synced and renamed into place.
  // kRefuse: ALREADY_EXISTS when either file exists, leaving both as they were.
  Status write_pair(std::string_view name, const CertificateAndKey& pair, Overwrite overwrite);

  // Renames NAME.crt and NAME.key (those that exist) to NEW_NAME.*; ALREADY_EXISTS rather than
  // replacing anything.
  Status rename_pair(std::string_view name, std::string_view new_name);

 private:
  CertificateDirectory(std::string path, UniqueFd fd)
      : path_(std::move(path)), fd_(std::move(fd)) {}

  Status place(const std::string& temporary, const std::string& final_name, Overwrite overwrite);

  std::string path_;
  UniqueFd fd_;  // the directory: every file operation is relative to it
};

// The content of a certificate file (at most 1 MiB, a regular file). `what` names it in errors.
Expected<std::string> read_certificate_file(const std::string& path, std::string_view what);

}  // namespace rosetctl
