"""The Python client's resident arrays against a real local cluster it
starts itself: put/get/ls/delete, handles as arguments, brainstate-style
state (accumulate), a training loop with data and parameters resident
(against numpy's least squares), put_tree with nnx-style rules (and the
rule matching on its own), checkpoints, and registered programs.

Environment: SHARDMAP_BIN_DIR = directory of the binaries; the package is
imported from the build tree (build/python, next to build/bin).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import python_env  # noqa: E402
from python_env import P, sm  # noqa: E402

RNG = np.random.default_rng(17)
setUpModule = python_env.check


class ResidentTest(python_env.LocalClusterCase):

    def test_registered_programs(self):
        c = self.cluster

        def halve(x):
            return x / 2

        self.assertEqual(c.register("py_halve", halve).name, "py_halve")
        self.assertIn("py_halve", [f.name for f in c.functions()])
        f = sm.shard_map("py_halve", mesh=self.line, in_specs=P("i"),
                         out_specs=P("i"))
        np.testing.assert_array_equal(f(np.arange(8.0)), np.arange(8.0) / 2)
        with self.assertRaises(sm.AlreadyExists):
            c.register("py_halve", "lambda x: x")
        c.register("py_halve", "lambda x: x * 3", replace=True)
        np.testing.assert_array_equal(f(np.arange(8.0)), np.arange(8.0) * 3)
        c.unregister("py_halve")
        with self.assertRaises(sm.NotFound):
            f(np.arange(8.0))
        with self.assertRaises(sm.NotFound):
            c.unregister("py_halve")

    def test_resident_arrays(self):
        c = self.cluster
        w = RNG.standard_normal((8, 4)).astype(np.float64)
        h = c.put("py/w", w, self.mesh, P("a", "b"))
        self.assertEqual((h.shape, h.dtype, h.spec), ((8, 4), np.float64,
                                                      P("a", "b")))
        np.testing.assert_array_equal(c.get("py/w"), w)
        np.testing.assert_array_equal(np.asarray(h), w)
        self.assertIn("py/w", [a.name for a in c.ls("py/")])
        # A handle as an argument: used where it lives, resharded as asked.
        f = sm.shard_map("add", mesh=self.mesh, in_specs=(P("a"), P("a")),
                         out_specs=P("a"))
        np.testing.assert_array_equal(f(h, w), 2 * w)
        with self.assertRaises(sm.FailedPrecondition):
            c.put("py/w", w[:4], self.mesh, P("a", "b"))
        c.put("py/w", w[:4], self.mesh, P("a"), overwrite=True)
        np.testing.assert_array_equal(c.get("py/w"), w[:4])
        c.delete("py/w")
        with self.assertRaises(sm.NotFound):
            c.get("py/w")
        with self.assertRaises(sm.NotFound):
            c.delete("py/w")

    def test_accumulating_state(self):
        c = self.cluster
        buf = c.put("py/buffer", np.zeros(8, np.float32), self.line, P("i"))
        acc = sm.shard_map("accumulate", mesh=self.line, in_specs=P("i"),
                           out_specs=P("i"), state={"buffer": buf})
        for step in range(1, 4):
            out = acc(np.full(8, step, np.float32))
        np.testing.assert_array_equal(out, np.full(8, 6.0))
        np.testing.assert_array_equal(c.get("py/buffer"), np.full(8, 6.0))
        # A failed job changes no state.
        with self.assertRaises(sm.InvalidArgument):
            acc(np.ones(6, np.float32))
        np.testing.assert_array_equal(c.get("py/buffer"), np.full(8, 6.0))
        c.delete("py/buffer")

    def test_training_loop_with_resident_data_and_params(self):
        c, m = self.cluster, self.cluster.mesh(data=4)
        n, d = 64, 3
        x = RNG.standard_normal((n, d))
        y = x @ np.array([1.5, -2.0, 0.5]) + 0.25
        hx = c.put("py/lr/x", x, m, P("data"))
        hy = c.put("py/lr/y", y, m, P("data"))
        c.put("py/lr/params", np.zeros(d + 1), m, P())
        step = sm.shard_map("linear_sgd_step", mesh=m, in_specs=P("data"),
                            out_specs=P(), lr=0.2, axes="data",
                            state={"params": ("py/lr/params", P())})
        losses = [float(step(hx, hy)[0]) for _ in range(150)]
        self.assertLess(losses[-1], losses[0] / 100)
        want, *_ = np.linalg.lstsq(np.c_[x, np.ones(n)], y, rcond=None)
        np.testing.assert_allclose(c.get("py/lr/params"), want, atol=1e-3)
        for name in ("py/lr/x", "py/lr/y", "py/lr/params"):
            c.delete(name)

    def test_put_takes_its_spec_from_rules(self):
        c = self.cluster
        m = c.mesh(model=4)
        w = RNG.standard_normal((8, 16)).astype(np.float32)
        rules = {"*/bias": P(), "kernel": P(None, "model")}
        h = c.put("py/rules/l1/kernel", w, m, rules=rules)
        self.assertEqual(h.spec, P(None, "model"))
        np.testing.assert_array_equal(c.get(h), w)
        with self.assertRaises(sm.InvalidArgument):
            c.put("py/rules/other", w, m, rules=rules)
        c.delete("py/rules/l1/kernel")

    def test_put_tree_rules(self):
        c = self.cluster
        m = c.mesh(model=4)
        w1 = RNG.standard_normal((8, 16)).astype(np.float32)
        w2 = RNG.standard_normal((16, 3)).astype(np.float32)
        params = {"linear1": {"kernel": w1, "bias": np.zeros(16, np.float32)},
                  "linear2": {"kernel": w2}}
        tree = c.put_tree("py/mlp", params, m,
                          "linear1/kernel=P(None, 'model'); "
                          "linear2/kernel=P('model', None); *=P()")
        self.assertEqual(tree["linear1"]["kernel"].spec, P(None, "model"))
        self.assertEqual(tree["linear1"]["bias"].spec, P())
        self.assertEqual(tree["linear2"]["kernel"].name, "py/mlp/linear2/kernel")
        x = RNG.standard_normal((4, 8)).astype(np.float32)
        mlp = sm.shard_map("mlp_tp", mesh=m,
                           in_specs=(P(), P(None, "model"), P("model", None)),
                           out_specs=P(), axes="model")
        np.testing.assert_allclose(
            mlp(x, tree["linear1"]["kernel"], tree["linear2"]["kernel"]),
            np.maximum(x @ w1, 0) @ w2, rtol=1e-4, atol=1e-4)
        # Existing names, a rule that matches nothing, or a spec that does
        # not fit: refused before anything is put.
        with self.assertRaises(sm.AlreadyExists):
            c.put_tree("py/mlp", params, m, [("*", P())])
        with self.assertRaises(sm.InvalidArgument) as e:
            c.put_tree("py/mlp2", params, m, {"kernel": P()})
        self.assertIn("linear1/bias", e.exception.message)
        with self.assertRaises(sm.InvalidArgument):
            c.put_tree("py/mlp2", params, m, [("*", P(None, None, "model"))])
        self.assertEqual(c.ls("py/mlp2"), [])
        for a in c.ls("py/mlp/"):
            a.delete()

    def test_tree_rule_matching(self):
        from shardmap.tree import parse_rules, rule_matches
        for flt, path, want in [
                ("kernel", "mlp/linear1/kernel", True),
                ("linear1/kernel", "mlp/linear1/kernel", True),
                ("1/kernel", "mlp/linear1/kernel", False),
                ("*/bias", "a/b/bias", True), ("*", "a/b", True),
                ("/bias", "bias", True), ("/bias", "a/bias", False),
                ("l?n*", "x/lin1", True), ("l[0-9]", "l/", False),
                ("[!a]x", "bx", True), ("[!a]x", "ax", False)]:
            self.assertEqual(rule_matches(flt, path), want, (flt, path))
        self.assertEqual(parse_rules("a=P('x', None), b=P()"),
                         [("a", P("x", None)), ("b", P())])
        for bad in ("nospec", "=P()", "a//b=P()", "a=P(1)"):
            with self.assertRaises(sm.InvalidArgument):
                parse_rules(bad)

    def test_save_and_restore(self):
        c = self.cluster
        v = RNG.integers(0, 1 << 40, (6, 4))
        c.put("py/ckpt", v, self.mesh, P("a"))
        directory = os.path.join(self.tmp.name, "ckpt")
        saved = c.save(directory)
        self.assertIn("py/ckpt", [a.name for a in saved])
        c.delete("py/ckpt")
        restored = c.restore(directory)
        self.assertIn("py/ckpt", [a.name for a in restored])
        np.testing.assert_array_equal(c.get("py/ckpt"), v)
        c.delete("py/ckpt")


if __name__ == "__main__":
    harness.main()
