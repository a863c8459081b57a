// Reading open-iscsi's initiator name file.
#include "cli/initiator_name.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "core/unique_fd.h"

namespace rosetctl::cli {
namespace {

std::string_view trim_blanks(std::string_view text) {
  constexpr std::string_view kBlanks = " \t\r";
  std::size_t first = text.find_first_not_of(kBlanks);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kBlanks) - first + 1);
}

// The file is one line; anything much longer is not open-iscsi's.
constexpr std::size_t kMaxInitiatorFileBytes = 64 * 1024;

}  // namespace

std::string initiator_name_file() {
  const char* file = std::getenv("ROSETCTL_ISCSI_INITIATOR_FILE");
  return file != nullptr && *file != '\0' ? std::string(file) : std::string(kInitiatorNameFile);
}

Expected<std::optional<std::string>> read_initiator_name(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<std::string>();
    return errno_status(errno, fmt::format("cannot read the iSCSI initiator name file \"{}\" "
                                           "(pass --iscsi-initiator instead)",
                                           path));
  }
  std::string content;
  char buffer[4096];
  while (content.size() < kMaxInitiatorFileBytes) {
    ssize_t got = ::read(fd.get(), buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return errno_status(errno,
                          fmt::format("cannot read the iSCSI initiator name file \"{}\"", path));
    }
    if (got == 0) break;
    content.append(buffer, static_cast<std::size_t>(got));
  }
  constexpr std::string_view kKey = "InitiatorName=";
  std::string_view rest = content;
  while (!rest.empty()) {
    std::size_t end = rest.find('\n');
    std::string_view line = trim_blanks(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (line.starts_with(kKey))
      return std::optional<std::string>(trim_blanks(line.substr(kKey.size())));
  }
  return std::optional<std::string>();
}

}  // namespace rosetctl::cli
