#!/usr/bin/env python3
"""Writes a large PyTorch/Kineto-like Chrome trace for memory and throughput
measurements of chronolink-trace's JSON reader and writer (docs/chrome-trace.md,
"Limits and figures"). Not a test fixture: the file is generated where it is
measured and never committed.

The events mimic libkineto's output_json.cpp: an object with
baseTimeNanoseconds, distributedInfo and deviceProperties; process/thread
metadata; cpu_op events with nested "Input Dims"/"Input type" args; CUDA
runtime calls with ac2g flows to kernels on GPU streams; record_param_comms
collectives; instant and counter events. ts/dur are relative µs with three
decimals, as Kineto prints them.

    python3 bench/gen_kineto_trace.py --out /tmp/big.json --size-mb 1024
"""
import argparse
import random

BASE_NS = 1727740800000000000  # a 3-month boundary, as Kineto rounds its base


def header(rank, world):
    return (
        '{\n  "schemaVersion": 1,\n'
        '  "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", '
        '"totalGlobalMem": 85031714816, "computeMajor": 9, "computeMinor": 0, '
        '"maxThreadsPerBlock": 1024, "numSms": 132}],\n'
        f'  "distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": {world}, '
        '"pg_count": 1, "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", '
        '"backend_config": "cuda:nccl", "pg_size": 8, "ranks": [0, 1, 2, 3, 4, 5, 6, 7]}], '
        '"nccl_version": "2.21.5"},\n'
        '  "displayTimeUnit": "ms",\n'
        f'  "baseTimeNanoseconds": {BASE_NS},\n'
        '  "traceEvents": [\n'
    )


def ts(ns):
    return f"{ns // 1000}.{ns % 1000:03d}"


def metadata(pid, threads):
    out = [
        f'{{"ph": "M", "name": "process_name", "ts": 0.000, "pid": {pid}, "tid": 0, '
        f'"args": {{"name": "python {pid}"}}}}',
        '{"ph": "M", "name": "process_name", "ts": 0.000, "pid": 0, "tid": 0, '
        '"args": {"name": "GPU 0"}}',
    ]
    for tid in threads:
        out.append(f'{{"ph": "M", "name": "thread_name", "ts": 0.000, "pid": {pid}, "tid": {tid}, '
                   f'"args": {{"name": "thread {tid} (python)"}}}}')
    return out


OPS = ["aten::add", "aten::mm", "aten::linear", "aten::relu", "aten::layer_norm",
       "aten::softmax", "aten::copy_", "aten::empty", "aten::view", "aten::addmm"]


def step_events(rng, pid, tid, now, seq, corr):
    """One op with its runtime call, kernel and flow; sometimes a collective."""
    out = []
    op = rng.choice(OPS)
    dur = rng.randint(2_000, 90_000)
    dims = f"[[{rng.randint(1, 4096)}, {rng.randint(1, 4096)}], [{rng.randint(1, 4096)}], []]"
    out.append(
        f'{{"ph": "X", "cat": "cpu_op", "name": "{op}", "pid": {pid}, "tid": {tid}, '
        f'"ts": {ts(now)}, "dur": {ts(dur)}, '
        f'"args": {{"External id": {seq}, "Record function id": 0, "Ev Idx": {seq % 1000}, '
        f'"Input Dims": {dims}, "Input type": ["float", "float", "Scalar"], '
        f'"Input Strides": [[4096, 1], [1], []], "Concrete Inputs": ["", "", "1"], '
        f'"Sequence number": {seq}, "Fwd thread id": 0}}}}')
    launch = now + dur // 3
    out.append(
        f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {pid}, "tid": {tid}, '
        f'"ts": {ts(launch)}, "dur": {ts(4_321)}, '
        f'"args": {{"External id": {seq}, "cbid": 211, "correlation": {corr}}}}}')
    out.append(f'{{"ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {ts(launch)}, '
               f'"cat": "ac2g", "name": "ac2g"}}')
    kstart = launch + rng.randint(5_000, 20_000)
    stream = 7 + seq % 4
    out.append(
        f'{{"ph": "X", "cat": "kernel", "name": "void at::native::elementwise_kernel<128, 2>'
        f'(int, at::native::AddFunctor<float>)", "pid": 0, "tid": {stream}, '
        f'"ts": {ts(kstart)}, "dur": {ts(rng.randint(1_000, 50_000))}, '
        f'"args": {{"External id": {seq}, "queued": 0, "device": 0, "context": 1, '
        f'"stream": {stream}, "correlation": {corr}, "registers per thread": 32, '
        f'"shared memory": 0, "blocks per SM": 1.5, "warps per SM": 6.0, '
        f'"grid": [4096, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 100}}}}')
    out.append(f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": {stream}, "ts": {ts(kstart)}, '
               f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}')
    if seq % 50 == 0:
        out.append(
            f'{{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": {pid}, "tid": {tid}, '
            f'"ts": {ts(now + dur)}, "dur": {ts(150_500)}, '
            f'"args": {{"External id": {seq + 1}, "Collective name": "allreduce", "dtype": "Float", '
            f'"In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 8, '
            f'"In split size": "[]", "Out split size": "[]", "Global rank start": 0, '
            f'"Global rank stride": 1, "Process Group Name": "0", '
            f'"Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", '
            f'"Rank": 1, "Seq": {seq // 50}}}}}')
    if seq % 200 == 0:
        out.append(f'{{"ph": "C", "cat": "gpu_memory", "name": "Memory 0", "pid": 0, "tid": 0, '
                   f'"ts": {ts(now)}, "args": {{"allocated": {rng.randint(1, 1 << 34)}}}}}')
    return out, dur


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--size-mb", type=int, default=1024)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = random.Random(a.seed)
    pid = 4242
    threads = [pid + 1 + k for k in range(a.threads)]
    clocks = {tid: 5_000_000_000_000 + k * 1_000 for k, tid in enumerate(threads)}
    limit = a.size_mb * 1024 * 1024
    written = 0
    seq = corr = 0
    events = 0
    with open(a.out, "w") as f:
        f.write(header(rank=1, world=8))
        first = True
        chunk = []

        def emit(lines):
            nonlocal first, written, events
            for line in lines:
                text = ("  " if first else ",\n  ") + line
                first = False
                chunk.append(text)
                written += len(text)
                events += 1

        emit(metadata(pid, threads))
        while written < limit:
            for tid in threads:
                seq += 1
                corr += 1
                lines, dur = step_events(rng, pid, tid, clocks[tid], seq, corr)
                emit(lines)
                clocks[tid] += dur + rng.randint(1_000, 30_000)
            if len(chunk) > 10_000:
                f.write("".join(chunk))
                chunk.clear()
        f.write("".join(chunk))
        f.write('\n  ],\n  "traceName": "/tmp/rank1.pt.trace.json"\n}\n')
    print(f"wrote {a.out}: {written / 1e6:.0f} MB, {events} events")


if __name__ == "__main__":
    main()
