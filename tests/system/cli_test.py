"""End-to-end tests of shardctl against real coordinator and worker
processes on 127.0.0.1, checked against the numpy reference in
shardmap_ref.py. Run with Debian's /usr/bin/python3 (it has numpy).

Environment: SHARDMAP_BIN_DIR = directory of shardctl and the servers.
"""
import json
import os
import re
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import shardmap_ref as ref  # noqa: E402

CLUSTER = None
ADDRESS = None
TMP = None


def setUpModule():
    global CLUSTER, ADDRESS, TMP
    TMP = harness.Scratch("shardmap-cli-test-")
    CLUSTER = harness.UpCluster(workers=8)
    ADDRESS = CLUSTER.address


def tearDownModule():
    CLUSTER.close()
    TMP.cleanup()


def save(array):
    return TMP.save(array)


def out_path():
    return TMP.out_path()


shardctl = harness.shardctl


def run_job(mesh, fn, args, in_specs, out_spec, kwargs=None, extra=(),
            coordinator=None):
    """Runs a job; returns (exit code, output array or None, stderr)."""
    out = out_path()
    cmd = ["run", "--mesh", mesh, "--fn", fn]
    cmd += ["--local", str(coordinator)] if isinstance(coordinator, int) else [
        "--coordinator", coordinator or ADDRESS]
    for a in args:
        cmd += ["--arg", save(a)]
    for s in in_specs:
        cmd += ["--in-spec", s]
    cmd += ["--out", out, "--out-spec", out_spec]
    if kwargs is not None:
        cmd += ["--kwargs", json.dumps(kwargs)]
    cmd += list(extra)
    code, _, err = shardctl(*cmd)
    return code, (np.load(out) if code == 0 else None), err


RNG = np.random.default_rng(1234)


def rand(shape, dtype):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-50, 50, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


class SemanticsTest(unittest.TestCase):
    """Jobs over 1-D, 2-D and 3-D meshes agree with the numpy reference."""

    def check(self, mesh, fn, args, in_specs, out_spec, kwargs=None):
        code, got, err = run_job(mesh, fn, args, in_specs, out_spec, kwargs)
        self.assertEqual(code, 0, f"{fn} {mesh} {in_specs} {out_spec}: {err}")
        want = ref.shard_map(ref.reference(fn, kwargs or {}),
                             ref.parse_mesh(mesh),
                             [ref.parse_spec(s) for s in in_specs],
                             ref.parse_spec(out_spec), args)
        self.assertEqual(got.dtype, want.dtype)
        self.assertEqual(got.shape, want.shape)
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)

    def test_elementwise_2d_mesh_every_spec_combination(self):
        specs = ["P('x', 'y')", "P('y', 'x')", "P(('x', 'y'))",
                 "P(('y', 'x'), None)", "P(None, ('x', 'y'))", "P('x')",
                 "P(None, 'y')", "P()", "None"]
        for dtype in (np.float32, np.int32):
            for spec in specs:
                a, b = rand((8, 8), dtype), rand((8, 8), dtype)
                out = spec if spec != "None" else "P()"
                with self.subTest(spec=spec, dtype=dtype):
                    self.check("x=2,y=2", "add", [a, b], [spec], out)
                    self.check("x=2,y=2", "relu", [a], [spec], out)

    def test_mixed_in_specs_and_block_transpose(self):
        a, b = rand((4, 6), np.float64), rand((2, 3), np.float64)
        # a split into (2, 3) blocks, b whole on every device.
        self.check("x=2,y=2", "add", [a, b], ["P('x', 'y')", "P()"],
                   "P('x', 'y')")
        # Out spec in another axis order than the input: a block transpose.
        self.check("x=2,y=2", "identity", [a], ["P('x', 'y')"], "P('y', 'x')")
        # Mentioning an axis the value is invariant over tiles copies.
        self.check("x=2,y=2", "identity", [a], ["P('x')"], "P(('x', 'y'))")

    def test_matmul_tensor_parallel_blocks(self):
        a, b = rand((8, 6), np.float32), rand((6, 4), np.float32)
        # Row blocks of a times the whole b: rows of the product.
        self.check("x=4", "matmul", [a, b], ["P('x')", "P()"], "P('x')")
        # 2-D mesh: a over x (rows), b over y (cols): a block of the product.
        self.check("x=2,y=2", "matmul", [a, b], ["P('x')", "P(None, 'y')"],
                   "P('x', 'y')")

    def test_3d_mesh(self):
        x = rand((8, 4, 6), np.float32)
        for spec in ["P('x', 'y', 'z')", "P(('z', 'x'), 'y')",
                     "P(('x', 'y', 'z'))", "P(None, ('y', 'z'))"]:
            with self.subTest(spec=spec):
                self.check("x=2,y=2,z=2", "scale", [x], [spec], spec,
                           {"alpha": -1.5})
        self.check("x=2,y=2,z=2", "sum", [x], ["P('x', 'y')"], "P('x', 'y')",
                   {"axis": 2, "keepdims": True})

    def test_1d_meshes_of_every_size(self):
        for n in (1, 2, 4, 8):
            x = rand((8 * 3, 2), np.int64)
            with self.subTest(devices=n):
                self.check(f"i={n}", "mul", [x, x], ["P('i')"], "P('i')")
                self.check(f"i={n}", "sum", [x], ["P('i')"], "P('i')",
                           {"axis": 1})

    def test_scale_dtype_rules(self):
        x = rand((4, 4), np.int32)
        self.check("x=2", "scale", [x], ["P('x')"], "P('x')", {"alpha": 3})
        self.check("x=2", "scale", [x], ["P('x')"], "P('x')", {"alpha": 0.5})
        self.check("x=2", "scale", [x], ["P('x')"], "P('x')", {"alpha": 2.0})

    def test_scalar_and_zero_length_arrays(self):
        self.check("x=2", "identity", [np.array(3.25, np.float32)], ["P()"],
                   "P()")
        self.check("x=2", "identity", [np.zeros((0, 3), np.float32)],
                   ["P('x')"], "P('x')")
        self.check("x=2,y=2", "add",
                   [np.zeros((4, 0), np.int32), np.zeros((4, 0), np.int32)],
                   ["P('x', 'y')"], "P('x', 'y')")
        # Per-device scalars concatenated through a singleton axis.
        self.check("x=4", "sum", [rand((8,), np.float64)], ["P('x')"], "P('x')",
                   {"keepdims": True})

    def test_large_array_spans_many_chunks(self):
        # 80 MiB float32: many 1 MiB chunks each way, blocks of 20 MiB.
        x = np.arange(20 * 1024 * 1024, dtype=np.float32).reshape(4096, -1)
        code, got, err = run_job("x=4", "identity", [x], ["P('x')"], "P('x')")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, x)

    def test_nan_and_inf_survive(self):
        x = np.array([[np.nan, np.inf], [-np.inf, -0.0]], np.float64)
        code, got, err = run_job("x=2", "identity", [x], ["P('x')"], "P('x')")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, x)
        self.assertTrue(np.signbit(got[1, 1]))


class CheckRepTest(unittest.TestCase):

    def test_unreplicated_output_is_refused(self):
        x = rand((4,), np.float32)
        code, _, err = run_job("x=2", "identity", [x], ["P('x')"], "P()")
        self.assertEqual(code, 65, err)
        self.assertIn("INVALID_ARGUMENT", err)
        self.assertIn("replicated across mesh axis 'x'", err)
        self.assertIn("--no-check-rep", err)

    def test_no_check_rep_returns_the_first_copy(self):
        x = rand((4,), np.float32)
        code, got, err = run_job("x=2", "identity", [x], ["P('x')"], "P()",
                                 extra=["--no-check-rep"])
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, x[:2])

    def test_replicated_output_passes(self):
        # Blocks split over x only, replicated over y: out P('x') is true.
        x = rand((4, 2), np.float32)
        code, got, err = run_job("x=2,y=2", "identity", [x], ["P('x')"],
                                 "P('x')")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, x)


class LocalClusterTest(unittest.TestCase):

    def test_local_clusters_of_1_2_4_8_workers(self):
        for n in (1, 2, 4, 8):
            x = rand((16, 3), np.float32)
            with self.subTest(workers=n):
                code, got, err = run_job(f"d={n}", "scale", [x], ["P('d')"],
                                         "P('d')", {"alpha": 2.0},
                                         coordinator=n)
                self.assertEqual(code, 0, err)
                np.testing.assert_allclose(got, x * np.float32(2.0))
                # The cluster stops quietly: workers drain while their
                # coordinator still answers.
                self.assertNotIn("[warning]", err)

    def test_json_summary_and_printed_values(self):
        x = np.arange(6, dtype=np.int32).reshape(2, 3)
        code, out, err = shardctl("run", "--local", "2", "--mesh", "x=2",
                                  "--fn", "identity", "--arg", save(x),
                                  "--in-spec", "P('x')", "--out-spec", "P('x')",
                                  "--json")
        self.assertEqual(code, 0, err)
        summary = json.loads(out)
        self.assertEqual(summary["devices"], 2)
        self.assertEqual(summary["outputs"][0]["shape"], [2, 3])
        self.assertEqual(summary["outputs"][0]["values"], x.tolist())
        code, out, err = shardctl("run", "--coordinator", ADDRESS, "--mesh",
                                  "x=2", "--fn", "identity", "--arg", save(x),
                                  "--in-spec", "P('x')", "--out-spec",
                                  "P('x')")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.strip(), "[[0 1 2]\n [3 4 5]]")


class StatusAndFunctionsTest(unittest.TestCase):

    def test_status_lists_live_workers(self):
        code, out, err = shardctl("status", "--coordinator", ADDRESS, "--json")
        self.assertEqual(code, 0, err)
        status = json.loads(out)
        self.assertEqual(len(status["workers"]), 8)
        # Far below --max-concurrent-jobs, no job waits for a turn.
        self.assertIsInstance(status["jobs_running"], int)
        self.assertEqual(status["jobs_waiting"], 0)

    def test_functions_lists_builtins_with_signatures(self):
        code, out, err = shardctl("functions", "--coordinator", ADDRESS, "--json")
        self.assertEqual(code, 0, err)
        fns = {f["name"]: f for f in json.loads(out)["functions"]}
        for name in ("identity", "add", "mul", "scale", "relu", "matmul", "sum"):
            self.assertIn(name, fns)
        self.assertEqual(fns["matmul"]["arity"], 2)
        self.assertEqual([k["name"] for k in fns["scale"]["kwargs"]], ["alpha"])

    def test_unreachable_coordinator_is_unavailable(self):
        code, _, err = shardctl("status", "--coordinator", "127.0.0.1:1")
        self.assertEqual(code, 69, err)
        self.assertIn("error: UNAVAILABLE:", err)


class BadInputTest(unittest.TestCase):
    """Every bad input gets its exit code and a message naming the problem."""

    def expect(self, code_want, status, fragments, *args):
        code, out, err = shardctl(*args)
        self.assertEqual(code, code_want, err)
        self.assertIn(f"error: {status}:", err)
        for f in fragments:
            self.assertIn(f, err)
        self.assertEqual(out, "")

    def job(self, mesh, fn, arrays, specs, out_spec="P('x')", extra=()):
        cmd = ["run", "--coordinator", ADDRESS, "--mesh", mesh, "--fn", fn]
        for a in arrays:
            cmd += ["--arg", a if isinstance(a, str) else save(a)]
        for s in specs:
            cmd += ["--in-spec", s]
        return cmd + ["--out-spec", out_spec, *extra]

    def test_unknown_mesh_axis(self):
        self.expect(65, "INVALID_ARGUMENT", ["in_specs", "mesh axis 'z'"],
                    *self.job("x=2", "identity", [np.zeros(4)], ["P('z')"]))

    def test_axis_used_twice(self):
        self.expect(65, "INVALID_ARGUMENT", ["duplicate", "'x'"],
                    *self.job("x=2,y=2", "identity", [np.zeros((4, 4))],
                              ["P('x', 'x')"]))

    def test_spec_longer_than_rank(self):
        self.expect(65, "INVALID_ARGUMENT", ["has length 2", "rank 1"],
                    *self.job("x=2", "identity", [np.zeros(4)],
                              ["P('x', None)"]))

    def test_dimension_not_divisible(self):
        self.expect(65, "INVALID_ARGUMENT",
                    ["args[0]", "array axis 0 (of size 6)",
                     "mesh axes ('x', 'y') (of total size 8)",
                     "8 does not evenly divide 6"],
                    *self.job("x=4,y=2", "identity", [np.zeros(6)],
                              ["P(('x', 'y'))"]))

    def test_argument_count(self):
        self.expect(65, "INVALID_ARGUMENT",
                    ["add(x, y) takes 2 positional arguments but 1 was given"],
                    *self.job("x=2", "add", [np.zeros(4)], ["P('x')"]))

    def test_dtype_the_function_does_not_take(self):
        self.expect(65, "INVALID_ARGUMENT",
                    ["args[0] is float64 and args[1] is int32"],
                    *self.job("x=2", "add",
                              [np.zeros(4), np.zeros(4, np.int32)], ["P('x')"]))

    def test_unsupported_npy_dtype(self):
        self.expect(65, "INVALID_ARGUMENT", [".npy", "bool"],
                    *self.job("x=2", "identity", [np.zeros(4, bool)],
                              ["P('x')"]))

    def test_malformed_spec_text(self):
        self.expect(64, "INVALID_ARGUMENT", ["--in-spec 0", "at position 5"],
                    *self.job("x=2", "identity", [np.zeros(4)], ["P('x'"]))

    def test_malformed_kwargs(self):
        self.expect(64, "INVALID_ARGUMENT", ["malformed --kwargs JSON"],
                    *self.job("x=2", "scale", [np.zeros(4)], ["P('x')"],
                              extra=["--kwargs", '{"alpha": }']))

    def test_missing_and_mistyped_kwargs(self):
        self.expect(65, "INVALID_ARGUMENT", ["required keyword argument 'alpha'"],
                    *self.job("x=2", "scale", [np.zeros(4)], ["P('x')"]))
        self.expect(65, "INVALID_ARGUMENT", ["'alpha' must be a JSON number"],
                    *self.job("x=2", "scale", [np.zeros(4)], ["P('x')"],
                              extra=["--kwargs", '{"alpha": "two"}']))
        self.expect(65, "INVALID_ARGUMENT", ["unexpected keyword argument 'beta'"],
                    *self.job("x=2", "identity", [np.zeros(4)], ["P('x')"],
                              extra=["--kwargs", '{"beta": 1}']))

    def test_malformed_and_truncated_npy(self):
        bad = os.path.join(TMP.name, "garbage.npy")
        with open(bad, "wb") as f:
            f.write(b"this is not an npy file at all")
        self.expect(65, "INVALID_ARGUMENT", ["garbage.npy"],
                    *self.job("x=2", "identity", [bad], ["P('x')"]))
        good = save(np.arange(100, dtype=np.float32))
        cut = os.path.join(TMP.name, "truncated.npy")
        with open(good, "rb") as f, open(cut, "wb") as g:
            g.write(f.read()[:-10])
        self.expect(65, "INVALID_ARGUMENT", ["truncated.npy", "truncated"],
                    *self.job("x=2", "identity", [cut], ["P('x')"]))

    def test_missing_input_file(self):
        self.expect(66, "NOT_FOUND", ["nope.npy"],
                    *self.job("x=2", "identity", ["/nonexistent/nope.npy"],
                              ["P('x')"]))

    def test_unknown_function_lists_known_ones(self):
        self.expect(64, "NOT_FOUND", ["unknown function 'nope'", "matmul"],
                    *self.job("x=2", "nope", [np.zeros(4)], ["P('x')"]))

    def test_more_devices_than_live_workers(self):
        self.expect(69, "FAILED_PRECONDITION", ["16 devices", "only 8 workers"],
                    *self.job("x=16", "identity", [np.zeros(16)], ["P('x')"]))

    def test_bad_mesh(self):
        self.expect(64, "INVALID_ARGUMENT", ["--mesh", "appears twice"],
                    *self.job("x=2,x=2", "identity", [np.zeros(4)], ["P('x')"]))
        self.expect(64, "INVALID_ARGUMENT", ["--mesh", "size 0"],
                    *self.job("x=0", "identity", [np.zeros(4)], ["P('x')"]))

    def test_kernel_shape_error_names_the_device(self):
        self.expect(65, "INVALID_ARGUMENT", ["(mesh coordinates (", "worker w",
                                              "matmul: contracting dimension"],
                    *self.job("x=2", "matmul",
                              [np.zeros((4, 3)), np.zeros((4, 3))], ["P('x')"]))

    def test_usage_errors(self):
        # --mesh is optional (SHARDMAP_MESH, or the residents' mesh);
        # --out-spec is not.
        code, out, err = shardctl("run", "--coordinator", ADDRESS, "--fn", "identity")
        self.assertEqual(code, 64)
        self.assertIn("--out-spec is required", err)
        code, out, err = shardctl("bogus")
        self.assertEqual(code, 64)

    def test_json_error_object(self):
        code, out, err = shardctl(*self.job("x=2", "nope", [np.zeros(4)],
                                            ["P('x')"], extra=["--json"]))
        self.assertEqual(code, 64)
        e = json.loads(out)["error"]
        self.assertEqual(e["code"], "NOT_FOUND")
        self.assertEqual(e["exit_code"], 64)


def in_netns(*argv):
    """`argv` in a network namespace of its own (only its loopback), so
    binding 0.0.0.0 reaches no other interface."""
    return ["unshare", "--net", "--", "sh", "-c",
            'ip link set lo up && exec "$@"', "sh", *argv]


class ServerCliTest(unittest.TestCase):

    def test_version_of_every_binary(self):
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "..", "..", "CMakeLists.txt")) as f:
            version = re.search(r"project\(shardmap VERSION ([\d.]+)",
                                f.read()).group(1)
        for binary in ("shardctl", "shardmap-coordinator", "shardmap-worker"):
            p = subprocess.run([os.path.join(harness.BIN, binary),
                                "--version"], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual((p.returncode, p.stdout.strip()), (0, version),
                             f"{binary} --version: {p.stderr}")

    @unittest.skipUnless(os.geteuid() == 0, "needs root (unshare --net)")
    def test_servers_print_the_any_address_they_listen_on(self):
        """--listen/--health-listen/--metrics 0.0.0.0:0 are printed as
        0.0.0.0:PORT, not as a loopback address."""
        any_flags = ["--listen", "0.0.0.0:0", "--health-listen", "0.0.0.0:0",
                     "--metrics", "0.0.0.0:0", "--insecure"]
        servers = {
            "shardmap-coordinator": [],
            # Its coordinator is not there: it serves and retries.
            "shardmap-worker": ["--coordinator", "127.0.0.1:1"]}
        for binary, extra in servers.items():
            proc = subprocess.Popen(
                in_netns(os.path.join(harness.BIN, binary), *extra,
                         *any_flags), stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True)
            try:
                lines = [proc.stdout.readline().strip() for _ in range(3)]
            finally:
                proc.kill()
                proc.wait()
                proc.stdout.close()
            for what, line in zip(("listening", "health", "metrics"), lines):
                self.assertRegex(line, rf"^{binary} {what} on 0\.0\.0\.0:"
                                 r"[1-9]\d*$", lines)

    @unittest.skipUnless(os.geteuid() == 0, "needs root (unshare --net)")
    def test_local_cluster_on_the_any_address_dials_loopback(self):
        proc = subprocess.Popen(
            in_netns(harness.SHARDCTL, "up", "--workers", "1", "--listen",
                     "0.0.0.0:0", "--insecure"), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline().strip()
        finally:
            proc.kill()
            _, err = proc.communicate(timeout=30)
        self.assertRegex(line, r"127\.0\.0\.1:[1-9]\d*", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
