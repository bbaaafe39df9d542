"""A coordinator killed (-9) and restarted while resident arrays exist
(docs/RELIABILITY.md scenario 32), with real processes on 127.0.0.1: the
workers re-register and report their blocks; every array reads back
bit-exact (same dtype, shape, mesh, spec and version) or is listed LOST
naming its missing blocks; never stale, never silently gone; a new put of
a name is what a get returns. (Under load: restart_load_test.py.)

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import os
import socket
import sys
import time
import unittest
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import storage_test  # noqa: E402
from restart_cluster import (LAYOUT, REPORT_TIMEOUT, Cluster,  # noqa: E402
                             paused)

RNG = np.random.default_rng(32)


class CoordinatorRestartTest(unittest.TestCase):

    def setUp(self):
        self.c = Cluster(4, state_dirs=1)

    def tearDown(self):
        self.c.close()

    def test_every_array_reads_back_bit_exact(self):
        c = self.c
        arrays = {
            "a": (np.arange(8, dtype=np.float32), "x=4", "P('x')"),
            "m/b": (RNG.integers(-2**40, 2**40, (6, 4)).astype(np.int64),
                    "x=2,y=2", "P('x', 'y')"),
            "c": (RNG.standard_normal((5, 3)), "x=2", "P()"),
            "d": (RNG.integers(0, 100, (4, 8)).astype(np.int32), "x=2,y=2",
                  "P(None, ('y', 'x'))"),
            "e": (RNG.standard_normal((2, 6)).astype(np.float32), "x=1",
                  "P()"),
        }
        for name, (value, mesh, spec) in arrays.items():
            code, _, err = c.put(name, value, mesh, spec)
            self.assertEqual(code, 0, err)
        # A state written by a job, too.
        zeros = np.zeros((4, 3), np.float64)
        code, _, err = c.put("s", zeros, "x=2", "P('x')")
        self.assertEqual(code, 0, err)
        step = RNG.standard_normal((4, 3))
        code, _, err = c.ctl("run", "--mesh", "x=2", "--fn", "accumulate",
                             "--arg", c.file(step), "--in-spec", "P('x')",
                             "--out-spec", "P('x')", "--state", "buffer=s",
                             "--state-spec", "buffer=P('x')")
        self.assertEqual(code, 0, err)
        arrays["s"] = (step, "x=2", "P('x')")
        before = c.ls()
        self.assertEqual(sorted(before), sorted(arrays))

        c.restart_coordinator(4)
        after = c.wait_listed(list(arrays))
        for name, (value, _, _) in arrays.items():
            with self.subTest(name=name):
                self.assertEqual({k: after[name][k] for k in LAYOUT},
                                 {k: before[name][k] for k in LAYOUT})
                code, got, err = c.get(name)
                self.assertEqual(code, 0, err)
                self.assertEqual(got.dtype, value.dtype)
                np.testing.assert_array_equal(got, value)

        # The new put is what a get returns (it used to be the old data).
        new = np.arange(100, 108, dtype=np.float32)
        code, _, err = c.put("a", new, "x=4", "P('x')")
        self.assertEqual(code, 0, err)
        code, got, err = c.get("a")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, new)
        self.assertGreater(c.ls()["a"]["version"], before["a"]["version"])
        # So is a job's write of the state.
        code, _, err = c.ctl("run", "--mesh", "x=2", "--fn", "accumulate",
                             "--arg", c.file(step), "--in-spec", "P('x')",
                             "--out-spec", "P('x')", "--state", "buffer=s",
                             "--state-spec", "buffer=P('x')")
        self.assertEqual(code, 0, err)
        code, got, err = c.get("s")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, step + step)

        # A second restart: the versions issued after the first one still
        # win over anything kept from before it.
        c.restart_coordinator(4)
        c.wait_listed(list(arrays))
        code, got, err = c.get("a")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, new)

    def test_a_restart_whose_port_was_taken_meanwhile_waits_for_it(self):
        # Between the kill and the restart another process takes the port
        # (here a plain listening socket); it lets go once the restart has
        # found the port taken. The restart then starts the coordinator at
        # its address, and the workers come back to it.
        c = self.c
        code, _, err = c.put("a", np.arange(4, dtype=np.int32), "x=1", "P()")
        self.assertEqual(code, 0, err)
        port = int(c.address.rsplit(":", 1)[1])
        c.kill_coordinator()
        squatter = socket.create_server(("127.0.0.1", port))
        probes = []
        real_port_taken = harness.port_taken

        def port_taken(address):
            taken = real_port_taken(address)
            probes.append(taken)
            if taken:
                squatter.close()
            return taken

        with mock.patch.object(harness, "port_taken", port_taken):
            c.start_coordinator(port)
        squatter.close()
        self.assertEqual(probes[0], True, probes)
        self.assertEqual(c.address, f"127.0.0.1:{port}")
        c.wait_for_workers(4, timeout=REPORT_TIMEOUT)
        c.wait_listed(["a"])

    def test_an_array_whose_holder_died_meanwhile_is_lost(self):
        c = self.c
        whole = RNG.standard_normal((4, 2))
        part = np.arange(16, dtype=np.int32).reshape(8, 2)
        code, _, err = c.put("whole", whole, "x=2", "P('x')")
        self.assertEqual(code, 0, err)
        code, _, err = c.put("part", part, "x=4", "P('x')")
        self.assertEqual(code, 0, err)
        # Devices go to workers in registration order: device 3 of "part"
        # is on a worker "whole" does not use.
        holder = c.worker_of_device(3)
        port = c.address.rsplit(":", 1)[1]
        c.kill_coordinator()
        c.kill_worker(holder)
        c.start_coordinator(port)
        c.wait_for_workers(3, timeout=REPORT_TIMEOUT)
        listed = c.wait_listed(["whole"])
        code, got, err = c.get("whole")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, whole)
        # Listed LOST, never silently gone; reading it names the block.
        self.assertIn("part", listed)
        self.assertTrue(listed["part"]["lost"], listed)
        code, out, err = c.ctl("ls")
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"part.*LOST")
        code, _, err = c.get("part")
        self.assertEqual(code, 69, err)
        self.assertIn("lost", err)
        self.assertIn("device 3 (of 4", err)
        # A new put heals it.
        code, _, err = c.put("part", part + 1, "x=2", "P('x')", "--overwrite")
        self.assertEqual(code, 0, err)
        code, got, err = c.get("part")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, part + 1)

    def test_a_put_before_a_late_worker_reports_wins(self):
        c = self.c
        old = np.arange(8, dtype=np.float32)
        code, _, err = c.put("p", old, "x=4", "P('x')")
        self.assertEqual(code, 0, err)
        code, _, err = c.put("q", old, "x=4", "P('x')")
        self.assertEqual(code, 0, err)
        # The worker with a state directory is down while the coordinator
        # restarts: its blocks are missing, and it comes back late.
        keeper = c.workers[0]
        device = [w["address"] for w in harness.status(c.address)[
            "workers"]].index(keeper.address)
        state_dir = os.path.join(c.tmp.name, "state0")
        port = c.address.rsplit(":", 1)[1]
        c.kill_coordinator()
        c.kill_worker(keeper)
        c.start_coordinator(port)
        c.wait_for_workers(3, timeout=REPORT_TIMEOUT)
        code, _, err = c.get("p")
        self.assertEqual(code, 69, err)
        self.assertIn(f"device {device} (of 4", err)
        # p is written anew meanwhile, on the workers there are.
        new = np.arange(100, 104, dtype=np.float32)
        code, _, err = c.put("p", new, "x=2", "P('x')", "--overwrite")
        self.assertEqual(code, 0, err)
        # The late worker's blocks: p's is older than the new put and is
        # dropped (from its state directory too); q's completes q.
        c.add_worker("--state-dir", state_dir)
        c.wait_for_workers(4, timeout=REPORT_TIMEOUT)
        c.wait_listed(["p", "q"])
        self.assertReads("p", new)
        self.assertReads("q", old)
        kept = os.path.join(state_dir, "arrays")
        end = time.monotonic() + REPORT_TIMEOUT
        while "p" in os.listdir(kept) and time.monotonic() < end:
            time.sleep(0.05)
        self.assertEqual(sorted(os.listdir(kept)), ["q"])


    def test_former_holders_registering_first_bring_back_nothing(self):
        # Devices go to workers in registration order, which a restart
        # reshuffles, so a write after one lands on other workers than the
        # array's. The former holders must not keep their blocks: after a
        # later restart that hears from them first, the older version was
        # served (and writes built on it) until the new holders reported.
        c = self.c
        code, _, err = c.put("s", np.zeros((4, 2), np.int64), "x=2", "P('x')")
        self.assertEqual(code, 0, err)
        # Registered at the same time, on the same workers: it shows when
        # the former holders' reports are in.
        marker = RNG.standard_normal((4, 2))
        code, _, err = c.put("marker", marker, "x=2", "P('x')")
        self.assertEqual(code, 0, err)
        former = [c.worker_of_device(d) for d in range(2)]
        others = [w for w in c.workers if w not in former]
        # A restart with the holders stopped: they register last, and the
        # next job runs on the others.
        with paused(former):
            c.restart_coordinator(2)
        c.wait_for_workers(4, timeout=REPORT_TIMEOUT)
        c.wait_listed(["s", "marker"])
        self.assertEqual({c.worker_of_device(d) for d in range(2)},
                         set(others))
        step = np.ones((4, 2), np.int64)
        code, _, err = c.ctl("run", "--mesh", "x=2", "--fn", "accumulate",
                             "--arg", c.file(step), "--in-spec", "P('x')",
                             "--out-spec", "P('x')", "--state", "buffer=s",
                             "--state-spec", "buffer=P('x')")
        self.assertEqual(code, 0, err)
        # A restart with the new holders stopped: the former ones report
        # first. "s" is not there until the new holders report, never
        # at its older version.
        with paused(others):
            c.restart_coordinator(2)
            listed = c.wait_listed(["marker"])
            self.assertTrue("s" not in listed or listed["s"]["lost"], listed)
            code, got, err = c.get("s")
            self.assertNotEqual(code, 0, f"stale: {got}")
        c.wait_for_workers(4, timeout=REPORT_TIMEOUT)
        c.wait_listed(["s", "marker"])
        self.assertReads("s", step)
        self.assertReads("marker", marker)

    def assertReads(self, name, value):
        """`get name` succeeds and gives `value`."""
        code, got, err = self.c.get(name)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, value)


class UncommittedWriteTest(unittest.TestCase):
    """A write that one worker cannot persist is not committed (scenario
    36), and the worker that did apply it drops it again, from memory and
    from its state directory: neither a coordinator restart (scenario 32)
    nor a restart of every process brings back anything but the version
    that was acknowledged."""

    def setUp(self):
        self.c = Cluster(0)
        self.state = [os.path.join(self.c.tmp.name, f"state{i}")
                      for i in range(2)]

    def tearDown(self):
        self.c.close()

    def test_the_acknowledged_version_survives_every_restart(self):
        c = self.c
        c.add_worker("--state-dir", self.state[0])
        c.add_worker("--state-dir", self.state[1],
                     preexec_fn=storage_test.limit_file_size(64 << 10))
        c.wait_for_workers(2)
        small = RNG.standard_normal((16, 4))
        code, _, err = c.put("w", small, "x=2", "P('x')")
        self.assertEqual(code, 0, err)
        before = c.ls()["w"]
        big = RNG.standard_normal((64 << 10, 2))  # 512 KiB per block
        code, _, err = c.put("w", big, "x=2", "P('x')", "--overwrite")
        self.assertEqual(code, 75, err)
        self.assertIn("not committed", err)
        self.assertIn("File too large", err)

        c.restart_coordinator(2)
        after = c.wait_listed(["w"])
        self.assertEqual({k: after["w"][k] for k in LAYOUT},
                         {k: before[k] for k in LAYOUT})
        code, got, err = c.get("w")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, small)

        # Every process killed and started again on its state directory.
        port = c.address.rsplit(":", 1)[1]
        c.kill_coordinator()
        c.kill_workers()
        c.start_coordinator(port)
        for d in self.state:
            c.add_worker("--state-dir", d)
        c.wait_for_workers(2, timeout=REPORT_TIMEOUT)
        after = c.wait_listed(["w"])
        self.assertEqual({k: after["w"][k] for k in LAYOUT},
                         {k: before[k] for k in LAYOUT})
        code, got, err = c.get("w")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, small)


if __name__ == "__main__":
    unittest.main()
