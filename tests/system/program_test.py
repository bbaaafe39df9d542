"""Expression programs end to end, with real processes on 127.0.0.1: the
issue's tensor-parallel MLP and JAX's documentation examples run as
programs and equal numpy; every collective as a program equals the same
collective as a built-in; programs JAX would refuse are refused with the
line, column and caret; `shardctl plan` shows shapes, costs and blocks;
registered programs survive a coordinator restart.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RNG = np.random.default_rng(13)
MLP = 'lambda x, w1, w2: psum(relu(x @ w1) @ w2, "model")'


def relu(v):
    return np.maximum(v, 0)


class ProgramTest(harness.ClusterTestCase):
    """Programs on one 4-worker cluster (a coordinator without a data
    directory)."""

    def setUp(self):
        super().setUp()
        self.c = self.cluster(4)

    def run_job(self, *args, outs=1):
        """shardctl run ARGS with `outs` --out files; returns the arrays."""
        paths = [self.path(f"out{i}.npy") for i in range(outs)]
        flags = [a for p in paths for a in ("--out", p)]
        code, out, err = self.ctl(self.c, "run", *args, *flags)
        self.assertEqual(code, 0, err)
        return [np.load(p) for p in paths]

    def args(self, *arrays, specs):
        flags = []
        for a in arrays:
            flags += ["--arg", self.file(a)]
        for s in specs:
            flags += ["--in-spec", s]
        return flags

    def test_tensor_parallel_mlp_equals_numpy(self):
        x = RNG.standard_normal((8, 6)).astype(np.float32)
        w1 = RNG.standard_normal((6, 16)).astype(np.float32)
        w2 = RNG.standard_normal((16, 5)).astype(np.float32)
        (got,) = self.run_job(
            "--mesh", "data=2,model=2", "--expr", MLP,
            *self.args(x, w1, w2, specs=["P('data', None)", "P(None, 'model')",
                                         "P('model', None)"]),
            "--out-spec", "P('data', None)")
        np.testing.assert_allclose(got, relu(x @ w1) @ w2, rtol=1e-5,
                                   atol=1e-5)

    def test_jax_documentation_examples(self):
        # Tensor-parallel GEMM: psum_scatter(x @ W) + b.
        x = RNG.standard_normal((8, 8)).astype(np.float32)
        w = RNG.standard_normal((8, 4)).astype(np.float32)
        b = RNG.standard_normal((4,)).astype(np.float32)
        (got,) = self.run_job(
            "--mesh", "i=4", "--expr",
            "lambda x, W, b: jax.lax.psum_scatter(x @ W, 'i', "
            "scatter_dimension=0, tiled=True) + b",
            *self.args(x, w, b, specs=["P(None, 'i')", "P('i', None)", "P()"]),
            "--out-spec", "P('i', None)")
        np.testing.assert_allclose(got, x @ w + b, rtol=1e-4, atol=1e-4)
        # A data-parallel gradient of least squares.
        X = RNG.standard_normal((16, 3))
        y = RNG.standard_normal((16,))
        wv = RNG.standard_normal((3,))
        (grad,) = self.run_job(
            "--mesh", "data=4", "--expr",
            "def grad(X, w, y):\n"
            "    residual = X @ w - y\n"
            "    return jax.lax.psum(X.T @ residual, 'data')\n",
            *self.args(X, wv, y, specs=["P('data', None)", "P()", "P('data')"]),
            "--out-spec", "P()")
        np.testing.assert_allclose(grad, X.T @ (X @ wv - y), rtol=1e-10)
        # Normalise by a global sum.
        v = RNG.random((12,)).astype(np.float32)
        (norm,) = self.run_job(
            "--mesh", "i=4", "--expr", "lambda x: x / psum(jnp.sum(x), 'i')",
            *self.args(v, specs=["P('i')"]), "--out-spec", "P('i')")
        np.testing.assert_allclose(norm, v / v.sum(), rtol=1e-5)

    def test_several_outputs_and_dtypes(self):
        a = RNG.integers(-50, 50, (4, 6)).astype(np.int32)
        outs = self.run_job(
            "--mesh", "x=2", "--expr",
            "lambda a: (a * 2.0, jnp.max(a, axis=1, keepdims=True), "
            "(a // 7).astype(jnp.int64))",
            *self.args(a, specs=["P('x')"]), "--out-spec", "P('x')", outs=3)
        self.assertEqual(outs[0].dtype, np.float32)  # weak float: float32
        np.testing.assert_array_equal(outs[0], a * np.float32(2.0))
        np.testing.assert_array_equal(outs[1], a.max(axis=1, keepdims=True))
        self.assertEqual(outs[2].dtype, np.int64)
        np.testing.assert_array_equal(outs[2], (a // 7).astype(np.int64))

    def test_collectives_as_programs_equal_the_builtins(self):
        """Every collective as a program against the same collective as a
        built-in, over 1-D, 2-D and 3-D meshes and axis tuples in both
        orders. The output spec names every axis, so every device's block
        comes back and is compared."""
        x = RNG.standard_normal((8, 4)).astype(np.float32)
        meshes = {
            "x=4": [("x",)],
            "x=2,y=2": [("x", "y"), ("y", "x"), ("y",)],
            "x=1,y=2,z=2": [("y", "z"), ("z", "y"), ("x", "z")],
        }
        for mesh, axes_list in meshes.items():
            sizes = {k: int(v) for k, v in
                     (a.split("=") for a in mesh.split(","))}
            every = tuple(sizes)
            spec = f"P({every!r})"
            for axes in axes_list:
                n = int(np.prod([sizes[a] for a in axes]))
                in_mesh_order = list(axes) == sorted(axes, key=every.index)
                cases = [
                    ("psum", f"psum(x, {axes!r})", {}),
                    ("pmax", f"pmax(x, {axes!r})", {}),
                    ("pmin", f"jax.lax.pmin(x, axis_name={axes!r})", {}),
                    ("all_gather", f"all_gather(x, {axes!r})", {}),
                    ("all_gather", f"all_gather(x, {axes!r}, axis=1, "
                     "tiled=True)", {"axis": 1, "tiled": True}),
                    ("psum_scatter", f"psum_scatter(x, {axes!r}, "
                     "scatter_dimension=1, tiled=True)",
                     {"scatter_dimension": 1, "tiled": True}),
                    ("all_to_all", f"all_to_all(x, {axes!r}, 1, 0, "
                     "tiled=True)",
                     {"split_axis": 1, "concat_axis": 0, "tiled": True}),
                ]
                if in_mesh_order:  # JAX requires it of ppermute
                    perm = [[i, (i + 1) % n] for i in range(n)]
                    cases.append(("ppermute", f"ppermute(x, {axes!r}, "
                                  f"perm={perm!r})", {"perm": perm}))
                for fn, body, kwargs in cases:
                    with self.subTest(mesh=mesh, axes=axes, body=body):
                        common = ["--mesh", mesh, "--arg", self.file(x),
                                  "--in-spec", spec, "--out-spec", spec,
                                  "--no-check-rep"]
                        kwargs = {"axes": list(axes), **kwargs}
                        (native,) = self.run_job(*common, "--fn", fn,
                                                 "--kwargs", json.dumps(kwargs))
                        (program,) = self.run_job(*common, "--expr",
                                                  f"lambda x: {body}")
                        np.testing.assert_array_equal(program, native)
                with self.subTest(mesh=mesh, axes=axes, fn="axis_index"):
                    common = ["--mesh", mesh, "--out-spec", spec]
                    (native,) = self.run_job(
                        *common, "--fn", "axis_index", "--kwargs",
                        json.dumps({"axes": list(axes)}))
                    (program,) = self.run_job(
                        *common, "--expr",
                        f"lambda: axis_index({axes!r})[None]")
                    np.testing.assert_array_equal(program, native)

    def test_axis_index_varies_and_psum_makes_it_invariant(self):
        (got,) = self.run_job(
            "--mesh", "x=2,y=2", "--expr",
            "lambda: psum(axis_index('y') * 10 + axis_index('x'), "
            "('x', 'y'))", "--out-spec", "P()")
        self.assertEqual(int(got), sum(10 * y + x for x in range(2)
                                       for y in range(2)))

    def test_refusals_point_at_the_source(self):
        x = self.file(np.ones((4, 4), np.float32))
        cases = [
            ("lambda x: psum(x, 'modle')", "P('x')", "'modle'"),
            ("lambda x: x @ jnp.ones((3, 2))", "P('x')", "matmul"),
            ("lambda x: import os", "P('x')", "line 1, column"),
            ("lambda x: x", "P()", "replicated across mesh axis 'x'"),
        ]
        for source, out_spec, expected in cases:
            with self.subTest(source=source):
                code, out, err = self.ctl(
                    self.c, "run", "--mesh", "x=2", "--expr", source, "--arg",
                    x, "--in-spec", "P('x')", "--out-spec", out_spec)
                self.assertEqual(code, 65, err)
                self.assertIn("INVALID_ARGUMENT", err)
                self.assertIn(expected, err)
        code, out, err = self.ctl(
            self.c, "run", "--mesh", "x=2", "--expr", "lambda x: psum(x, 'y')",
            "--arg", x, "--in-spec", "P('x')", "--out-spec", "P('x')")
        caret = [line for line in err.splitlines() if line.strip() == "^"]
        self.assertEqual(len(caret), 1, err)
        # --no-check-rep turns the replication rule off, as in JAX.
        code, out, err = self.ctl(
            self.c, "run", "--mesh", "x=2", "--expr", "lambda x: x * 1",
            "--arg", x, "--in-spec", "P('x')", "--out-spec", "P()",
            "--no-check-rep")
        self.assertEqual(code, 0, err)

    def test_a_source_over_the_limit_is_refused_before_it_runs(self):
        source = self.path("long.py")
        with open(source, "w") as f:
            f.write("lambda x: " + " + ".join(["x"] * 40000))
        code, out, err = self.ctl(
            self.c, "run", "--mesh", "x=2", "--expr-file", source,
            "--arg", self.file(np.ones(4)), "--in-spec", "P('x')",
            "--out-spec", "P('x')")
        self.assertEqual(code, 75, err)
        self.assertIn("RESOURCE_EXHAUSTED", err)
        self.assertIn("bytes", err)
        code, out, err = self.ctl(
            self.c, "run", "--mesh", "x=2", "--expr-file",
            self.path("missing.py"), "--arg", self.file(np.ones(4)),
            "--in-spec", "P('x')", "--out-spec", "P('x')")
        self.assertEqual(code, 66, err)

    def test_plan_shows_shapes_costs_and_blocks(self):
        x = self.file(np.zeros((8, 6), np.float32))
        w1 = self.file(np.zeros((6, 16), np.float32))
        w2 = self.file(np.zeros((16, 5), np.float32))
        flags = ["--mesh", "data=2,model=2", "--expr", MLP, "--arg", x,
                 "--arg", w1, "--arg", w2, "--in-spec", "P('data', None)",
                 "--in-spec", "P(None, 'model')", "--in-spec",
                 "P('model', None)", "--out-spec", "P('data', None)"]
        code, out, err = self.ctl(self.c, "plan", *flags, "--json")
        self.assertEqual(code, 0, err)
        plan = json.loads(out)
        self.assertEqual(plan["outputs"][0]["shape"], [8, 5])
        self.assertEqual(plan["outputs"][0]["block_shape"], [4, 5])
        self.assertEqual(plan["inputs"][1]["block_shape"], [6, 8])
        per = plan["per_device"]
        # x block (4,6) @ w1 block (6,8), relu, @ w2 block (8,5), psum.
        self.assertGreaterEqual(per["flops"], 2 * 4 * 6 * 8 + 2 * 4 * 8 * 5)
        self.assertGreater(per["collective_bytes_sent"], 0)
        self.assertEqual(per["scatter_bytes"], (4 * 6 + 6 * 8 + 8 * 5) * 4)
        self.assertEqual(per["gather_bytes"], 4 * 5 * 4)
        self.assertGreater(per["peak_bytes"], 0)
        code, out, err = self.ctl(self.c, "plan", *flags)
        self.assertEqual(code, 0, err)
        self.assertIn("float32[8,5]", out)
        self.assertIn("+", out)  # the block pictures
        self.assertIn("0,1", out)  # output 0 is replicated over 'model'

    def test_plan_of_builtins_matches_what_they_return(self):
        """Each built-in's shape program gives the shape and dtype the
        function really returns."""
        x = RNG.standard_normal((8, 4)).astype(np.float32)
        i = RNG.integers(-9, 9, (8, 4)).astype(np.int32)
        w = RNG.standard_normal((4, 6)).astype(np.float32)
        l = RNG.integers(-9, 9, (8, 4)).astype(np.int64)
        cases = [
            ("identity", [x], "P('x')", "{}", "P('x')"),
            ("scale", [l], "P('x')", '{"alpha": 2.0}', "P('x')"),
            ("scale", [i], "P('x')", '{"alpha": 2.0}', "P('x')"),
            ("scale", [i], "P('x')", '{"alpha": 3}', "P('x')"),
            ("pmean", [l], "P('x')", '{"axes": "x"}', "P()"),
            ("pmean", [i], "P('x')", '{"axes": "x"}', "P()"),
            ("add", [i, i], "P('x')", "{}", "P('x')"),
            ("relu", [x], "P(None, 'y')", "{}", "P(None, 'y')"),
            ("matmul", [x, w], "P()", "{}", "P()"),
            ("sum", [i], "P('x')", '{"axis": 1, "keepdims": true}', "P('x')"),
            ("psum", [x], "P('x', 'y')", '{"axes": "y"}', "P('x')"),
            ("all_gather", [x], "P(('x', 'y'))",
             '{"axes": ["x", "y"], "axis": 1}', "P()"),
            ("psum_scatter", [x], "P()",
             '{"axes": "x", "scatter_dimension": 0, "tiled": true}',
             "P('x')"),
            ("all_to_all", [x], "P('x')",
             '{"axes": "y", "split_axis": 1, "concat_axis": 0, '
             '"tiled": true}', "P('x')"),
            ("global_sum", [i], "P('x')", '{"axes": ["x", "y"]}', "P()"),
            ("axis_index", [], "P()", '{"axes": "y"}', "P('y')"),
        ]
        for fn, arrays, in_spec, kwargs, out_spec in cases:
            with self.subTest(fn=fn):
                flags = ["--mesh", "x=2,y=2", "--fn", fn, "--kwargs", kwargs,
                         "--out-spec", out_spec, "--no-check-rep"]
                for a in arrays:
                    flags += ["--arg", self.file(a)]
                if arrays:
                    flags += ["--in-spec", in_spec]
                code, out, err = self.ctl(self.c, "plan", *flags, "--json")
                self.assertEqual(code, 0, err)
                planned = json.loads(out)["outputs"][0]
                (got,) = self.run_job(*flags)
                self.assertEqual(planned["shape"], list(got.shape))
                self.assertEqual(planned["dtype"], str(got.dtype))
                self.assertGreaterEqual(json.loads(out)["per_device"]["flops"],
                                        0)


class RegisteredProgramTest(harness.ClusterTestCase):
    """Programs registered by name on a coordinator with a data
    directory."""

    def test_a_registered_program_survives_a_restart(self):
        data = self.path("data")
        os.mkdir(data)
        c = self.cluster(2, coordinator_args=["--data-dir", data])
        code, out, err = self.ctl(
            c, "register", "scaled_sum", "--expr",
            "def scaled_sum(x, y):\n    return psum(x * 3 + y, 'i')\n")
        self.assertEqual(code, 0, err)
        code, out, err = self.ctl(c, "functions", "--json")
        listed = {f["name"]: f for f in json.loads(out)["functions"]}
        self.assertIn("scaled_sum", listed)
        self.assertIn("psum(x * 3 + y", listed["scaled_sum"]["program"])
        a, b = np.arange(4.0), np.ones(4)
        args = ["--mesh", "i=2", "--arg", self.file(a), "--arg", self.file(b),
                "--in-spec", "P('i')", "--out-spec", "P()"]
        want = (a * 3 + b).reshape(2, 2).sum(axis=0)
        for restart in (False, True):
            if restart:
                port = c.address.rsplit(":", 1)[1]
                c.kill_coordinator()
                c.start_coordinator(port)
                c.wait_for_workers(2)
            out_path = self.path(f"sum{int(restart)}.npy")
            code, out, err = self.ctl(c, "run", "--fn", "scaled_sum", *args,
                                      "--out", out_path)
            self.assertEqual(code, 0, err)
            np.testing.assert_allclose(np.load(out_path), want)
        code, out, err = self.ctl(c, "unregister", "scaled_sum")
        self.assertEqual(code, 0, err)
        code, out, err = self.ctl(c, "run", "--fn", "scaled_sum", *args)
        self.assertEqual(code, 64, err)
        self.assertIn("NOT_FOUND", err)

    def test_names_and_sources_are_checked(self):
        c = self.cluster(1)
        code, out, err = self.ctl(c, "register", "psum", "--expr",
                                  "lambda x: x")
        self.assertEqual(code, 73, err)
        self.assertIn("built-in", err)
        code, out, err = self.ctl(c, "register", "../etc", "--expr",
                                  "lambda x: x")
        self.assertEqual(code, 65, err)
        code, out, err = self.ctl(c, "register", "broken", "--expr",
                                  "lambda x: x +")
        self.assertEqual(code, 65, err)
        self.assertIn("line 1, column", err)
        code, out, err = self.ctl(c, "register", "twice", "--expr",
                                  "lambda x: x")
        self.assertEqual(code, 0, err)
        self.assertIn("memory only", err)  # no --data-dir
        code, out, err = self.ctl(c, "register", "twice", "--expr",
                                  "lambda x: -x")
        self.assertEqual(code, 73, err)
        code, out, err = self.ctl(c, "register", "twice", "--expr",
                                  "lambda x: -x", "--replace")
        self.assertEqual(code, 0, err)


if __name__ == "__main__":
    harness.main()
