#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, one clang build with ASan+UBSan of the unit
# tests and the fuzz targets (our libraries compiled once for both), the unit tests under it, a
# short run of each fuzz target, then every unit, integration and conformance test against the
# release build (as root: real mounts).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
# Each step's wall-clock seconds, printed when the next one starts and again as a table at the
# end (also when a step fails), so a CI log says where the time went.
timings=()
step_name=""
step_started=${SECONDS}
run_started=${SECONDS}
finish_step() {
  [[ -n ${step_name} ]] || return 0
  local took=$((SECONDS - step_started))
  timings+=("$(printf '%6d s  %s' "${took}" "${step_name}")")
  printf '==> %s: %d s\n' "${step_name}" "${took}"
  step_name=""
}
step() {
  finish_step
  step_name="$*"
  step_started=${SECONDS}
  printf '\n==> %s (load average %s)\n' "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"
}
# shellcheck disable=SC2317  # called by the EXIT trap
summary() {
  local rc=$?
  finish_step
  printf '\n==> time per step (exit %d)\n' "${rc}"
  printf '%s\n' "${timings[@]}"
  printf '%6d s  total\n' "$((SECONDS - run_started))"
}
trap summary EXIT

# What the suite needs beyond what rosetctl builds with (nothing to do when .ci/run or an
# earlier run installed it all).
step "packages the test suite needs"
scripts/install-deps.sh

step "clang-format check"
scripts/check-format.sh

step "Ansible collection lint (the ansible-test sanity tests that run offline)"
scripts/lint-ansible.sh

step "release build"
# The tests on: scripts/quickstart.sh configures this build tree without them.
cmake --preset release -DROSETCTL_BUILD_TESTS=ON >/dev/null
cmake --build --preset release -j "${jobs}"

step "clang ASan+UBSan build of the unit tests and the fuzz targets"
cmake --preset asan >/dev/null
# Only what the next two steps run: not the rosetctl binary or the test tools, which the
# integration tests take from the release build.
test_targets=$(cmake --build --preset asan --target help |
  sed -n 's/^\(\(unit\|fuzz\)_[a-z_]*\): .*/\1/p' | tr '\n' ' ')
# shellcheck disable=SC2086  # one word per target
cmake --build --preset asan -j "${jobs}" --target ${test_targets}

step "unit tests under ASan+UBSan"
ctest --preset asan -j "${jobs}"

step "fuzz targets of the input readers and services, 10 s each (tests/fuzz/run.sh; built above)"
tests/fuzz/run.sh 10

step "all tests (unit, integration, conformance) on the release build"
# Two at a time: integration and conformance files run beside each other unless they declare
# otherwise (tests/README.md, "Running tests side by side"); the longest start first. ctest
# prints each test's seconds; the slowest are listed again below it.
ctest_log=build/release/ctest-output.log
ctest_rc=0
ctest --preset release -j "${jobs}" 2>&1 | tee "${ctest_log}" || ctest_rc=$?
printf '\n==> the 15 slowest tests (seconds)\n'
sed -n 's/^.*Test *#[0-9]*: \(.*[^ ]\) \.\.*[^0-9]*\([0-9.]*\) sec$/\2 \1/p' "${ctest_log}" |
  sort -rn | head -n 15 || true
exit "${ctest_rc}"
