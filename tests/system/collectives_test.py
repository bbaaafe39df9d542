"""Collectives end to end: real coordinator and worker processes on
127.0.0.1, every built-in collective over 1, 2 and 3 axes of a 2x2x2 mesh
(tuples in both orders), checked against the numpy simulation in
shardmap_ref.py; the composites against plain numpy matmuls; concurrent
clients; a worker killed in the middle of a psum. CTest runs the suite
twice: with shared memory between the workers (the default on one host)
and over gRPC (SHARDMAP_NO_SHM=1).

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import concurrent.futures
import json
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
import shardmap_ref as ref  # noqa: E402

SHARDCTL = harness.SHARDCTL
MESH = "x=2,y=2,z=2"
ALL = "P(('x', 'y', 'z'))"
AXES = [["x"], ["y"], ["z"], ["x", "y"], ["y", "x"], ["z", "x"],
        ["x", "y", "z"], ["z", "y", "x"]]
RNG = np.random.default_rng(7)

CLUSTER = None
ADDRESS = None
TMP = None
_count = [0]


def setUpModule():
    global CLUSTER, ADDRESS, TMP
    TMP = tempfile.TemporaryDirectory(prefix="shardmap-coll-test-")
    CLUSTER = harness.UpCluster(workers=8)
    ADDRESS = CLUSTER.address


def tearDownModule():
    CLUSTER.close()
    TMP.cleanup()


def path(kind):
    _count[0] += 1
    return os.path.join(TMP.name, f"{kind}{_count[0]}.npy")


def run(fn, args, in_specs, out_spec, kwargs, mesh=MESH, address=None,
        timeout=120):
    cmd = [SHARDCTL, "run", "--coordinator", address or ADDRESS, "--mesh",
           mesh, "--fn", fn, "--kwargs", json.dumps(kwargs)]
    for a in args:
        p = path("in")
        np.save(p, a)
        cmd += ["--arg", p]
    for s in in_specs:
        cmd += ["--in-spec", s]
    out = path("out")
    cmd += ["--out", out, "--out-spec", out_spec]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, (np.load(out) if p.returncode == 0 else None), p.stderr


def rand(shape, dtype):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-20, 20, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def size(axes):
    return 2 ** len(axes)


class CollectivesTest(unittest.TestCase):

    def check(self, fn, collective, x, kwargs, in_spec=ALL, out_spec=ALL,
              mesh=MESH, address=None):
        code, got, err = run(fn, [x], [in_spec], out_spec, kwargs, mesh,
                             address)
        self.assertEqual(code, 0, f"{fn} {kwargs}: {err}")
        kw = dict(kwargs)
        want = ref.shard_map_collective(
            collective, ref.parse_mesh(mesh), ref.parse_spec(in_spec),
            ref.parse_spec(out_spec), x, **kw)
        self.assertEqual(got.shape, want.shape, f"{fn} {kwargs}")
        self.assertEqual(got.dtype, want.dtype, f"{fn} {kwargs}")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{fn} {kwargs}")

    def test_reductions(self):
        for axes in AXES:
            for dtype in (np.float32, np.int32):
                x = rand((32, 5), dtype)
                with self.subTest(axes=axes, dtype=dtype):
                    self.check("psum", ref.c_psum, x, {"axes": axes})
                    self.check("pmax", ref.c_pmax, x, {"axes": axes})
                    self.check("pmin", ref.c_pmin, x, {"axes": axes})
                    self.check("pmean", ref.c_pmean, x, {"axes": axes})

    def test_psum_of_replicated_value_counts_every_copy(self):
        x = rand((4, 3), np.float64)
        # Replicated over everything: psum over all axes is 8 * x.
        code, got, err = run("psum", [x], ["P()"], "P()",
                             {"axes": ["x", "y", "z"]})
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(got, 8 * x)

    def test_all_gather(self):
        for axes in AXES:
            x = rand((32, 6), np.float64)
            for axis, tiled in ((0, False), (1, True), (-1, False), (0, True)):
                with self.subTest(axes=axes, axis=axis, tiled=tiled):
                    self.check("all_gather", ref.c_all_gather, x,
                               {"axes": axes, "axis": axis, "tiled": tiled})

    def test_psum_scatter(self):
        for axes in AXES:
            n = size(axes)
            with self.subTest(axes=axes, tiled=True):
                self.check("psum_scatter", ref.c_psum_scatter,
                           rand((64, 3), np.float32),
                           {"axes": axes, "scatter_dimension": 0,
                            "tiled": True})
                self.check("psum_scatter", ref.c_psum_scatter,
                           rand((8, 16), np.int64),
                           {"axes": axes, "scatter_dimension": 1,
                            "tiled": True})
            with self.subTest(axes=axes, tiled=False):
                self.check("psum_scatter", ref.c_psum_scatter,
                           rand((8 * n, 3), np.float32),
                           {"axes": axes, "scatter_dimension": 0})

    def test_ppermute(self):
        # ppermute takes its axes in mesh order only (as JAX).
        for axes in [a for a in AXES if a == sorted(a)]:
            n = size(axes)
            x = rand((16, 3), np.float32)
            shift = [[i, (i + 1) % n] for i in range(n)]
            with self.subTest(axes=axes, perm="shift"):
                self.check("ppermute", ref.c_ppermute, x,
                           {"axes": axes, "perm": shift})
            with self.subTest(axes=axes, perm="partial"):
                self.check("ppermute", ref.c_ppermute, x,
                           {"axes": axes, "perm": [[0, n - 1]]})

    def test_all_to_all(self):
        for axes in AXES:
            n = size(axes)
            with self.subTest(axes=axes, tiled=True):
                self.check("all_to_all", ref.c_all_to_all,
                           rand((64, 8), np.float32),
                           {"axes": axes, "split_axis": 0, "concat_axis": 1,
                            "tiled": True})
            with self.subTest(axes=axes, tiled=False):
                self.check("all_to_all", ref.c_all_to_all,
                           rand((8 * n, 3), np.int32),
                           {"axes": axes, "split_axis": 0, "concat_axis": 1})

    def check_large_blocks(self, mesh, axes, n, address=None):
        # Blocks of 256 KiB and more per device: between workers on one
        # host they go through the ring in 1 MiB pieces, or with
        # --shm-single-copy straight from the sender's memory.
        x = rand((n * 65536, 2), np.float32)
        spec = f"P({tuple(axes)!r})"
        kw = dict(in_spec=spec, out_spec=spec, mesh=mesh, address=address)
        self.check("ppermute", ref.c_ppermute, x,
                   {"axes": axes, "perm": [[i, (i + 3) % n] for i in range(n)]},
                   **kw)
        self.check("all_gather", ref.c_all_gather, x,
                   {"axes": axes, "axis": 0, "tiled": True}, **kw)
        self.check("all_to_all", ref.c_all_to_all, x,
                   {"axes": axes, "split_axis": 0, "concat_axis": 1,
                    "tiled": True}, **kw)

    def test_large_blocks(self):
        self.check_large_blocks(MESH, ["x", "y", "z"], 8)

    def test_large_blocks_single_copy(self):
        if os.environ.get("SHARDMAP_NO_SHM") == "1":
            self.skipTest("shared memory is off in this run")
        os.environ["SHARDMAP_SHM_SINGLE_COPY"] = "1"  # the workers inherit it
        try:
            cluster = harness.UpCluster(workers=4)
        finally:
            del os.environ["SHARDMAP_SHM_SINGLE_COPY"]
        try:
            harness.wait_for_workers(cluster.address, 4)
            self.check_large_blocks("x=4", ["x"], 4, cluster.address)
        finally:
            cluster.close()

    def test_axis_index(self):
        for axes in AXES:
            with self.subTest(axes=axes):
                code, got, err = run("axis_index", [], [], ALL, {"axes": axes})
                self.assertEqual(code, 0, err)
                want = ref.assemble(
                    ref.c_axis_index(ref.parse_mesh(MESH), axes,
                                     [None] * 8),
                    ref.parse_mesh(MESH), ref.parse_spec(ALL))
                np.testing.assert_array_equal(got, want)

    def test_matmul_psum_is_a_sharded_contraction(self):
        x, w = rand((6, 16), np.float64), rand((16, 5), np.float64)
        code, got, err = run("matmul_psum", [x, w],
                             ["P(None, 'model')", "P('model', None)"], "P()",
                             {"axes": "model"}, mesh="model=4")
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(got, x @ w, rtol=1e-12)

    def test_mlp_tp_matches_numpy(self):
        x = rand((4, 8), np.float32)
        w1, w2 = rand((8, 16), np.float32), rand((16, 3), np.float32)
        code, got, err = run("mlp_tp", [x, w1, w2],
                             ["P()", "P(None, 'model')", "P('model', None)"],
                             "P()", {"axes": "model"}, mesh="data=2,model=4")
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(got, np.maximum(x @ w1, 0) @ w2,
                                   rtol=1e-5, atol=1e-5)

    def test_global_sum(self):
        x = rand((16, 4), np.int64)
        code, got, err = run("global_sum", [x], ["P('x', 'y')"], "P()",
                             {"axes": ["x", "y"]}, mesh="x=4,y=2")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, [x.sum()])

    def test_sixteen_concurrent_clients(self):
        def job(i):
            x = rand((16, 4), np.float32)
            axes = AXES[i % len(AXES)]
            fn = ["psum", "all_gather", "ppermute"][i % 3]
            if fn == "ppermute":
                axes = sorted(axes)
            kwargs = {"axes": axes}
            collective = ref.c_psum
            if fn == "all_gather":
                collective = ref.c_all_gather
            elif fn == "ppermute":
                collective = ref.c_ppermute
                kwargs["perm"] = [[k, (k + 1) % size(axes)]
                                  for k in range(size(axes))]
            code, got, err = run(fn, [x], [ALL], ALL, kwargs)
            want = ref.shard_map_collective(
                collective, ref.parse_mesh(MESH), ref.parse_spec(ALL),
                ref.parse_spec(ALL), x, **dict(kwargs))
            return code, err, got, want
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            results = list(pool.map(job, range(32)))
        for code, err, got, want in results:
            self.assertEqual(code, 0, err)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def rings_mapped(pid):
    """Shared-memory rings (worker/transport/shm/shm_ring) the process has mapped."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return sum("/dev/shm/shardmap-" in line for line in f)
    except OSError:
        return 0


def cluster_workers():
    """PIDs of the worker processes `shardctl up` started."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                worker = b"shardmap-worker" in f.read()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == CLUSTER.proc.pid and worker:
            pids.append(int(entry))
    return pids


class TransportTest(unittest.TestCase):
    """The suite runs twice (CTest): as is, where the workers (all on this
    host) exchange collective data through shared memory, and with
    SHARDMAP_NO_SHM=1, where they use gRPC. Check that each run really
    used the transport it claims to test."""

    def test_collectives_use_the_expected_transport(self):
        x = rand((8 * 4096, 3), np.float32)
        self.check_psum(x)
        pids = cluster_workers()
        self.assertEqual(len(pids), 8)
        rings = {pid: rings_mapped(pid) for pid in pids}
        if os.environ.get("SHARDMAP_NO_SHM") == "1":
            self.assertEqual(sum(rings.values()), 0, rings)
        else:
            # A psum over all 8 devices: every worker sends and receives.
            for pid, n in rings.items():
                self.assertGreaterEqual(n, 2, f"worker {pid}: {rings}")

    def check_psum(self, x):
        code, got, err = run("psum", [x], [ALL], ALL, {"axes": ["x", "y", "z"]})
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(
            got, np.tile(x.reshape(8, -1, 3).sum(0), (8, 1)), rtol=1e-4,
            atol=1e-4)


class BadCollectiveTest(unittest.TestCase):

    def expect(self, fn, kwargs, fragments, shape=(16, 4)):
        code, _, err = run(fn, [np.zeros(shape, np.float32)], [ALL], ALL,
                           kwargs)
        self.assertEqual(code, 65, err)
        self.assertIn("error: INVALID_ARGUMENT:", err)
        for f in fragments:
            self.assertIn(f, err)

    def test_errors_before_anything_runs(self):
        self.expect("psum", {"axes": "q"}, ["unbound axis name: 'q'"])
        self.expect("psum", {"axes": ["x", "x"]}, ["'x' appears twice"])
        self.expect("ppermute", {"axes": "x", "perm": [[0, 1], [1, 1]]},
                    ["sources and destinations must be unique"])
        self.expect("ppermute", {"axes": ["y", "x"], "perm": [[0, 1]]},
                    ["not in the order the mesh declares them"])
        self.expect("ppermute", {"axes": "x", "perm": [[0, 2]]},
                    ["index 2", "outside the group of 2"])
        self.expect("all_to_all", {"axes": ["x", "y"], "split_axis": 1,
                                   "concat_axis": 0, "tiled": True},
                    ["split_axis (3)", "(4)"], shape=(16, 3))
        self.expect("all_gather", {"axes": "x", "axis": 3},
                    ["axis 3 is out of range"])
        self.expect("psum_scatter", {"axes": "x", "scatter_dimension": 5},
                    ["scatter_dimension 5 is out of range"])
        self.expect("psum_scatter", {"axes": ["x", "y", "z"], "tiled": True},
                    ["divisible by shard_count 8"], shape=(24, 4))


class WorkerLossTest(unittest.TestCase):
    """A worker killed or stopped inside a psum: the job fails on every
    worker within seconds, naming the worker, and the rest go on."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.cluster = harness.ProcessCluster(workers=0)
        self.address = self.cluster.address
        # The victim logs at debug level, so the test can see it enter the
        # psum and strike then, while its peers wait on it.
        for i in range(4):
            if i == 2:
                self.victim = self.cluster.add_worker(
                    "--log-level", "debug", stderr=subprocess.PIPE)
            else:
                self.cluster.add_worker("--log-level", "warn")
        self.cluster.wait_for_workers(4)

    def tearDown(self):
        self.cluster.close()
        self.tmp.cleanup()

    def strike_mid_psum(self, sig):
        big = os.path.join(self.tmp.name, "big.npy")
        np.save(big, np.ones((32 << 20,), np.float32))  # 128 MiB
        job = subprocess.Popen(
            [SHARDCTL, "run", "--coordinator", self.address, "--mesh", "x=4",
             "--fn", "psum", "--arg", big, "--in-spec", "P()",
             "--out-spec", "P()", "--kwargs", '{"axes": "x"}',
             "--out", os.path.join(self.tmp.name, "o.npy"), "--timeout", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in self.victim.proc.stderr:
            if "runs psum" in line:
                break
        self.victim.proc.send_signal(sig)
        t0 = time.monotonic()
        _, err = job.communicate(timeout=120)
        seconds = time.monotonic() - t0
        print(f"\n  signal {sig} -> {err.strip()} ({seconds:.1f} s)",
              file=sys.stderr)
        self.assertEqual(job.returncode, 69, err)
        self.assertIn("error: UNAVAILABLE:", err)
        self.assertIn(self.victim.address, err)
        # UNAVAILABLE (above), not the collective timeout's
        # DEADLINE_EXCEEDED; and within seconds (about 2 here), not at the
        # job's 120 s deadline: the margin is for loaded machines.
        self.assertLess(seconds, 60)

    def run_until_placed(self, mesh):
        x = rand((12, 2), np.float32)
        n = int(mesh.split("=")[1])
        for _ in range(100):
            code, got, err = run("psum", [x], ["P('x')"], "P()",
                                 {"axes": "x"}, mesh=mesh,
                                 address=self.address)
            if code != 69:
                break
            time.sleep(0.1)  # the pool has not yet caught up
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(got, x.reshape(n, -1, 2).sum(0),
                                   rtol=1e-5)

    def test_worker_killed_mid_psum(self):
        self.strike_mid_psum(signal.SIGKILL)
        self.run_until_placed("x=3")

    def test_worker_stopped_mid_psum(self):
        self.strike_mid_psum(signal.SIGSTOP)
        self.run_until_placed("x=3")
        # Back from SIGSTOP, the worker re-registers and serves again.
        self.victim.proc.send_signal(signal.SIGCONT)
        self.cluster.wait_for_workers(4)
        self.run_until_placed("x=4")


if __name__ == "__main__":
    unittest.main(verbosity=2)
