#!/usr/bin/env bash
# The long fuzz run bench/README.md records (issue 24): each target for SECONDS (default 600),
# at most two at a time and under `nice -n 10` (the machine is shared), from its seed corpus in
# tests/fuzz/corpus/<target>/. The binaries are copied first, so a rebuild of build/asan while
# this runs does not change what is being fuzzed. Per target it leaves the log, the corpus it
# grew and any crashing input in build/fuzz-long/, and prints one summary line:
#
#   target start end seconds executions corpus-units coverage(edges) features result load(1 min, start/end)
#
#   bench/fuzz/long-run.sh [SECONDS] [TARGET...]           (default: 600 s, every target)
# Build first: tests/fuzz/run.sh 0 (or cmake --build --preset asan).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit

seconds=${1:-600}
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(size validate mountinfo config_file secrets_file roset_api_json tgt_show commit_store
    services)
fi

out=build/fuzz-long
mkdir -p "${out}/bin"
for target in "${targets[@]}"; do
  cp "build/asan/tests/fuzz/fuzz_${target}" "${out}/bin/"
done
commit=$(git rev-parse --short HEAD)
# The commit store and services targets keep their scratch state under TMPDIR (tmpfs when it
# can be: they fsync) and remove it at exit; a crash cannot, so the whole of it goes here.
scratch_tmp=$(mktemp -d /dev/shm/rosetctl-fuzz-XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "${scratch_tmp}"' EXIT
export TMPDIR=${scratch_tmp}

one() {
  # Two locals: in one, log and corpus would expand the caller's ${target}, not $1.
  local target=$1
  local log=${out}/${target}.log corpus=${out}/corpus/${target}
  mkdir -p "${corpus}"
  local start load_start
  start=$(date -u +%H:%M:%S)
  load_start=$(cut -d' ' -f1 /proc/loadavg)
  local t0=${SECONDS}
  nice -n 10 "${out}/bin/fuzz_${target}" -max_total_time="${seconds}" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="${out}/${target}-" \
    "${corpus}" "tests/fuzz/corpus/${target}" >"${log}" 2>&1
  local rc=$?
  local result=clean
  [[ ${rc} -ne 0 ]] && result="CRASH(rc=${rc})"
  local execs cov ft corp
  execs=$(sed -n 's/^stat::number_of_executed_units: //p' "${log}")
  # The last status line: "#N  DONE  cov: C ft: F corp: U/..."
  cov=$(grep -oE 'cov: [0-9]+' "${log}" | tail -n1 | cut -d' ' -f2)
  ft=$(grep -oE 'ft: [0-9]+' "${log}" | tail -n1 | cut -d' ' -f2)
  corp=$(grep -oE 'corp: [0-9]+' "${log}" | tail -n1 | cut -d' ' -f2)
  printf '%s %s %s %s %s %s %s %s %s %s/%s commit=%s\n' "${target}" "${start}" \
    "$(date -u +%H:%M:%S)" "$((SECONDS - t0))" "${execs:-?}" "${corp:-?}" "${cov:-?}" "${ft:-?}" \
    "${result}" "${load_start}" "$(cut -d' ' -f1 /proc/loadavg)" "${commit}" |
    tee -a "${out}/summary.txt"
}

printf '# %s, %s s per target, commit %s\n' "$(date -u +%F)" "${seconds}" "${commit}" \
  >>"${out}/summary.txt"
# Two at a time: the first two start together, each next one when a slot frees.
running=0
for target in "${targets[@]}"; do
  if [[ ${running} -ge 2 ]]; then
    wait -n
    running=$((running - 1))
  fi
  one "${target}" &
  running=$((running + 1))
done
wait
