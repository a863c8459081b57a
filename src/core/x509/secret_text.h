// SecretText: a private key's PEM text in memory, overwritten when it is dropped so it does not
// linger in freed heap (a core dump, a later allocation). Move-only; never formatted.
#pragma once

#include <string.h>

#include <string>
#include <string_view>
#include <utility>

namespace rosetctl {

class SecretText {
 public:
  SecretText() = default;
  explicit SecretText(std::string text) : text_(std::move(text)) {}
  ~SecretText() { wipe(); }
  SecretText(SecretText&& other) noexcept : text_(std::move(other.text_)) { other.wipe(); }
  SecretText& operator=(SecretText&& other) noexcept {
    if (this != &other) {
      wipe();
      text_ = std::move(other.text_);
      other.wipe();
    }
    return *this;
  }
  SecretText(const SecretText&) = delete;
  SecretText& operator=(const SecretText&) = delete;

  std::string_view view() const { return text_; }
  bool empty() const { return text_.empty(); }

 private:
  void wipe() {
    // The whole buffer, not just size(): text once longer may have left bytes past the end.
    text_.resize(text_.capacity());
    ::explicit_bzero(text_.data(), text_.size());
    text_.clear();
  }

  std::string text_;
};

}  // namespace rosetctl
