#!/usr/bin/env bash
# Builds the libFuzzer targets (in the asan preset's build: clang-14, ASan, UBSan; nothing to do
# when scripts/test.sh built them already) and runs each for a while, starting from its seed
# corpus in tests/fuzz/corpus/<target>/ (which also holds every input that once crashed it, named
# regression-*). Fails on any crash, leak, sanitizer report or broken property (after every
# target ran); the input that did it is left in build/asan/fuzz/artifacts/. Targets run side by
# side, one per core.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 20 s, every target)
#
# Inputs found on the way go to a scratch corpus under build/asan/fuzz/, not into the repo: add
# the ones worth keeping by hand (libFuzzer's -merge=1 keeps the smallest set with the same
# coverage).
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-20}
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(size validate mountinfo config_file secrets_file roset_api_json tgt_show commit_store
    services)
fi

cmake --preset asan >/dev/null
cmake --build --preset asan -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

bin=build/asan/tests/fuzz
# The commit store and services targets keep their scratch state under TMPDIR (tmpfs when it
# can be: they fsync) and remove it at exit; a crash cannot, so the whole of it goes here.
scratch_tmp=$(mktemp -d /dev/shm/rosetctl-fuzz-XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "${scratch_tmp}"' EXIT
export TMPDIR=${scratch_tmp}
artifacts=build/asan/fuzz/artifacts
mkdir -p "${artifacts}"
# One libFuzzer process keeps one core busy: run as many targets at once as there are cores
# (FUZZ_JOBS overrides), each still for the full time, then report them in order.
jobs=${FUZZ_JOBS:-$(nproc)}
fuzz_one() {
  local target=$1 seeds=tests/fuzz/corpus/$1 scratch=build/asan/fuzz/corpus/$1
  mkdir -p "${scratch}"
  # The seeds are read, never written: new inputs land in the scratch corpus (the first dir).
  "${bin}/fuzz_${target}" -max_total_time="${seconds}" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="${artifacts}/${target}-" \
    "${scratch}" "${seeds}" >"${artifacts}/${target}.log" 2>&1
}
declare -A pid_of
for target in "${targets[@]}"; do
  while (($(jobs -pr | wc -l) >= jobs)); do
    wait -n || true  # statuses are collected by PID below
  done
  printf '==> fuzz_%s for %s s\n' "${target}" "${seconds}"
  fuzz_one "${target}" &
  pid_of[${target}]=$!
done
failed=()
for target in "${targets[@]}"; do
  if wait "${pid_of[${target}]}"; then
    printf 'fuzz_%s: ' "${target}"
    grep -E '^stat::(number_of_executed_units|new_units_added):' "${artifacts}/${target}.log" |
      tr '\n' ' '
    printf '\n'
  else
    tail -n 40 "${artifacts}/${target}.log"
    printf 'fuzz_%s failed: the input is in %s/%s-*\n' "${target}" "${artifacts}" "${target}"
    failed+=("${target}")
  fi
done
((${#failed[@]} == 0)) || exit 1
