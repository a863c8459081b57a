#!/usr/bin/env bash
# CreateVolume+DeleteVolume pairs/s over mutual TLS between two hosts (network namespaces joined
# by a veth pair), against the same load over serve's unix socket in the same run, alternating
# (issue 19: TLS should keep at least 70 % of the unix socket's rate). Results in bench/README.md.
# Run as root from the repository: sudo bench/net/run.sh [--seconds N] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=5
rounds=2
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: $0 [--seconds N] [--rounds N]" >&2; exit 2 ;;
  esac
done

cmake --preset release -DROSETCTL_BUILD_BENCH=ON >/dev/null
cmake --build --preset release --target rosetctl csi_load >/dev/null
bin=build/release/src/rosetctl
load=build/release/bench/csi_load

work=$(mktemp -d /var/tmp/rosetctl-netbench.XXXXXX)
ctl=rosetctl-bench-$$-ctl
cli=rosetctl-bench-$$-cli
serve_pid=""
cleanup() {
  [[ -n ${serve_pid} ]] && kill -TERM "${serve_pid}" 2>/dev/null && wait "${serve_pid}" 2>/dev/null || true
  ip netns del "${ctl}" 2>/dev/null || true
  ip netns del "${cli}" 2>/dev/null || true
  grep -o " ${work}[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "${work}"
}
trap cleanup EXIT

# Two hosts: the controller at 192.0.2.1, the client at 192.0.2.2, one veth pair between them.
ip netns add "${ctl}"
ip netns add "${cli}"
ip -n "${ctl}" link add eth0 type veth peer name eth0 netns "${cli}"
ip -n "${ctl}" addr add 192.0.2.1/24 dev eth0
ip -n "${cli}" addr add 192.0.2.2/24 dev eth0
for ns in "${ctl}" "${cli}"; do
  ip -n "${ns}" link set lo up
  ip -n "${ns}" link set eth0 up
done

"${bin}" tls init --dir "${work}/tls" --ip 192.0.2.1 >/dev/null
"${bin}" tls issue bench --admin --dir "${work}/tls" >/dev/null
nsenter --net="/run/netns/${ctl}" "${bin}" serve --state-dir "${work}/state" \
  --endpoint "unix://${work}/csi.sock" --listen 192.0.2.1:9443 \
  --tls-cert "${work}/tls/controller.crt" --tls-key "${work}/tls/controller.key" \
  --tls-ca "${work}/tls/ca.crt" 2>"${work}/serve.log" &
serve_pid=$!
for _ in $(seq 100); do [[ -S ${work}/csi.sock ]] && break; sleep 0.1; done
sleep 1

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), commit $(git rev-parse --short HEAD)"
tls=(--tls-cert "${work}/tls/bench.crt" --tls-key "${work}/tls/bench.key" --tls-ca "${work}/tls/ca.crt")
for round in $(seq "${rounds}"); do
  echo "round ${round}"
  printf 'unix socket     '
  "${load}" --endpoint "unix://${work}/csi.sock" --serve-pid "${serve_pid}" \
    --work-dir "${work}/load-unix-${round}" --seconds "${seconds}" --only create-delete |
    grep '^create-delete'
  printf 'mutual TLS      '
  nsenter --net="/run/netns/${cli}" "${load}" --endpoint 192.0.2.1:9443 "${tls[@]}" \
    --serve-pid "${serve_pid}" --work-dir "${work}/load-tls-${round}" --seconds "${seconds}" \
    --only create-delete | grep '^create-delete'
done
