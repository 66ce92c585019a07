# Tools and libraries of the eBPF timestamp tap (bpf/, agent/capture/bpf_tap.cc).
# Included from the top-level CMakeLists.txt when CHRONOLINK_WITH_BPF is ON.
# If anything is missing the tap is switched off with a clear message, and the
# agent is built with the stub that reports "built without the eBPF tap" and
# runs on SO_TIMESTAMPING alone.
set(_chronolink_bpf_missing "")

find_program(CHRONOLINK_BPF_CLANG NAMES clang clang-18 clang-17 clang-16 clang-15 clang-14)
if(NOT CHRONOLINK_BPF_CLANG)
  list(APPEND _chronolink_bpf_missing "clang (to compile bpf/*.bpf.c)")
endif()
find_program(CHRONOLINK_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin /usr/local/sbin)
if(NOT CHRONOLINK_BPFTOOL)
  list(APPEND _chronolink_bpf_missing "bpftool (vmlinux.h and the skeleton)")
endif()
find_program(CHRONOLINK_LLVM_STRIP NAMES llvm-strip llvm-strip-18 llvm-strip-17 llvm-strip-16
  llvm-strip-15 llvm-strip-14)
pkg_check_modules(LIBBPF QUIET IMPORTED_TARGET libbpf>=1.0)
if(NOT LIBBPF_FOUND)
  list(APPEND _chronolink_bpf_missing "libbpf >= 1.0 (pkg-config libbpf; Debian: libbpf-dev)")
endif()
find_library(CHRONOLINK_LIBELF elf)
if(NOT CHRONOLINK_LIBELF)
  list(APPEND _chronolink_bpf_missing "libelf (libelf-dev)")
endif()
find_library(CHRONOLINK_LIBZ z)
if(NOT CHRONOLINK_LIBZ)
  list(APPEND _chronolink_bpf_missing "zlib (zlib1g-dev)")
endif()
# The programs are CO-RE, but bpf_tracing.h still needs the target's arch
# (struct pt_regs layout behind its PT_REGS_* and BPF_KPROBE macros): it is
# the arch the agent runs on, i.e. the one this build targets, not the build
# machine's.
string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _chronolink_cpu)
if(_chronolink_cpu MATCHES "^(x86_64|amd64)$")
  set(CHRONOLINK_BPF_TARGET_ARCH x86)
elseif(_chronolink_cpu MATCHES "^(aarch64|arm64)$")
  set(CHRONOLINK_BPF_TARGET_ARCH arm64)
else()
  message(FATAL_ERROR "chronolink: no eBPF target arch for CMAKE_SYSTEM_PROCESSOR "
    "'${CMAKE_SYSTEM_PROCESSOR}' (known: x86_64/AMD64, aarch64/arm64); "
    "configure with -DCHRONOLINK_WITH_BPF=OFF to build without the tap")
endif()

# vmlinux.h only declares the kernel types the programs name; CO-RE relocates
# every field access at load time against the running kernel's BTF. So in a
# cross build the build machine's (x86) BTF does: the programs use only uapi
# contexts (__sk_buff, xdp_md) and sk_buff/net_device fields read through
# BPF_CORE_READ, never pt_regs. A program that needs arch-specific types must
# point this at the target kernel's BTF (e.g. an arm64 machine's
# /sys/kernel/btf/vmlinux, copied here).
set(CHRONOLINK_VMLINUX_BTF "/sys/kernel/btf/vmlinux" CACHE FILEPATH
  "Kernel BTF that vmlinux.h is generated from (cross builds: the target kernel's, see above)")
if(NOT EXISTS "${CHRONOLINK_VMLINUX_BTF}")
  list(APPEND _chronolink_bpf_missing "${CHRONOLINK_VMLINUX_BTF} (kernel built without BTF)")
endif()

if(_chronolink_bpf_missing)
  list(JOIN _chronolink_bpf_missing ", " _m)
  message(WARNING "chronolink: building WITHOUT the eBPF tap, missing: ${_m}. "
    "The agent will report 'built without the eBPF tap' and use SO_TIMESTAMPING only.")
  # a plain variable shadows the cached option for this configure only, so the
  # next configure checks again (e.g. after installing the missing package)
  set(CHRONOLINK_WITH_BPF OFF)
else()
  message(STATUS "chronolink: eBPF tap ON (clang ${CHRONOLINK_BPF_CLANG}, bpftool "
    "${CHRONOLINK_BPFTOOL}, libbpf ${LIBBPF_VERSION}, __TARGET_ARCH_${CHRONOLINK_BPF_TARGET_ARCH}, "
    "BTF ${CHRONOLINK_VMLINUX_BTF})")
endif()
