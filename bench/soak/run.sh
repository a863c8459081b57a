#!/bin/sh
# The long random-fault soak (issue 24 item 1): 500 kills of `rosetctl serve` (and CLI runs
# killed mid-call) under three clients, with every invariant checked after each restart; see
# tests/soak/soak.py. Figures go to bench/README.md ("Random-fault soak").
#
#   sudo bench/soak/run.sh [--kills N] [--seed S] [--keep]     (ROSETCTL_BIN: the binary)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
: "${ROSETCTL_BIN:=$root/build/release/src/rosetctl}"
: "${ROSETCTL_SOURCE_DIR:=$root}"
export ROSETCTL_BIN ROSETCTL_SOURCE_DIR
exec /usr/bin/python3 "$root/tests/soak/soak.py" --kills 500 --json "${SOAK_JSON:-/tmp/rosetctl-soak.json}" "$@"
