# Cross build for arm64 (GH200/GB200 Grace hosts) on an amd64 Debian 12
# machine, with Debian multiarch: the cross compilers from
# crossbuild-essential-arm64 and the :arm64 -dev packages in
# /usr/lib/aarch64-linux-gnu (scripts/install-deps-arm64.sh).
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
# Tests and gtest_discover_tests run the arm64 binaries under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)  # also picks __TARGET_ARCH_arm64 for bpf/ (cmake/ChronolinkBpf.cmake)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Multiarch keeps arm64 libraries in /usr/lib/aarch64-linux-gnu and shares
# /usr/include and the arch-independent CMake/pkg-config files under /usr, so
# "/" has to stay a root too; CMAKE_LIBRARY_ARCHITECTURE makes find_library
# and find_package look in lib/aarch64-linux-gnu, never lib/x86_64-linux-gnu.
# Programs (protoc, clang, bpftool, python3) are the host's.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config must read the arm64 .pc files only (an amd64 libsodium.pc would
# hand the linker -L/usr/lib/x86_64-linux-gnu).
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# The top-level CMakeLists.txt links with lld where -fuse-ld=lld works. A
# cross gcc looks for aarch64-linux-gnu-ld.lld on PATH (Debian has none) or
# ld.lld in its -B directories: point -B at lld's own directory (LLVM's bin,
# which holds no other tool gcc would pick up). lld links every target.
find_program(CHRONOLINK_LD_LLD ld.lld)
if(CHRONOLINK_LD_LLD)
  get_filename_component(_chronolink_lld_dir "${CHRONOLINK_LD_LLD}" REALPATH)
  get_filename_component(_chronolink_lld_dir "${_chronolink_lld_dir}" DIRECTORY)
  foreach(_kind EXE SHARED MODULE)
    set(CMAKE_${_kind}_LINKER_FLAGS_INIT "-B${_chronolink_lld_dir}")
  endforeach()
endif()

# Runs the test binaries (ctest, gtest_discover_tests at build time) under
# qemu-user, also where binfmt_misc cannot be registered (containers). The
# arm64 loader and libc are the multiarch libc6:arm64 (/lib/ld-linux-aarch64.so.1,
# a dependency of the :arm64 -dev packages), so qemu needs no -L. Not
# "-L /usr/aarch64-linux-gnu": with it (qemu 7.2, Debian 12) a forked child
# spins at 100 % CPU before its exec, and every test that starts a process
# hangs.
find_program(CHRONOLINK_QEMU_AARCH64 qemu-aarch64-static qemu-aarch64)
if(CHRONOLINK_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CHRONOLINK_QEMU_AARCH64})
endif()
