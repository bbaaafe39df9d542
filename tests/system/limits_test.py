"""Resource limits end to end (docs/RELIABILITY.md, scenarios 10 and 11):
the coordinator's --max-job-bytes (arguments plus returned outputs,
refused before allocating) and --max-concurrent-jobs with
--max-queued-jobs, the worker's
--memory-budget (resident arrays plus job buffers), arrays over 4 MiB
bit-exact through the chunked streams, and one oversize message refused
with RESOURCE_EXHAUSTED. An array over 2 GiB is huge_array_test's.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import os
import signal
import subprocess
import sys
import time
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SHARDCTL = harness.SHARDCTL
# Removed when the interpreter exits (TemporaryDirectory's finalizer).
SCRATCH = harness.Scratch("shardmap-limits-test-")
save = SCRATCH.save


class Cluster(harness.ProcessCluster):
    """A coordinator and workers with extra flags each."""

    def __init__(self, workers, coordinator_flags=(), worker_flags=()):
        super().__init__(workers, heartbeat_timeout=1.5,
                         coordinator_args=coordinator_flags,
                         worker_args=worker_flags)

    def run(self, *args, timeout=60):
        return subprocess.run(
            [SHARDCTL, "run", "--coordinator", self.address, *args],
            capture_output=True, text=True, timeout=timeout)


class CoordinatorLimitsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(2, ["--max-job-bytes", "10000"])

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def test_arguments_over_the_limit_are_refused_up_front(self):
        x = np.zeros((2, 1500), np.float32)  # 12000 bytes
        p = self.cluster.run("--mesh", "x=2", "--fn", "identity", "--arg",
                             save(x), "--in-spec", "P('x')", "--out-spec",
                             "P('x')")
        self.assertEqual(p.returncode, 75, p.stderr)
        self.assertIn("RESOURCE_EXHAUSTED", p.stderr)
        self.assertIn("12000 bytes", p.stderr)
        self.assertIn("--max-job-bytes of 10000", p.stderr)

    def test_output_bigger_than_the_budget_is_refused(self):
        # Scenario 10: 512 argument bytes, a 16384-byte outer product.
        a = np.ones((64, 1), np.float32)
        b = np.ones((1, 64), np.float32)
        p = self.cluster.run("--mesh", "x=2", "--fn", "matmul", "--arg",
                             save(a), "--in-spec", "P('x')", "--arg", save(b),
                             "--in-spec", "P()", "--out-spec", "P('x')")
        self.assertEqual(p.returncode, 75, p.stderr)
        self.assertIn("RESOURCE_EXHAUSTED", p.stderr)
        self.assertIn("--max-job-bytes of 10000", p.stderr)
        self.assertIn("arguments (512 bytes)", p.stderr)
        # Within the limit the same job runs, and the result is right.
        a = np.arange(16, dtype=np.float32).reshape(16, 1)
        b = np.arange(16, dtype=np.float32).reshape(1, 16)
        out = os.path.join(SCRATCH.name, "outer.npy")
        p = self.cluster.run("--mesh", "x=2", "--fn", "matmul", "--arg",
                             save(a), "--in-spec", "P('x')", "--arg", save(b),
                             "--in-spec", "P()", "--out", out, "--out-spec",
                             "P('x')")
        self.assertEqual(p.returncode, 0, p.stderr)
        np.testing.assert_array_equal(np.load(out), a @ b)


class ConcurrentJobsTest(unittest.TestCase):

    def test_one_job_too_many_is_refused(self):
        # No job may wait for a turn: the second is refused at once (a
        # queue, the default, is job_queue_test's).
        cluster = Cluster(1, ["--max-concurrent-jobs", "1",
                              "--max-queued-jobs", "0"])
        try:
            x = save(np.ones((4,), np.float64))
            job = ["--mesh", "x=1", "--fn", "identity", "--arg", x,
                   "--in-spec", "P('x')", "--out-spec", "P('x')"]
            os.kill(cluster.workers[0].proc.pid, signal.SIGSTOP)  # the worker
            first = subprocess.Popen(
                [SHARDCTL, "run", "--coordinator", cluster.address, *job],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.addCleanup(harness.stop, first)  # killed if a check fails
            time.sleep(0.5)  # the first job now waits on the stopped worker
            p = cluster.run(*job)
            self.assertEqual(p.returncode, 75, p.stderr)
            self.assertIn("--max-concurrent-jobs", p.stderr)
            self.assertIn("--max-queued-jobs", p.stderr)
            os.kill(cluster.workers[0].proc.pid, signal.SIGCONT)
            first.wait(timeout=30)
            harness.wait_for_workers(cluster.address, 1)
            # The slot is free again.
            p = cluster.run(*job)
            self.assertEqual(p.returncode, 0, p.stderr)
        finally:
            cluster.close()


class WorkerBudgetTest(unittest.TestCase):

    def test_memory_budget_counts_resident_arrays_and_job_buffers(self):
        cluster = Cluster(1, worker_flags=["--memory-budget", "10000"])
        try:
            job = ["--mesh", "x=1", "--fn", "identity", "--in-spec",
                   "P('x')", "--out-spec", "P('x')"]
            # 12000 argument bytes on one worker: refused before allocating.
            p = cluster.run(*job, "--arg", save(np.zeros(1500, np.float64)))
            self.assertEqual(p.returncode, 75, p.stderr)
            self.assertIn("arguments need 12000 bytes", p.stderr)
            self.assertIn("--memory-budget of 10000", p.stderr)
            # 3200 in and 3200 out fit...
            x = np.arange(400, dtype=np.float64)
            out = os.path.join(SCRATCH.name, "id.npy")
            p = cluster.run(*job, "--arg", save(x), "--out", out)
            self.assertEqual(p.returncode, 0, p.stderr)
            np.testing.assert_array_equal(np.load(out), x)
            # ...but not next to a 4800-byte resident array.
            p = subprocess.run(
                [SHARDCTL, "put", "big", save(np.ones(600, np.float64)),
                 "--mesh", "x=1", "--coordinator", cluster.address],
                capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            p = cluster.run(*job, "--arg", save(x))
            self.assertEqual(p.returncode, 75, p.stderr)
            self.assertIn("4800 bytes of resident arrays", p.stderr)
            # Blocks fetched for resident arguments count too: a small one
            # fits beside big (800 fetched, 800 out), two copies of big do
            # not.
            small = np.arange(100, dtype=np.float64)
            p = subprocess.run(
                [SHARDCTL, "put", "small", save(small), "--mesh", "x=1",
                 "--coordinator", cluster.address],
                capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            p = cluster.run(*job, "--arg", "@small", "--out", out)
            self.assertEqual(p.returncode, 0, p.stderr)
            np.testing.assert_array_equal(np.load(out), small)
            p = cluster.run("--mesh", "x=1", "--fn", "add", "--arg", "@big",
                            "--arg", "@big", "--in-spec", "P('x')",
                            "--out-spec", "P('x')")
            self.assertEqual(p.returncode, 75, p.stderr)
            self.assertIn("arguments and resident blocks need 9600 bytes",
                          p.stderr)
        finally:
            cluster.close()


class LargeArraysTest(unittest.TestCase):
    """Scenario 11."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(2)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def test_arrays_over_4_mib_round_trip_bit_exactly(self):
        # 24 MiB of random bit patterns, NaN payloads and -0.0 included.
        bits = np.random.default_rng(11).integers(
            0, 2**63, size=(1024, 3072), dtype=np.uint64)
        x = bits.view(np.float64)
        out = os.path.join(SCRATCH.name, "big.npy")
        p = self.cluster.run("--mesh", "x=2", "--fn", "identity", "--arg",
                             save(x), "--in-spec", "P('x')", "--out", out,
                             "--out-spec", "P('x')", timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        np.testing.assert_array_equal(np.load(out).view(np.uint64), bits)

    def test_one_oversize_message_is_resource_exhausted(self):
        # A single 9 MiB message against the 8 MiB limit every server sets.
        # ListArraysRequest{prefix: 9 MiB of "p"}.
        ch = grpc.insecure_channel(self.cluster.address)
        with self.assertRaises(grpc.RpcError) as e:
            ch.unary_unary("/shardmap.v1.Coordinator/ListArrays")(
                harness.pb_field(1, b"p" * (9 << 20)),
                metadata=harness.AUTH_METADATA, timeout=30)
        self.assertEqual(e.exception.code(),
                         grpc.StatusCode.RESOURCE_EXHAUSTED)
        ch.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
