"""Fault tests with real processes on 127.0.0.1: workers that are killed
or stopped while the coordinator still counts on them. Every case must end
with a clear error within seconds, and the cluster must serve the next job.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

import numpy as np

BIN = os.environ.get(
    "SHARDMAP_BIN_DIR",
    os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))


def start(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    line = p.stdout.readline().strip()
    return p, line.rsplit(" ", 1)[-1]


class Cluster:
    def __init__(self, workers, heartbeat_timeout=1.0):
        self.coordinator, self.address = start(
            [f"{BIN}/shardmap-coordinator", "--listen", "127.0.0.1:0",
             "--heartbeat-timeout", str(heartbeat_timeout)])
        self.workers = [start([f"{BIN}/shardmap-worker", "--coordinator",
                               self.address, "--listen", "127.0.0.1:0"])
                        for _ in range(workers)]
        self.wait_for_workers(workers)

    def live_workers(self):
        p = subprocess.run([f"{BIN}/shardctl", "status", "--coordinator",
                            self.address, "--json"], capture_output=True,
                           text=True, timeout=30)
        return len(json.loads(p.stdout)["workers"]) if p.returncode == 0 else 0

    def wait_for_workers(self, n, timeout=20):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.live_workers() == n:
                return
            time.sleep(0.05)
        raise AssertionError(f"{n} workers never became live")

    def close(self):
        for p, _ in self.workers:
            p.kill()
            p.wait()
            p.stdout.close()
        self.coordinator.terminate()
        self.coordinator.wait(timeout=10)
        self.coordinator.stdout.close()


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
            [f"{BIN}/shardctl", "run", "--coordinator", cluster.address,
             "--mesh", mesh, "--fn", "identity", "--arg", self.x,
             "--in-spec", "P('x')", "--out-spec", "P('x')", "--timeout", "60"],
            capture_output=True, text=True, timeout=90)
        return p.returncode, p.stderr, time.monotonic() - t0

    def test_stopped_worker_fails_the_job_fast_and_rejoins(self):
        cluster = Cluster(2)
        try:
            stopped, address = cluster.workers[1]
            stopped.send_signal(signal.SIGSTOP)
            code, err, seconds = self.run_job(cluster)
            self.assertEqual(code, 69, err)
            self.assertIn("error: UNAVAILABLE:", err)
            self.assertIn(address, err)
            self.assertLess(seconds, 10)  # the 60 s deadline was not needed
            stopped.send_signal(signal.SIGCONT)
            cluster.wait_for_workers(2)
            code, err, _ = self.run_job(cluster)
            self.assertEqual(code, 0, err)
        finally:
            cluster.workers[1][0].send_signal(signal.SIGCONT)
            cluster.close()

    def test_killed_worker_fails_the_job_then_the_pool_shrinks(self):
        cluster = Cluster(2)
        try:
            killed, address = cluster.workers[1]
            killed.kill()
            killed.wait()
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
            cluster.coordinator.kill()
            cluster.coordinator.wait()
            cluster.coordinator, cluster.address = start(
                [f"{BIN}/shardmap-coordinator", "--listen",
                 f"127.0.0.1:{port}", "--heartbeat-timeout", "1"])
            cluster.wait_for_workers(2)
            code, err, _ = self.run_job(cluster)
            self.assertEqual(code, 0, err)
        finally:
            cluster.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
