"""docs/RELIABILITY.md, scenario 19: a cluster left idle, then a call.

Between jobs, the coordinator's channels to the workers and the workers'
peer channels sit idle with keepalive pings going both ways (core/
keepalive.h). If a server allowed pings less often than an idle client
sends them, it would answer with a too_many_pings GOAWAY and the next job
would fail or wait for a reconnect. The cluster runs a collective, idles
for SHARDMAP_IDLE_SECONDS (default 70: two of a client's ping periods,
seven of a server's), and runs it again: the job succeeds at once, no
process logged a GOAWAY, and no worker registered again.
The full scenario (over 5 minutes) is SHARDMAP_IDLE_SECONDS=330.
"""
import os
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

IDLE_SECONDS = float(os.environ.get("SHARDMAP_IDLE_SECONDS", "70"))


class IdleTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="shardmap-idle-")
        self.addCleanup(self.tmp.cleanup)
        self.log = open(os.path.join(self.tmp.name, "cluster.log"), "w+")
        self.addCleanup(self.log.close)
        # gRPC core logs a too_many_pings GOAWAY at ERROR; keep that level.
        os.environ["GRPC_VERBOSITY"] = "ERROR"
        self.c = harness.ProcessCluster(4, stderr=self.log)
        self.addCleanup(self.c.close)

    def psum(self, x):
        out = os.path.join(self.tmp.name, "out.npy")
        arg = os.path.join(self.tmp.name, "x.npy")
        np.save(arg, x)
        t0 = time.monotonic()
        p = subprocess.run(
            [harness.SHARDCTL, "run", "--coordinator", self.c.address,
             "--mesh", "x=4", "--fn", "psum", "--arg", arg, "--in-spec",
             "P('x')", "--out-spec", "P()", "--kwargs", '{"axes": "x"}',
             "--out", out, "--timeout", "30"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        np.testing.assert_allclose(np.load(out), x.reshape(4, -1).sum(0),
                                   rtol=1e-12)
        return time.monotonic() - t0

    def workers(self):
        return sorted((w["id"], w["address"])
                      for w in harness.status(self.c.address)["workers"])

    def test_19_a_call_after_idling_succeeds_without_goaway(self):
        rng = np.random.default_rng(19)
        self.psum(rng.standard_normal(4 * 1024))
        before = self.workers()
        time.sleep(IDLE_SECONDS)
        seconds = self.psum(rng.standard_normal(4 * 1024))
        # A reconnect after a GOAWAY would cost a backoff of a second or
        # more; a process start is a few hundred ms on a loaded machine.
        self.assertLess(seconds, 5)
        self.assertEqual(self.workers(), before,
                         "a worker registered again while the cluster idled")
        self.log.flush()
        self.log.seek(0)
        text = self.log.read()
        self.assertNotIn("too_many_pings", text)
        self.assertNotIn("GOAWAY", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
