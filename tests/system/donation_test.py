"""Donated arguments end to end (JobSpec.donate_args, shardctl run
--donate): a resident array updated in place over several steps (checked
against numpy, its version moving on each step), the refusals (an
argument that is not resident, one stored back in another sharding or not
at all), and a donated job that fails leaving the array lost, never at an
old version, until it is put again.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


class DonationTest(harness.ClusterTestCase):

    @classmethod
    def setUpClass(cls):
        cls.c = harness.ProcessCluster(2)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def put(self, name, array, spec="P('x')"):
        code, _, err = self.ctl(self.c, "put", name, self.file(array),
                                "--mesh", "x=2", "--spec", spec)
        self.assertEqual(code, 0, err)

    def get(self, name):
        out = self.path(f"got-{self.count}.npy")
        code, _, err = self.ctl(self.c, "get", name, "--out", out)
        return code, (np.load(out) if code == 0 else None), err

    def listed(self, name):
        code, out, err = self.ctl(self.c, "ls", name, "--json")
        self.assertEqual(code, 0, err)
        return {a["name"]: a for a in json.loads(out)["arrays"]}[name]

    def scale(self, name, alpha, *extra, out_spec="P('x')"):
        return self.ctl(self.c, "run", "--fn", "scale", "--kwargs",
                        json.dumps({"alpha": alpha}), "--arg", f"@{name}",
                        "--in-spec", "P('x')", "--out", f"@{name}",
                        "--out-spec", out_spec, *extra)

    def test_donated_steps_update_the_array_in_place(self):
        x = np.random.default_rng(3).standard_normal((8, 6))
        self.put("don/w", x)
        versions = [int(self.listed("don/w")["version"])]
        for _ in range(3):
            code, _, err = self.scale("don/w", 1.5, "--donate", "0")
            self.assertEqual(code, 0, err)
            versions.append(int(self.listed("don/w")["version"]))
        self.assertEqual(versions, sorted(set(versions)), versions)
        code, got, err = self.get("don/w")
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(got, x * 1.5 ** 3, rtol=1e-12)
        self.assertFalse(self.listed("don/w")["lost"])
        # A job without --donate after donated ones reads the same array.
        code, _, err = self.scale("don/w", 2.0)
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(self.get("don/w")[1], x * 1.5 ** 3 * 2,
                                   rtol=1e-12)

    def test_only_a_resident_argument_can_be_donated(self):
        code, _, err = self.ctl(
            self.c, "run", "--mesh", "x=2", "--fn", "scale", "--kwargs",
            '{"alpha": 2}', "--arg", self.file(np.ones((4, 2))),
            "--in-spec", "P('x')", "--out", "@don/file", "--out-spec",
            "P('x')", "--donate", "0")
        self.assertEqual(code, 65, err)
        self.assertIn("donate_args: argument 0 is not a resident array", err)
        code, _, _ = self.get("don/file")
        self.assertNotEqual(code, 0)  # nothing was stored

    def test_a_donated_array_must_be_stored_back_as_it_is(self):
        x = np.arange(16.0).reshape(8, 2)
        self.put("don/keep", x)
        code, _, err = self.scale("don/keep", 2.0, "--donate", "0",
                                  out_spec="P()")
        self.assertEqual(code, 65, err)
        self.assertIn("argument 0 ('don/keep') cannot be donated", err)
        self.assertIn("output 0 stores it sharded P()", err)
        code, _, err = self.ctl(
            self.c, "run", "--fn", "scale", "--kwargs", '{"alpha": 2}',
            "--arg", "@don/keep", "--in-spec", "P('x')", "--out-spec",
            "P('x')", "--out", self.path("r.npy"), "--donate", "0")
        self.assertEqual(code, 65, err)
        self.assertIn("no output stores it back", err)
        code, _, err = self.ctl(
            self.c, "run", "--fn", "add", "--arg", "@don/keep", "--arg",
            "@don/keep", "--in-spec", "P('x')", "--out", "@don/keep",
            "--out-spec", "P('x')", "--donate", "0")
        self.assertEqual(code, 65, err)
        self.assertIn("also reads it as argument 1", err)
        # Refused before anything ran: the array is as it was.
        np.testing.assert_array_equal(self.get("don/keep")[1], x)

    def test_a_failed_donated_job_loses_the_array(self):
        x = np.arange(8, dtype=np.int32).reshape(4, 2)
        self.put("don/lost", x)
        version = int(self.listed("don/lost")["version"])
        # int32 * 0.5 is float32: storing it over the int32 array fails
        # after the workers consumed their blocks.
        code, _, err = self.scale("don/lost", 0.5, "--donate", "0")
        self.assertNotEqual(code, 0, err)
        self.assertIn(f"donated argument 'don/lost' (version {version}) is "
                      "lost", err)
        code, _, err = self.get("don/lost")
        self.assertNotEqual(code, 0, err)
        self.assertIn("lost", err)
        self.assertIn("donated to job-", err)
        self.assertTrue(self.listed("don/lost")["lost"])
        # A new put heals it.
        self.put("don/lost", 3 * x)
        code, got, err = self.get("don/lost")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, 3 * x)


class DonationStateDirTest(harness.ClusterTestCase):

    def test_a_failed_donated_job_leaves_nothing_to_come_back(self):
        """With --state-dir: donated steps keep one file per worker, and a
        failed donated job removes the array's files, so a worker
        restarted with its directory does not bring the old version back."""
        c = self.cluster(0)
        dirs = [self.path(f"state{i}") for i in range(2)]
        for d in dirs:
            c.add_worker("--state-dir", d)
        c.wait_for_workers(2)
        x = np.arange(8, dtype=np.int32).reshape(4, 2)

        def files():
            return sorted(os.path.relpath(os.path.join(root, f), d)
                          for d in dirs for root, _, fs in os.walk(d)
                          for f in fs if f.endswith(".npy"))

        code, _, err = self.ctl(c, "put", "sd/w", self.file(x), "--mesh",
                                "x=2", "--spec", "P('x')")
        self.assertEqual(code, 0, err)
        step = ("run", "--fn", "scale", "--arg", "@sd/w", "--in-spec",
                "P('x')", "--out", "@sd/w", "--out-spec", "P('x')",
                "--donate", "0", "--kwargs")
        code, _, err = self.ctl(c, *step, '{"alpha": 3}')
        self.assertEqual(code, 0, err)
        self.assertEqual(len(files()), 2, files())  # one block per worker
        code, _, err = self.ctl(c, *step, '{"alpha": 0.5}')  # int32 -> float
        self.assertNotEqual(code, 0, err)
        self.assertIn("is lost", err)
        self.assertEqual(files(), [])
        c.kill_worker(c.workers[1])
        c.add_worker("--state-dir", dirs[1])
        c.wait_for_workers(2)
        code, _, err = self.ctl(c, "get", "sd/w", "--out", self.path("g.npy"))
        self.assertNotEqual(code, 0)
        self.assertIn("lost", err)


if __name__ == "__main__":
    harness.main()
