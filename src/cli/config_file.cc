// The TOML config file, read with toml++ and checked against the command tree (config_file.h).
//
// toml++ is compiled header-only into this one source (not linked as libtomlplusplus.so), so
// the binary needs no extra shared library at run time and a CLI run loads nothing more.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0  // errors come back as values (parse_result), as in the rest of the code
#include "cli/config_file.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/config_text.h"

namespace rosetctl::cli {
namespace {

// Flags that steer the parse itself, not settings a file may give.
bool is_setting(const CLI::Option& option) {
  if (!option.get_configurable() || option.get_lnames().empty()) return false;
  const std::string& name = option.get_lnames().front();
  return name != "help" && name != "help-all" && name != "version" && name != "config";
}

std::string section_name(const std::vector<std::string>& parents) {
  std::string name;
  for (const std::string& part : parents)
    name += (name.empty() ? "" : ".") + part;
  return name;
}

class TomlConfig : public CLI::Config {
 public:
  explicit TomlConfig(CLI::App* root) : root_(root) {}

  // Writing a config file is not offered.
  std::string to_config(const CLI::App*, bool, bool, std::string) const override { return ""; }

  // CLI11's protocol for a config reader: items, or a ParseError thrown (it becomes exit 2).
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::string path = file_name();
    const std::string text(std::istreambuf_iterator<char>(input), {});
    if (auto unsafe = find_unsafe_config_text(text)) {
      throw CLI::ConfigError(fmt::format("config file \"{}\", line {}, column {}: {}", path,
                                         unsafe->line, unsafe->column, unsafe->what));
    }
    toml::parse_result parsed = toml::parse(text, path);
    if (!parsed) fail(parsed.error().source(), std::string(parsed.error().description()));
    std::vector<CLI::ConfigItem> items;
    std::vector<std::string> parents;
    collect(root_, parsed.table(), parents, items);
    return items;
  }

 private:
  // The file CLI11 is reading: the --config flag's value, else its default (env or /etc).
  std::string file_name() const {
    const CLI::Option* option = root_->get_config_ptr();
    if (option == nullptr) return "";
    return option->results().empty() ? option->get_default_str() : option->results().front();
  }

  [[noreturn]] void fail(const toml::source_region& where, std::string_view what) const {
    throw CLI::ConfigError(fmt::format("config file \"{}\", line {}, column {}: {}", file_name(),
                                       where.begin.line, where.begin.column, what));
  }

  static CLI::App* find_section(CLI::App* app, const std::string& name) {
    auto found = app->get_subcommands(
        [&](const CLI::App* sub) { return !sub->get_name().empty() && sub->check_name(name); });
    return found.empty() ? nullptr : found.front();
  }

  // Looked up as CLI11 then looks it up ("--name"), so both agree on which flag a key sets.
  static CLI::Option* find_setting(CLI::App* app, const std::string& name) {
    CLI::Option* option = app->get_option_no_throw("--" + name);
    return option != nullptr && is_setting(*option) ? option : nullptr;
  }

  static std::string known_keys(CLI::App* app) {
    std::string known;
    for (const CLI::Option* option : app->get_options()) {
      if (is_setting(*option)) known += (known.empty() ? "" : ", ") + option->get_lnames().front();
    }
    return known.empty() ? "none" : known;
  }

  static std::string known_sections(CLI::App* app, const std::vector<std::string>& parents) {
    std::string known;
    for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name().empty()) continue;
      std::vector<std::string> path = parents;
      path.push_back(sub->get_name());
      known += (known.empty() ? "[" : ", [") + section_name(path) + "]";
    }
    return known.empty() ? "none" : known;
  }

  void collect(CLI::App* app, const toml::table& table, std::vector<std::string>& parents,
               std::vector<CLI::ConfigItem>& items) const {
    std::string where = parents.empty() ? "" : " in [" + section_name(parents) + "]";
    for (auto&& [key, node] : table) {
      std::string name(key.str());
      if (const toml::table* section = node.as_table()) {
        CLI::App* sub = find_section(app, name);
        parents.push_back(name);
        if (sub == nullptr) {
          std::string unknown = section_name(parents);
          parents.pop_back();
          fail(key.source(), fmt::format("unknown section [{}]: no such command (known: {})",
                                         unknown, known_sections(app, parents)));
        }
        collect(sub, *section, parents, items);
        parents.pop_back();
        continue;
      }
      CLI::Option* option = find_setting(app, name);
      if (option == nullptr) {
        fail(key.source(),
             fmt::format("unknown key \"{}\"{} (known: {})", name, where, known_keys(app)));
      }
      CLI::ConfigItem item;
      item.parents = parents;
      item.name = name;
      item.inputs = inputs_of(*option, name, node);
      items.push_back(std::move(item));
    }
  }

  // The value as CLI11 takes it: strings, one per element of an array.
  std::vector<std::string> inputs_of(CLI::Option& option, const std::string& name,
                                     const toml::node& node) const {
    bool is_flag = option.get_expected_min() == 0;
    if (is_flag && !node.is_boolean()) {
      fail(node.source(), fmt::format("\"{}\" takes true or false (unquoted)", name));
    }
    std::vector<std::string> inputs;
    if (const toml::array* array = node.as_array()) {
      if (option.get_items_expected_max() <= 1) {
        fail(node.source(), fmt::format("\"{}\" takes one value, not a list", name));
      }
      for (const toml::node& element : *array)
        inputs.push_back(checked(option, name, element));
    } else {
      inputs.push_back(checked(option, name, node));
    }
    return inputs;
  }

  // One scalar as text, refused here (with its line) when the flag's own check refuses it.
  std::string checked(CLI::Option& option, const std::string& name, const toml::node& node) const {
    std::optional<std::string> text = scalar_text(node);
    if (!text) {
      fail(node.source(),
           fmt::format("\"{}\" takes a string, number or boolean, not {}", name, kind_of(node)));
    }
    for (int index = 0;; ++index) {
      const CLI::Validator* validator = nullptr;
      try {
        validator = option.get_validator(index);
      } catch (const CLI::OptionNotFound&) {
        break;  // CLI11 says "no more validators" this way
      }
      if (!validator->get_active()) continue;
      std::string value = *text;
      std::string refused = (*validator)(value);
      if (!refused.empty()) fail(node.source(), fmt::format("\"{}\": {}", name, refused));
    }
    return *text;
  }

  static std::string_view kind_of(const toml::node& node) {
    if (node.is_array()) return "a list";
    if (node.is_table()) return "a table";
    return "a date or time";
  }

  static std::optional<std::string> scalar_text(const toml::node& node) {
    if (const auto* text = node.as_string()) return text->get();
    if (const auto* number = node.as_integer()) return std::to_string(number->get());
    if (const auto* number = node.as_floating_point()) return fmt::format("{}", number->get());
    if (const auto* flag = node.as_boolean()) return flag->get() ? "true" : "false";
    return std::nullopt;  // a date, time, array or table
  }

  CLI::App* root_;
};

}  // namespace

void read_config_as_toml(CLI::App& app) {
  app.config_formatter(std::make_shared<TomlConfig>(&app));
}

ConfigFileRead config_file_read(const CLI::App& app) {
  const CLI::Option* option = app.get_config_ptr();
  if (option == nullptr) return {};
  ConfigFileRead file;
  file.path = option->results().empty() ? option->get_default_str() : option->results().front();
  std::error_code ignored;
  file.read = !file.path.empty() && std::filesystem::exists(file.path, ignored);
  return file;
}

std::string config_file_text(const std::string& path, bool read) {
  if (read) return fmt::format("configuration file \"{}\" read", path);
  return fmt::format("no configuration file: \"{}\" does not exist (flags and environment only)",
                     path);
}

}  // namespace rosetctl::cli
