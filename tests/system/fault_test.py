"""Fault tests with real processes on 127.0.0.1: workers that are killed
or stopped while the coordinator still counts on them. Every case must end
with a clear error within seconds, and the cluster must serve the next job.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SHARDCTL = harness.SHARDCTL
Cluster = harness.ProcessCluster


class FaultTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.x = os.path.join(self.tmp.name, "x.npy")
        np.save(self.x, np.arange(8, dtype=np.float32))

    def tearDown(self):
        self.tmp.cleanup()

    def run_job(self, cluster, mesh="x=2"):
        t0 = time.monotonic()
        p = subprocess.run(
            [SHARDCTL, "run", "--coordinator", cluster.address,
             "--mesh", mesh, "--fn", "identity", "--arg", self.x,
             "--in-spec", "P('x')", "--out-spec", "P('x')", "--timeout", "60"],
            capture_output=True, text=True, timeout=90)
        return p.returncode, p.stderr, time.monotonic() - t0

    def test_stopped_worker_fails_the_job_fast_and_rejoins(self):
        cluster = Cluster(2)
        try:
            stopped = cluster.workers[1]
            address = stopped.address
            stopped.proc.send_signal(signal.SIGSTOP)
            code, err, seconds = self.run_job(cluster)
            self.assertEqual(code, 69, err)
            self.assertIn("error: UNAVAILABLE:", err)
            self.assertIn(address, err)
            self.assertLess(seconds, 10)  # the 60 s deadline was not needed
            stopped.proc.send_signal(signal.SIGCONT)
            cluster.wait_for_workers(2)
            code, err, _ = self.run_job(cluster)
            self.assertEqual(code, 0, err)
            # Stopped again once its streams (and, with links, its job
            # link) are up: the job's calls go out at once and the wait for
            # the answers is what must notice.
            stopped.proc.send_signal(signal.SIGSTOP)
            code, err, seconds = self.run_job(cluster)
            stopped.proc.send_signal(signal.SIGCONT)
            self.assertEqual(code, 69, err)
            self.assertIn(address, err)
            self.assertLess(seconds, 10)
        finally:
            cluster.close()

    def test_killed_worker_fails_the_job_then_the_pool_shrinks(self):
        cluster = Cluster(2)
        try:
            address = cluster.workers[1].address
            cluster.kill_worker(cluster.workers[1])
            code, err, seconds = self.run_job(cluster)
            self.assertEqual(code, 69, err)
            self.assertLess(seconds, 10)
            # Either the job reached the dead worker (UNAVAILABLE naming
            # it) or the pool had already dropped it (FAILED_PRECONDITION).
            self.assertTrue(address in err or "only 1 worker is alive" in err,
                            err)
            cluster.wait_for_workers(1)
            code, err, _ = self.run_job(cluster, mesh="x=1")
            self.assertEqual(code, 0, err)
        finally:
            cluster.close()

    def test_coordinator_restart_workers_register_again(self):
        cluster = Cluster(2)
        try:
            # Jobs before the restart move the workers' job order on; the
            # new coordinator's tickets start again and must still run.
            for _ in range(3):
                code, err, _ = self.run_job(cluster)
                self.assertEqual(code, 0, err)
            port = cluster.address.rsplit(":", 1)[1]
            cluster.kill_coordinator()
            cluster.start_coordinator(port)
            cluster.wait_for_workers(2)
            code, err, _ = self.run_job(cluster)
            self.assertEqual(code, 0, err)
        finally:
            cluster.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
