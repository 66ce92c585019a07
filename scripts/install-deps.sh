#!/usr/bin/env bash
# Installs every Debian package chronolink needs to build, test, benchmark and
# run its demo. Idempotent; needs root (or sudo).
#
#   scripts/install-deps.sh [--build | --run]
#
# --build installs only what compiling needs (compilers, the -dev libraries,
# the code generators); --run only what the tests, benchmarks and demo run
# (PyTorch, Chromium, etcd, chronyd, ...). scripts/test.sh installs the first
# before the build and the second beside it: on a clean CI machine the
# runtime packages are most of the download.
set -euo pipefail

BUILD_PACKAGES=(
  build-essential cmake pkg-config clang libclang-rt-14-dev lld
  libsodium-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libcpp-httplib-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsvm-dev libeigen3-dev
  libbpf-dev bpftool libelf-dev zlib1g-dev libcap-dev
  protobuf-compiler libprotobuf-dev python3
  libamdhip64-dev libhsakmt-dev libhsa-runtime-dev
)
RUN_PACKAGES=(
  openssl libcap2-bin
  iproute2 iperf3 chrony linuxptp procps time etcd-server etcd-client
  python3-protobuf python3-torch chromium librsvg2-bin
  python3-yaml python3-numpy  # python3-numpy: bench/fit_replay.py
  systemd  # systemd-analyze verify/security for the unit files (tests/deploy/systemd_units_test.sh); not booted
)
# kubectl for the Kubernetes manifest check (tests/deploy/): Debian's
# kubernetes-client, unless a kubectl is installed already (another package
# owning /usr/bin/kubectl would make the install fail; the check works with
# any kubectl from 1.20 on).
command -v kubectl >/dev/null || RUN_PACKAGES+=(kubernetes-client)

case "${1:-}" in
  "") PACKAGES=("${BUILD_PACKAGES[@]}" "${RUN_PACKAGES[@]}") ;;
  --build) PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  --run) PACKAGES=("${RUN_PACKAGES[@]}") ;;
  *) echo "usage: $0 [--build | --run]" >&2; exit 2 ;;
esac

# shellcheck source=scripts/lib/apt_install.sh
source "$(dirname "$0")/lib/apt_install.sh"
apt_install_missing install-deps "${PACKAGES[@]}"
