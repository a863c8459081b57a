// Checks the compiled CSI descriptors against csi-v1.10.0-wire.tsv, the table of every service,
// rpc, message, field, enum value and option of CSI v1.10.0. Both directions are checked: every
// row must match what protoc compiled, and csi.proto may define nothing the table leaves out.
// The checks are plain functions returning the differences they find, so the last test cases can
// feed them deliberate mistakes and prove that a broken csi.proto would not pass.
#include <google/protobuf/descriptor.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "csi.pb.h"

namespace {

namespace pb = google::protobuf;

// Each entry names the table line and the element, then says how the compiled proto differs.
using Problems = std::vector<std::string>;

constexpr std::string_view kPackage = "csi.v1";
constexpr std::size_t kColumns = 7;

// One line of the wire table; `line` (1-based) locates it in failure messages.
struct WireRow {
  int line = 0;
  std::size_t columns = 0;
  std::string kind;
  std::string parent;
  std::string name;
  std::string number;
  std::string type;
  std::string label;
  std::string options;
};

// The options column, split into the markers it asks for.
struct RowOptions {
  bool csi_secret = false;
  bool alpha = false;
  std::string oneof;
  std::vector<std::string> unknown;
};

// --- Reading the table ---------------------------------------------------------------------

std::vector<std::string> split_tabs(std::string_view line) {
  std::vector<std::string> cells;
  for (std::size_t start = 0;;) {
    const std::size_t tab = line.find('\t', start);
    cells.emplace_back(line.substr(start, tab - start));
    if (tab == std::string_view::npos) return cells;
    start = tab + 1;
  }
}

WireRow parse_row(std::string_view line, int line_number) {
  std::vector<std::string> cells = split_tabs(line);
  const std::size_t columns = cells.size();
  cells.resize(kColumns);
  return WireRow{.line = line_number,
                 .columns = columns,
                 .kind = cells[0],
                 .parent = cells[1],
                 .name = cells[2],
                 .number = cells[3],
                 .type = cells[4],
                 .label = cells[5],
                 .options = cells[6]};
}

// Header comments and the column-title line carry no element.
bool is_data_line(std::string_view line) {
  return !line.empty() && !line.starts_with('#') && !line.starts_with("kind\t");
}

std::vector<WireRow> read_wire_table(const std::string& path) {
  std::ifstream in(path);
  std::vector<WireRow> rows;
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    if (is_data_line(line)) rows.push_back(parse_row(line, line_number));
  }
  return rows;
}

RowOptions parse_options(const std::string& column) {
  RowOptions options;
  std::istringstream words(column);
  std::string word;
  while (words >> word) {
    if (word == "csi_secret") {
      options.csi_secret = true;
    } else if (word == "alpha") {
      options.alpha = true;
    } else if (word == "oneof") {
      if (!(words >> options.oneof)) options.unknown.push_back("oneof without a name");
    } else {
      options.unknown.push_back(word);
    }
  }
  return options;
}

// The element's name below the package, as the table spells it: `PluginCapability.Service`.
// Extension rows use the parent column for the extendee, so their name stands alone.
std::string qualified_name(const WireRow& row) {
  if (row.parent.empty() || row.kind == "extension") return row.name;
  return row.parent + "." + row.name;
}

std::string full_name(std::string_view qualified) {
  return std::string(kPackage) + "." + std::string(qualified);
}

std::string describe(const WireRow& row) {
  return "wire table line " + std::to_string(row.line) + " (" + row.kind + " " +
         qualified_name(row) + ")";
}

// --- The compiled side, in the table's vocabulary -------------------------------------------

// Naming a generated message keeps csi.pb.o linked and its file registered in the pool.
const pb::FileDescriptor& csi_file() {
  return *csi::v1::GetPluginInfoRequest::descriptor()->file();
}

const pb::DescriptorPool& csi_pool() {
  return *csi_file().pool();
}

// `string`, `.csi.v1.Volume`, `map<string, string>`: how the table writes a field's type.
std::string wire_type(const pb::FieldDescriptor& field) {
  if (field.is_map()) {
    const pb::Descriptor& entry = *field.message_type();
    return "map<" + wire_type(*entry.map_key()) + ", " + wire_type(*entry.map_value()) + ">";
  }
  if (field.type() == pb::FieldDescriptor::TYPE_MESSAGE) {
    return "." + field.message_type()->full_name();
  }
  if (field.type() == pb::FieldDescriptor::TYPE_ENUM) return "." + field.enum_type()->full_name();
  return field.type_name();
}

// Maps are repeated on the wire, but the table leaves their label empty.
std::string wire_label(const pb::FieldDescriptor& field) {
  if (field.is_map()) return "";
  return field.is_repeated() ? "repeated" : "optional";
}

std::string wire_signature(const pb::MethodDescriptor& rpc) {
  return "." + rpc.input_type()->full_name() + " -> ." + rpc.output_type()->full_name();
}

std::string wire_streaming(const pb::MethodDescriptor& rpc) {
  if (rpc.client_streaming() && rpc.server_streaming()) return "bidi_streaming";
  if (rpc.client_streaming()) return "client_streaming";
  if (rpc.server_streaming()) return "server_streaming";
  return "";
}

// A synthetic oneof (proto3 `optional`) is not a oneof of the spec, so it does not count here.
std::string wire_oneof(const pb::FieldDescriptor& field) {
  const pb::OneofDescriptor* oneof = field.real_containing_oneof();
  return oneof == nullptr ? "" : oneof->name();
}

// --- Comparing one row ----------------------------------------------------------------------

void compare(Problems& problems, std::string_view what, const std::string& compiled,
             const std::string& expected) {
  if (compiled == expected) return;
  problems.push_back(std::string(what) + " is '" + compiled + "', the table says '" + expected +
                     "'");
}

void compare_option(Problems& problems, std::string_view option, bool compiled, bool expected) {
  if (compiled == expected) return;
  problems.push_back(
      "(" + std::string(option) + ") = true is " +
      (compiled ? "set, but the table does not ask for it" : "missing, but the table asks for it"));
}

std::string not_found(const WireRow& row) {
  return "no " + row.kind + " of that name in csi.proto";
}

Problems check_file(const WireRow& row) {
  const pb::FileDescriptor* file = csi_pool().FindFileByName(row.name);
  if (file == nullptr) return {not_found(row)};
  Problems problems;
  compare(problems, "package", "package " + file->package(), row.type);
  return problems;
}

Problems check_extension(const WireRow& row) {
  const pb::FieldDescriptor* extension = csi_pool().FindExtensionByName(full_name(row.name));
  if (extension == nullptr) return {not_found(row)};
  Problems problems;
  compare(problems, "extendee", "." + extension->containing_type()->full_name(), row.parent);
  compare(problems, "number", std::to_string(extension->number()), row.number);
  compare(problems, "type", wire_type(*extension), row.type);
  compare(problems, "label", wire_label(*extension), row.label);
  return problems;
}

Problems check_service(const WireRow& row, const RowOptions& options) {
  const pb::ServiceDescriptor* service = csi_pool().FindServiceByName(full_name(row.name));
  if (service == nullptr) return {not_found(row)};
  Problems problems;
  compare_option(problems, "alpha_service", service->options().GetExtension(csi::v1::alpha_service),
                 options.alpha);
  return problems;
}

Problems check_rpc(const WireRow& row, const RowOptions& options) {
  const pb::MethodDescriptor* rpc = csi_pool().FindMethodByName(full_name(qualified_name(row)));
  if (rpc == nullptr) return {not_found(row)};
  Problems problems;
  compare(problems, "signature", wire_signature(*rpc), row.type);
  compare(problems, "streaming", wire_streaming(*rpc), row.label);
  compare_option(problems, "alpha_method", rpc->options().GetExtension(csi::v1::alpha_method),
                 options.alpha);
  return problems;
}

Problems check_message(const WireRow& row, const RowOptions& options) {
  const pb::Descriptor* message = csi_pool().FindMessageTypeByName(full_name(qualified_name(row)));
  if (message == nullptr) return {not_found(row)};
  Problems problems;
  compare_option(problems, "alpha_message", message->options().GetExtension(csi::v1::alpha_message),
                 options.alpha);
  return problems;
}

Problems check_field(const WireRow& row, const RowOptions& options) {
  const pb::FieldDescriptor* field = csi_pool().FindFieldByName(full_name(qualified_name(row)));
  if (field == nullptr) return {not_found(row)};
  Problems problems;
  compare(problems, "number", std::to_string(field->number()), row.number);
  compare(problems, "type", wire_type(*field), row.type);
  compare(problems, "label", wire_label(*field), row.label);
  compare(problems, "oneof", wire_oneof(*field), options.oneof);
  if (field->has_optional_keyword()) {
    problems.push_back("is declared proto3 `optional` (a synthetic oneof); the spec has none");
  }
  compare_option(problems, "csi_secret", field->options().GetExtension(csi::v1::csi_secret),
                 options.csi_secret);
  compare_option(problems, "alpha_field", field->options().GetExtension(csi::v1::alpha_field),
                 options.alpha);
  return problems;
}

Problems check_enum(const WireRow& row, const RowOptions& options) {
  const pb::EnumDescriptor* type = csi_pool().FindEnumTypeByName(full_name(qualified_name(row)));
  if (type == nullptr) return {not_found(row)};
  Problems problems;
  compare_option(problems, "alpha_enum", type->options().GetExtension(csi::v1::alpha_enum),
                 options.alpha);
  return problems;
}

// Enum values are scoped beside their enum in protobuf, so look them up through the enum.
Problems check_enum_value(const WireRow& row, const RowOptions& options) {
  const pb::EnumDescriptor* type = csi_pool().FindEnumTypeByName(full_name(row.parent));
  const pb::EnumValueDescriptor* value = type ? type->FindValueByName(row.name) : nullptr;
  if (value == nullptr) return {not_found(row)};
  Problems problems;
  compare(problems, "number", std::to_string(value->number()), row.number);
  compare_option(problems, "alpha_enum_value",
                 value->options().GetExtension(csi::v1::alpha_enum_value), options.alpha);
  return problems;
}

Problems check_element(const WireRow& row, const RowOptions& options) {
  if (row.kind == "file") return check_file(row);
  if (row.kind == "extension") return check_extension(row);
  if (row.kind == "service") return check_service(row, options);
  if (row.kind == "rpc") return check_rpc(row, options);
  if (row.kind == "message") return check_message(row, options);
  if (row.kind == "field") return check_field(row, options);
  if (row.kind == "enum") return check_enum(row, options);
  if (row.kind == "enumvalue") return check_enum_value(row, options);
  return {"unknown kind '" + row.kind + "'"};
}

// Flags a row this test would misread, so no requirement of the table is silently skipped.
Problems check_row_shape(const WireRow& row, const RowOptions& options) {
  Problems problems;
  if (row.columns != kColumns) {
    problems.push_back("has " + std::to_string(row.columns) + " columns, expected " +
                       std::to_string(kColumns));
  }
  for (const std::string& word : options.unknown) {
    problems.push_back("unknown option '" + word + "'");
  }
  if (row.kind != "field" && (options.csi_secret || !options.oneof.empty())) {
    problems.push_back("csi_secret and oneof only apply to fields");
  }
  return problems;
}

// Every way `row` differs from the compiled csi.proto; empty when it matches.
Problems check_row(const WireRow& row) {
  const RowOptions options = parse_options(row.options);
  Problems problems = check_row_shape(row, options);
  for (std::string& problem : check_element(row, options))
    problems.push_back(std::move(problem));
  for (std::string& problem : problems)
    problem = describe(row) + ": " + problem;
  return problems;
}

// --- The reverse direction: nothing compiled that the table does not list --------------------

// "field CreateVolumeRequest.name": the key both directions agree on.
std::string element_key(std::string_view kind, std::string_view qualified) {
  return std::string(kind) + " " + std::string(qualified);
}

// A compiled element's full name without the `csi.v1.` prefix, to match qualified_name(row).
std::string relative_name(const std::string& full) {
  return full.substr(kPackage.size() + 1);
}

std::set<std::string> listed_elements(const std::vector<WireRow>& rows) {
  std::set<std::string> listed;
  for (const WireRow& row : rows) {
    listed.insert(element_key(row.kind, qualified_name(row)));
    const std::string oneof = parse_options(row.options).oneof;
    if (!oneof.empty()) listed.insert(element_key("oneof", row.parent + "." + oneof));
  }
  return listed;
}

void collect_enum(const pb::EnumDescriptor& type, std::vector<std::string>& keys) {
  const std::string name = relative_name(type.full_name());
  keys.push_back(element_key("enum", name));
  for (int i = 0; i < type.value_count(); ++i) {
    keys.push_back(element_key("enumvalue", name + "." + type.value(i)->name()));
  }
}

void collect_message(const pb::Descriptor& message, std::vector<std::string>& keys) {
  if (message.options().map_entry()) return;  // the table writes maps as map<k, v> fields
  keys.push_back(element_key("message", relative_name(message.full_name())));
  for (int i = 0; i < message.field_count(); ++i) {
    keys.push_back(element_key("field", relative_name(message.field(i)->full_name())));
  }
  for (int i = 0; i < message.oneof_decl_count(); ++i) {
    keys.push_back(element_key("oneof", relative_name(message.oneof_decl(i)->full_name())));
  }
  for (int i = 0; i < message.extension_count(); ++i) {
    keys.push_back(element_key("extension", relative_name(message.extension(i)->full_name())));
  }
  for (int i = 0; i < message.nested_type_count(); ++i) {
    collect_message(*message.nested_type(i), keys);
  }
  for (int i = 0; i < message.enum_type_count(); ++i)
    collect_enum(*message.enum_type(i), keys);
}

// Every element csi.proto defines, keyed the way the table lists it.
std::vector<std::string> compiled_elements(const pb::FileDescriptor& file) {
  std::vector<std::string> keys;
  for (int i = 0; i < file.service_count(); ++i) {
    const pb::ServiceDescriptor& service = *file.service(i);
    keys.push_back(element_key("service", relative_name(service.full_name())));
    for (int j = 0; j < service.method_count(); ++j) {
      keys.push_back(element_key("rpc", relative_name(service.method(j)->full_name())));
    }
  }
  for (int i = 0; i < file.extension_count(); ++i) {
    keys.push_back(element_key("extension", relative_name(file.extension(i)->full_name())));
  }
  for (int i = 0; i < file.message_type_count(); ++i)
    collect_message(*file.message_type(i), keys);
  for (int i = 0; i < file.enum_type_count(); ++i)
    collect_enum(*file.enum_type(i), keys);
  return keys;
}

// The compiled elements that no row of `rows` lists.
std::vector<std::string> unlisted_elements(const pb::FileDescriptor& file,
                                           const std::vector<WireRow>& rows) {
  const std::set<std::string> listed = listed_elements(rows);
  std::vector<std::string> unlisted;
  for (const std::string& key : compiled_elements(file)) {
    if (!listed.contains(key)) unlisted.push_back(key + " is in csi.proto but not in the table");
  }
  return unlisted;
}

// --- Test plumbing --------------------------------------------------------------------------

std::string join_lines(const std::vector<std::string>& lines) {
  std::string joined;
  for (const std::string& line : lines)
    joined += line + "\n";
  return joined;
}

std::vector<WireRow> read_table_or_fail() {
  const std::vector<WireRow> rows = read_wire_table(ROSETCTL_CSI_WIRE_TABLE);
  INFO("wire table: " << ROSETCTL_CSI_WIRE_TABLE);
  REQUIRE_FALSE(rows.empty());
  return rows;
}

// A row as if read from line 0 of the table, for feeding the checks deliberate mistakes.
WireRow fabricated_row(const std::vector<std::string>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i)
    line += (i == 0 ? "" : "\t") + cells[i];
  return parse_row(line, 0);
}

std::vector<WireRow> without_row(std::vector<WireRow> rows, std::string_view kind,
                                 std::string_view qualified) {
  std::erase_if(rows, [&](const WireRow& row) {
    return row.kind == kind && qualified_name(row) == qualified;
  });
  return rows;
}

}  // namespace

TEST_CASE("every row of the CSI v1.10.0 wire table matches the compiled csi.proto", "[proto]") {
  for (const WireRow& row : read_table_or_fail()) {
    const Problems problems = check_row(row);
    INFO(join_lines(problems));
    CHECK(problems.empty());
  }
}

TEST_CASE("the compiled csi.proto defines nothing the wire table leaves out", "[proto]") {
  const std::vector<std::string> unlisted = unlisted_elements(csi_file(), read_table_or_fail());
  INFO(join_lines(unlisted));
  CHECK(unlisted.empty());
}

TEST_CASE("the row check reports each way a row can differ from csi.proto", "[proto]") {
  SECTION("a matching row passes") {
    CHECK(check_row(fabricated_row(
                        {"field", "CreateVolumeRequest", "name", "1", "string", "optional", ""}))
              .empty());
  }
  SECTION("wrong field number") {
    CHECK(check_row(fabricated_row(
              {"field", "CreateVolumeRequest", "name", "2", "string", "optional", ""})) ==
          Problems{"wire table line 0 (field CreateVolumeRequest.name): number is '1', the table "
                   "says '2'"});
  }
  SECTION("wrong type, label and oneof") {
    CHECK(check_row(fabricated_row({"field", "VolumeCapability", "access_mode", "3",
                                    ".csi.v1.VolumeCapability.BlockVolume", "repeated",
                                    "oneof access_type"})) ==
          Problems{
              "wire table line 0 (field VolumeCapability.access_mode): type is "
              "'.csi.v1.VolumeCapability.AccessMode', the table says "
              "'.csi.v1.VolumeCapability.BlockVolume'",
              "wire table line 0 (field VolumeCapability.access_mode): label is 'optional', the "
              "table says 'repeated'",
              "wire table line 0 (field VolumeCapability.access_mode): oneof is '', the table says "
              "'access_type'"});
  }
  SECTION("secret marker missing from the table") {
    CHECK(check_row(fabricated_row({"field", "NodeStageVolumeRequest", "secrets", "5",
                                    "map<string, string>", "", ""})) ==
          Problems{"wire table line 0 (field NodeStageVolumeRequest.secrets): (csi_secret) = true "
                   "is set, but the table does not ask for it"});
  }
  SECTION("alpha marker the compiled rpc lacks") {
    CHECK(check_row(fabricated_row({"rpc", "Controller", "CreateVolume", "",
                                    ".csi.v1.CreateVolumeRequest -> .csi.v1.CreateVolumeResponse",
                                    "server_streaming", "alpha"})) ==
          Problems{"wire table line 0 (rpc Controller.CreateVolume): streaming is '', the table "
                   "says 'server_streaming'",
                   "wire table line 0 (rpc Controller.CreateVolume): (alpha_method) = true is "
                   "missing, but the table asks for it"});
  }
  SECTION("enum value number") {
    CHECK(check_row(fabricated_row({"enumvalue", "VolumeUsage.Unit", "INODES", "3", "", "", ""})) ==
          Problems{"wire table line 0 (enumvalue VolumeUsage.Unit.INODES): number is '2', the "
                   "table says '3'"});
  }
  SECTION("element missing from csi.proto") {
    CHECK(check_row(fabricated_row({"message", "", "GetSnapshotRequest", "", "", "", ""})) ==
          Problems{"wire table line 0 (message GetSnapshotRequest): no message of that name in "
                   "csi.proto"});
  }
  SECTION("a row this test cannot read") {
    CHECK(check_row(fabricated_row({"message", "", "ProbeRequest", "", "", "", "beta"})) ==
          Problems{"wire table line 0 (message ProbeRequest): unknown option 'beta'"});
  }
}

TEST_CASE("the reverse check reports compiled elements the table leaves out", "[proto]") {
  std::vector<WireRow> rows = read_table_or_fail();
  rows = without_row(rows, "enumvalue", "NodeServiceCapability.RPC.Type.VOLUME_MOUNT_GROUP");
  rows = without_row(rows, "field", "VolumeCapability.block");
  CHECK(unlisted_elements(csi_file(), rows) ==
        std::vector<std::string>{
            "field VolumeCapability.block is in csi.proto but not in the table",
            "enumvalue NodeServiceCapability.RPC.Type.VOLUME_MOUNT_GROUP is in csi.proto but not "
            "in the table"});
}
