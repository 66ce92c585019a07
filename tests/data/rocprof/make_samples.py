#!/usr/bin/env python3
"""Writes the rocprof import sample files in this directory (deterministic).

The files follow the formats as documented (docs/rocprof-import.md lists the
sources): a rocprofv3 kernel_trace.csv, a rocprofv3 results.json (kernels and
memory copies), a rocprof (v1) results.csv, and the host-clocks recording
made on the same (made-up) boot, plus truth.json: every event's true
REALTIME start and end.

The profilers stamp CLOCK_BOOTTIME. Here REALTIME - BOOTTIME starts at a
known offset and grows by 40 ppm (REALTIME slewed against BOOTTIME), and
each host-clocks sample carries a bracket 200..1200 ns wide, its offset off
the truth by up to half of it, as a real bracketed read would be. Importing
the traces with the recording must land every event within 1 us of truth.

  python3 tests/data/rocprof/make_samples.py   # rewrites the files
"""
import json
import os
import random
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
BOOT_ID = "3f0b6a52-7c1e-4d2a-9b8e-5a1c0d2e4f60"
HOST = "gpunode1"
B0 = 123_456_789_012_345             # BOOTTIME at the recording's start (about 1.4 days up)
R0 = 1_795_608_000_000_000_000       # REALTIME then (2026-11-25 12:00 UTC)
DRIFT_PPM = 40                       # REALTIME - BOOTTIME grows this fast
SUSPENDED_NS = 2_000_000_000         # MONOTONIC = BOOTTIME - time spent suspended
RAW_PPM = -12                        # MONOTONIC_RAW against MONOTONIC
PERIOD_NS = 100_000_000
SPAN_NS = 3_000_000_000


def true_realtime(boottime: int) -> Fraction:
    return Fraction(R0) + (boottime - B0) + Fraction(DRIFT_PPM * (boottime - B0), 1_000_000)


def domain_ref(domain: str, boottime: int) -> int:
    mono = boottime - SUSPENDED_NS
    if domain == "boottime":
        return boottime
    if domain == "monotonic":
        return mono
    return mono + (RAW_PPM * (boottime - B0)) // 1_000_000  # monotonic_raw


def write_host_clocks(rng: random.Random) -> None:
    lines = [json.dumps({"schema": "chronolink.host_clocks/1", "host": HOST, "boot_id": BOOT_ID,
                         "started_realtime_ns": int(true_realtime(B0)), "period_ns": PERIOD_NS,
                         "granularity_ns": 1}, separators=(",", ":"))]
    for k in range(SPAN_NS // PERIOD_NS + 1):
        b = B0 + k * PERIOD_NS + rng.randrange(0, 20_000)
        for domain in ("boottime", "monotonic", "monotonic_raw"):
            width = rng.randrange(200, 1201)
            ref = domain_ref(domain, b)
            truth = true_realtime(b) - ref
            noise = rng.randrange(-(width // 2), width // 2 + 1)
            lines.append(json.dumps({"domain": domain, "ref_ns": ref, "offset_ns": round(truth) + noise,
                                     "error_ns": (width + 1) // 2 + 1, "bracket_ns": width},
                                    separators=(",", ":")))
    with open(os.path.join(HERE, "host_clocks.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")


def kernel_times(rng: random.Random, n: int, lo_s: float, hi_s: float):
    out = []
    for _ in range(n):
        start = B0 + int(rng.uniform(lo_s, hi_s) * 1e9)
        out.append((start, start + rng.randrange(10_000, 200_000)))
    return sorted(out)


def truth_entry(gpu: int, name: str, corr: int, start: int, end: int) -> dict:
    return {"gpu": gpu, "name": name, "correlation_id": corr,
            "true_start_ns": round(true_realtime(start)), "true_end_ns": round(true_realtime(end))}


def write_v3_csv(rng: random.Random, truth: dict) -> None:
    header = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
              "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
              "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z",
              "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]
    rows = ['"' + '","'.join(header) + '"']
    events = []
    for i, (s, e) in enumerate(kernel_times(rng, 24, 0.2, 1.2)):
        agent = 4 + i % 2  # two GPUs: agents 4 and 5 -> ordinals 0 and 1
        name = f"void vector_add_{i}<float>(float*, float const*, int)"
        corr = i + 1
        rows.append(f'"KERNEL_DISPATCH","Agent {agent}",{1 + i % 3},{1 + i % 3},852831,{i + 1},{10 + i},"{name}",'
                    f'{corr},{s},{e},0,0,8,0,16,64,1,1,1024,1024,1')
        events.append(truth_entry(agent - 4, name, corr, s, e))
    with open(os.path.join(HERE, "kernel_trace.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    truth["kernel_trace.csv"] = events


def write_v3_json(rng: random.Random, truth: dict) -> None:
    agents = [{"size": 0, "id": {"handle": 1}, "type": 1, "node_id": 0, "logical_node_id": 0, "name": "CPU"},
              {"size": 0, "id": {"handle": 2}, "type": 2, "node_id": 1, "logical_node_id": 1, "name": "gfx90a"},
              {"size": 0, "id": {"handle": 3}, "type": 2, "node_id": 2, "logical_node_id": 2, "name": "gfx90a"}]
    symbols, dispatches, copies, events = [], [], [], []
    for i, (s, e) in enumerate(kernel_times(rng, 16, 1.3, 2.2)):
        kid = 100 + i
        name = f"gemm_tile_{i}(float const*, float*, int)"
        symbols.append({"size": 0, "kernel_id": kid, "code_object_id": 1, "kernel_name": f"_Z11gemm_tile_{i}PKfPfi",
                        "formatted_kernel_name": name, "demangled_kernel_name": name,
                        "truncated_kernel_name": f"gemm_tile_{i}"})
        handle = 2 + i % 2
        corr = 1000 + i
        dispatches.append({"size": 0, "kind": 12, "operation": 0, "thread_id": 4242,
                           "correlation_id": {"internal": corr, "external": 0},
                           "start_timestamp": s, "end_timestamp": e,
                           "dispatch_info": {"size": 0, "agent_id": {"handle": handle}, "queue_id": {"handle": 7 + i % 2},
                                             "kernel_id": kid, "dispatch_id": i + 1, "private_segment_size": 0,
                                             "group_segment_size": 1024, "workgroup_size": {"x": 256, "y": 1, "z": 1},
                                             "grid_size": {"x": 65536, "y": 1, "z": 1}}})
        events.append(truth_entry(handle - 2, name, corr, s, e))
    # operation: 1 host-to-host (skipped), 2 host-to-device, 3 device-to-host
    for j, (s, e) in enumerate(kernel_times(rng, 4, 2.3, 2.7)):
        op = [2, 2, 3, 1][j]
        corr = 2000 + j
        copies.append({"size": 0, "kind": 14, "operation": op, "thread_id": 4242,
                       "correlation_id": {"internal": corr, "external": 0},
                       "start_timestamp": s, "end_timestamp": e,
                       "dst_agent_id": {"handle": 2 if op == 2 else 1}, "src_agent_id": {"handle": 3 if op == 3 else 1},
                       "bytes": 1 << (20 + j)})
        if op == 2:
            events.append(truth_entry(0, "MemcpyH2D", corr, s, e))
        elif op == 3:
            events.append(truth_entry(1, "MemcpyD2H", corr, s, e))
    doc = {"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 31337, "init_time": B0 + 100_000_000, "fini_time": B0 + 2_900_000_000,
                     "command": ["./app"]},
        "agents": agents, "counters": [], "strings": {"buffer_records": [], "marker_api": []},
        "code_objects": [], "kernel_symbols": symbols, "callback_records": {"counter_collection": []},
        "buffer_records": {"kernel_dispatch": dispatches, "hip_api": [], "hsa_api": [], "marker_api": [],
                           "memory_copy": copies, "scratch_memory": []}}]}
    with open(os.path.join(HERE, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    truth["results.json"] = events


def write_v1_csv(rng: random.Random, truth: dict) -> None:
    header = ("Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,accum_vgpr,sgpr,"
              "wave_size,sig,obj,DispatchNs,BeginNs,EndNs,CompleteNs")
    rows = [header]
    events = []
    for i, (s, e) in enumerate(kernel_times(rng, 12, 2.3, 2.8)):
        gpu = i % 2
        name = f"reduce_sum_{i}(double const*, double*, unsigned long) [clone .kd]"
        rows.append(f'{i},"{name}",{gpu},{gpu},{i * 4},31337,31338,1048576,256,0,0,16,0,24,64,0x0,0x7f00,'
                    f'{s - 5000},{s},{e},{e + 3000}')
        events.append(truth_entry(gpu, name, 0, s, e))
    with open(os.path.join(HERE, "results.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    truth["results.csv"] = events


def main() -> None:
    rng = random.Random(20261125)
    write_host_clocks(rng)
    truth = {}
    write_v3_csv(rng, truth)
    write_v3_json(rng, truth)
    write_v1_csv(rng, truth)
    meta = {"host": HOST, "boot_id": BOOT_ID, "boottime_at_start_ns": B0, "realtime_at_start_ns": R0,
            "drift_ppm": DRIFT_PPM, "files": truth}
    with open(os.path.join(HERE, "truth.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
