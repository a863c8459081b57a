// Unit test helper: a state store opened in a test's scratch directory, or the test stops there
// with the reason.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "core/state_store.h"

namespace rosetctl {

inline std::unique_ptr<StateStore> open_store(const std::string& dir) {
  Expected<std::unique_ptr<StateStore>> store = StateStore::open(dir);
  INFO(store.status().message());
  REQUIRE(store.has_value());
  return std::move(*store);
}

}  // namespace rosetctl
