#!/usr/bin/env python3
"""GPU check: the collector embedded in a PyTorch CUDA program through its C API.

Needs an NVIDIA GPU and a python3 whose torch was built with CUDA (Debian's
python3-torch is CPU-only: run this with a GPU machine's python3). Not part
of CI (no GPU there); scripts/gpu-bundle.sh packs it with the binaries it
needs, and docs/gpu-clocks.md records its figures.

What it checks, on real CUDA kernels and copies:
  * libchronolink_collector.so loads into a PyTorch process (ctypes), finds
    the GPU with the `cuda` backend, samples its clock and records CUPTI
    activity while torch runs matrix products, element-wise kernels and
    copies;
  * every step of work is bracketed by host CLOCK_REALTIME reads (taken
    before the first launch and after torch.cuda.synchronize()), and every
    kernel / copy the collector exported, converted to host time with its
    bound, lies inside its step's bracket: start >= before - bound and
    end <= after + bound. A conversion off by more than its bound fails;
  * the figures: how long after the launch call the first kernel of a step
    starts, how long before synchronize returned the last one ends, and the
    collector's GPU -> host bound.

Exit 0 when all checks pass, 1 when one fails, 2 on a setup error.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time


def fail_setup(message):
    print(f"torch_cuda_embed_check: {message}", file=sys.stderr)
    sys.exit(2)


def load_collector(path):
    lib = ctypes.CDLL(path)
    lib.chronolink_collector_create.restype = ctypes.c_void_p
    lib.chronolink_collector_create.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.chronolink_collector_start.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.chronolink_collector_stop.argtypes = [ctypes.c_void_p]
    lib.chronolink_collector_write_run.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.chronolink_collector_status_json.restype = ctypes.c_void_p
    lib.chronolink_collector_status_json.argtypes = [ctypes.c_void_p]
    lib.chronolink_collector_free.argtypes = [ctypes.c_void_p]
    lib.chronolink_collector_destroy.argtypes = [ctypes.c_void_p]
    return lib


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_REALTIME)


def run_workload(torch, steps):
    """Runs `steps` bracketed steps; returns [(name, before_ns, after_ns)]."""
    brackets = []
    dev = torch.device("cuda:0")
    before = now_ns()
    a = torch.randn(2048, 2048, device=dev)
    b = torch.randn(2048, 2048, device=dev)
    torch.cuda.synchronize()
    brackets.append(("setup", before, now_ns()))
    host = torch.ones(4 << 20, dtype=torch.float32)  # 16 MiB
    for i in range(steps):
        before = now_ns()
        c = a @ b
        c = torch.relu(c) + 1.0
        d = host.to(dev, non_blocking=False)
        back = (d * 2.0).cpu()
        torch.cuda.synchronize()
        after = now_ns()
        brackets.append((f"step{i}", before, after))
        del c, d, back
        time.sleep(0.02)  # let the sampler take pairs between steps
    # Tight steps: one tiny kernel between a launch and a synchronize. Its
    # start cannot precede the launch call, nor its end follow synchronize's
    # return, so the two gaps bound the whole GPU -> REALTIME error (CUPTI's
    # own interpolation included) from both sides.
    before = now_ns()
    small = torch.zeros(1024, device=dev)
    torch.cuda.synchronize()
    brackets.append(("tight_setup", before, now_ns()))
    for i in range(50):
        before = now_ns()
        small.add_(1.0)
        torch.cuda.synchronize()
        brackets.append((f"tight{i}", before, now_ns()))
        time.sleep(0.005)
    return brackets


def device_events(chrome_json):
    with open(chrome_json) as f:
        doc = json.load(f)
    base = int(doc["baseTimeNanoseconds"])
    device_pids = {e["pid"] for e in doc["traceEvents"]
                   if e.get("ph") == "M" and e.get("name") == "process_name"
                   and "/device:GPU:" in e["args"]["name"]}
    events = []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("pid") not in device_pids:
            continue
        start = base + round(float(e["ts"]) * 1000)
        end = start + round(float(e.get("dur", 0)) * 1000)
        bound = int(e.get("args", {}).get("chronolink_gpu_bound_ns", -1))
        events.append((e["name"], start, end, bound))
    return events


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="libchronolink_collector.so")
    ap.add_argument("--trace", required=True, help="chronolink-trace binary")
    ap.add_argument("--out", required=True, help="output directory (the run and its Chrome JSON)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--timestamp", default="raw", choices=["raw", "cupti"],
                    help="the cuda backend's timestamp setting")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        fail_setup(f"no torch in {sys.executable}: {e}")
    if not torch.cuda.is_available():
        fail_setup(f"torch {torch.__version__} sees no CUDA device")

    lib = load_collector(args.lib)
    err = ctypes.create_string_buffer(512)
    options = json.dumps({"backend": "cuda", "no_device": "fail", "sample_period_ms": 10,
                          "backend_settings": f"timestamp={args.timestamp}", "host": "gpu-check"})
    c = lib.chronolink_collector_create(options.encode(), err, len(err))
    if not c:
        fail_setup(f"create: {err.value.decode()}")
    if not lib.chronolink_collector_start(c, err, len(err)):
        fail_setup(f"start: {err.value.decode()}")
    time.sleep(0.2)  # pairs before the first kernel
    brackets = run_workload(torch, args.steps)
    time.sleep(0.2)  # and after the last
    lib.chronolink_collector_stop(c)
    run = f"gpu_check_{args.timestamp}"
    if not lib.chronolink_collector_write_run(c, args.out.encode(), run.encode(), err, len(err)):
        fail_setup(f"write_run: {err.value.decode()}")
    status_ptr = lib.chronolink_collector_status_json(c)
    status = json.loads(ctypes.string_at(status_ptr).decode())
    lib.chronolink_collector_free(status_ptr)
    lib.chronolink_collector_destroy(c)
    print("status:", json.dumps(status, sort_keys=True))

    chrome = os.path.join(args.out, f"{run}.json")
    subprocess.run([args.trace, "export-chrome", args.out, "--run", run, "--out", chrome], check=True)
    events = device_events(chrome)
    print(f"figure: {args.timestamp}: {len(events)} device events exported, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(0)}")
    if not events:
        print("FAIL: no device events exported")
        return 1

    failures = 0
    # Every exported op must lie inside one step's host bracket, widened by its bound.
    outside = []
    for ev in events:
        name, start, end, bound = ev
        if bound < 0:
            print(f"FAIL: {name} has no chronolink_gpu_bound_ns")
            failures += 1
            continue
        if not any(start >= before - bound and end <= after + bound for _, before, after in brackets):
            outside.append(ev)
    for name, start, end, bound in outside[:5]:
        print(f"FAIL: {name} [{start}, {end}] +- {bound} ns lies in no step's host bracket")
    starts_after, ends_before, tight_starts, tight_ends = [], [], [], []
    for step, before, after in brackets[1:]:
        inside = [e for e in events if e[1] >= before - e[3] and e[2] <= after + e[3]]
        if not inside:
            print(f"FAIL: {step}: no device op within its bracket")
            failures += 1
            continue
        first, last = min(e[1] for e in inside) - before, after - max(e[2] for e in inside)
        (tight_starts if step.startswith("tight") and step != "tight_setup" else starts_after).append(first)
        (tight_ends if step.startswith("tight") and step != "tight_setup" else ends_before).append(last)
    if tight_starts:
        print(f"figure: {args.timestamp}: tight steps (one tiny kernel, launch .. synchronize): kernel starts "
              f"p50 {statistics.median(tight_starts) / 1e3:.1f} us after the launch call (min "
              f"{min(tight_starts) / 1e3:.1f}), ends p50 {statistics.median(tight_ends) / 1e3:.1f} us before "
              f"synchronize returned (min {min(tight_ends) / 1e3:.1f}): the whole conversion error lies in "
              f"[-{min(tight_starts) / 1e3:.1f}, +{min(tight_ends) / 1e3:.1f}] us")
    bounds = [e[3] for e in events if e[3] >= 0]
    if starts_after:
        print(f"figure: {args.timestamp}: first device op starts after the step's first launch call: "
              f"min {min(starts_after) / 1e3:.1f} us, p50 {statistics.median(starts_after) / 1e3:.1f} us")
        print(f"figure: {args.timestamp}: last device op ends before synchronize returned: "
              f"min {min(ends_before) / 1e3:.1f} us, p50 {statistics.median(ends_before) / 1e3:.1f} us")
    if bounds:
        print(f"figure: {args.timestamp}: GPU -> host bound p50 {quantile(bounds, 0.5)} ns, "
              f"max {max(bounds)} ns; ops outside every step's bracket: {len(outside)} of {len(events)}")
    failures += len(outside)
    print("PASS" if failures == 0 else f"FAIL: {failures} failure(s)")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
