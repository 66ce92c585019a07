#!/usr/bin/env bash
# Packs the GPU checks into a self-contained folder (default .gpu-bundle/)
# for a GPU machine that has the vendor driver and toolkit but none of
# chronolink's Debian build dependencies (a CUDA image, say): stripped
# binaries (the CUDA GPU test, chronolink-collect, chronolink-trace,
# libchronolink_collector.so), the non-system shared libraries they link,
# CUPTI and the CUDA runtime from /usr/local/cuda as a fallback, the PyTorch
# embedding check (tests/gpu/torch_cuda_embed_check.py) and run.sh, which
# runs them all there and prints the figures docs/gpu-clocks.md quotes.
#
#   scripts/gpu-bundle.sh                 # build (BUILD_DIR, default build) and pack
#   (on the GPU machine) OUT=/tmp/out bash .gpu-bundle/run.sh
#
# On a machine with the build dependencies, scripts/test-gpu.sh is the
# simpler way (it builds and runs the ctest label `gpu` in place).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUNDLE=${BUNDLE:-.gpu-bundle}
targets=(cuda_gpu_test chronolink-collect chronolink-trace chronolink_collector_shared)

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  echo "gpu-bundle: no configured build in $BUILD_DIR (run scripts/build.sh first)" >&2
  exit 1
fi
if ! grep -q "^CHRONOLINK_CUDA_INCLUDE:PATH=/" "$BUILD_DIR/CMakeCache.txt"; then
  echo "gpu-bundle: $BUILD_DIR was configured without the CUDA toolkit (/usr/local/cuda): no CUDA backend to check" >&2
  exit 1
fi
echo "== build ${targets[*]}"
cmake --build "$BUILD_DIR" --target "${targets[@]}" -j "$(nproc)" >/dev/null

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/cuda"
for f in "$BUILD_DIR/tests/cuda_gpu_test" "$BUILD_DIR/collector/chronolink-collect" "$BUILD_DIR/tools/chronolink-trace"; do
  strip --strip-debug -o "$BUNDLE/bin/$(basename "$f")" "$f"
done
lib=$(readlink -f "$BUILD_DIR/collector/libchronolink_collector.so")
strip --strip-debug -o "$BUNDLE/lib/$(basename "$lib")" "$lib"
ln -s "$(basename "$lib")" "$BUNDLE/lib/libchronolink_collector.so"

# The C library, loader and C++ runtime stay the machine's own (newer ones
# read older binaries; a second libstdc++ in a PyTorch process would clash).
system='^(linux-vdso|libc\.so|libm\.so|ld-linux|libstdc\+\+|libgcc_s|libpthread|libdl|librt)'
for f in "$BUNDLE"/bin/* "$BUNDLE/lib/$(basename "$lib")"; do
  ldd "$f" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ ! $name =~ $system ]]; then cp -L "$path" "$BUNDLE/lib/$name"; fi
done
for name in libcupti.so.13 libcudart.so.13; do
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64; do
    if [ -f "$dir/$name" ]; then cp -L "$dir/$name" "$BUNDLE/cuda/"; break; fi
  done
done
cp tests/gpu/torch_cuda_embed_check.py "$BUNDLE/"
cp scripts/gpu-bundle-run.sh "$BUNDLE/run.sh"
echo "== $BUNDLE: $(du -sh "$BUNDLE" | cut -f1)"
ls -R "$BUNDLE" | sed 's/^/  /'
