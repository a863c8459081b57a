// Walking sysfs for iSCSI sessions and their disks.
#include "providers/iscsi/iscsi_sysfs.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

namespace rosetctl::iscsi {
namespace fs = std::filesystem;
namespace {

// A sysfs attribute's first line; nullopt when the file does not exist.
std::optional<std::string> read_attribute(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  return line;
}

std::string trimmed(std::string text) {
  auto blank = [](unsigned char c) { return c == ' ' || c == '\0' || c == '\n' || c == '\t'; };
  while (!text.empty() && blank(text.back()))
    text.pop_back();
  size_t start = 0;
  while (start < text.size() && blank(text[start]))
    ++start;
  return text.substr(start);
}

// The number in "session12" (sessions and their connections share it).
std::string session_number(const std::string& name) {
  return name.substr(std::string_view("session").size());
}

// The LUN of a SCSI device directory named "H:C:T:L"; -1 when the name is not one.
int lun_of(const std::string& name) {
  size_t colon = name.rfind(':');
  if (colon == std::string::npos || std::count(name.begin(), name.end(), ':') != 3) return -1;
  try {
    return std::stoi(name.substr(colon + 1));
  } catch (const std::exception&) {
    return -1;
  }
}

Status sysfs_error(const std::error_code& ec, const fs::path& path) {
  return errno_status(ec.value(), fmt::format("cannot read \"{}\"", path.string()));
}

}  // namespace

Expected<std::vector<KernelSession>> list_kernel_sessions(const std::string& sysfs) {
  std::vector<KernelSession> sessions;
  fs::path dir = fs::path(sysfs) / "class/iscsi_session";
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return sessions;
  if (ec) return sysfs_error(ec, dir);
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    if (name.rfind("session", 0) != 0) continue;
    auto target = read_attribute(entry.path() / "targetname");
    if (!target) continue;  // went away while we looked
    KernelSession session{name, trimmed(*target), ""};
    fs::path connection = fs::path(sysfs) / "class/iscsi_connection" /
                          fmt::format("connection{}:0", session_number(name));
    auto address = read_attribute(connection / "persistent_address");
    auto port = read_attribute(connection / "persistent_port");
    if (address && port) session.portal = fmt::format("{}:{}", trimmed(*address), trimmed(*port));
    sessions.push_back(std::move(session));
  }
  std::sort(sessions.begin(), sessions.end(),
            [](const KernelSession& a, const KernelSession& b) { return a.name < b.name; });
  return sessions;
}

Expected<std::optional<std::string>> find_session_disk(const std::string& sysfs,
                                                       const std::string& target, int lun) {
  auto sessions = list_kernel_sessions(sysfs);
  if (!sessions) return sessions.status();
  for (const KernelSession& session : *sessions) {
    if (session.target != target) continue;
    std::error_code ec;
    fs::path device =
        fs::canonical(fs::path(sysfs) / "class/iscsi_session" / session.name / "device", ec);
    if (ec) continue;
    // <session>/target<H>:<C>:<T>/<H>:<C>:<T>:<L>/block/<disk>
    for (const auto& scsi_target : fs::directory_iterator(device, ec)) {
      if (scsi_target.path().filename().string().rfind("target", 0) != 0) continue;
      std::error_code inner;
      for (const auto& scsi_device : fs::directory_iterator(scsi_target.path(), inner)) {
        if (lun_of(scsi_device.path().filename().string()) != lun) continue;
        std::error_code block_ec;
        for (const auto& disk : fs::directory_iterator(scsi_device.path() / "block", block_ec))
          return std::optional<std::string>(disk.path().filename().string());
      }
    }
  }
  return std::optional<std::string>();
}

Expected<std::string> read_unit_serial(const std::string& sysfs, const std::string& disk) {
  fs::path page = fs::path(sysfs) / "block" / disk / "device/vpd_pg80";
  std::ifstream in(page, std::ios::binary);
  if (!in) {
    return error(Code::kInternal, "cannot read the serial number of disk {} (\"{}\")", disk,
                 page.string());
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // SPC: byte 1 is the page code, bytes 2-3 the length of the serial that follows from byte 4.
  if (bytes.size() < 4 || static_cast<unsigned char>(bytes[1]) != 0x80) {
    return error(Code::kInternal, "disk {} reports a malformed serial number page", disk);
  }
  size_t length =
      (static_cast<unsigned char>(bytes[2]) << 8) | static_cast<unsigned char>(bytes[3]);
  return trimmed(bytes.substr(4, std::min(length, bytes.size() - 4)));
}

Expected<int64_t> read_disk_bytes(const std::string& sysfs, const std::string& disk) {
  fs::path path = fs::path(sysfs) / "block" / disk / "size";
  auto sectors = read_attribute(path);
  if (!sectors) return error(Code::kInternal, "cannot read the size of disk {}", disk);
  try {
    return static_cast<int64_t>(std::stoll(*sectors)) * 512;  // sysfs counts 512-byte sectors
  } catch (const std::exception&) {
    return error(Code::kInternal, "disk {} reports a size that is no number", disk);
  }
}

}  // namespace rosetctl::iscsi
