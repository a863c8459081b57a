// Looking up optional string values in maps of strings.
#pragma once

#include <string>

namespace rosetctl {

// The value under `key` in a map of strings (std::map, a protobuf Map), or "" when there is none:
// for the optional keys of parameters and contexts, where absent and empty mean the same.
template <typename Map, typename Key>
std::string value_or_empty(const Map& map, const Key& key) {
  auto it = map.find(key);
  return it == map.end() ? std::string() : std::string(it->second);
}

}  // namespace rosetctl
