"""End-to-end tests of JAX's mesh and axes rules through shardctl on a
real local cluster (8 workers on 127.0.0.1), against numpy:

- the mesh and in_specs taken from resident arguments (JAX's Infer), the
  SHARDMAP_MESH default mesh, and their errors;
- partial-manual jobs (--axis-names / --auto, JAX's axis_names / auto) on
  1-D, 2-D and 3-D meshes, native functions and programs;
- collectives over the empty axis tuple (psum(x, ()) is x).

Run with Debian's /usr/bin/python3 (it has numpy). Environment as
harness.py: SHARDMAP_BIN_DIR, SHARDMAP_CLUSTER_LOG.
"""
import json
import os
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import python_env  # noqa: E402
import shardmap_ref as ref  # noqa: E402

CLUSTER = None
TMP = None
INVALID = 65  # INVALID_ARGUMENT from the coordinator
USAGE = 64    # refused by shardctl before it connects


def setUpModule():
    global CLUSTER, TMP
    TMP = harness.Scratch("shardmap-jax-axes-test-")
    CLUSTER = harness.UpCluster(workers=8)


def tearDownModule():
    CLUSTER.close()
    TMP.cleanup()


def ctl(*args, env=None):
    """shardctl against the test cluster; `env` adds environment variables."""
    full = [harness.SHARDCTL, *args, "--coordinator", CLUSTER.address]
    p = subprocess.run(full, capture_output=True, text=True,
                       timeout=harness.SUBPROCESS_TIMEOUT,
                       env={**os.environ, **(env or {})})
    return p.returncode, p.stdout, p.stderr


def put(array, mesh, spec):
    name = TMP.fresh("axes/a").replace("/", "_")
    code, _, err = ctl("put", name, TMP.save(array), "--mesh", mesh,
                       "--spec", spec)
    assert code == 0, err
    return name


def run(*args, env=None):
    """(exit code, the single output or None, stderr)."""
    out = TMP.out_path()
    code, _, err = ctl("run", *args, "--out", out, env=env)
    return code, (np.load(out) if code == 0 else None), err


A = np.arange(32, dtype=np.float32).reshape(8, 4)
B = np.arange(32, dtype=np.float32).reshape(8, 4)[::-1].copy() * 0.5


class Case(unittest.TestCase):

    def assertResult(self, result, want):
        code, got, err = result
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, want)

    def assertError(self, result, exit_code, *fragments):
        code, _, err = result
        self.assertEqual(code, exit_code, err)
        for f in fragments:
            self.assertIn(f, err)


class InferredMeshAndSpecsTest(Case):

    def test_no_mesh_and_no_in_spec_with_resident_arguments(self):
        for mesh, spec_a, spec_b, out in [
                ("i=4", "P('i')", "P(None, 'i')", "P('i')"),
                ("x=2,y=2", "P('x', 'y')", "P('y')", "P(('x', 'y'))"),
                ("x=2,y=2,z=2", "P(('x', 'z'), 'y')", "P()", "P('y', 'x')")]:
            with self.subTest(mesh=mesh):
                a, b = put(A, mesh, spec_a), put(B, mesh, spec_b)
                self.assertResult(run("--fn", "add", "--arg", f"@{a}",
                                      "--arg", f"@{a}", "--out-spec",
                                      spec_a), A + A)
                # Mixed: b resharded to a's spec, a's own spec inferred.
                self.assertResult(run("--fn", "add", "--arg", f"@{a}",
                                      "--arg", f"@{b}", "--in-spec", "Infer",
                                      "--in-spec", spec_a, "--out-spec",
                                      spec_a), A + B)
                self.assertResult(run("--fn", "identity", "--arg", f"@{b}",
                                      "--out-spec", out),
                                  _identity(B, mesh, spec_b, out))

    def test_training_step_with_no_mesh_and_no_in_spec(self):
        # A data-parallel SGD step: w -= lr * pmean(x^T (x w - y), 'data').
        x = np.arange(24, dtype=np.float64).reshape(8, 3) / 10
        y = np.arange(8, dtype=np.float64).reshape(8, 1)
        w = np.ones((3, 1), np.float64)
        xs, ys, ws = put(x, "data=4", "P('data')"), \
            put(y, "data=4", "P('data')"), put(w, "data=4", "P()")
        step = ("lambda x, y, w: w - 0.1 * pmean(x.T @ (x @ w - y), 'data')")
        got = run("--expr", step, "--arg", f"@{xs}", "--arg", f"@{ys}",
                  "--arg", f"@{ws}", "--out-spec", "P()")
        want = w - 0.1 * np.mean([xb.T @ (xb @ w - yb) for xb, yb in
                                  zip(np.split(x, 4), np.split(y, 4))],
                                 axis=0)
        code, out, err = got
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(out, want, rtol=1e-12)

    def test_default_mesh_from_the_environment(self):
        f = TMP.save(A)
        self.assertResult(run("--fn", "scale", "--kwargs", '{"alpha": 2}',
                              "--arg", f, "--in-spec", "P('x', 'y')",
                              "--out-spec", "P('x', 'y')",
                              env={"SHARDMAP_MESH": "x=2,y=4"}), 2 * A)
        # --mesh wins over SHARDMAP_MESH.
        self.assertResult(run("--fn", "scale", "--kwargs", '{"alpha": 2}',
                              "--arg", f, "--in-spec", "P('x')", "--mesh",
                              "x=8", "--out-spec", "P('x')",
                              env={"SHARDMAP_MESH": "nonsense"}), 2 * A)
        self.assertError(run("--fn", "identity", "--arg", f, "--in-spec",
                             "P()", "--out-spec", "P()",
                             env={"SHARDMAP_MESH": "x=0"}),
                         USAGE, "SHARDMAP_MESH:")

    def test_errors(self):
        a, line = put(A, "x=2,y=2", "P('x')"), put(B, "x=4", "P('x')")
        self.assertError(run("--fn", "add", "--arg", f"@{a}", "--arg",
                             f"@{line}", "--out-spec", "P()"),
                         INVALID, "error: INVALID_ARGUMENT:",
                         "different meshes", f"args[0] ('{a}') is on mesh "
                         "x=2,y=2", f"args[1] ('{line}') is on mesh x=4")
        self.assertError(run("--fn", "add", "--arg", f"@{a}", "--arg",
                             f"@{line}", "--mesh", "x=2,y=2", "--in-spec",
                             "P()", "--in-spec", "Infer", "--out-spec",
                             "P()"),
                         INVALID, "in_specs[1] is Infer", "mesh x=4")
        f = TMP.save(A)
        self.assertError(run("--fn", "identity", "--arg", f, "--out-spec",
                             "P()"), USAGE, "--in-spec is required")
        self.assertError(run("--fn", "identity", "--arg", f, "--in-spec",
                             "P()", "--out-spec", "P()"),
                         INVALID, "mesh is missing")


def _identity(x, mesh, in_spec, out_spec):
    """identity's global result: `x` split by `in_spec`, the blocks
    reassembled by `out_spec`."""
    m = ref.parse_mesh(mesh)
    blocks = [ref.split(x, m, ref.parse_spec(in_spec), c)
              for c in ref.devices(m)]
    return ref.assemble(blocks, m, ref.parse_spec(out_spec))


class PartialManualTest(Case):
    """Mesh x=2,y=2 with y auto: the function sees blocks split over x
    only, equal along y; JAX's results on the same program."""

    def test_native_collectives_over_the_manual_axis(self):
        f = TMP.save(A)
        common = ["--mesh", "x=2,y=2", "--arg", f, "--in-spec", "P('x')"]
        top, bottom = A[:4], A[4:]
        for flag in (["--axis-names", "x"], ["--auto", "y"],
                     ["--axis-names", "x", "--auto", "y"]):
            with self.subTest(flag=flag):
                self.assertResult(run("--fn", "psum", *common, *flag,
                                      "--kwargs", '{"axes": "x"}',
                                      "--out-spec", "P()"), top + bottom)
        self.assertResult(run("--fn", "all_gather", *common, "--auto", "y",
                              "--kwargs", '{"axes": "x", "tiled": true}',
                              "--out-spec", "P()"), A)
        self.assertResult(run("--fn", "axis_index", "--mesh", "x=2,y=2",
                              "--auto", "y", "--kwargs", '{"axes": "x"}',
                              "--out-spec", "P('x')"),
                          np.array([0, 1], np.int32))

    def test_programs(self):
        f = TMP.save(A)
        self.assertResult(run("--expr", "lambda v: psum(v * 2, 'x')",
                              "--mesh", "x=2,y=2", "--auto", "y", "--arg", f,
                              "--in-spec", "P('x')", "--out-spec", "P()"),
                          2 * (A[:4] + A[4:]))
        # 3-D: manual x and z, y auto; the blocks minus their mean over z.
        x = np.arange(64, dtype=np.float64).reshape(4, 16)
        blocks = x.reshape(2, 2, 2, 8).transpose(0, 2, 1, 3)  # [x][z][4/2][8]
        mean_z = blocks.mean(axis=1, keepdims=True)
        want = (blocks - mean_z).transpose(0, 2, 1, 3).reshape(4, 16)
        self.assertResult(run("--expr", "lambda v: v - pmean(v, 'z')",
                              "--mesh", "x=2,y=2,z=2", "--axis-names", "x,z",
                              "--arg", TMP.save(x), "--in-spec",
                              "P('x', 'z')", "--out-spec", "P('x', 'z')"),
                          want)
        # 1-D: every axis named is all-manual, as without the flag.
        self.assertResult(run("--expr", "lambda v: psum(v, 'i')", "--mesh",
                              "i=4", "--axis-names", "i", "--arg", f,
                              "--in-spec", "P('i')", "--out-spec", "P()"),
                          sum(np.split(A, 4)))

    def test_errors_in_jax_words(self):
        f = TMP.save(A)
        common = ["--mesh", "x=2,y=2", "--arg", f]
        self.assertError(run("--fn", "identity", *common, "--in-spec",
                             "P('x', 'y')", "--auto", "y", "--out-spec",
                             "P('x')"), INVALID,
                         "shard_map in_specs argument must refer to an axis "
                         "marked as manual (frozenset({'x'})), but:",
                         "in_specs refers to 'y'")
        self.assertError(run("--fn", "identity", *common, "--in-spec",
                             "P('x')", "--auto", "y", "--out-spec",
                             "P('x', 'y')"), INVALID,
                         "shard_map out_specs argument must refer to an axis "
                         "marked as manual", "out_specs refers to 'y'")
        self.assertError(run("--fn", "psum", *common, "--in-spec", "P('x')",
                             "--auto", "y", "--kwargs", '{"axes": "y"}',
                             "--out-spec", "P('x')"), INVALID,
                         "Found an unbound axis name: y. To fix this, please "
                         "call psum under `jax.shard_map`.")
        self.assertError(run("--fn", "axis_index", "--mesh", "x=2,y=2",
                             "--auto", "y", "--kwargs", '{"axes": "y"}',
                             "--out-spec", "P('x')"), INVALID,
                         "Found an unbound axis name: y")
        self.assertError(run("--expr", "lambda v: v * axis_index('y')",
                             *common, "--in-spec", "P('x')", "--auto", "y",
                             "--out-spec", "P('x')"), INVALID,
                         "Found an unbound axis name: y", "line 1")
        self.assertError(run("--fn", "identity", *common, "--in-spec", "P()",
                             "--axis-names", "x", "--auto", "x",
                             "--out-spec", "P()"), INVALID,
                         "must be complements")
        self.assertError(run("--fn", "identity", *common, "--in-spec", "P()",
                             "--axis-names", "w", "--out-spec", "P()"),
                         INVALID, "jax.shard_map requires axis_names={'w'} "
                         "to be a subset of mesh.axis_names={'x', 'y'}")


class EmptyAxesTest(Case):

    def test_collectives_over_no_axes(self):
        f = TMP.save(A)
        common = ["--mesh", "x=2", "--arg", f, "--in-spec", "P('x')",
                  "--out-spec", "P('x')"]
        for fn, kwargs in [("psum", {}), ("pmax", {}),
                           ("all_gather", {"tiled": True}),
                           ("ppermute", {"perm": [[0, 0]]})]:
            with self.subTest(fn=fn):
                self.assertResult(run("--fn", fn, *common, "--kwargs",
                                      json.dumps({"axes": [], **kwargs})), A)
        self.assertResult(run("--expr", "lambda v: psum(v, ())", *common), A)
        self.assertResult(run("--expr", "lambda v: all_gather(v, ())[0]",
                              *common), A)
        self.assertResult(run("--expr", "lambda v: v * axis_size(())",
                              *common), A)


class PythonSetMeshTest(Case):
    """The Python client's mesh context (JAX's set_mesh)."""

    def test_shard_map_takes_the_context_mesh(self):
        python_env.check()
        sm, P = python_env.sm, python_env.P
        cluster = sm.connect(CLUSTER.address)
        try:
            f = sm.shard_map("psum", in_specs=P("x"), out_specs=P(),
                             axes="x")
            with sm.set_mesh(cluster.mesh(x=4)):
                np.testing.assert_array_equal(f(A), sum(np.split(A, 4)))
                explicit = sm.shard_map("psum", mesh=cluster.mesh(x=2),
                                        in_specs=P("x"), out_specs=P(),
                                        axes="x")
                np.testing.assert_array_equal(explicit(A),
                                              sum(np.split(A, 2)))
            with self.assertRaisesRegex(sm.InvalidArgument,
                                        "context mesh cannot be empty"):
                f(A)
        finally:
            cluster.close()


if __name__ == "__main__":
    unittest.main()
