#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, unit tests under ASan+UBSan, a short run of
# each fuzz target, then every unit, integration and conformance test against the release build
# (as root: real mounts).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
step() { printf '\n==> %s\n' "$*"; }

step "clang-format check"
scripts/check-format.sh

step "Ansible collection lint (the ansible-test sanity tests that run offline)"
scripts/lint-ansible.sh

step "release build"
cmake --preset release >/dev/null
cmake --build --preset release -j "${jobs}"

step "ASan+UBSan build of the unit tests"
cmake --preset asan >/dev/null
unit_targets=$(cmake --build --preset asan --target help | sed -n 's/^\(unit_[a-z]*\): .*/\1/p' | tr '\n' ' ')
# shellcheck disable=SC2086  # one word per target
cmake --build --preset asan -j "${jobs}" --target ${unit_targets}

step "unit tests under ASan+UBSan"
ctest --preset asan -j "${jobs}"

step "fuzz targets of the input parsers, 15 s each (tests/fuzz/run.sh; a build of their own)"
tests/fuzz/run.sh 15

step "all tests (unit, integration, conformance) on the release build"
# Integration and conformance tests run one at a time (RUN_SERIAL); unit tests two at a time.
ctest --preset release -j "${jobs}"
