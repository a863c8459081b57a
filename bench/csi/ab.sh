#!/usr/bin/env bash
# Two rosetctl binaries side by side under the same CSI load (bench/csi/csi_load.cc), in
# alternating rounds, each serve on a fresh state directory: what a change costs, measured
# against the previous binary in the same run (bench/README.md).
#
#   sudo bench/csi/ab.sh OLD_ROSETCTL NEW_ROSETCTL CSI_LOAD [ROUNDS] [SECONDS]
#
# Prints, per round and binary, the create-delete pairs/s, the publish fan-out's total and the
# floor (GetPluginInfo from the same clients), as csi_load reports them.
set -euo pipefail
old=$1 new=$2 load=$3 rounds=${4:-3} seconds=${5:-5}

run_one() {  # BINARY LABEL
  local work serve_pid
  work=$(mktemp -d /var/tmp/rosetctl-ab.XXXXXX)
  "$1" serve --state-dir "${work}/state" --endpoint "unix://${work}/csi.sock" 2>"${work}/serve.log" &
  serve_pid=$!
  for _ in $(seq 100); do [[ -S ${work}/csi.sock ]] && break; sleep 0.1; done
  sleep 1
  for scenario in create-delete publish-fanout floor; do
    "${load}" --endpoint "unix://${work}/csi.sock" --serve-pid "${serve_pid}" --work-dir "${work}/load" \
      --seconds "${seconds}" --only "${scenario}" 2>&1 | grep -v "RssAnon\|VmRSS\|memory" | sed "s/^/$2 ${scenario}: /"
  done
  kill -TERM "${serve_pid}" && wait "${serve_pid}" || true
  grep -o " ${work}[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "${work}"
}

echo "load average $(cut -d' ' -f1-3 /proc/loadavg); old=${old} new=${new}"
for round in $(seq "${rounds}"); do
  echo "== round ${round}"
  if ((round % 2)); then run_one "${old}" old; run_one "${new}" new; else run_one "${new}" new; run_one "${old}" old; fi
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
