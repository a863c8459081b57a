#!/usr/bin/env bash
# Benchmark of `rosetctl serve` with the local provider (issue 3 targets; results in
# bench/README.md). Builds the load client, starts serve on a fresh on-disk state dir, runs the
# scenarios, stops serve and cleans up every mount. Run as root from the repository.
set -euo pipefail
cd "$(dirname "$0")/../.."

cmake --preset release -DROSETCTL_BUILD_BENCH=ON >/dev/null
cmake --build --preset release --target rosetctl csi_load >/dev/null

work=$(mktemp -d /var/tmp/rosetctl-bench.XXXXXX)
serve_pid=""
cleanup() {
  [[ -n ${serve_pid} ]] && kill -TERM "${serve_pid}" 2>/dev/null && wait "${serve_pid}" 2>/dev/null || true
  grep -o " ${work}[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "${work}"
}
trap cleanup EXIT

build/release/src/rosetctl serve --state-dir "${work}/state" --endpoint "unix://${work}/csi.sock" \
  2>"${work}/serve.log" &
serve_pid=$!
for _ in $(seq 100); do [[ -S ${work}/csi.sock ]] && break; sleep 0.1; done
sleep 1  # let start-up allocations settle before the idle memory reading

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), state dir on $(df -T "${work}" | awk 'NR==2 {print $2}')"
build/release/bench/csi_load --endpoint "unix://${work}/csi.sock" --serve-pid "${serve_pid}" \
  --work-dir "${work}/load" "$@"
