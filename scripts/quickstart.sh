#!/usr/bin/env bash
# README command 1: install the packages rosetctl needs, build it, install it to /usr/local,
# then run the main job on the local provider: create a volume, connect it, write to it, commit
# it, disconnect it, and show that the data is still there. Safe to run again (each run adds one
# snapshot).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "installing the packages rosetctl builds and runs with (not the test suite's)"
scripts/install-deps.sh --build

# Only the binary and what installs with it (rosetctl(1), completions): the unit tests and the
# test tools are scripts/test.sh's to build, in the same build tree, reusing what is built here.
# The release preset builds in batches of 32 sources with debug info as line tables (-g1, still
# -O2), each cutting the CPU time of a build from nothing (docs/building.md, "How long the
# quickstart takes"); scripts/test.sh and CI build the same preset.
step "building rosetctl (release)"
cmake --preset release -DROSETCTL_BUILD_TESTS=OFF >/dev/null
cmake --build --preset release -j "$(nproc)"

step "installing rosetctl to /usr/local (binary, rosetctl(1), completions, systemd units)"
cmake --install build/release --prefix /usr/local >/dev/null
command -v rosetctl

target=/mnt/rosetctl-demo
step "rosetctl volume create demo --size 64Mi"
rosetctl volume create demo --size 64Mi

step "rosetctl volume connect demo --target ${target}"
rosetctl volume connect demo --target "${target}"

step "writing ${target}/hello.txt"
echo "hello from rosetctl, $(date -u +%FT%TZ)" >"${target}/hello.txt"

step "rosetctl snapshot commit demo -m quickstart"
rosetctl snapshot commit demo -m quickstart

step "rosetctl volume list"
rosetctl volume list

step "rosetctl volume disconnect demo"
rosetctl volume disconnect demo

step "the data survives: connect read-only, read it back, disconnect"
rosetctl volume connect demo --target "${target}" --read-only
cat "${target}/hello.txt"
rosetctl volume disconnect demo

cat <<MSG

Done. The volume "demo" is kept; try:
  rosetctl volume show demo -o json
  rosetctl snapshot list --volume demo
  rosetctl snapshot restore <commit id printed above> --name demo-copy
  rosetctl volume delete demo
MSG
