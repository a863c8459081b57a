// Writing settings into an open-iscsi node record file, as iscsiadm's reader (idbm.c) reads it:
// one "name = value" per line, surrounding white space stripped, a later line of a name
// overriding an earlier one.
#include "providers/iscsi/node_record.h"

#include <fstream>
#include <iterator>
#include <sstream>

#include "core/private_file.h"

namespace rosetctl::iscsi {
namespace {

constexpr size_t kMaxValue = 255;  // open-iscsi's VALUE_MAXVAL (256) with its terminating NUL

// The setting a record line names ("" for a comment or a blank line).
std::string_view line_name(std::string_view line) {
  size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos || line[start] == '#') return {};
  size_t end = line.find_first_of(" \t=", start);
  return line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
}

}  // namespace

Status check_record_value(std::string_view name, std::string_view value) {
  bool control = false;
  for (unsigned char c : value)
    control = control || c < 0x20 || c == 0x7f;
  bool padded = !value.empty() && (value.front() == ' ' || value.back() == ' ');
  if (control || padded || value.size() > kMaxValue) {
    return error(Code::kInvalidArgument,
                 "the value for open-iscsi's {} must be one line of at most {} bytes without "
                 "control characters or spaces at either end",
                 name, kMaxValue);
  }
  return Status::ok();
}

Status write_record_settings(const std::filesystem::path& record, const RecordSettings& settings) {
  for (const auto& [name, value] : settings)
    ROSETCTL_RETURN_IF_ERROR(check_record_value(name, value));
  std::ifstream in(record);
  if (!in) {
    return error(Code::kInternal, "cannot read the open-iscsi node record \"{}\"", record.string());
  }
  std::vector<bool> written(settings.size(), false);
  std::ostringstream out;
  auto write_missing = [&] {
    for (size_t i = 0; i < settings.size(); ++i) {
      if (!written[i]) out << settings[i].first << " = " << settings[i].second << '\n';
      written[i] = true;
    }
  };
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# END RECORD", 0) == 0) write_missing();
    std::string_view name = line_name(line);
    size_t i = 0;
    while (i < settings.size() && (name.empty() || settings[i].first != name))
      ++i;
    if (i == settings.size()) {
      out << line << '\n';
    } else if (!written[i]) {
      out << settings[i].first << " = " << settings[i].second << '\n';
      written[i] = true;
    }
  }
  if (in.bad()) {
    return error(Code::kInternal, "cannot read the open-iscsi node record \"{}\"", record.string());
  }
  write_missing();
  return write_private_file(record.string(), out.str());
}

}  // namespace rosetctl::iscsi
