// A check of the config file's text before toml++ reads it. toml++ 3.3.0 (Debian 12) reaches
// __builtin_unreachable() -- undefined behaviour -- when it tests a non-ASCII character for
// whitespace in the wrong code point ranges (é, ˊ, §...: marzer/tomlplusplus#190 and #295, fixed
// after 3.3.0). It does that test outside strings and comments, and after a line-ending
// backslash in a multi-line basic string. TOML allows non-ASCII only inside strings and
// comments anyway, so such a character elsewhere is refused here, with its line and column.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rosetctl::cli {

struct ConfigTextProblem {
  int line = 1;    // 1-based
  int column = 1;  // 1-based, in characters (UTF-8 sequences count once)
  std::string what;
};

// The first character toml++ must not be handed, or nullopt when the text is safe for it.
std::optional<ConfigTextProblem> find_unsafe_config_text(std::string_view text);

}  // namespace rosetctl::cli
