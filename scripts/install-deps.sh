#!/usr/bin/env bash
# Installs what rosetctl needs, from Debian 12 packages only. Safe to run again: it only calls
# apt when something is missing.
#
#   scripts/install-deps.sh --build   what building, installing and running rosetctl on one
#                                     host needs (scripts/quickstart.sh; a few dozen packages)
#   scripts/install-deps.sh           that and everything the test suite needs (QEMU, a kernel,
#                                     podman, Ansible, tgt, ...; scripts/test.sh and .ci/run)
set -euo pipefail

case "${1:-}" in
  --build) only_build=1 ;;
  "") only_build=0 ;;
  *)
    echo "install-deps: unknown argument ${1}; use --build (build and run) or nothing (also the tests)" >&2
    exit 2
    ;;
esac

build_packages=(
  # toolchain; python3 runs scripts/gen-manpage.py, which writes rosetctl(1) at build time
  build-essential cmake ninja-build pkg-config python3
  # libraries (docs say why each one is here)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libsqlite3-dev libssl-dev libspdlog-dev libfmt-dev
  libcurl4-openssl-dev libblkid-dev
  # `serve --metrics-listen`: prometheus-cpp's core keeps the counters and writes the text
  # format, cpp-httplib serves /metrics
  prometheus-cpp-dev libcpp-httplib-dev
  # what the node side uses at run time
  util-linux mount
  # image volumes: mkfs, e2fsck, resize2fs (ext4) and mkfs.xfs, xfs_growfs (xfs)
  e2fsprogs xfsprogs
  # the roset provider's nodes unmount FUSE clients with fusermount3
  fuse3
)

test_packages=(
  # formatting check, and git for the tests that look at the tree
  git clang-format
  # the asan preset (unit tests and the fuzz targets of tests/fuzz): clang 14 and its libFuzzer
  # runtime; the sanitizers' runtimes come with clang
  clang-14 libfuzzer-14-dev
  # the unit tests
  catch2
  # tests: `promtool check metrics` checks what /metrics serves
  prometheus
  # test suites: Debian's Python with pytest and gRPC; bindfs is the stand-in roset-fuse's
  # real FUSE filesystem
  python3-pytest python3-grpcio python3-grpc-tools bindfs
  # the multi-host tests' "hosts" are network namespaces (tests/integration/host_lab.py): `ip`
  # builds them, util-linux's nsenter runs commands in them
  iproute2
  # `openssl verify` / `openssl x509` check the certificates `rosetctl tls` makes; Python's
  # cryptography makes the expired one the across-hosts tests need (rosetctl never makes one)
  openssl python3-cryptography
  # bench/stream: snapshot streaming between nodes is measured against `rsync -a` to an rsync
  # daemon in the same network namespaces
  rsync
  # the Ansible collection (ansible/): ansible-playbook, ansible-doc and ansible-test; the
  # guests that play its consumer hosts run sshd, reached with ssh
  ansible-core openssh-server openssh-client
  # the iscsi provider's controller side: tgtd, the user-space iSCSI target, and tgtadm, which
  # the target backend runs (src/providers/iscsi); its tests start a tgtd of their own
  tgt
  # tests: libiscsi's user-space initiator (iscsi-inq, iscsi-readcapacity16, iscsi-ls) checks
  # each export from this host, whose kernel has no iSCSI initiator
  libiscsi-bin
  # the iscsi provider's consumer side: iscsid and iscsiadm (the tests run them in a guest)
  open-iscsi
  # tests: the guest lab (tests/integration/guest_lab.py) boots a QEMU guest as a consumer host
  # with this kernel (it has the iSCSI initiator the host kernel lacks) and a static busybox
  # as its init
  qemu-system-x86 linux-image-amd64 busybox-static
  # tests: deploy/kubernetes is checked offline (tests/integration/test_deploy_kubernetes.py)
  # against the Kubernetes API's OpenAPI-generated models of python3-kubernetes; PyYAML reads
  # what `kubectl kustomize` renders
  python3-kubernetes python3-yaml
  # tests: the .deb (cmake/Packaging.cmake) is checked with lintian, its rosetctl(1) rendered
  # with man, its units checked with systemd-analyze (systemd)
  lintian man-db systemd
  # the container image (scripts/build-image.sh, tests/integration/test_container_image.py):
  # debootstrap makes its Debian base, podman imports and builds it; runc runs the containers
  # (crun, podman's other runtime, refuses hosts whose cgroup2 beside the v1 controllers has
  # controllers of its own, as these machines have)
  debootstrap podman runc
)

packages=("${build_packages[@]}")
((only_build)) || packages+=("${test_packages[@]}")

if [[ ${EUID} -ne 0 ]]; then
  echo "install-deps: run as root (apt-get installs system packages)" >&2
  exit 1
fi

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "${package}" 2>/dev/null || true)
  [[ ${status} == "install ok installed" ]] || missing+=("${package}")
done

# tests: `kubectl kustomize` renders deploy/kubernetes. Debian's kubernetes-client (kubectl
# 1.20, kustomize v2) is enough: the manifests keep to what kustomize v2 knows. A kubectl that
# is already there (another vendor's package owns /usr/bin/kubectl and would conflict) is used
# as it is.
if ((!only_build)) && ! command -v kubectl >/dev/null; then
  missing+=(kubernetes-client)
fi

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
