// Output in one place: every verb builds a JSON value (the stable, documented model) and hands
// it here; JSON mode prints it as is, table mode shows a view of it.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/global_options.h"

namespace rosetctl::cli {

struct Column {
  std::string header;
  // Text of the cell for one item.
  std::function<std::string(const nlohmann::json& item)> cell;
};

// A list: a table with a header row in table mode, a JSON array otherwise.
void print_list(OutputFormat format, const nlohmann::json& items,
                const std::vector<Column>& columns);

// One object: "Field: value" lines in table mode (in the order of `fields`), JSON otherwise.
void print_object(OutputFormat format, const nlohmann::json& object,
                  const std::vector<Column>& fields);

// Table mode prints `text` as is; JSON mode prints `object`. For verbs whose human output is one
// line (a path, a confirmation).
void print_line_or_json(OutputFormat format, const std::string& text, const nlohmann::json& object);

// Cell helpers.
std::string text_of(const nlohmann::json& value);  // strings bare, null as "-", others dumped

}  // namespace rosetctl::cli
