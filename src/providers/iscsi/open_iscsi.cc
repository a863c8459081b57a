// Driving iscsiadm, and finding the disk a login produced.
#include "providers/iscsi/open_iscsi.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "core/run_program.h"
#include "core/unique_fd.h"

namespace rosetctl::iscsi {
namespace fs = std::filesystem;
namespace {

constexpr auto kIscsiadmTimeout = std::chrono::seconds(60);
// The disk usually shows up within milliseconds of the login's answer: look again soon, then
// less often (each look walks sysfs).
constexpr auto kFirstDiskPoll = std::chrono::milliseconds(2);
constexpr auto kMaxDiskPoll = std::chrono::milliseconds(50);

// open-iscsi's exit codes (include/iscsi_err.h) that carry a meaning here.
constexpr int kErrTransport = 4;
constexpr int kErrLogin = 5;
constexpr int kErrTransportTimeout = 8;
constexpr int kErrSessionExists = 15;
constexpr int kErrFatalLogin = 19;  // the target refused us: not in its ACL, or no such target
constexpr int kErrNoObjects = 21;   // no such record or session
constexpr int kErrLoginAuth = 24;

Expected<ProgramResult> iscsiadm(std::vector<std::string> arguments) {
  auto program = find_program("iscsiadm", "open-iscsi");
  if (!program) return program.status();
  arguments.insert(arguments.begin(), *program);
  return run_program(arguments,
                     std::chrono::duration_cast<std::chrono::milliseconds>(kIscsiadmTimeout));
}

std::vector<std::string> node_arguments(const std::string& target, const std::string& portal) {
  return {"--mode", "node", "--targetname", target, "--portal", portal};
}

// A new record's settings: startup manual, a short login retry, CHAP when given. They are written
// into the record file, not through `iscsiadm --op update`: one process start less per login
// (hundreds of milliseconds in an emulated guest) and no password on a command line.
RecordSettings login_settings(const std::optional<LoginChap>& chap) {
  RecordSettings settings = {{"node.startup", "manual"},
                             // Give up on an unreachable portal after a few tries rather than
                             // open-iscsi's minutes.
                             {"node.session.initial_login_retry_max", "2"}};
  if (chap) {
    settings.push_back({"node.session.auth.authmethod", "CHAP"});
    settings.push_back({"node.session.auth.username", chap->initiator.user});
    settings.push_back({"node.session.auth.password", chap->initiator.password});
    if (chap->target) {
      settings.push_back({"node.session.auth.username_in", chap->target->user});
      settings.push_back({"node.session.auth.password_in", chap->target->password});
    }
  }
  return settings;
}

// Whether the disk's node opens yet. sysfs shows the disk before the kernel has finished adding
// it (an open meanwhile fails with ENXIO: a guest's connect saw it once the disk was looked for
// every few milliseconds), and devtmpfs makes the node a moment later (ENOENT).
Expected<bool> device_opens(const std::string& device) {
  UniqueFd fd(::open(device.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.valid()) return true;
  if (errno == ENXIO || errno == ENOENT) return false;
  return errno_status(errno, fmt::format("cannot open \"{}\"", device));
}

// The portal's "ADDR,PORT" as open-iscsi names record directories.
std::string record_prefix(const std::string& portal) {
  size_t colon = portal.rfind(':');
  return colon == std::string::npos ? portal
                                    : portal.substr(0, colon) + "," + portal.substr(colon + 1);
}

}  // namespace

Status iscsiadm_failure(int exit_code, const std::string& message, const std::string& what) {
  switch (exit_code) {
    case kErrFatalLogin:
    case kErrLoginAuth:
      return error(Code::kPermissionDenied, "{}: the target refused the login ({})", what, message);
    case kErrTransport:
    case kErrTransportTimeout:
    case kErrLogin:
      return error(Code::kUnavailable, "{}: the portal did not answer ({})", what, message);
    default:
      return error(Code::kInternal, "{}: iscsiadm failed ({})", what, message);
  }
}

OpenIscsi::OpenIscsi(std::string sysfs, std::string nodes_dir)
    : sysfs_(std::move(sysfs)), nodes_dir_(std::move(nodes_dir)) {}

Status OpenIscsi::check_installed() const {
  auto program = find_program("iscsiadm", "open-iscsi");
  return program ? Status::ok() : program.status();
}

std::vector<fs::path> OpenIscsi::record_files(const LunAddress& lun) const {
  std::vector<fs::path> found;
  std::error_code ec;
  std::string prefix = record_prefix(lun.portal);
  for (const auto& entry : fs::directory_iterator(fs::path(nodes_dir_) / lun.target, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix + ",", 0) != 0 && name != prefix) continue;
    // Newer open-iscsi keeps one file per interface inside the portal's directory.
    found.push_back(entry.is_directory() ? entry.path() / "default" : entry.path());
  }
  return found;
}

Status OpenIscsi::write_settings(const LunAddress& lun, const RecordSettings& settings) const {
  auto records = record_files(lun);
  if (records.empty()) {
    return error(Code::kInternal, "no open-iscsi node record for {} at {} under \"{}\"", lun.target,
                 lun.portal, nodes_dir_);
  }
  for (const fs::path& record : records)
    ROSETCTL_RETURN_IF_ERROR(write_record_settings(record, settings));
  return Status::ok();
}

Expected<std::string> OpenIscsi::attach(const LunAddress& lun, const std::optional<LoginChap>& chap,
                                        std::chrono::milliseconds timeout) const {
  auto existing = find_disk(lun);
  if (!existing) return existing.status();
  bool new_login = !existing->has_value();
  if (new_login) {
    // Every value is checked before the record exists: a refused secret leaves nothing behind.
    RecordSettings settings = login_settings(chap);
    for (const auto& [name, value] : settings)
      ROSETCTL_RETURN_IF_ERROR(check_record_value(name, value));
    // A record for exactly the portal the controller named: discovery would answer with the
    // address the target sees itself on, which need not be reachable from here.
    auto arguments = node_arguments(lun.target, lun.portal);
    arguments.insert(arguments.end(), {"--op", "new"});
    auto created = iscsiadm(arguments);
    if (!created) return created.status();
    if (!created->succeeded()) {
      return iscsiadm_failure(created->exit_code, created->describe(),
                              fmt::format("creating the node record for {}", lun.target));
    }
    if (Status written = write_settings(lun, settings); !written) {
      (void)detach(lun.portal, lun.target);
      return written;
    }
    auto login = node_arguments(lun.target, lun.portal);
    login.push_back("--login");
    auto logged_in = iscsiadm(login);
    if (!logged_in) return logged_in.status();
    if (!logged_in->succeeded() && logged_in->exit_code != kErrSessionExists) {
      Status failed =
          iscsiadm_failure(logged_in->exit_code, logged_in->describe(),
                           fmt::format("logging in to {} at {}", lun.target, lun.portal));
      (void)detach(lun.portal, lun.target);
      return failed;
    }
  }
  auto give_up = std::chrono::steady_clock::now() + timeout;
  Status unreadable_serial;
  auto poll = std::chrono::milliseconds(kFirstDiskPoll);
  while (true) {
    auto disk = find_session_disk(sysfs_, lun.target, lun.lun);
    if (!disk) return disk.status();
    // The kernel shows the disk before it has read its serial number page: until the
    // deadline, a page that cannot be read yet is waited for, not an answer.
    auto serial = disk->has_value() ? read_unit_serial(sysfs_, **disk) : Expected<std::string>("");
    if (!serial) unreadable_serial = serial.status();
    if (disk->has_value() && serial) {
      unreadable_serial = Status::ok();
      if (*serial != lun.serial) {
        if (new_login) (void)detach(lun.portal, lun.target);
        return error(Code::kFailedPrecondition,
                     "LUN {} of {} reports serial number \"{}\", not the volume's \"{}\": not "
                     "the volume's disk; nothing was mounted",
                     lun.lun, lun.target, *serial, lun.serial);
      }
      std::string device = "/dev/" + **disk;
      auto opens = device_opens(device);
      if (!opens) {
        if (new_login) (void)detach(lun.portal, lun.target);
        return opens.status();
      }
      if (*opens) return device;
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      if (new_login) (void)detach(lun.portal, lun.target);
      if (!unreadable_serial.is_ok()) {
        return error(Code::kDeadlineExceeded, "logged in to {} at {}, but within {} ms: {}",
                     lun.target, lun.portal, timeout.count(), unreadable_serial.message());
      }
      return error(Code::kDeadlineExceeded,
                   "logged in to {} at {}, but LUN {} did not appear as a disk within {} ms",
                   lun.target, lun.portal, lun.lun, timeout.count());
    }
    std::this_thread::sleep_for(poll);
    poll = std::min<std::chrono::milliseconds>(poll * 2, kMaxDiskPoll);
  }
}

Expected<std::optional<std::string>> OpenIscsi::find_disk(const LunAddress& lun) const {
  auto disk = find_session_disk(sysfs_, lun.target, lun.lun);
  if (!disk) return disk.status();
  if (!disk->has_value()) return std::optional<std::string>();
  return std::optional<std::string>("/dev/" + **disk);
}

Status OpenIscsi::detach(const std::string& portal, const std::string& target) const {
  auto logout = node_arguments(target, portal);
  logout.push_back("--logout");
  auto out = iscsiadm(logout);
  if (!out) return out.status();
  if (!out->succeeded() && out->exit_code != kErrNoObjects) {
    return iscsiadm_failure(out->exit_code, out->describe(),
                            fmt::format("logging out of {} at {}", target, portal));
  }
  auto remove = node_arguments(target, portal);
  remove.insert(remove.end(), {"--op", "delete"});
  auto removed = iscsiadm(remove);
  if (!removed) return removed.status();
  if (!removed->succeeded() && removed->exit_code != kErrNoObjects) {
    return iscsiadm_failure(removed->exit_code, removed->describe(),
                            fmt::format("deleting the node record for {} at {}", target, portal));
  }
  return Status::ok();
}

Expected<std::vector<KernelSession>> OpenIscsi::records() const {
  std::vector<KernelSession> found;
  std::error_code ec;
  fs::directory_iterator targets(nodes_dir_, ec);
  if (ec == std::errc::no_such_file_or_directory) return found;
  if (ec) return errno_status(ec.value(), fmt::format("cannot read \"{}\"", nodes_dir_));
  for (const auto& target : targets) {
    std::error_code inner;
    for (const auto& portal : fs::directory_iterator(target.path(), inner)) {
      // "ADDR,PORT,TPGT" (or "ADDR,PORT"): the portal's address is everything before the
      // second-to-last or last comma.
      std::string name = portal.path().filename().string();
      size_t first = name.find(',');
      if (first == std::string::npos) continue;
      size_t second = name.find(',', first + 1);
      std::string port = name.substr(
          first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
      found.push_back({"", target.path().filename().string(),
                       fmt::format("{}:{}", name.substr(0, first), port)});
    }
  }
  return found;
}

Status OpenIscsi::login(const std::string& portal, const std::string& target) const {
  auto arguments = node_arguments(target, portal);
  arguments.push_back("--login");
  auto out = iscsiadm(arguments);
  if (!out) return out.status();
  if (!out->succeeded() && out->exit_code != kErrSessionExists) {
    return iscsiadm_failure(out->exit_code, out->describe(),
                            fmt::format("logging in to {} at {}", target, portal));
  }
  return Status::ok();
}

Expected<int64_t> OpenIscsi::rescan(const LunAddress& lun) const {
  auto arguments = node_arguments(lun.target, lun.portal);
  arguments.push_back("--rescan");
  auto out = iscsiadm(arguments);
  if (!out) return out.status();
  if (!out->succeeded()) {
    return iscsiadm_failure(out->exit_code, out->describe(),
                            fmt::format("rescanning {} at {}", lun.target, lun.portal));
  }
  auto disk = find_session_disk(sysfs_, lun.target, lun.lun);
  if (!disk) return disk.status();
  if (!disk->has_value()) {
    return error(Code::kNotFound, "no disk for LUN {} of {} after a rescan", lun.lun, lun.target);
  }
  return read_disk_bytes(sysfs_, **disk);
}

}  // namespace rosetctl::iscsi
