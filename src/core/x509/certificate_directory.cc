#include "core/x509/certificate_directory.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "core/private_file.h"
#include "core/random_id.h"

namespace rosetctl {
namespace {

constexpr std::size_t kMaxCertificateFileBytes = 1 << 20;
constexpr std::size_t kMaxKeyFileBytes = 64 << 10;
constexpr mode_t kCertificateFileMode = 0644;
constexpr mode_t kKeyFileMode = 0600;

// A temporary file in the directory, removed unless it was renamed into place.
class TemporaryCertificateFile {
 public:
  TemporaryCertificateFile(int dir_fd, std::string name)
      : dir_fd_(dir_fd), name_(std::move(name)) {}
  ~TemporaryCertificateFile() {
    if (!name_.empty()) ::unlinkat(dir_fd_, name_.c_str(), 0);
  }
  TemporaryCertificateFile(TemporaryCertificateFile&& other) noexcept
      : dir_fd_(other.dir_fd_), name_(std::exchange(other.name_, {})) {}
  TemporaryCertificateFile(const TemporaryCertificateFile&) = delete;
  TemporaryCertificateFile& operator=(const TemporaryCertificateFile&) = delete;
  TemporaryCertificateFile& operator=(TemporaryCertificateFile&&) = delete;

  const std::string& name() const { return name_; }
  void placed() { name_.clear(); }

 private:
  int dir_fd_;
  std::string name_;
};

Status write_synced(int fd, std::string_view content, const std::string& what) {
  while (!content.empty()) {
    ssize_t wrote = ::write(fd, content.data(), content.size());
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) return errno_status(errno, fmt::format("cannot write {}", what));
    content.remove_prefix(static_cast<std::size_t>(wrote));
  }
  if (::fsync(fd) != 0) return errno_status(errno, fmt::format("cannot sync {}", what));
  return Status::ok();
}

// `content` in a new file of `mode` next to `final_name`, on disk.
Expected<TemporaryCertificateFile> write_temporary(int dir_fd, const std::string& dir_path,
                                                   const std::string& final_name,
                                                   std::string_view content, mode_t mode) {
  std::string name = "." + final_name + ".tmp-" + random_hex(6);
  std::string what = fmt::format("\"{}/{}\"", dir_path, name);
  // O_EXCL|O_NOFOLLOW: a file or link planted under this name is an error, never written through.
  UniqueFd fd(
      ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot create {}", what));
  TemporaryCertificateFile file(dir_fd, std::move(name));
  // The umask may have narrowed a certificate's 0644; it cannot have widened a key's 0600.
  if (::fchmod(fd.get(), mode) != 0)
    return errno_status(errno, fmt::format("cannot chmod {}", what));
  ROSETCTL_RETURN_IF_ERROR(write_synced(fd.get(), content, what));
  return file;
}

}  // namespace

Expected<CertificateDirectory> CertificateDirectory::open(const std::string& path, bool create) {
  if (path.empty()) return error(Code::kInvalidArgument, "the certificate directory is required");
  if (create) {
    std::error_code failed;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, failed);
    if (failed) {
      return error(Code::kInternal, "cannot create \"{}\": {}", parent.string(), failed.message());
    }
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return errno_status(errno, fmt::format("cannot create certificate directory \"{}\"", path));
    }
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    return errno_status(errno, fmt::format("cannot open certificate directory \"{}\"", path));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect certificate directory \"{}\"", path));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return error(Code::kFailedPrecondition,
                 "certificate directory \"{}\" has mode {:04o}: other users could replace the "
                 "certificates in it; chmod go-w it",
                 path, st.st_mode & 07777);
  }
  return CertificateDirectory(path, std::move(fd));
}

std::string CertificateDirectory::certificate_path(std::string_view name) const {
  return fmt::format("{}/{}.crt", path_, name);
}

std::string CertificateDirectory::key_path(std::string_view name) const {
  return fmt::format("{}/{}.key", path_, name);
}

Expected<PairPresence> CertificateDirectory::presence(std::string_view name) const {
  PairPresence found;
  for (auto [suffix, slot] : {std::pair{".crt", &found.certificate}, {".key", &found.key}}) {
    std::string file = std::string(name) + suffix;
    struct stat st;
    if (::fstatat(fd_.get(), file.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      *slot = true;
    } else if (errno != ENOENT) {
      return errno_status(errno, fmt::format("cannot inspect \"{}/{}\"", path_, file));
    }
  }
  return found;
}

Expected<std::string> CertificateDirectory::read_certificate(std::string_view name) const {
  return read_certificate_file(certificate_path(name),
                               fmt::format("certificate \"{}\"", certificate_path(name)));
}

Expected<SecretText> CertificateDirectory::read_key(std::string_view name) const {
  auto text = read_private_file(key_path(name), "key file", kMaxKeyFileBytes);
  if (!text) return text.status();
  return SecretText(std::move(*text));
}

Status CertificateDirectory::place(const std::string& temporary, const std::string& final_name,
                                   Overwrite overwrite) {
  unsigned flags = overwrite == Overwrite::kRefuse ? RENAME_NOREPLACE : 0;
  if (::renameat2(fd_.get(), temporary.c_str(), fd_.get(), final_name.c_str(), flags) == 0) {
    return Status::ok();
  }
  if (errno == EEXIST) {
    return error(Code::kAlreadyExists, "\"{}/{}\" already exists", path_, final_name);
  }
  return errno_status(errno, fmt::format("cannot rename into \"{}/{}\"", path_, final_name));
}

Status CertificateDirectory::write_pair(std::string_view name, const CertificateAndKey& pair,
                                        Overwrite overwrite) {
  const std::string key_name = std::string(name) + ".key";
  const std::string certificate_name = std::string(name) + ".crt";
  if (overwrite == Overwrite::kRefuse) {
    auto found = presence(name);
    if (!found) return found.status();
    if (found->any()) {
      return error(Code::kAlreadyExists, "\"{}/{}\" already exists", path_,
                   found->certificate ? certificate_name : key_name);
    }
  }
  auto key = write_temporary(fd_.get(), path_, key_name, pair.key_pem.view(), kKeyFileMode);
  if (!key) return key.status();
  auto certificate = write_temporary(fd_.get(), path_, certificate_name, pair.certificate_pem,
                                     kCertificateFileMode);
  if (!certificate) return certificate.status();

  ROSETCTL_RETURN_IF_ERROR(place(key->name(), key_name, overwrite));
  key->placed();
  if (Status placed = place(certificate->name(), certificate_name, overwrite); !placed) {
    // Only under kRefuse can another writer have won the race; its certificate stays, our key
    // (just created, matching nothing) goes.
    if (overwrite == Overwrite::kRefuse) ::unlinkat(fd_.get(), key_name.c_str(), 0);
    return placed;
  }
  certificate->placed();
  if (::fsync(fd_.get()) != 0) {
    return errno_status(errno, fmt::format("cannot sync certificate directory \"{}\"", path_));
  }
  return Status::ok();
}

Status CertificateDirectory::rename_pair(std::string_view name, std::string_view new_name) {
  // Checked for both first, so a clash cannot leave one file renamed and the other not.
  auto taken = presence(new_name);
  if (!taken) return taken.status();
  if (taken->any()) {
    return error(Code::kAlreadyExists, "\"{}/{}.{}\" already exists", path_, new_name,
                 taken->certificate ? "crt" : "key");
  }
  for (const char* suffix : {".crt", ".key"}) {
    std::string from = std::string(name) + suffix;
    std::string to = std::string(new_name) + suffix;
    if (::renameat2(fd_.get(), from.c_str(), fd_.get(), to.c_str(), RENAME_NOREPLACE) == 0) {
      continue;
    }
    if (errno == ENOENT) continue;
    if (errno == EEXIST) return error(Code::kAlreadyExists, "\"{}/{}\" already exists", path_, to);
    return errno_status(errno, fmt::format("cannot rename \"{}/{}\"", path_, from));
  }
  if (::fsync(fd_.get()) != 0) {
    return errno_status(errno, fmt::format("cannot sync certificate directory \"{}\"", path_));
  }
  return Status::ok();
}

Expected<std::string> read_certificate_file(const std::string& path, std::string_view what) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open {}", what));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return errno_status(errno, fmt::format("cannot inspect {}", what));
  if (!S_ISREG(st.st_mode)) return error(Code::kInvalidArgument, "{} is not a regular file", what);
  std::string content;
  char buffer[8192];
  while (content.size() <= kMaxCertificateFileBytes) {
    ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_status(errno, fmt::format("cannot read {}", what));
    if (got == 0) return content;
    content.append(buffer, static_cast<std::size_t>(got));
  }
  return error(Code::kInvalidArgument, "{} is larger than {} bytes", what,
               kMaxCertificateFileBytes);
}

}  // namespace rosetctl
