#!/usr/bin/env python3
"""donation_rss: a worker's peak memory when a resident array is updated in
place, with and without donation (shardctl run --donate, issue 15).

For each mode, on a fresh local cluster of one worker (so VmHWM, the
process's peak RSS from /proc/PID/status, starts from nothing): put an
array of --mib MiB of float32 (mesh x=1, P()), then run --steps updates
`scale(alpha=1.0001)` with `--arg @big --out @big`, donated or not. Prints
the worker's VmHWM after the put and after the updates, in MiB, and the
peak over the put's (the copies an update holds at once), as RESULT lines
bench/report.py reads. Not a test: the figures depend on the allocator.

Usage: donation_rss.py [--mib 128] [--steps 3] [--bin-dir build/bin]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def peak_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def run(args, donate, path):
    import harness  # tests/system/harness.py: the local cluster
    c = harness.ProcessCluster(1)
    try:
        def ctl(*a):
            p = subprocess.run([harness.SHARDCTL, *a, "--coordinator",
                                c.address], capture_output=True, text=True,
                               timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"shardctl {' '.join(a)}: {p.stderr}")
        ctl("put", "big", path, "--mesh", "x=1", "--spec", "P()")
        pid = c.workers[0].proc.pid
        after_put = peak_mib(pid)
        for _ in range(args.steps):
            ctl("run", "--fn", "scale", "--kwargs", '{"alpha": 1.0001}',
                "--arg", "@big", "--in-spec", "P()", "--out", "@big",
                "--out-spec", "P()", *(["--donate", "0"] if donate else []))
        return after_put, peak_mib(pid)
    finally:
        c.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    args = parser.parse_args()
    os.environ["SHARDMAP_BIN_DIR"] = os.path.abspath(args.bin_dir)
    sys.path.insert(0, os.path.join(ROOT, "tests", "system"))
    with tempfile.TemporaryDirectory(prefix="donation-rss-") as tmp:
        path = os.path.join(tmp, "big.npy")
        np.save(path, np.ones(args.mib << 18, np.float32))
        for donate in (False, True):
            mode = "donated" if donate else "copied"
            after_put, peak = run(args, donate, path)
            print(f"RESULT impl=shardmap op=update_{mode} n=1 "
                  f"bytes={args.mib << 20} steps={args.steps} "
                  f"put_peak_mib={after_put:.0f} peak_mib={peak:.0f} "
                  f"copies={(peak - after_put) / args.mib + 1:.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
