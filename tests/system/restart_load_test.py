"""The coordinator killed (-9) and restarted twice under load from 4
clients (docs/RELIABILITY.md scenario 32): every state reads back with
every acknowledged step, or is LOST; never stale.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import os
import sys
import threading
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restart_cluster import Cluster  # noqa: E402


class CoordinatorRestartUnderLoadTest(unittest.TestCase):
    """Clients keep putting, getting and running jobs with state while
    the coordinator is killed and restarted. Each client owns its names,
    so what a get may return is known: never an older value than the last
    acknowledged write (only that one, or a later write whose answer the
    restart cut off), or LOST."""

    CLIENTS = 4
    RESTARTS = 2

    def setUp(self):
        self.c = Cluster(4, state_dirs=1)

    def tearDown(self):
        self.c.close()

    def client(self, t, stop, log):
        """Client t's loop: put its array with value i, get it, accumulate
        ones into its state. `log` gets what was acknowledged."""
        c = self.c
        name, state = f"load/a{t}", f"load/s{t}"
        one = np.ones((4, 2), np.int64)
        mine = log[t]
        i = 0
        while not stop.is_set() or mine["after_restart"] < 5:
            i += 1
            mine["attempted"] = i
            code, _, err = c.put(name, np.full((8,), i, np.int64), "x=4",
                                 "P('x')")
            if code == 0:
                mine["acked"] = i
            code, got, err = c.get(name)
            if code == 0:
                # Never older than the last acknowledged put.
                v = int(got[0])
                if not (np.all(got == v) and mine["acked"] <= v <= i):
                    mine["errors"].append(f"get {name} gave {got} after "
                                          f"put {mine['acked']} acked")
            path = c.file(one)
            mine["steps_tried"] += 1
            code, _, err = c.ctl("run", "--mesh", "x=2", "--fn", "accumulate",
                                 "--arg", path, "--in-spec", "P('x')",
                                 "--out-spec", "P('x')", "--state",
                                 f"buffer={state}", "--state-spec",
                                 "buffer=P('x')")
            if code == 0:
                mine["steps_acked"] += 1
            if stop.is_set():
                mine["after_restart"] += 1

    def test_every_array_is_acknowledged_data_or_lost(self):
        c = self.c
        for t in range(self.CLIENTS):
            code, _, err = c.put(f"load/s{t}", np.zeros((4, 2), np.int64),
                                 "x=2", "P('x')")
            self.assertEqual(code, 0, err)
        log = [{"attempted": 0, "acked": 0, "steps_tried": 0,
                "steps_acked": 0, "after_restart": 0, "errors": []}
               for _ in range(self.CLIENTS)]
        restarted = threading.Event()
        threads = [threading.Thread(target=self.client,
                                    args=(t, restarted, log))
                   for t in range(self.CLIENTS)]
        for th in threads:
            th.start()
        # Twice: let every client get some more writes in, then kill the
        # coordinator mid-flight.
        for _ in range(self.RESTARTS):
            goal = min(m["acked"] for m in log) + 3
            end = time.monotonic() + 60
            while (min(m["acked"] for m in log) < goal
                   and time.monotonic() < end):
                time.sleep(0.05)
            c.restart_coordinator(4)
        restarted.set()
        for th in threads:
            th.join(timeout=300)
            self.assertFalse(th.is_alive())
        listed = c.ls()

        def check(name, low, high):
            """1 if `name` is listed LOST (and reads fail so), else 0 once
            it read back as one value in [low, high] everywhere."""
            self.assertIn(name, listed)
            code, got, err = c.get(name)
            if listed[name]["lost"]:
                self.assertEqual(code, 69, err)
                return 1
            self.assertEqual(code, 0, err)
            self.assertTrue(np.all(got == got.flat[0]), got)
            self.assertGreaterEqual(int(got.flat[0]), low)
            self.assertLessEqual(int(got.flat[0]), high)
            return 0

        lost = 0
        for t, mine in enumerate(log):
            with self.subTest(client=t):
                self.assertEqual(mine["errors"], [])
                # The last acknowledged put, or a later one whose answer
                # the restart cut off.
                lost += check(f"load/a{t}", mine["acked"], mine["attempted"])
                # Every acknowledged step is in; of the others, a step
                # whose answer the restart cut off may be too.
                lost += check(f"load/s{t}", mine["steps_acked"],
                              mine["steps_tried"])
        print(f"\n  {sum(m['attempted'] for m in log)} puts, "
              f"{sum(m['steps_tried'] for m in log)} jobs; {lost} arrays "
              f"lost", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
