#!/usr/bin/env bash
# Builds the rosetctl container image (deploy/container/Containerfile) with podman, from Debian
# packages only: no image registry is needed or asked.
#
#   1. The base: `debootstrap --variant=minbase bookworm` from the Debian mirror this machine's
#      apt uses, with the packages of deploy/container/packages, tarred into the cache directory
#      under a name keyed by that package list (a second build with the same list skips this,
#      the slow step), then `podman import`ed as localhost/rosetctl-base:<key>.
#   2. rosetctl: `cmake --install` of a build directory into a staging directory.
#   3. The image: `podman build` FROM that base with the staged rosetctl, without network, tagged
#      localhost/rosetctl:<version> (the name deploy/kubernetes uses).
#   4. With --roset-fuse: the roset overlay's image, FROM that one with roset-fuse added
#      (deploy/container/Containerfile.roset), tagged localhost/rosetctl-roset:<version>.
#
# Usage: scripts/build-image.sh [--build-dir DIR] [--cache-dir DIR] [--tag NAME:TAG]
#                               [--roset-fuse FILE] [--print-names]
#   --build-dir  the configured and built CMake build directory (default: build/release)
#   --cache-dir  where the base's tarball is kept (default: build/container)
#   --tag        the image's name (default: localhost/rosetctl:<rosetctl --version>)
#   --roset-fuse Roset's FUSE client (an executable; not a Debian package): also build the roset
#                image, named like --tag with "-roset" after the name
#   --print-names  print the names the images would get (one a line) and build nothing
# ROSETCTL_DEBIAN_MIRROR overrides the mirror. Prints the image's name on the last line (with
# --roset-fuse: the rosetctl image's, then the roset image's on the last).
# Needs root, debootstrap and podman (scripts/install-deps.sh installs them).
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${source_dir}/build/release
cache_dir=${source_dir}/build/container
tag=
roset_fuse=
print_names=0

while (($#)); do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --cache-dir) cache_dir=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --roset-fuse) roset_fuse=$2; shift 2 ;;
    --print-names) print_names=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image: unknown argument \"$1\" (see --help)" >&2; exit 2 ;;
  esac
done

fail() {
  echo "build-image: $*" >&2
  exit 1
}

rosetctl=${build_dir}/src/rosetctl
[[ -x ${rosetctl} ]] || fail "no rosetctl in \"${build_dir}\" (build it: cmake --preset release && cmake --build --preset release)"
if [[ -z ${tag} ]]; then
  version=$("${rosetctl}" --version | awk '{print $2}')
  tag=localhost/rosetctl:${version}
fi
# NAME:TAG -> NAME-roset:TAG (a registry's host:port before the name keeps its colon).
if [[ ${tag##*/} == *:* ]]; then roset_tag=${tag%:*}-roset:${tag##*:}; else roset_tag=${tag}-roset; fi
if ((print_names)); then
  echo "${tag}"
  if [[ -n ${roset_fuse} ]]; then echo "${roset_tag}"; fi
  exit 0
fi

[[ ${EUID} -eq 0 ]] || fail "run as root (debootstrap makes device nodes and chowns; podman runs rootful)"
for tool in debootstrap podman; do
  command -v "${tool}" >/dev/null || fail "${tool} is not installed (run scripts/install-deps.sh)"
done
if [[ -n ${roset_fuse} ]]; then
  [[ -f ${roset_fuse} && -x ${roset_fuse} ]] || fail "--roset-fuse \"${roset_fuse}\" is not an executable file"
fi

# podman as root on a machine without systemd (CI runners, containers, VMs booted without it):
# cgroupfs instead of systemd's cgroup manager, and events in a file rather than the journal.
# The storage is podman's own default (overlay, in /var/lib/containers); nothing in the
# machine's configuration is changed.
podman=(podman --cgroup-manager=cgroupfs --events-backend=file)

# The mirror: the one the machine's apt uses for bookworm's main (deb822 .sources files, then
# one-line .list files), so that debootstrap reaches what apt reaches.
find_mirror() {
  local file
  for file in /etc/apt/sources.list.d/*.sources; do
    [[ -f ${file} ]] || continue
    awk '
      function flush() {
        if (uris != "" && suites ~ /(^| )bookworm( |$)/ && components ~ /(^| )main( |$)/ && !found) {
          split(uris, u, " "); print u[1]; found = 1
        }
        uris = suites = components = ""
      }
      /^[ \t]*$/ { flush(); next }
      /^URIs:/ { uris = $0; sub(/^URIs:[ \t]*/, "", uris) }
      /^Suites:/ { suites = $0; sub(/^Suites:[ \t]*/, "", suites) }
      /^Components:/ { components = $0; sub(/^Components:[ \t]*/, "", components) }
      END { flush() }' "${file}"
  done
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f ${file} ]] || continue
    # deb [options] URI SUITE COMPONENT...
    sed -E 's/\[[^]]*\]//' "${file}" |
      awk '$1 == "deb" && $3 == "bookworm" { for (i = 4; i <= NF; i++) if ($i == "main") { print $2; exit } }'
  done
}
mirror=${ROSETCTL_DEBIAN_MIRROR:-$(find_mirror | head -n1)}
[[ -n ${mirror} ]] || fail "no Debian bookworm main mirror in /etc/apt/sources.list*; name one with ROSETCTL_DEBIAN_MIRROR"

# The packages: deploy/container/packages without comments, sorted; the cache key is their hash
# (with the suite and variant), so a changed list makes a new base.
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "${source_dir}/deploy/container/packages" | grep -v '^$' | sort -u)
((${#packages[@]})) || fail "deploy/container/packages names no package"
include=$(IFS=,; echo "${packages[*]}")
# `recipe` names what this script does to the tree besides debootstrap: bump it when that changes.
recipe=2
key=$(printf 'bookworm minbase %s recipe %s\n' "${include}" "${recipe}" | sha256sum | cut -c1-16)
mkdir -p "${cache_dir}"
base_tar=${cache_dir}/debian-bookworm-minbase-${key}.tar
base_image=localhost/rosetctl-base:${key}

scratch=$(mktemp -d "${cache_dir}/scratch.XXXXXX")
root=${scratch}/root
cleanup() {
  if mountpoint -q "${root}"; then umount "${root}"; fi
  rm -rf --one-file-system "${scratch}"
}
trap cleanup EXIT

if [[ ! -f ${base_tar} ]]; then
  echo "build-image: debootstrap bookworm (minbase + ${#packages[@]} packages) from ${mirror}" >&2
  # On a tmpfs: dpkg syncs every file it unpacks, which on a busy disk made the install take
  # minutes; the tree is thrown away once tarred, so nothing is lost by not syncing it.
  mkdir "${root}"
  mount -t tmpfs -o size=2g,mode=0755 rosetctl-image-root "${root}"
  if ! debootstrap --variant=minbase --include="${include}" bookworm "${root}" "${mirror}" \
    >"${scratch}/debootstrap.log" 2>&1; then
    tail -n 30 "${scratch}/debootstrap.log" >&2
    [[ -f ${root}/debootstrap/debootstrap.log ]] && tail -n 30 "${root}/debootstrap/debootstrap.log" >&2
    fail "debootstrap failed (above: the end of its log)"
  fi
  # What only installing needed: downloaded packages and package lists.
  rm -rf "${root}"/var/cache/apt/archives/*.deb "${root}"/var/cache/apt/*.bin "${root}"/var/lib/apt/lists/*
  # open-iscsi's postinst generated an initiator name: every container of the image would share
  # it, and a node registers the name it finds (two nodes with one name see each other's
  # volumes). Nodes use the host's /etc/iscsi (deploy/kubernetes/overlays/iscsi); without it
  # a node has no name, and mapping to it is refused.
  rm -f "${root}/etc/iscsi/initiatorname.iscsi"
  tar --numeric-owner --xattrs -C "${root}" -cf "${scratch}/base.tar" .
  mv "${scratch}/base.tar" "${base_tar}"  # whole or not at all: an interrupted run leaves no cache
  umount "${root}"
fi

if ! "${podman[@]}" image exists "${base_image}"; then
  echo "build-image: importing ${base_tar} as ${base_image}" >&2
  "${podman[@]}" import --quiet "${base_tar}" "${base_image}" >/dev/null
fi

# rosetctl as `cmake --install` lays it out; the Containerfile takes the executable.
context=${scratch}/context
DESTDIR=${context} cmake --install "${build_dir}" --prefix /usr >"${scratch}/install.log" ||
  { cat "${scratch}/install.log" >&2; fail "cmake --install ${build_dir} failed"; }

# podman build of one Containerfile FROM a base into a tag; the image the tag named before, now
# nameless, is removed unless a container still uses it.
build() {
  local containerfile=$1 from=$2 name=$3 context=$4 previous current
  echo "build-image: building ${name} FROM ${from}" >&2
  previous=$("${podman[@]}" image inspect --format '{{.Id}}' "${name}" 2>/dev/null || true)
  "${podman[@]}" build --quiet --network=none --pull=never --build-arg "BASE=${from}" \
    -f "${source_dir}/deploy/container/${containerfile}" -t "${name}" "${context}" >/dev/null
  current=$("${podman[@]}" image inspect --format '{{.Id}}' "${name}")
  if [[ -n ${previous} && ${previous} != "${current}" ]]; then
    "${podman[@]}" rmi "${previous}" >/dev/null 2>&1 || true
  fi
}

build Containerfile "${base_image}" "${tag}" "${context}"
echo "${tag}"
if [[ -n ${roset_fuse} ]]; then
  roset_context=${scratch}/roset-context
  mkdir "${roset_context}"
  cp "${roset_fuse}" "${roset_context}/roset-fuse"
  chmod 0755 "${roset_context}/roset-fuse"
  build Containerfile.roset "${tag}" "${roset_tag}" "${roset_context}"
  echo "${roset_tag}"
fi
