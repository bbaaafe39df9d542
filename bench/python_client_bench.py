#!/usr/bin/env python3
"""python_client_bench: the Python client (python/shardmap) against the C++
client, on the same kind of local cluster (4 worker processes), in one run.

  job_tiny  `identity` on 16 float32 sharded P('x') over x=N: per-job
            latency through Python, p50 / p99 over --tiny-iters jobs
  job_big   `identity` on --big-bytes of float32, P('x') in and out: the
            bytes go client -> coordinator -> workers -> back to Python,
            checked bit for bit; one untimed job first, as job_bench
            runs (the first big job also faults every array's pages in)

Each repetition runs build/bin/job_bench (the C++ client's figures, on
its own fresh cluster) and then this client on a fresh cluster, so both
see the same machine load; the ratios per repetition are printed at the
end (issue 16's targets: tiny p50 within 1.5x of C++'s, big throughput at
least 0.8x of C++'s). --no-cpp prints only the Python figures (run.sh runs
job_bench itself in the same repetition; report.py pairs them).

Prints RESULT lines as bench/report.py reads them (impl=python; run.sh
adds rep=K).
Usage: python_client_bench.py [--reps 3] [--workers 4] [--tiny-iters 300]
       [--big-bytes 268435456] [--big-iters 3] [--no-cpp] [--bin-dir DIR]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def setup_path(bin_dir):
    build = os.path.dirname(os.path.abspath(bin_dir))
    sys.path.insert(0, os.path.join(build, "python"))


def cpp_figures(args):
    """(tiny p50 us, tiny p99 us, big us) from one job_bench run."""
    cmd = [os.path.join(args.bin_dir, "job_bench"), "--workers",
           str(args.workers), "--tiny-iters", str(args.tiny_iters),
           "--clients", "1", "--seconds", "0.2", "--big-bytes",
           str(args.big_bytes), "--big-iters", str(args.big_iters),
           "--mlp-rows", "8", "--mlp-width", str(8 * args.workers),
           "--mlp-iters", "1", "--timeout", "600"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=700,
                         check=True).stdout
    fig = {}
    for line in out.splitlines():
        kv = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
        if line.startswith("RESULT") and kv.get("impl") == "shardmap":
            fig[kv["op"]] = kv
    return (float(fig["job_tiny"]["median_us"]),
            float(fig["job_tiny"]["p99_us"]),
            float(fig["job_big"]["median_us"]))


def python_figures(args):
    import numpy as np
    import shardmap as sm
    from shardmap import P

    with sm.local(args.workers, bin_dir=args.bin_dir) as cluster:
        mesh = cluster.mesh(x=args.workers)
        f = sm.shard_map("identity", mesh=mesh, in_specs=P("x"),
                         out_specs=P("x"))
        tiny = np.arange(16, dtype=np.float32)
        lat = []
        warmup = max(5, args.tiny_iters // 10)
        for it in range(warmup + args.tiny_iters):
            t0 = time.perf_counter()
            y = f(tiny)
            t1 = time.perf_counter()
            if not np.array_equal(y, tiny):
                raise SystemExit("python_client_bench: tiny job: wrong output")
            if it >= warmup:
                lat.append((t1 - t0) * 1e6)
        lat.sort()
        p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1,
                                                int(0.99 * len(lat)))]
        print(f"RESULT impl=python op=job_tiny n={args.workers} "
              f"bytes=64 iters={len(lat)} median_us={p50:.2f} "
              f"p99_us={p99:.2f} min_us={lat[0]:.2f}", flush=True)
        big = (np.arange(args.big_bytes // 4) % 1000003).astype(np.float32)
        times = []
        # One untimed job first, as job_bench runs: the first job of a
        # fresh cluster also faults every array's pages in.
        if not np.array_equal(f(big), big):
            raise SystemExit("python_client_bench: big job: wrong output")
        for _ in range(args.big_iters):
            t0 = time.perf_counter()
            y = f(big)
            times.append((time.perf_counter() - t0) * 1e6)
            if not np.array_equal(y, big):
                raise SystemExit("python_client_bench: big job: wrong output")
            del y
        big_us = statistics.median(times)
        print(f"RESULT impl=python op=job_big n={args.workers} "
              f"bytes={args.big_bytes} iters={len(times)} "
              f"median_us={big_us:.2f}", flush=True)
    return p50, p99, big_us


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--tiny-iters", type=int, default=300)
    ap.add_argument("--big-bytes", type=int, default=256 << 20)
    ap.add_argument("--big-iters", type=int, default=3)
    ap.add_argument("--no-cpp", action="store_true")
    ap.add_argument("--bin-dir", default=os.environ.get(
        "SHARDMAP_BIN_DIR", os.path.join(ROOT, "build", "bin")))
    args = ap.parse_args()
    setup_path(args.bin_dir)
    tiny_ratios, big_ratios = [], []
    for rep in range(1, args.reps + 1):
        print(f"# repetition {rep}", flush=True)
        py = python_figures(args)
        if args.no_cpp:
            continue
        cpp = cpp_figures(args)
        print(f"RESULT impl=shardmap op=job_tiny n={args.workers} "
              f"bytes=64 median_us={cpp[0]:.2f} p99_us={cpp[1]:.2f}")
        print(f"RESULT impl=shardmap op=job_big n={args.workers} "
              f"bytes={args.big_bytes} median_us={cpp[2]:.2f}", flush=True)
        tiny_ratios.append(py[0] / cpp[0])
        big_ratios.append(cpp[2] / py[2])
    if tiny_ratios:
        def text(values):
            return (f"{statistics.median(values):.2f} "
                    f"({min(values):.2f}-{max(values):.2f})")
        print(f"python/C++ tiny job p50 time: {text(tiny_ratios)} "
              f"(target <= 1.5)")
        print(f"python/C++ {args.big_bytes >> 20} MiB throughput: "
              f"{text(big_ratios)} (target >= 0.8)")


if __name__ == "__main__":
    main()
