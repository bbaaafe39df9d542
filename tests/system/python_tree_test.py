"""Pytrees, brainstate's state specs and get_tree through the Python client
(python/shardmap) against a real local cluster it starts, checked against
numpy: dict/list/tuple/None arguments and results, nested in_specs
prefixes with JAX's error wording, state_in_specs/state_out_specs with a
read-only state never re-stored, and get_tree inverting put_tree.

Environment: SHARDMAP_BIN_DIR = directory of the binaries; the package is
imported from the build tree (build/python, next to build/bin).
"""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_env  # noqa: E402
from python_env import P, sm  # noqa: E402

setUpModule = python_env.check
RNG = np.random.default_rng(17)


class PythonTreeTest(python_env.LocalClusterCase):

    def test_dict_list_none_arguments_and_tree_results(self):
        params = {"w": RNG.standard_normal((8, 4)).astype(np.float32),
                  "b": RNG.standard_normal(8).astype(np.float32)}
        xs = [np.arange(8.0), None]
        # Leaves in JAX's order: params['b'], params['w'], xs[0]; the
        # outputs fill out_specs' leaves in order: 'scaled'[0], then 'sum'.
        f = sm.shard_map("lambda b, w, x: (w * 2.0, b + x)", mesh=self.line,
                         in_specs=({"b": P("i"), "w": P("i", None)}, P("i")),
                         out_specs={"sum": P("i"), "scaled": [P("i")]})
        got = f(params, xs)
        self.assertEqual(sorted(got), ["scaled", "sum"])
        np.testing.assert_allclose(got["sum"], params["b"] + np.arange(8.0))
        self.assertIsInstance(got["scaled"], list)
        np.testing.assert_array_equal(got["scaled"][0], params["w"] * 2.0)
        # One P for the whole tree.
        g = sm.shard_map("lambda b, w: b", mesh=self.line, in_specs=P("i"),
                         out_specs=P("i"))
        np.testing.assert_array_equal(g(params), params["b"])

    def test_prefix_mismatch_in_jax_wording(self):
        f = sm.shard_map("lambda b, w: b", mesh=self.line,
                         in_specs=({"w": P("i")},), out_specs=P("i"))
        with self.assertRaises(sm.InvalidArgument) as e:
            f({"w": np.zeros(8), "b": np.zeros(8)})
        self.assertIn("pytree structure error: different numbers of pytree "
                      "children at key path\n    shard_map in_specs[0]",
                      e.exception.message)
        f = sm.shard_map("lambda b, w: b", mesh=self.line,
                         in_specs=({"b": P("i", None), "w": P()},),
                         out_specs=P("i"))
        with self.assertRaises(sm.InvalidArgument) as e:
            f({"w": np.zeros(8), "b": np.zeros(8)})
        self.assertIn("args[0]['b']", e.exception.message)
        self.assertIn("in_specs[0]['b']", e.exception.message)

    def test_state_in_and_out_specs(self):
        # brainstate: data * w.value, w read-only: never re-stored.
        w = self.cluster.put("py/w", RNG.standard_normal(6), self.line, P(),
                             overwrite=True)
        data = RNG.standard_normal((8, 6))
        f = sm.shard_map("mul_by_state", mesh=self.line, in_specs=P("i"),
                         out_specs=P("i"), state={"w": w},
                         state_in_specs=P())
        np.testing.assert_array_equal(f(data), data * self.cluster.get(w))
        self.assertEqual(self.cluster.info("py/w").version, w.version)
        with self.assertRaises(sm.InvalidArgument) as e:
            sm.shard_map("mul_by_state", mesh=self.line, in_specs=P("i"),
                         out_specs=P("i"), state={"w": w},
                         state_out_specs={"w": P("i")})(data)
        self.assertIn("only reads state 'w'", e.exception.message)
        # A state read split over 'i' and stored back replicated.
        buf = self.cluster.put("py/buf", np.arange(8.0), self.line, P("i"),
                               overwrite=True)
        x = RNG.standard_normal(8)
        acc = sm.shard_map("accumulate", mesh=self.line, in_specs=P("i"),
                           out_specs=P("i"), state={"buffer": buf},
                           state_in_specs={"buffer": P("i")},
                           state_out_specs={"buffer": P()})
        acc(x)
        info = self.cluster.info("py/buf")
        self.assertEqual(tuple(info.spec), ())
        np.testing.assert_array_equal(self.cluster.get(info),
                                      np.arange(8.0) + x)

    def test_get_tree_inverts_put_tree(self):
        params = {"linear1": {"kernel": RNG.standard_normal((8, 4)),
                              "bias": np.array([np.nan, -0.0, 1.0, 2.0])},
                  "step": np.array([3], np.int64)}
        self.cluster.put_tree("pt", params, self.line,
                              [("kernel", P(None, "i")), ("*", P())],
                              overwrite=True)
        back = self.cluster.get_tree("pt")
        self.assertEqual(sorted(back), ["linear1", "step"])
        for got, want in ((back["linear1"]["kernel"],
                           params["linear1"]["kernel"]),
                          (back["linear1"]["bias"], params["linear1"]["bias"]),
                          (back["step"], params["step"])):
            self.assertEqual(got.dtype, want.dtype)
            self.assertEqual(got.tobytes(), want.tobytes())
        with self.assertRaises(sm.NotFound):
            self.cluster.get_tree("no-such-prefix")


if __name__ == "__main__":
    unittest.main()
