#!/usr/bin/env bash
# Fails when a C++ file differs from what clang-format (with the repo's .clang-format) makes of it.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h')
bad=()
for file in "${files[@]}"; do
  clang-format --dry-run --Werror "${file}" >/dev/null 2>&1 || bad+=("${file}")
done
if ((${#bad[@]})); then
  echo "not clang-formatted (run: clang-format -i ${bad[*]}):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "clang-format: ${#files[@]} files clean"
