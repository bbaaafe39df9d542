"""docs/RELIABILITY.md's scenarios as bounded tests with real processes on
127.0.0.1. Each case asserts the status code, the message and the time
bound, and that the cluster serves the next job. The workers run with
--test-functions: `spin` (psum after busy work that stops when the job is
cancelled) and `fail_on` (psum, but one device fails).

Scenario numbers are docs/RELIABILITY.md's. Environment: SHARDMAP_BIN_DIR.
"""
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SHARDCTL = harness.SHARDCTL
RNG = np.random.default_rng(31)


class Base(harness.ClusterTestCase):
    """Clusters, files and jobs for the cases below."""

    scratch_prefix = "shardmap-rel-"

    def cluster(self, n, coordinator_args=(), heartbeat_timeout=1.0,
                worker_args=()):
        return super().cluster(
            n, heartbeat_timeout=heartbeat_timeout,
            coordinator_args=coordinator_args,
            worker_args=["--test-functions", *worker_args])

    def job(self, c, fn, x, kwargs, mesh="x=2", in_spec="P('x')",
            out_spec="P()", extra=()):
        """The shardctl run command line; output in self.out."""
        self.out = os.path.join(self.tmp.name, f"out{self.count}.npy")
        return [SHARDCTL, "run", "--coordinator", c.address, "--mesh", mesh,
                "--fn", fn, "--arg", self.file(x), "--in-spec", in_spec,
                "--out-spec", out_spec, "--kwargs", json.dumps(kwargs),
                *(["--out", self.out] if "--out" not in extra else []),
                *extra]

    def run_job(self, c, *args, **kw):
        t0 = time.monotonic()
        p = subprocess.run(self.job(c, *args, **kw), capture_output=True,
                           text=True, timeout=90)
        return p.returncode, p.stderr, time.monotonic() - t0

    def assert_serves(self, c, n=2):
        """The next job runs at once: psum over every device."""
        x = RNG.standard_normal((4 * n, 3))
        code, err, seconds = self.run_job(
            c, "spin", x, {"axes": "x", "seconds": 0}, mesh=f"x={n}")
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(np.load(self.out),
                                   x.reshape(n, 4, 3).sum(0), rtol=1e-12)
        self.assertLess(seconds, 10)

    def worker_pids(self, c):
        return [w.proc.pid for w in c.workers]

    def assert_failed(self, result, exit_code, status, *fragments, within):
        """`result` = (exit code, stderr, seconds) of a job that must fail
        with `status` (gRPC code name) and `fragments` inside `within` s."""
        code, err, seconds = result
        self.assertEqual(code, exit_code, err)
        self.assertIn(f"error: {status}:", err)
        for f in fragments:
            self.assertIn(f, err)
        self.assertLess(seconds, within, err)

    def assert_idle_then_serves(self, c):
        """No orphan compute on any worker, and the next job runs."""
        idle = harness.wait_until_idle(self.worker_pids(c), timeout=5)
        self.assert_serves(c)
        return idle



class Scenario(Base):

    def test_02_stuck_rank_fails_the_step_by_the_collective_timeout(self):
        # Alive (heartbeating) but stuck in its function: its peers wait in
        # the psum until the collective timeout, then the whole step fails.
        c = self.cluster(2, coordinator_args=["--collective-timeout", "2"])
        result = self.run_job(
            c, "spin", np.ones(4), {"axes": "x", "seconds": 60, "device": 1})
        print(f"\n  stuck rank -> {result[1].strip()} ({result[2]:.1f} s)",
              file=sys.stderr)
        # Device 0 names device 1, which never reached collective #0.
        self.assert_failed(result, 75, "DEADLINE_EXCEEDED",
                           "waiting for device 1", "collective #0",
                           within=10)
        # The stuck rank was cancelled too: no orphan spin.
        self.assert_idle_then_serves(c)

    def test_04_coordinator_killed_mid_job_workers_go_idle(self):
        c = self.cluster(2)
        client = subprocess.Popen(
            self.job(c, "spin", np.ones(4), {"axes": "x", "seconds": 60},
                     extra=["--timeout", "120"]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        harness.wait_until_busy(self.worker_pids(c))
        port = c.address.rsplit(":", 1)[1]
        c.kill_coordinator()
        t0 = time.monotonic()
        _, err = client.communicate(timeout=30)
        self.assert_failed((client.returncode, err, time.monotonic() - t0),
                           69, "UNAVAILABLE", within=5)
        # The workers abort the step when the coordinator's stream dies.
        idle = harness.wait_until_idle(self.worker_pids(c), timeout=5)
        print(f"\n  workers idle {idle:.1f} s after the coordinator died",
              file=sys.stderr)
        c.start_coordinator(port)
        c.wait_for_workers(2)
        self.assert_serves(c)

    def test_05_restart_with_same_address_is_a_new_incarnation(self):
        c = self.cluster(0)
        state_dir = os.path.join(self.tmp.name, "state0")
        c.add_worker("--state-dir", state_dir)
        c.add_worker()
        c.wait_for_workers(2)
        a = RNG.standard_normal((6, 2))
        code, _, err = self.ctl(c, "put", "kept", self.file(a), "--mesh",
                                "x=2", "--spec", "P('x')")
        self.assertEqual(code, 0, err)

        def restart(worker, *extra):
            address = worker.address
            c.kill_worker(worker)
            # Same address, at once: the pool still counts the old
            # incarnation live; the new one replaces it.
            return c.add_worker(*extra, listen=address)

        # With its state directory, the worker rejoins with its block.
        restart(c.workers[0], "--state-dir", state_dir)
        c.wait_for_workers(2)
        got = os.path.join(self.tmp.name, "got.npy")
        code, _, err = self.ctl(c, "get", "kept", "--out", got)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(np.load(got), a)
        # Without it, the array is reported lost, never silently empty.
        restart(c.workers[1])
        c.wait_for_workers(2)
        code, _, err = self.ctl(c, "get", "kept", "--out", got)
        self.assertEqual(code, 69, err)
        self.assertIn("lost", err)
        code, out, err = self.ctl(c, "ls", "--json")
        self.assertEqual(code, 0, err)
        listed = {x["name"]: x for x in json.loads(out)["arrays"]}
        self.assertTrue(listed["kept"]["lost"], out)
        # A job that reads it fails the same way; a new put heals it.
        code, _, err = self.ctl(c, "run", "--mesh", "x=2", "--fn", "identity",
                                "--arg", "@kept", "--in-spec", "P('x')",
                                "--out-spec", "P('x')")
        self.assertEqual(code, 69, err)
        self.assertIn("lost", err)
        code, _, err = self.ctl(c, "put", "kept", self.file(a), "--mesh",
                                "x=2", "--spec", "P('x')", "--overwrite")
        self.assertEqual(code, 0, err)
        self.assert_serves(c)

    def test_09_function_fails_on_one_rank_only(self):
        c = self.cluster(4)
        result = self.run_job(
            c, "fail_on", np.ones((4, 4)), {"axes": ["x", "y"], "device": 1},
            mesh="x=2,y=2", in_spec="P('x', 'y')")
        # The peers blocked in the psum were released by the abort, not by
        # the 30 s collective timeout.
        self.assert_failed(result, 70, "UNKNOWN",
                           "device 1 (mesh coordinates (0, 1)",
                           "fail_on: injected failure on device 1", within=10)
        self.assert_serves(c, 4)

    def test_12_slow_consumer_keeps_the_sender_bounded(self):
        # The receiver stops for 2 s while 32 MiB blocks head its way: the
        # sender waits under flow control instead of queueing the bytes.
        c = self.cluster(2, heartbeat_timeout=10)
        block = 8 << 20  # float32 elements: 32 MiB a device
        x = np.arange(2 * block, dtype=np.float32)
        sender = c.worker_of_device(0).proc.pid
        receiver = c.worker_of_device(1).proc.pid
        for fn, kwargs, want in (
                ("ppermute", {"axes": "x", "perm": [[0, 1]]},
                 np.r_[np.zeros(block, np.float32), x[:block]]),
                ("all_to_all", {"axes": "x", "split_axis": 0,
                                "concat_axis": 0, "tiled": True},
                 x.reshape(2, 2, -1).transpose(1, 0, 2).reshape(-1))):
            base = harness.rss_bytes(sender)
            os.kill(receiver, signal.SIGSTOP)
            try:
                client = subprocess.Popen(
                    self.job(c, fn, x, kwargs, out_spec="P('x')"),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                peak = base
                end = time.monotonic() + 2
                while time.monotonic() < end:
                    peak = max(peak, harness.rss_bytes(sender))
                    time.sleep(0.01)
            finally:
                os.kill(receiver, signal.SIGCONT)
            _, err = client.communicate(timeout=60)
            self.assertEqual(client.returncode, 0, err)
            np.testing.assert_array_equal(np.load(self.out), want)
            grew = (peak - base) / (1 << 20)
            print(f"\n  {fn}: sender RSS +{grew:.0f} MiB over {base >> 20} "
                  f"MiB while the receiver was stopped", file=sys.stderr)
            # Its input and output blocks (64 MiB) and bounded queues.
            self.assertLess(grew, 100, fn)

    def test_13_client_disconnect_reaches_the_workers(self):
        c = self.cluster(2)
        client = subprocess.Popen(
            self.job(c, "spin", np.ones(4), {"axes": "x", "seconds": 60}),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        harness.wait_until_busy(self.worker_pids(c))
        client.kill()  # the connection closes mid-call
        client.wait()
        idle = self.assert_idle_then_serves(c)
        print(f"\n  workers idle {idle:.1f} s after the client left",
              file=sys.stderr)

    def test_14_deadline_shorter_than_the_compute(self):
        c = self.cluster(2)
        old = np.arange(4, dtype=np.float64)
        code, _, err = self.ctl(c, "put", "s", self.file(old), "--mesh",
                                "x=2", "--spec", "P()")
        self.assertEqual(code, 0, err)
        code, out, _ = self.ctl(c, "ls", "--json")
        before = json.loads(out)["arrays"]
        # With a call_id the client may try again (75); without one, a
        # state-changing call that ran out of time may or may not have
        # been applied as far as the client knows (69, not safe to resend).
        self.assert_failed(self.run_job(
            c, "spin", np.ones(8), {"axes": "x", "seconds": 60},
            extra=["--out", "@s", "--overwrite", "--timeout", "1",
                   "--call-id", "deadline-1"]),
            75, "DEADLINE_EXCEEDED", within=5)
        self.assert_idle_then_serves(c)
        self.assert_failed(self.run_job(
            c, "spin", np.ones(8), {"axes": "x", "seconds": 60},
            extra=["--out", "@s", "--overwrite", "--timeout", "1"]),
            69, "DEADLINE_EXCEEDED", "not safe to send again", within=5)
        self.assert_idle_then_serves(c)
        got = os.path.join(self.tmp.name, "got.npy")
        code, _, err = self.ctl(c, "get", "s", "--out", got)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(np.load(got), old)
        code, out, _ = self.ctl(c, "ls", "--json")
        self.assertEqual(json.loads(out)["arrays"], before)

    def test_15_server_maximum_applies_without_a_client_deadline(self):
        c = self.cluster(2, coordinator_args=["--max-job-seconds", "2"])
        self.assert_failed(self.run_job(
            c, "spin", np.ones(4), {"axes": "x", "seconds": 60},
            extra=["--timeout", "31536000"]),  # a year: as good as none
            75, "DEADLINE_EXCEEDED", "passed its deadline of 2s", within=6)
        self.assert_idle_then_serves(c)

    def test_18_two_clients_see_every_update_whole(self):
        # One client adds ones to a resident array sharded over two
        # workers while another reads it: each read is one version, the
        # same count on both shards, and no update is lost.
        c = self.cluster(2)
        code, _, err = self.ctl(c, "put", "acc", self.file(np.zeros(
            (4, 3))), "--mesh", "x=2", "--spec", "P('x')")
        self.assertEqual(code, 0, err)
        ones = self.file(np.ones((4, 3)))
        rounds = 12

        def write(_):
            return self.ctl(c, "run", "--mesh", "x=2", "--fn", "accumulate",
                            "--arg", ones, "--in-spec", "P('x')",
                            "--out-spec", "P('x')", "--state", "buffer=acc",
                            "--state-spec", "buffer=P('x')")[0]

        def read(i):
            path = os.path.join(self.tmp.name, f"read{i}.npy")
            code, _, err = self.ctl(c, "get", "acc", "--out", path)
            self.assertEqual(code, 0, err)
            return np.load(path)

        # Write i and read i are submitted alternately, so reads run while
        # writes are still coming, not after them all.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            writes, reads = [], []
            for i in range(rounds):
                writes.append(pool.submit(write, i))
                reads.append(pool.submit(read, i))
            writes = [f.result() for f in writes]
            reads = [f.result() for f in reads]
            self.assertEqual(writes, [0] * rounds)
        for r in reads:
            self.assertTrue((r == r[0, 0]).all(), r)
            self.assertTrue(0 <= r[0, 0] <= rounds, r)
        np.testing.assert_array_equal(read("last"), rounds * np.ones((4, 3)))


class IdempotencyTest(Base):
    """Scenario 17: a client retries a state-changing call after
    UNAVAILABLE. The reply is cut on its way back (harness.ReplyCutProxy),
    after the coordinator applied the call."""

    def setUp(self):
        super().setUp()
        self.c = self.cluster(2)
        code, _, err = self.ctl(self.c, "put", "acc", self.file(np.zeros(
            (4, 3))), "--mesh", "x=2", "--spec", "P('x')")
        self.assertEqual(code, 0, err)
        self.proxy = harness.ReplyCutProxy(self.c.address)
        self.addCleanup(self.proxy.close)

    def accumulate(self, x, *extra, via=None):
        """accumulate(x) into acc, through `via` (default the proxy); the
        new buffer in self.out."""
        self.out = os.path.join(self.tmp.name, f"out{self.count}.npy")
        p = subprocess.run(
            [SHARDCTL, "run", "--coordinator", via or self.proxy.address,
             "--mesh", "x=2", "--fn", "accumulate", "--arg", self.file(x),
             "--in-spec", "P('x')", "--out-spec", "P('x')", "--state",
             "buffer=acc", "--state-spec", "buffer=P('x')", "--out", self.out,
             *extra], capture_output=True, text=True, timeout=90)
        return p.returncode, p.stderr

    def acc(self):
        path = os.path.join(self.tmp.name, f"acc{self.count}.npy")
        self.count += 1
        code, _, err = self.ctl(self.c, "get", "acc", "--out", path)
        self.assertEqual(code, 0, err)
        return np.load(path)

    def test_17_a_retry_with_a_call_id_is_answered_not_applied_again(self):
        ones = np.ones((4, 3))
        code, err = self.accumulate(ones, "--call-id", "step-1",
                                    "--retries", "6")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.proxy.cut, 1, "the first reply was not cut")
        np.testing.assert_array_equal(np.load(self.out), ones)
        np.testing.assert_array_equal(self.acc(), ones)  # applied once
        # The same call again, straight to the coordinator: the same answer.
        code, err = self.accumulate(ones, "--call-id", "step-1",
                                    via=self.c.address)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(np.load(self.out), ones)
        np.testing.assert_array_equal(self.acc(), ones)
        # The key with other data is refused, and changes nothing.
        code, err = self.accumulate(2 * ones, "--call-id", "step-1",
                                    via=self.c.address)
        self.assertEqual(code, 65, err)
        self.assertIn("INVALID_ARGUMENT", err)
        self.assertIn("call_id 'step-1'", err)
        np.testing.assert_array_equal(self.acc(), ones)
        # A new key is a new call.
        code, err = self.accumulate(ones, "--call-id", "step-2",
                                    via=self.c.address)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(self.acc(), 2 * ones)

    def test_17_retries_make_their_own_call_id(self):
        # --retries alone: shardctl gives the job a call id itself.
        ones = np.ones((4, 3))
        code, err = self.accumulate(ones, "--retries", "6")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.proxy.cut, 1)
        np.testing.assert_array_equal(self.acc(), ones)
        # A put whose reply is lost, retried: put once, listed, readable.
        self.proxy.arm(1)
        x = RNG.standard_normal((4, 6))
        p = subprocess.run(
            [SHARDCTL, "put", "w", self.file(x), "--mesh", "x=2", "--spec",
             "P(None, 'x')", "--retries", "6", "--coordinator",
             self.proxy.address], capture_output=True, text=True, timeout=90)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.proxy.cut, 2)
        path = os.path.join(self.tmp.name, "w.npy")
        code, _, err = self.ctl(self.c, "get", "w", "--out", path)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(np.load(path), x)

    def test_17_without_a_call_id_the_failure_says_not_safe_to_retry(self):
        ones = np.ones((4, 3))
        t0 = time.monotonic()
        code, err = self.accumulate(ones, "--retries", "0")
        self.assertEqual(self.proxy.cut, 1)
        self.assertEqual(code, 69, err)  # not 75, "retry"
        self.assertIn("UNAVAILABLE", err)
        self.assertIn("not safe to send again", err)
        self.assertLess(time.monotonic() - t0, 30)
        # It was applied: a blind resend would have added twice.
        np.testing.assert_array_equal(self.acc(), ones)


    def test_17_a_repeated_delete_with_its_call_id_succeeds(self):
        import grpc  # only here: the other cases go through shardctl

        field = harness.pb_field

        def delete(name, call_id=None):
            request = field(1, name) + (field(2, call_id) if call_id else b"")
            with grpc.insecure_channel(self.c.address) as ch:
                try:
                    ch.unary_unary("/shardmap.v1.Coordinator/DeleteArray")(
                        request, timeout=10, metadata=harness.AUTH_METADATA)
                    return grpc.StatusCode.OK, ""
                except grpc.RpcError as e:
                    return e.code(), e.details()

        self.assertEqual(delete("acc", "rm-1")[0], grpc.StatusCode.OK)
        self.assertEqual(delete("acc", "rm-1")[0], grpc.StatusCode.OK)
        self.assertEqual(delete("acc")[0], grpc.StatusCode.NOT_FOUND)
        code, details = delete("other", "rm-1")
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("delete 'acc'", details)


class InputAuditTest(Base):
    """Gaps the other suites leave in scenarios 8, 20, 24, 25, 27 and 28,
    on one shared cluster."""

    @classmethod
    def setUpClass(cls):
        cls.c = harness.ProcessCluster(4, worker_args=["--test-functions"])

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def npy(self, name, header, data):
        """A .npy file written byte by byte (numpy would not write it)."""
        header += " " * (-(len(header) + 11) % 64) + "\n"
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
                    + header.encode() + data)
        return path

    def identity(self, path, spec="P('x')"):
        got = os.path.join(self.tmp.name, "got.npy")
        p = subprocess.run(
            [SHARDCTL, "run", "--coordinator", self.c.address, "--mesh",
             "x=2", "--fn", "identity", "--arg", path, "--in-spec", spec,
             "--out-spec", spec, "--out", got],
            capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            self.assertEqual(p.stdout, "")  # errors go to stderr only
            return p.returncode, None, p.stderr
        return 0, np.load(got), p.stderr

    def test_08_collective_that_differs_across_ranks(self):
        result = self.run_job(self.c, "mismatch_on", np.ones((4, 4)),
                              {"axes": ["x", "y"], "device": 2},
                              mesh="x=2,y=2", in_spec="P('x', 'y')")
        print(f"\n  mismatch -> {result[1].strip()}", file=sys.stderr)
        # Both fingerprints: float64[2,2] from the others, a scalar from 2.
        self.assert_failed(result, 65, "INVALID_ARGUMENT", "float64[2,2]",
                           "float64[]", within=10)
        self.assert_serves(self.c, 4)

    def test_20_meshes_with_bad_axes(self):
        for mesh, fragment in (("=2", "--mesh"), ("x=-1", "--mesh"),
                               ("x=2,y", "--mesh")):
            with self.subTest(mesh=mesh):
                p = subprocess.run(
                    [SHARDCTL, "run", "--coordinator", self.c.address,
                     "--mesh", mesh, "--fn", "identity", "--arg",
                     self.file(np.zeros(4)), "--in-spec", "P()",
                     "--out-spec", "P()"],
                    capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 64, p.stderr)
                self.assertIn("error: INVALID_ARGUMENT:", p.stderr)
                self.assertIn(fragment, p.stderr)
                self.assertEqual(p.stdout, "")
        # A smaller mesh runs on a subset of the workers.
        self.assert_serves(self.c, 3)

    def test_24_25_byte_orders_layouts_and_refused_files(self):
        values = np.arange(6, dtype=np.int32).reshape(3, 2) * 1000 - 7
        big = self.npy("big.npy", "{'descr': '>f8', 'fortran_order': False,"
                       " 'shape': (2, 3), }",
                       values.T.astype(">f8").tobytes())
        code, got, err = self.identity(big)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, values.T.astype(np.float64))
        fortran = self.npy("fortran.npy", "{'descr': '<i4', 'fortran_order':"
                           " True, 'shape': (2, 3), }",
                           values.tobytes())  # column-major of values.T
        code, got, err = self.identity(fortran)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, values.T)
        obj = os.path.join(self.tmp.name, "object.npy")
        np.save(obj, np.array([{"a": 1}, None], dtype=object),
                allow_pickle=True)
        code, _, err = self.identity(obj, "P()")
        self.assertEqual(code, 65, err)
        self.assertIn("object.npy", err)
        self.assertIn("never unpickles", err)
        huge = self.npy("huge.npy", "{'descr': '<f4', 'fortran_order': False,"
                        " 'shape': (2,), }" + " " * 20000, b"\0" * 8)
        code, _, err = self.identity(huge)
        self.assertEqual(code, 65, err)
        self.assertIn("huge.npy", err)
        self.assertIn("exceeds the limit of 10000 bytes", err)
        short = self.npy("short.npy", "{'descr': '<f8', 'fortran_order':"
                         " False, 'shape': (4,), }", b"\0" * 24)
        code, _, err = self.identity(short)
        self.assertEqual(code, 65, err)
        self.assertIn("short.npy", err)

    def test_27_psum_propagates_nan_and_keeps_shapes(self):
        x = np.array([[1.0, np.nan], [np.inf, 2.0], [3.0, 4.0],
                      [-np.inf, 5.0]])
        code, err, _ = self.run_job(self.c, "spin", x,
                                    {"axes": "x", "seconds": 0})
        self.assertEqual(code, 0, err)
        got = np.load(self.out)
        # NaN + 4 and inf + -inf are NaN; the rest add up.
        np.testing.assert_array_equal(got, [[4.0, np.nan], [np.nan, 7.0]])
        code, err, _ = self.run_job(self.c, "spin", np.zeros((4, 0)),
                                    {"axes": "x", "seconds": 0})
        self.assertEqual(code, 0, err)
        self.assertEqual(np.load(self.out).shape, (2, 0))

    def test_28_missing_names_and_shape_changes(self):
        for command in ("rm", "get"):
            code, _, err = self.ctl(self.c, command, "never/put")
            self.assertEqual(code, 65, err)
            self.assertIn("error: NOT_FOUND:", err)
            self.assertIn("'never/put'", err)
        a = self.file(np.ones((4, 2)))
        code, _, err = self.ctl(self.c, "put", "p28", a, "--mesh", "x=2",
                                "--spec", "P('x')")
        self.assertEqual(code, 0, err)
        # Another dtype (resident_cli_test covers another shape).
        code, _, err = self.ctl(self.c, "put", "p28", self.file(
            np.ones((4, 2), np.int32)), "--mesh", "x=2", "--spec", "P('x')")
        self.assertEqual(code, 73, err)
        self.assertIn("--overwrite", err)
        got = os.path.join(self.tmp.name, "p28.npy")
        code, _, err = self.ctl(self.c, "get", "p28", "--out", got)
        self.assertEqual(code, 0, err)
        self.assertEqual(np.load(got).dtype, np.float64)
        # The same shape and dtype in another sharding, by put or by a
        # job's stored output: refused without --overwrite, naming both.
        b = np.arange(8.0).reshape(4, 2)
        code, _, err = self.ctl(self.c, "put", "p28", self.file(b), "--mesh",
                                "x=2", "--spec", "P(None, 'x')")
        self.assertEqual(code, 73, err)
        self.assertIn("error: FAILED_PRECONDITION:", err)
        self.assertIn("P('x',)", err)
        self.assertIn("P(None, 'x')", err)
        self.assertIn("--overwrite", err)
        p = subprocess.run(
            [SHARDCTL, "run", "--coordinator", self.c.address, "--mesh",
             "x=2", "--fn", "identity", "--arg", self.file(b), "--in-spec",
             "P()", "--out", "@p28", "--out-spec", "P()"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 73, p.stderr)
        self.assertIn("P()", p.stderr)
        # Written out in full, the same sharding is no change of layout.
        code, _, err = self.ctl(self.c, "put", "p28", self.file(b), "--mesh",
                                "x=2", "--spec", "P('x', None)")
        self.assertEqual(code, 0, err)
        code, _, err = self.ctl(self.c, "put", "p28", self.file(b), "--mesh",
                                "x=2", "--spec", "P(None, 'x')",
                                "--overwrite")
        self.assertEqual(code, 0, err)
        code, out, err = self.ctl(self.c, "ls", "p28", "--json")
        self.assertEqual(code, 0, err)
        info = json.loads(out)["arrays"][0]
        self.assertEqual(info["spec"], "P(None, 'x')")
        code, _, err = self.ctl(self.c, "get", "p28", "--out", got)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(np.load(got), b)


if __name__ == "__main__":
    unittest.main(verbosity=2)
