#!/usr/bin/env bash
# Runs inside the folder scripts/gpu-bundle.sh packs, on an NVIDIA GPU
# machine: the CUDA backend's GPU test, `chronolink-collect devices`, a
# clock-only `run` on the cuda backend, and the PyTorch embedding check with
# both CUPTI timestamp settings. Writes the log and the outputs to $OUT
# (default ./out beside this script). Exit status: the number of failed
# steps (0: all passed).
set -uo pipefail
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$B/out}
WORK=$(mktemp -d /tmp/chronolink-gpu.XXXXXX)
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1

# The machine's CUDA libraries first; the bundled ones only where it has none.
export LD_LIBRARY_PATH="$B/lib:${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:$B/cuda"
PY=${PYTHON:-python3}
failed=0
step() {
  local name=$1; shift
  echo "== $name"
  local t0=$SECONDS
  if timeout 240 "$@"; then echo "-- $name: ok ($((SECONDS - t0)) s)"; else
    echo "-- $name: FAILED (exit $?, $((SECONDS - t0)) s)"; failed=$((failed + 1)); fi
}

echo "== machine"
uname -r
grep PRETTY_NAME /etc/os-release || true
nvidia-smi -L || true
nvidia-smi --query-gpu=driver_version --format=csv,noheader || true
ldconfig -p | grep -E 'libcuda\.so\.1|libcupti' || echo "(ldconfig knows no libcuda.so.1 / libcupti)"
ls /usr/local/nvidia/lib64/libcuda.so.1 2>/dev/null || true
ls /usr/local/cuda/lib64 2>/dev/null | grep -E '^lib(cupti|cudart)\.so' || echo "(no CUPTI / cudart in /usr/local/cuda/lib64: the bundled ones are used)"

step "cuda_gpu_test" "$B/bin/cuda_gpu_test" --gtest_color=no
step "chronolink-collect devices" "$B/bin/chronolink-collect" devices
step "chronolink-collect run (clock only, 3 s)" "$B/bin/chronolink-collect" run --backend cuda --no-device fail \
  --duration-s 3 --sample-period-ms 10 --host gpu-check --out "$OUT/clock_only.xplane.pb"
for ts in raw cupti; do
  step "torch embedding check (timestamp=$ts)" "$PY" "$B/torch_cuda_embed_check.py" --lib "$B/lib/libchronolink_collector.so" \
    --trace "$B/bin/chronolink-trace" --out "$WORK" --timestamp "$ts"
  cp "$WORK/gpu_check_$ts.json" "$OUT/" 2>/dev/null || true
done
cp "$WORK/plugins/profile/gpu_check_raw/gpu-check.xplane.pb" "$OUT/embed_raw.xplane.pb" 2>/dev/null || true
echo "== $failed step(s) failed"
exit "$failed"
