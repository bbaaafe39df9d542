"""Many concurrent large jobs on a busy machine (RELIABILITY scenario 39):
64 psum jobs over 4 workers, all submitted at once, all succeed with the
values numpy computes. Workers run their jobs one at a time in the order
the coordinator issued them; no job may fail because another one's header
was slow to arrive (there is no ordering timeout).

Sizes: 64 jobs (the coordinator's default --max-concurrent-jobs) of 16 MiB
float32 arrays each by default, about 4 GiB of peak memory over the
clients, the coordinator and the workers, and under two minutes on a busy
2-core machine. SHARDMAP_BURST_MIB=64 runs the full 64 MiB jobs (about
18 GiB of memory: only on a machine that has it free).

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import json
import os
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SHARDCTL = harness.SHARDCTL
JOBS = 64
MIB = int(os.environ.get("SHARDMAP_BURST_MIB", "16"))
JOB_TIMEOUT = 600  # s; each job's deadline, far past the expected time


class BurstTest(unittest.TestCase):

    def test_concurrent_large_psums_all_succeed(self):
        tmp = harness.Scratch("shardmap-burst-")
        # Heartbeats wait behind the burst on a loaded machine: the pool's
        # heartbeat timeout is not what this test is about.
        cluster = harness.ProcessCluster(4, heartbeat_timeout=30)
        try:
            # Rows of 1024 float32; each job's array is MIB MiB, 4 blocks.
            rows = MIB * 256
            procs, inputs, outs = [], [], []
            for j in range(JOBS):
                # Small integers: float32 sums are exact in any order.
                x = np.random.default_rng(j).integers(
                    -8, 8, size=(rows, 1024)).astype(np.float32)
                inputs.append(tmp.save(x))
                del x
                outs.append(tmp.out_path())
            for j in range(JOBS):
                procs.append(subprocess.Popen(
                    [SHARDCTL, "run", "--coordinator", cluster.address,
                     "--mesh", "x=4", "--fn", "psum",
                     "--kwargs", json.dumps({"axes": ["x"]}),
                     "--arg", inputs[j], "--in-spec", "P('x')",
                     "--out-spec", "P()", "--out", outs[j],
                     "--timeout", str(JOB_TIMEOUT)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    text=True))
            failures = []
            for j, p in enumerate(procs):
                _, err = p.communicate(timeout=JOB_TIMEOUT + 60)
                if p.returncode != 0:
                    failures.append(f"job {j}: exit {p.returncode}: {err}")
            self.maxDiff = None
            self.assertEqual(failures, [])
            for j in range(JOBS):
                x = np.load(inputs[j])
                want = x.reshape(4, rows // 4, 1024).sum(axis=0)
                np.testing.assert_array_equal(np.load(outs[j]), want,
                                              err_msg=f"job {j}")
        finally:
            cluster.close()
            tmp.cleanup()


if __name__ == "__main__":
    harness.main()
