// The canonical path of a directory, asked of the kernel in a few system calls.
#pragma once

#include <optional>
#include <string>

namespace rosetctl {

// realpath(3) for a directory: `path` with every symlink, "." and ".." resolved. glibc's
// realpath calls readlink(2) once per path component, each walking the path from the start,
// which a node service resolving kubelet's deep pod paths pays on every call; here the kernel
// names the directory it opened (/proc/self/fd), with realpath(3) as the fallback when /proc is
// not there. A path that needs no resolving (no symlink, ".", ".." or "//") is checked in one
// openat2 and given back as it is. nullopt with errno set (ENOENT, ENOTDIR, EACCES, ...) when it
// cannot be resolved.
std::optional<std::string> real_directory_path(const std::string& path);

}  // namespace rosetctl
