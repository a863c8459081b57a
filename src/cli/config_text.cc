// The config file's text checked before toml++ reads it (config_text.h says why).
#include "cli/config_text.h"

namespace rosetctl::cli {
namespace {

enum class Context { kOutside, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral };

bool is_non_ascii(char c) {
  return static_cast<unsigned char>(c) >= 0x80;
}

// What a bare value (a number, date or boolean) or bare key is made of. toml++ scans a bare value
// up to a terminator (whitespace, a line end, ',', ']', '}' or '#'; not a quote, '.' or '='),
// testing each character for whitespace on the way, so a quote inside such a scan (never valid
// TOML) starts no string for it, and none starts one here either.
bool is_bare_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '+' || c == ':' || c == '.';
}

bool ends_bare_scan(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ']' || c == '}' ||
         c == '#';
}

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  std::optional<ConfigTextProblem> run() {
    while (at_ < text_.size()) {
      if (auto problem = step()) return problem;
    }
    return std::nullopt;
  }

 private:
  bool starts_with(std::string_view what) const { return text_.substr(at_).starts_with(what); }

  // Moves past `count` bytes, keeping the line and column of the next one.
  void advance(std::size_t count = 1) {
    for (; count > 0 && at_ < text_.size(); --count, ++at_) {
      const auto byte = static_cast<unsigned char>(text_[at_]);
      if (byte == '\n') {
        ++line_;
        column_ = 1;
      } else if ((byte & 0xC0) != 0x80) {  // not a UTF-8 continuation byte
        ++column_;
      }
    }
  }

  ConfigTextProblem problem(std::string what) const { return {line_, column_, std::move(what)}; }

  // A closing delimiter of a multi-line string may be followed by one or two more quotes,
  // which belong to the string.
  void close_multi_line(char quote) {
    advance(3);
    for (int extra = 0; extra < 2 && at_ < text_.size() && text_[at_] == quote; ++extra)
      advance();
    context_ = Context::kOutside;
  }

  std::optional<ConfigTextProblem> step() {
    const char c = text_[at_];
    switch (context_) {
      case Context::kOutside:
        if (is_non_ascii(c)) {
          return problem(
              "a non-ASCII character outside a string or comment (TOML keys and whitespace are "
              "ASCII: quote it)");
        }
        // The first '=' of a line ends a bare key ('a="é"'); a later one is inside a value.
        if (is_bare_char(c)) bare_scan_ = true;
        if (ends_bare_scan(c) || (c == '=' && !equals_seen_)) bare_scan_ = false;
        if (c == '=') equals_seen_ = true;
        if (c == '\n') equals_seen_ = false;
        if (c == '#') context_ = Context::kComment;
        if (c == '"' && !bare_scan_) {
          context_ = starts_with("\"\"\"") ? Context::kMultiBasic : Context::kBasic;
        }
        if (c == '\'' && !bare_scan_) {
          context_ = starts_with("'''") ? Context::kMultiLiteral : Context::kLiteral;
        }
        advance(context_ == Context::kMultiBasic || context_ == Context::kMultiLiteral ? 3 : 1);
        return std::nullopt;
      case Context::kComment:
        if (c == '\n') {
          context_ = Context::kOutside;
          equals_seen_ = false;
        }
        advance();
        return std::nullopt;
      case Context::kBasic:
        if (c == '"' || c == '\n') context_ = Context::kOutside;
        advance(c == '\\' ? 2 : 1);  // an escaped quote does not end the string
        return std::nullopt;
      case Context::kLiteral:
        if (c == '\'' || c == '\n') context_ = Context::kOutside;
        advance();
        return std::nullopt;
      case Context::kMultiBasic:
        if (starts_with("\"\"\"")) {
          close_multi_line('"');
          return std::nullopt;
        }
        if (c == '\\') return after_backslash();
        advance();
        return std::nullopt;
      case Context::kMultiLiteral:
        if (starts_with("'''")) {
          close_multi_line('\'');
        } else {
          advance();
        }
        return std::nullopt;
    }
    return std::nullopt;
  }

  // In a multi-line basic string: an escape, or a line-ending backslash. toml++ tests the
  // characters after the backslash for whitespace, up to the first that is not whitespace or a
  // newline, so none of them may be non-ASCII.
  std::optional<ConfigTextProblem> after_backslash() {
    std::size_t next = at_ + 1;
    while (next < text_.size() && (text_[next] == ' ' || text_[next] == '\t'))
      ++next;
    const bool line_ending = next < text_.size() && (text_[next] == '\n' || text_[next] == '\r');
    if (!line_ending && next == at_ + 1) {
      if (next < text_.size() && is_non_ascii(text_[next])) {
        advance();
        return problem(unsafe_after_backslash());
      }
      advance(2);  // an escape such as \" or \\: the escaped character is not a delimiter
      return std::nullopt;
    }
    advance(next - at_);
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r'))
      advance();
    if (at_ < text_.size() && is_non_ascii(text_[at_])) return problem(unsafe_after_backslash());
    return std::nullopt;
  }

  static std::string unsafe_after_backslash() {
    return "a non-ASCII character first after a backslash in a multi-line string (put it "
           "before the backslash, or write it as \\uXXXX)";
  }

  std::string_view text_;
  std::size_t at_ = 0;
  int line_ = 1;
  int column_ = 1;
  Context context_ = Context::kOutside;
  bool bare_scan_ = false;    // in a bare key or value, where toml++ sees no strings
  bool equals_seen_ = false;  // this line has had its '=' outside strings
};

}  // namespace

std::optional<ConfigTextProblem> find_unsafe_config_text(std::string_view text) {
  return Scanner(text).run();
}

}  // namespace rosetctl::cli
