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

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root (or install sudo)" >&2; exit 1; }
  SUDO=sudo
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A chronyd started by the package would discipline the host clock: keep
# services from starting during the install (containers have no init anyway).
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  created_policy=1
fi
trap '[ "$created_policy" = 1 ] && $SUDO rm -f "$policy"' EXIT
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
