"""A worker killed with SIGKILL and started again is usable at once
(RELIABILITY scenario 38): once it has registered, the very next job over
every worker succeeds with the right values, whether it came back at the
same address or at a new one, over gRPC (--no-shm) and over shared memory.
Its peers learn of the new process from the job header (each device's
worker incarnation), not from the new process's first frame.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import json
import os
import subprocess
import sys
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SHARDCTL = harness.SHARDCTL
REGISTER_TIMEOUT = 30  # s; bound on the wait for the new process to join


class RejoinTest(unittest.TestCase):

    def setUp(self):
        self.tmp = harness.Scratch("shardmap-rejoin-")
        self.rng = np.random.default_rng(38)

    def tearDown(self):
        self.tmp.cleanup()

    def psum(self, cluster):
        """A psum over all 4 devices; returns (exit code, stderr), checking
        the values against numpy when it succeeds."""
        # 4 blocks of 256 Ki float32 (1 MiB): several peer frames each.
        x = self.rng.standard_normal((4 * 512, 512)).astype(np.float32)
        out = self.tmp.out_path()
        p = subprocess.run(
            [SHARDCTL, "run", "--coordinator", cluster.address, "--mesh",
             "x=4", "--fn", "psum", "--kwargs", json.dumps({"axes": ["x"]}),
             "--arg", self.tmp.save(x), "--in-spec", "P('x')",
             "--out-spec", "P()", "--out", out, "--timeout", "60"],
            capture_output=True, text=True, timeout=90)
        if p.returncode == 0:
            want = x.reshape(4, 512, 512).sum(axis=0, dtype=np.float32)
            np.testing.assert_allclose(np.load(out), want, rtol=1e-5,
                                       atol=1e-5)
        return p.returncode, p.stderr

    def wait_registered(self, cluster, address, gone=None):
        """Bounded poll of `shardctl status` until `address` is among 4 live
        workers (and `gone`, the dead process's address, is not)."""
        end = time.monotonic() + REGISTER_TIMEOUT
        while time.monotonic() < end:
            s = harness.status(cluster.address)
            if s is not None:
                live = [w["address"] for w in s["workers"]]
                if len(live) == 4 and address in live and gone not in live:
                    return
            time.sleep(0.05)
        self.fail(f"worker {address} did not register within "
                  f"{REGISTER_TIMEOUT} s")

    def restart_and_run(self, worker_args, same_address):
        cluster = harness.ProcessCluster(4, worker_args=worker_args)
        try:
            for _ in range(2):  # every pair of workers has streams now
                code, err = self.psum(cluster)
                self.assertEqual(code, 0, err)
            victim = cluster.workers[2]
            old = victim.address
            cluster.kill_worker(victim)  # SIGKILL
            # Jobs keep coming while it is down: they fail (the coordinator
            # still counts the dead worker in, or no longer has 4), and
            # leave failed connections and given-up tickets behind.
            for _ in range(3):
                code, err = self.psum(cluster)
                self.assertNotEqual(code, 0, "a job without worker 2 passed")
            listen = old if same_address else "127.0.0.1:0"
            new = cluster.add_worker(listen=listen).address
            self.assertEqual(new == old, same_address, (old, new))
            self.wait_registered(cluster, new,
                                 gone=None if same_address else old)
            # The very next job succeeds, and so do the ones after it.
            for i in range(3):
                code, err = self.psum(cluster)
                self.assertEqual(code, 0, f"job {i} after the restart: {err}")
        finally:
            cluster.close()

    def test_grpc_same_address(self):
        self.restart_and_run(["--no-shm"], same_address=True)

    def test_grpc_new_address(self):
        self.restart_and_run(["--no-shm"], same_address=False)

    def test_shm_same_address(self):
        self.restart_and_run([], same_address=True)

    def test_shm_new_address(self):
        self.restart_and_run([], same_address=False)


if __name__ == "__main__":
    harness.main()
