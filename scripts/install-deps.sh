#!/usr/bin/env bash
# Installs every Debian package chronolink needs to build, test, benchmark and
# run its demo. Idempotent; needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config clang libclang-rt-14-dev lld
  libsodium-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libcpp-httplib-dev libssl-dev openssl
  libgtest-dev libgmock-dev libbenchmark-dev libsvm-dev libeigen3-dev
  libbpf-dev bpftool libelf-dev zlib1g-dev libcap-dev libcap2-bin
  iproute2 iperf3 chrony linuxptp procps time python3 etcd-server etcd-client
  protobuf-compiler libprotobuf-dev python3-protobuf python3-torch chromium librsvg2-bin
  libamdhip64-dev libhsakmt-dev libhsa-runtime-dev
  python3-yaml
  systemd  # systemd-analyze verify/security for the unit files (tests/deploy/systemd_units_test.sh); not booted
)
# kubectl for the Kubernetes manifest check (tests/deploy/): Debian's
# kubernetes-client, unless a kubectl is installed already (another package
# owning /usr/bin/kubectl would make the install fail; the check works with
# any kubectl from 1.20 on).
command -v kubectl >/dev/null || PACKAGES+=(kubernetes-client)

# shellcheck source=scripts/lib/apt_install.sh
source "$(dirname "$0")/lib/apt_install.sh"
apt_install_missing install-deps "${PACKAGES[@]}"
