"""State and resident arrays end to end, with real processes on 127.0.0.1:
brainstate's accumulate, a failed job leaving state unchanged, writes whose
copies differ refused before the commit, concurrent writers without lost
updates, a data-parallel linear regression trained
with its data and weights resident (checked against numpy's least squares),
flax nnx's tensor-parallel MLP with weights put by rules, arrays lost with
their worker, and a checkpoint that survives restarting every worker.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import concurrent.futures
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SHARDCTL = harness.SHARDCTL
RNG = np.random.default_rng(11)
COUNTER = itertools.count()


class Cluster(harness.ProcessCluster):
    """A cluster whose workers the tests kill and restart, with a scratch
    directory and shardctl shortcuts."""

    def __init__(self, n, heartbeat_timeout=1.0):
        self.tmp = tempfile.TemporaryDirectory(prefix="shardmap-state-")
        super().__init__(n, heartbeat_timeout)

    def close(self):
        super().close()
        self.tmp.cleanup()

    def file(self, name, array=None):
        path = os.path.join(self.tmp.name, name)
        if array is not None:
            np.save(path, array)
        return path

    def ctl(self, *args, timeout=120):
        p = subprocess.run([SHARDCTL, *args, "--coordinator", self.address],
                           capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def put(self, name, array, mesh, spec, *extra):
        code, _, err = self.ctl("put", name, self.file(name.replace("/", "_") +
                                                       ".npy", array),
                                "--mesh", mesh, "--spec", spec, *extra)
        assert code == 0, err

    def get(self, name):
        out = self.file("got.npy")
        code, _, err = self.ctl("get", name, "--out", out)
        return code, (np.load(out) if code == 0 else None), err


class FourWorkerTest(unittest.TestCase):
    """One cluster of four workers for all the tests of a class."""

    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(4)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()


class StateTest(FourWorkerTest):

    def accumulate(self, x, name, spec="P('x')"):
        # A file of its own per call: callers run in parallel.
        path = self.c.file(f"x-{os.getpid()}-{next(COUNTER)}.npy", x)
        return self.c.ctl("run", "--mesh", "x=2", "--fn", "accumulate",
                          "--arg", path, "--in-spec", spec,
                          "--out-spec", spec, "--state", f"buffer={name}",
                          "--state-spec", f"buffer={spec}")

    def test_accumulate_sums_its_inputs(self):
        self.c.put("acc/buf", np.zeros((4, 3), np.float64), "x=2", "P('x')")
        xs = [RNG.standard_normal((4, 3)) for _ in range(5)]
        for x in xs:
            code, _, err = self.accumulate(x, "acc/buf")
            self.assertEqual(code, 0, err)
        code, got, err = self.c.get("acc/buf")
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(got, sum(xs), rtol=1e-12)

    def test_failed_job_leaves_state_unchanged(self):
        self.c.put("acc/keep", np.ones((4, 3), np.float32), "x=2", "P('x')")
        code, _, err = self.accumulate(np.ones((4, 5), np.float32), "acc/keep")
        self.assertEqual(code, 65, err)  # shapes do not match
        code, got, err = self.c.get("acc/keep")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, np.ones((4, 3), np.float32))

    def test_concurrent_writers_lose_no_update(self):
        self.c.put("acc/race", np.zeros((2, 2), np.int64), "x=2", "P('x')")
        ones = np.ones((2, 2), np.int64)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda _: self.accumulate(ones, "acc/race")[0],
                                  range(16)))
        self.assertEqual(codes, [0] * 16)
        code, got, err = self.c.get("acc/race")
        np.testing.assert_array_equal(got, 16 * ones)

    def test_linear_regression_converges_to_least_squares(self):
        n, d = 64, 3
        x = RNG.standard_normal((n, d))
        y = x @ np.array([1.5, -2.0, 0.5]) + 0.25 + 0.01 * RNG.standard_normal(n)
        self.c.put("lr/x", x, "data=4", "P('data')")
        self.c.put("lr/y", y, "data=4", "P('data')")
        self.c.put("lr/params", np.zeros(d + 1), "data=4", "P()")
        losses = []
        for _ in range(150):
            code, out, err = self.c.ctl(
                "run", "--mesh", "data=4", "--fn", "linear_sgd_step",
                "--arg", "@lr/x", "--arg", "@lr/y", "--in-spec", "P('data')",
                "--out-spec", "P()", "--state", "params=lr/params",
                "--kwargs", '{"lr": 0.2, "axes": "data"}', "--json")
            self.assertEqual(code, 0, err)
            losses.append(json.loads(out)["outputs"][0]["values"][0])
        self.assertLess(losses[-1], losses[0] / 100)
        code, params, err = self.c.get("lr/params")
        want, *_ = np.linalg.lstsq(np.c_[x, np.ones(n)], y, rcond=None)
        np.testing.assert_allclose(params, want, atol=1e-3)

    def test_mlp_tp_with_weights_put_by_rules(self):
        x = RNG.standard_normal((4, 8)).astype(np.float32)
        w1 = RNG.standard_normal((8, 16)).astype(np.float32)
        w2 = RNG.standard_normal((16, 3)).astype(np.float32)
        npz = os.path.join(self.c.tmp.name, "model.npz")
        np.savez(npz, **{"linear1/kernel": w1, "linear2/kernel": w2})
        code, _, err = self.c.ctl(
            "put-tree", "mlp", npz, "--mesh", "model=4", "--rules",
            "linear1/kernel=P(None, 'model');linear2/kernel=P('model', None)")
        self.assertEqual(code, 0, err)
        out = self.c.file("y.npy")
        code, _, err = self.c.ctl(
            "run", "--mesh", "model=4", "--fn", "mlp_tp",
            "--arg", self.c.file("xm.npy", x), "--in-spec", "P()",
            "--arg", "@mlp/linear1/kernel", "--in-spec", "P(None, 'model')",
            "--arg", "@mlp/linear2/kernel", "--in-spec", "P('model', None)",
            "--out", out, "--out-spec", "P()", "--kwargs", '{"axes": "model"}')
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(np.load(out), np.maximum(x @ w1, 0) @ w2,
                                   rtol=1e-4, atol=1e-4)


class ReplicationTest(FourWorkerTest):
    """Writes whose spec claims equal copies are compared before the
    commit (docs/RELIABILITY.md, scenario 33): a divergent write fails
    naming the slot or output, the axis and the devices, and the stored
    array is unchanged."""

    def put_fresh(self, name, array):
        self.c.put(name, array, "x=4", "P()", "--overwrite")

    def assert_unchanged(self, name, want):
        code, got, err = self.c.get(name)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, want)

    def accumulate(self, x, name, in_spec, *extra):
        path = self.c.file(f"rx-{next(COUNTER)}.npy", x)
        return self.c.ctl("run", "--mesh", "x=4", "--fn", "accumulate",
                          "--arg", path, "--in-spec", in_spec,
                          "--out-spec", "P('x')", "--state", f"buffer={name}",
                          *extra)

    def store(self, x, name, in_spec, out_spec, *extra):
        path = self.c.file(f"ry-{next(COUNTER)}.npy", x)
        return self.c.ctl("run", "--mesh", "x=4", "--fn", "identity",
                          "--arg", path, "--in-spec", in_spec,
                          "--out", "@" + name, "--out-spec", out_spec, *extra)

    def test_state_written_with_copies_that_differ_fails(self):
        old = np.arange(3, dtype=np.float64)
        self.put_fresh("rep/s", old)
        # x split over x=4: each device adds a different quarter to its copy
        # of the replicated (P()) buffer.
        code, _, err = self.accumulate(RNG.standard_normal(12), "rep/s",
                                       "P('x')")
        self.assertEqual(code, 65, err)
        for part in ["INVALID_ARGUMENT",
                     "state slot 'buffer' (array 'rep/s') is written with "
                     "spec P()", "differ along mesh axis 'x'",
                     "device 0 (mesh coordinates (0,)",
                     "device 1 (mesh coordinates (1,)", "Nothing was stored"]:
            self.assertIn(part, err)
        self.assert_unchanged("rep/s", old)

    def test_stored_output_with_copies_that_differ_fails(self):
        old = np.full(3, 5, np.int32)
        self.put_fresh("rep/d", old)
        x = np.arange(12, dtype=np.int32)
        code, _, err = self.store(x, "rep/d", "P('x')", "P()")
        self.assertEqual(code, 65, err)
        for part in ["identity output 0 is stored as 'rep/d' with spec P()",
                     "mesh axis 'x'", "device 0", "device 1",
                     "Nothing was stored"]:
            self.assertIn(part, err)
        self.assertNotIn("--no-check-rep", err)
        self.assert_unchanged("rep/d", old)

    def test_no_check_rep_is_refused_for_stored_copies(self):
        old = np.full(3, 9, np.int32)
        self.put_fresh("rep/n", old)
        x = np.arange(12, dtype=np.int32)
        code, _, err = self.store(x, "rep/n", "P('x')", "P()",
                                  "--no-check-rep")
        self.assertEqual(code, 65, err)
        for part in ["INVALID_ARGUMENT", "--no-check-rep cannot be used",
                     "identity output 0 stored as 'rep/n'", "P()",
                     "mesh axis 'x'"]:
            self.assertIn(part, err)
        self.assert_unchanged("rep/n", old)
        code, _, err = self.accumulate(np.ones(12, np.int32), "rep/n",
                                       "P('x')", "--no-check-rep")
        self.assertEqual(code, 65, err)
        self.assertIn("state slot 'buffer' (array 'rep/n')", err)
        self.assert_unchanged("rep/n", old)

    def test_writes_that_are_replicated_succeed(self):
        old = np.arange(3, dtype=np.float64)
        self.put_fresh("rep/ok", old)
        x = RNG.standard_normal(3)
        # The whole x on every device: every copy gets the same sum.
        code, _, err = self.accumulate(x, "rep/ok", "P()")
        self.assertEqual(code, 0, err)
        self.assert_unchanged("rep/ok", old + x)
        code, _, err = self.store(x, "rep/e", "P()", "P()")
        self.assertEqual(code, 0, err)
        self.assert_unchanged("rep/e", x)
        # Split over every axis, a stored output has no copies to check.
        y = np.arange(8, dtype=np.int64)
        code, _, err = self.store(y, "rep/f", "P('x')", "P('x')",
                                  "--no-check-rep")
        self.assertEqual(code, 0, err)
        self.assert_unchanged("rep/f", y)


class LossAndCheckpointTest(unittest.TestCase):

    def test_lost_with_its_worker_then_restored_from_checkpoint(self):
        c = Cluster(2)
        try:
            a = RNG.standard_normal((6, 4))
            c.put("ckpt/a", a, "x=2", "P('x')")
            c.put("ckpt/b", np.arange(5, dtype=np.int32), "x=2", "P()")
            ckpt = os.path.join(c.tmp.name, "ckpt")
            code, _, err = c.ctl("save", ckpt)
            self.assertEqual(code, 0, err)
            self.assertTrue(os.path.exists(os.path.join(ckpt, "manifest.json")))
            # Every worker dies: the arrays are lost, never silently empty.
            c.kill_workers()
            for _ in range(2):
                c.add_worker()
            c.wait_for_workers(2)
            code, _, err = c.get("ckpt/a")
            self.assertNotEqual(code, 0)
            self.assertIn("lost", err)
            code, out, err = c.ctl("ls", "--json")
            self.assertEqual(code, 0, err)
            listed = {a["name"]: a for a in json.loads(out)["arrays"]}
            self.assertTrue(listed["ckpt/a"]["lost"], out)
            self.assertTrue(listed["ckpt/b"]["lost"], out)
            # The checkpoint brings them back, bit for bit.
            code, _, err = c.ctl("restore", ckpt)
            self.assertEqual(code, 0, err)
            code, got, err = c.get("ckpt/a")
            self.assertEqual(code, 0, err)
            np.testing.assert_array_equal(got, a)
            code, got, err = c.get("ckpt/b")
            np.testing.assert_array_equal(got, np.arange(5, dtype=np.int32))
            # A second save replaces the first atomically.
            code, _, err = c.ctl("save", ckpt)
            self.assertEqual(code, 0, err)
            self.assertEqual(sorted(os.listdir(c.tmp.name)).count("ckpt"), 1)
        finally:
            c.close()


class StateDirTest(unittest.TestCase):

    def test_worker_restarted_with_its_state_dir_rejoins_with_its_blocks(self):
        c = Cluster(0)
        try:
            dirs = [os.path.join(c.tmp.name, f"state{i}") for i in range(2)]
            for d in dirs:
                c.add_worker("--state-dir", d)
            c.wait_for_workers(2)
            a = RNG.standard_normal((4, 6))
            c.put("kept/a", a, "x=2", "P(None, 'x')")
            c.kill_worker(c.workers[1])
            c.wait_for_workers(1)
            code, _, err = c.get("kept/a")
            self.assertNotEqual(code, 0)
            self.assertIn("lost", err)
            c.add_worker("--state-dir", dirs[1])  # same directory, new port
            c.wait_for_workers(2)
            code, got, err = c.get("kept/a")
            self.assertEqual(code, 0, err)
            np.testing.assert_array_equal(got, a)
        finally:
            c.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
