#!/usr/bin/env bash
# Installs what the arm64 cross build (cmake/toolchain-aarch64-linux-gnu.cmake,
# scripts/test-arm64.sh) needs on an amd64 Debian 12 machine: the cross
# compilers, qemu-user to run the arm64 tests, and the arm64 variants of the
# libraries scripts/install-deps.sh installs (Debian multiarch, next to the
# amd64 ones). Build tools run on the host: cmake, pkg-config, protoc, clang
# and bpftool (the eBPF objects are arch-neutral bytecode). Idempotent; needs
# root (or sudo).
#
# Not here, on purpose:
#   libamdhip64-dev, libhsakmt-dev, libhsa-runtime-dev (:arm64): not
#     Multi-Arch co-installable, apt would remove the amd64 ones the native
#     build needs. The collector's ROCm backend only needs their headers, which
#     are the same for both arches, and finds the amd64 package's in
#     /usr/include.
#   nlohmann-json3-dev, libcli11-dev, libeigen3-dev: Architecture all (headers),
#     the host's serve both builds.
#   libclang-rt-14-dev: the fuzzers' sanitizer runtimes (host clang only).
set -euo pipefail

PACKAGES=(
  crossbuild-essential-arm64 qemu-user-static libc6:arm64
  cmake pkg-config clang lld bpftool protobuf-compiler python3
  nlohmann-json3-dev libcli11-dev libeigen3-dev
  libsodium-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64 libcpp-httplib-dev:arm64
  libssl-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libbenchmark-dev:arm64
  libsvm-dev:arm64 libbpf-dev:arm64 libelf-dev:arm64 zlib1g-dev:arm64 libcap-dev:arm64
  libprotobuf-dev:arm64
)

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "install-deps-arm64: dpkg --add-architecture arm64"
  if [ "$(id -u)" -eq 0 ]; then dpkg --add-architecture arm64; else sudo dpkg --add-architecture arm64; fi
fi
# An arm64 library must have the same version as its amd64 twin, so apt may
# upgrade amd64 packages (e.g. libssl3 to the current security release); it
# must never remove one.
# shellcheck source=scripts/lib/apt_install.sh
source "$(dirname "$0")/lib/apt_install.sh"
apt_install_missing install-deps-arm64 --refuse-removals "${PACKAGES[@]}"
