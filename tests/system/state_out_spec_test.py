"""--state-out-spec is atomic, end to end on a local cluster of four workers
whose --memory-budget leaves room for a state's blocks but not for a whole
replica of it: a job that would store the state replicated (P()) fails in
the resharding step, after the function ran, and `shardctl get` still
returns the previous value (numpy) at the previous version and sharding;
the next job builds on it. A resharding that fits equals numpy (also with
auto axes, whose out spec may name only manual ones), and an
array bound to a state cannot also be donated.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RNG = np.random.default_rng(21)
DATA_ERR = 65
TEMP_FAIL = 75
# A state of 1000 float64 is 2000 bytes per worker as P('x') over x=4; its
# replica (P()) is 8000 bytes, which with the block held does not fit.
BUDGET = "9000"


class StateOutSpecTest(harness.ClusterTestCase):
    scratch_prefix = "shardmap-state-out-"

    @classmethod
    def setUpClass(cls):
        cls.c = harness.ProcessCluster(
            4, worker_args=["--memory-budget", BUDGET])

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def ok(self, *args):
        code, out, err = self.ctl(self.c, *args)
        self.assertEqual(code, 0, err)
        return out

    def put(self, name, array, spec):
        self.ok("put", name, self.file(array), "--mesh", "x=4", "--spec", spec)

    def info(self, name):
        out = self.ok("ls", name, "--json")
        return {a["name"]: a for a in json.loads(out)["arrays"]}[name]

    def get(self, name):
        out = self.path(f"got{self.count}.npy")
        self.count += 1
        self.ok("get", name, "--out", out)
        return np.load(out)

    def accumulate(self, name, x, *specs):
        return self.ctl(self.c, "run", "--mesh", "x=4", "--fn", "accumulate",
                        "--arg", self.file(x), "--in-spec", "P('x')",
                        "--state", "buffer=@" + name, *specs,
                        "--out-spec", "P('x')")

    def test_a_failed_reshard_changes_no_state(self):
        buf = np.arange(1000, dtype=np.float64)
        self.put("out/buf", buf, "P('x')")
        before = self.info("out/buf")
        x = RNG.standard_normal(1000)
        code, _, err = self.accumulate(
            "out/buf", x, "--state-spec", "P('x')",
            "--state-out-spec", "buffer=P()")
        self.assertEqual(code, TEMP_FAIL, err)
        self.assertIn("states 'buffer' (out/buf) in their out specs need "
                      "8000 bytes", err)
        self.assertIn("--memory-budget of " + BUDGET, err)
        # The previous value, version and sharding, on every read.
        after = self.info("out/buf")
        self.assertEqual(after["version"], before["version"])
        self.assertEqual(after["spec"], before["spec"])
        self.assertFalse(after.get("lost", False))
        np.testing.assert_array_equal(self.get("out/buf"), buf)
        # The workers still hold it: the next job builds on it.
        x2 = RNG.standard_normal(1000)
        code, _, err = self.accumulate("out/buf", x2, "--state-spec", "P('x')")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(self.get("out/buf"), buf + x2)

    def test_a_reshard_that_fits_equals_numpy(self):
        m = RNG.standard_normal((4, 256)).astype(np.float32)
        self.put("out/m", m, "P('x')")
        x = RNG.standard_normal((4, 256)).astype(np.float32)
        code, _, err = self.accumulate(
            "out/m", x, "--state-spec", "P('x')",
            "--state-out-spec", "buffer=P(None, 'x')")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.info("out/m")["spec"], "P(None, 'x')")
        np.testing.assert_array_equal(self.get("out/m"), m + x)
        # Read in that sharding, stored back by rows.
        x2 = RNG.standard_normal((4, 256)).astype(np.float32)
        code, _, err = self.ctl(
            self.c, "run", "--mesh", "x=4", "--fn", "accumulate",
            "--arg", self.file(x2), "--in-spec", "P(None, 'x')",
            "--state", "buffer=@out/m", "--state-spec", "P(None, 'x')",
            "--state-out-spec", "buffer=P('x')", "--out-spec", "P(None, 'x')")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.info("out/m")["spec"], "P('x',)")
        np.testing.assert_array_equal(self.get("out/m"), m + x + x2)

    def test_auto_axes(self):
        # Manual x, auto y: the blocks are equal along y, and each device
        # reads only from those that share its y.
        s = RNG.standard_normal((4, 6))
        self.ok("put", "out/auto", self.file(s), "--mesh", "x=2,y=2",
                "--spec", "P('x')")
        x = RNG.standard_normal((4, 6))
        code, _, err = self.ctl(
            self.c, "run", "--mesh", "x=2,y=2", "--axis-names", "x",
            "--fn", "accumulate", "--arg", self.file(x),
            "--in-spec", "P('x')", "--state", "buffer=@out/auto",
            "--state-spec", "P('x')", "--state-out-spec", "buffer=P(None, 'x')",
            "--out-spec", "P('x')")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.info("out/auto")["spec"], "P(None, 'x')")
        np.testing.assert_array_equal(self.get("out/auto"), s + x)
        # An auto axis in the out spec is refused before anything runs.
        code, _, err = self.ctl(
            self.c, "run", "--mesh", "x=2,y=2", "--axis-names", "x",
            "--fn", "accumulate", "--arg", self.file(x),
            "--in-spec", "P(None, 'x')", "--state", "buffer=@out/auto",
            "--state-spec", "P(None, 'x')",
            "--state-out-spec", "buffer=P('y')", "--out-spec", "P(None, 'x')")
        self.assertEqual(code, DATA_ERR, err)
        self.assertIn("the out_spec of state 'buffer'", err)
        np.testing.assert_array_equal(self.get("out/auto"), s + x)

    def test_a_state_cannot_be_donated(self):
        d = np.ones(8, np.float64)
        self.put("out/d", d, "P('x')")
        code, _, err = self.ctl(
            self.c, "run", "--mesh", "x=4", "--fn", "accumulate",
            "--arg", "@out/d", "--in-spec", "P('x')", "--donate", "0",
            "--state", "buffer=@out/d", "--state-spec", "P('x')",
            "--state-out-spec", "buffer=P()", "--out-spec", "P('x')")
        self.assertEqual(code, DATA_ERR, err)
        self.assertIn("cannot be donated", err)
        self.assertIn("the job also binds it to state 'buffer'", err)
        np.testing.assert_array_equal(self.get("out/d"), d)


if __name__ == "__main__":
    harness.main()
