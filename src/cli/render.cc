// Table and JSON rendering.
#include "cli/render.h"

#include <algorithm>
#include <cstdio>

namespace rosetctl::cli {
namespace {

void print_json(const nlohmann::json& value) {
  std::string text = value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
}

}  // namespace

std::string text_of(const nlohmann::json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) return value.get<std::string>().empty() ? "-" : value.get<std::string>();
  return value.dump();
}

void print_list(OutputFormat format, const nlohmann::json& items,
                const std::vector<Column>& columns) {
  if (format == OutputFormat::kJson) return print_json(items);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::size_t> widths;
  for (const Column& column : columns)
    widths.push_back(column.header.size());
  for (const auto& item : items) {
    std::vector<std::string> row;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      row.push_back(columns[i].cell(item));
      widths[i] = std::max(widths[i], row.back().size());
    }
    rows.push_back(std::move(row));
  }
  auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      line += cells[i];
      if (i + 1 < cells.size()) line += std::string(widths[i] - cells[i].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  };
  std::vector<std::string> headers;
  for (const Column& column : columns)
    headers.push_back(column.header);
  print_row(headers);
  for (const auto& row : rows)
    print_row(row);
}

void print_object(OutputFormat format, const nlohmann::json& object,
                  const std::vector<Column>& fields) {
  if (format == OutputFormat::kJson) return print_json(object);
  std::size_t width = 0;
  for (const Column& field : fields)
    width = std::max(width, field.header.size());
  for (const Column& field : fields) {
    std::string value = field.cell(object);
    std::printf("%s:%s %s\n", field.header.c_str(),
                std::string(width - field.header.size(), ' ').c_str(), value.c_str());
  }
}

void print_line_or_json(OutputFormat format, const std::string& text,
                        const nlohmann::json& object) {
  if (format == OutputFormat::kJson) return print_json(object);
  std::printf("%s\n", text.c_str());
}

}  // namespace rosetctl::cli
