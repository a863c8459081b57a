#!/usr/bin/env bash
# rosetctl serve beside the Kubernetes reference driver csi-driver-host-path
# (../shared/anchors/README.md) under the same load client (bench/csi/csi_load.cc), in
# alternating rounds, each plugin on a fresh state directory under /var/tmp; and, when given, a
# previous rosetctl binary as a third. Issue 35's measures: 2,000 CreateVolume+DeleteVolume
# pairs from 8 clients; one volume published to 100 targets by 16 clients, then unpublished;
# 20,000 Probes from 8 clients; serve's private memory after the load. Prints every round, then
# the medians and the ratios (the other plugin's time / this rosetctl's time). Run as root.
#
#   sudo bench/csi/vs-hostpath.sh ROSETCTL CSI_LOAD HOSTPATHPLUGIN [BASELINE_ROSETCTL] [ROUNDS]
set -euo pipefail
new=$1 load=$2 hostpath=$3 old=${4:-} rounds=${5:-3}

work=""
plugin_pid=""
cleanup() {
  [[ -n ${plugin_pid} ]] && kill -TERM "${plugin_pid}" 2>/dev/null && wait "${plugin_pid}" 2>/dev/null || true
  plugin_pid=""
  if [[ -n ${work} ]]; then
    grep -o " ${work}[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    rm -rf "${work}"
  fi
  work=""
}
trap cleanup EXIT

results=$(mktemp /var/tmp/vs-hostpath.XXXXXX)
run_one() {  # LABEL
  work=$(mktemp -d /var/tmp/vs-hostpath-$1.XXXXXX)
  case $1 in
    hostpath)
      "${hostpath}" --endpoint "unix://${work}/csi.sock" --nodeid bench-node \
        --statedir "${work}/state" --enable-attach 2>"${work}/plugin.log" & ;;
    new) "${new}" serve --state-dir "${work}/state" --endpoint "unix://${work}/csi.sock" 2>"${work}/plugin.log" & ;;
    old) "${old}" serve --state-dir "${work}/state" --endpoint "unix://${work}/csi.sock" 2>"${work}/plugin.log" & ;;
  esac
  plugin_pid=$!
  for _ in $(seq 100); do [[ -S ${work}/csi.sock ]] && break; sleep 0.1; done
  sleep 1
  local common=(--endpoint "unix://${work}/csi.sock" --serve-pid "${plugin_pid}" --work-dir "${work}/load")
  "${load}" "${common[@]}" --only create-delete --pairs 2000 | grep -v "^memory" | sed "s/^/$1 /" | tee -a "${results}"
  "${load}" "${common[@]}" --only publish-fanout --targets 100 --fanout-clients 16 | grep -v "^memory\|fanout floor" |
    sed "s/^/$1 /" | tee -a "${results}"
  "${load}" "${common[@]}" --only probe --probes 20000 | grep -v "3 s after\|idle" | sed "s/^/$1 /" | tee -a "${results}"
  cleanup
}

plugins=(hostpath new)
[[ -n ${old} ]] && plugins+=(old)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), /var/tmp on $(df -T /var/tmp | awk 'NR==2 {print $2}')"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "new=${new} ($("${new}" --version | head -1)) old=${old:-none} hostpath=${hostpath}"
for round in $(seq "${rounds}"); do
  echo "== round ${round}"
  # Rotate the order so that no plugin always runs first (or last) in a round.
  n=${#plugins[@]}
  for ((i = 0; i < n; i++)); do run_one "${plugins[(i + round - 1) % n]}"; done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

# Medians of the rounds, and each plugin's time over this rosetctl's time.
python3 - "${results}" <<'PY'
import re, statistics, sys
times = {}
patterns = {
    "create+delete, 2,000 pairs (s)": r"create-delete .* pairs in ([\d.]+) s",
    "publish 1 volume to 100 targets (s)": r"publish-fanout .*: ([\d.]+) s total",
    "unpublish those 100 (s)": r"unpublish .*: ([\d.]+) s total",
    "Probe, 20,000 calls (s)": r"probe .* calls in ([\d.]+) s",
    "RssAnon after the three loads (MiB)": r"memory after the runs\s+RssAnon\s+([\d.]+) MiB",
}
for line in open(sys.argv[1]):
    plugin, rest = line.split(" ", 1)
    for name, pattern in patterns.items():
        m = re.search(pattern, rest)
        if m:
            times.setdefault((name, plugin), []).append(float(m.group(1)))
print()
plugins = [p for p in ("hostpath", "old", "new") if any(k[1] == p for k in times)]
print("| measure | " + " | ".join(f"{p} (rounds)" for p in plugins) + " | " +
      " | ".join(f"{p} / new" for p in plugins if p != "new") + " |")
print("|---" * (1 + len(plugins) + len(plugins) - 1) + "|")
for name in patterns:
    cells, medians = [], {}
    for p in plugins:
        values = times.get((name, p), [])
        medians[p] = statistics.median(values) if values else float("nan")
        cells.append(" / ".join(f"{v:.3f}" for v in values))
    ratios = [f"{medians[p] / medians['new']:.2f}" for p in plugins if p != "new"]
    print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
PY
rm -f "${results}"
