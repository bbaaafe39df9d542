"""Pytrees, brainstate's state specs and nnx's get-tree end to end, through
shardctl on one real local cluster of 4 workers, checked against numpy:

- an .npz argument is a dict tree; --in-spec trees are JAX tree prefixes;
  --in-rules give each leaf a spec by its path; outputs come back as a
  tree in one .npz (--out-tree, --out-rules);
- prefix mismatches, unmatched rules and rank errors name the key path in
  JAX's wording, with exit 65;
- a read-only state (brainstate's `data * w.value`) is never re-stored;
  --state-spec SPEC for every state; --state-out-spec stores a state in
  another sharding;
- get-tree is the inverse of put-tree, bit for bit.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RNG = np.random.default_rng(15)
DATA_ERR = 65


class TreeTest(harness.ClusterTestCase):
    scratch_prefix = "shardmap-tree-"

    @classmethod
    def setUpClass(cls):
        cls.up = harness.UpCluster(4)

    @classmethod
    def tearDownClass(cls):
        cls.up.close()

    def run_ok(self, *args):
        code, out, err = self.ctl(self.up, "run", *args)
        self.assertEqual(code, 0, err)
        return out, err

    def npz(self, **arrays):
        self.count += 1
        path = self.path(f"t{self.count}.npz")
        np.savez(path, **arrays)
        return path

    def ls(self, prefix):
        code, out, err = self.ctl(self.up, "ls", prefix, "--json")
        self.assertEqual(code, 0, err)
        return {a["name"]: a for a in json.loads(out)["arrays"]}

    # --- pytrees ---------------------------------------------------------

    def test_mlp_params_tree_with_in_rules(self):
        # flax nnx's tensor-parallel MLP: mlp_tp(x, w1, w2) takes the leaves
        # of (x, {'linear1': {'kernel'}, 'linear2': {'kernel'}}) in order.
        x = RNG.standard_normal((4, 8)).astype(np.float32)
        w1 = RNG.standard_normal((8, 16)).astype(np.float32)
        w2 = RNG.standard_normal((16, 3)).astype(np.float32)
        params = self.npz(**{"linear2/kernel": w2, "linear1/kernel": w1})
        out = self.path("y.npy")
        self.run_ok("--mesh", "model=4", "--fn", "mlp_tp",
                    "--arg", self.file(x), "--arg", params,
                    "--in-rules", "linear1/kernel=P(None, 'model'); "
                    "linear2/kernel=P('model', None); *=P()",
                    "--out", out, "--out-spec", "P()",
                    "--kwargs", '{"axes": "model"}')
        np.testing.assert_allclose(np.load(out), np.maximum(x @ w1, 0) @ w2,
                                   rtol=1e-4, atol=1e-4)

    def test_plan_names_tree_arguments_by_their_path(self):
        x = np.zeros((4, 8), np.float32)
        params = self.npz(**{"linear2/kernel": np.zeros((16, 3), np.float32),
                             "linear1/kernel": np.zeros((8, 16), np.float32)})
        code, out, err = self.ctl(
            self.up, "plan", "--mesh", "model=4", "--fn", "mlp_tp", "--arg",
            self.file(x), "--arg", params, "--in-rules",
            "linear1/kernel=P(None, 'model'); linear2/kernel=P('model', "
            "None); *=P()", "--out-spec", "P()", "--kwargs",
            '{"axes": "model"}', "--json")
        self.assertEqual(code, 0, err)
        inputs = json.loads(out)["inputs"]
        self.assertEqual([a["role"] for a in inputs],
                         ["args[0]", "args[1]['linear1']['kernel']",
                          "args[1]['linear2']['kernel']"])
        self.assertEqual(inputs[1]["block_shape"], [8, 4])

    def test_plan_names_tree_outputs_by_their_path(self):
        params = self.npz(w=np.zeros((8, 4), np.float32),
                          b=np.zeros(8, np.float32))
        code, out, err = self.ctl(
            self.up, "plan", "--mesh", "x=2,y=2",
            "--expr", "lambda b, w: (b * 2.0, w + 1.0)",
            "--arg", params, "--in-spec", "{'b': P('x'), 'w': P('x', 'y')}",
            "--out-tree", "{'new': {'b': *, 'w': *}}",
            "--out-rules", "*/w=P('x', 'y'); *=P('x')", "--json")
        self.assertEqual(code, 0, err)
        outputs = json.loads(out)["outputs"]
        self.assertEqual([a["role"] for a in outputs],
                         ["out['new']['b']", "out['new']['w']"])
        self.assertEqual(outputs[1]["block_shape"], [4, 2])
        # Without an out_tree, outputs keep their numbers.
        code, out, err = self.ctl(
            self.up, "plan", "--mesh", "x=2", "--expr", "lambda b, w: b",
            "--arg", params, "--in-spec", "P('x')", "--out-spec", "P('x')",
            "--json")
        self.assertEqual(code, 0, err)
        self.assertEqual([a["role"] for a in json.loads(out)["outputs"]],
                         ["output 0"])

    def test_tree_prefix_in_specs_and_tree_output(self):
        w = RNG.standard_normal((8, 4)).astype(np.float32)
        b = RNG.standard_normal((8,)).astype(np.float32)
        params = self.npz(w=w, b=b)
        out = self.path("new.npz")
        # Leaves in order: b, w (dict keys sorted, as JAX flattens them).
        _, err = self.run_ok(
            "--mesh", "x=2,y=2",
            "--expr", "lambda b, w: (b * 2.0, w + 1.0)",
            "--arg", params, "--in-spec", "{'b': P('x'), 'w': P('x', 'y')}",
            "--out-tree", "args[0]",
            "--out-rules", "w=P('x', 'y'); b=P('x')", "--out", out)
        got = np.load(out)
        self.assertEqual(sorted(got.files), ["b", "w"])
        np.testing.assert_array_equal(got["b"], b * 2.0)
        np.testing.assert_array_equal(got["w"], w + 1.0)
        self.assertIn("out['w']: float32[8,4]", err)

    def test_one_spec_for_the_whole_tree_and_literal_out_tree(self):
        a = np.arange(16, dtype=np.int32).reshape(4, 4)
        c = np.arange(8, dtype=np.int64)
        out = self.path("o.npz")
        self.run_ok("--mesh", "x=4", "--expr", "lambda a, c: (c, a)",
                    "--arg", self.npz(**{"m/a": a, "m/c": c}),
                    "--in-spec", "P('x')",
                    "--out-tree", "{'first': *, 'second': {'z': *}}",
                    "--out-spec", "P('x')", "--out", out)
        got = np.load(out)
        np.testing.assert_array_equal(got["first"], c)
        np.testing.assert_array_equal(got["second/z"], a)

    def test_prefix_mismatch_names_the_key_path(self):
        params = self.npz(w=np.zeros((4, 4), np.float32),
                          b=np.zeros(4, np.float32))
        code, _, err = self.ctl(
            self.up, "run", "--mesh", "x=2", "--expr", "lambda b, w: b",
            "--arg", params, "--in-spec", "{'w': P('x')}",
            "--out-spec", "P()")
        self.assertEqual(code, DATA_ERR, err)
        self.assertIn("pytree structure error: different numbers of pytree "
                      "children at key path\n    shard_map in_specs[0]\n", err)

    def test_unmatched_rule_and_rank_error_name_the_leaf(self):
        params = self.npz(w=np.zeros((4, 4), np.float32),
                          b=np.zeros(4, np.float32))
        code, _, err = self.ctl(
            self.up, "run", "--mesh", "x=2", "--expr", "lambda b, w: b",
            "--arg", params, "--in-rules", "w=P('x')", "--out-spec", "P()")
        self.assertEqual(code, DATA_ERR, err)
        self.assertIn("args[0]['b']", err)
        self.assertIn("no sharding rule matches path '0/b'", err)
        code, _, err = self.ctl(
            self.up, "run", "--mesh", "x=2", "--expr", "lambda b, w: b",
            "--arg", params, "--in-rules", "*=P(None, 'x')",
            "--out-spec", "P()")
        self.assertEqual(code, DATA_ERR, err)
        self.assertIn("args[0]['b']", err)
        self.assertIn("in_rules rule '*'", err)

    def test_resident_tree_updated_as_a_tree(self):
        # nnx: params put by rules, one step reads @pp/ and stores the new
        # params back under the same names and shardings, then get-tree.
        w = RNG.standard_normal((8, 4)).astype(np.float32)
        b = RNG.standard_normal(8).astype(np.float32)
        rules = "w=P('x', 'y'); b=P('x')"
        code, _, err = self.ctl(self.up, "put-tree", "pp", self.npz(w=w, b=b),
                                "--mesh", "x=2,y=2", "--rules", rules,
                                "--overwrite")
        self.assertEqual(code, 0, err)
        before = self.ls("pp/")
        self.run_ok("--mesh", "x=2,y=2",
                    "--expr", "lambda b, w: (b - 0.5, w * 0.5)",
                    "--arg", "@pp/", "--in-rules", rules,
                    "--out-tree", "args[0]", "--out-rules", rules,
                    "--out", "@pp/")
        after = self.ls("pp/")
        for name in ("pp/w", "pp/b"):
            self.assertGreater(after[name]["version"], before[name]["version"])
            self.assertEqual(after[name]["spec"], before[name]["spec"])
        back = self.path("pp.npz")
        code, _, err = self.ctl(self.up, "get-tree", "pp", back)
        self.assertEqual(code, 0, err)
        got = np.load(back)
        np.testing.assert_array_equal(got["w"], w * np.float32(0.5))
        np.testing.assert_array_equal(got["b"], b - np.float32(0.5))

    # --- state specs -----------------------------------------------------

    def put(self, name, array, mesh, spec):
        code, _, err = self.ctl(self.up, "put", name, self.file(array),
                                "--mesh", mesh, "--spec", spec, "--overwrite")
        self.assertEqual(code, 0, err)

    def get(self, name):
        out = self.path(name.replace("/", "_") + ".npy")
        code, _, err = self.ctl(self.up, "get", name, "--out", out)
        self.assertEqual(code, 0, err)
        return np.load(out)

    def test_read_only_state_is_never_stored(self):
        # brainstate: data * w.value with w a read-only weight.
        w = RNG.standard_normal(6).astype(np.float32)
        data = RNG.standard_normal((8, 6)).astype(np.float32)
        self.put("ro/w", w, "x=4", "P()")
        before = self.ls("ro/")["ro/w"]["version"]
        out = self.path("y.npy")
        for _ in range(2):
            self.run_ok("--mesh", "x=4", "--fn", "mul_by_state",
                        "--arg", self.file(data), "--in-spec", "P('x')",
                        "--state", "w=@ro/w", "--state-spec", "P()",
                        "--out", out, "--out-spec", "P('x')")
            np.testing.assert_array_equal(np.load(out), data * w)
        self.assertEqual(self.ls("ro/")["ro/w"]["version"], before)
        np.testing.assert_array_equal(self.get("ro/w"), w)
        code, _, err = self.ctl(
            self.up, "run", "--mesh", "x=4", "--fn", "mul_by_state",
            "--arg", self.file(data), "--in-spec", "P('x')",
            "--state", "w=@ro/w", "--state-out-spec", "w=P('x')",
            "--out-spec", "P('x')")
        self.assertEqual(code, DATA_ERR, err)
        self.assertIn("only reads state 'w', which is never stored back", err)

    def test_state_read_in_one_sharding_written_in_another(self):
        buf = np.arange(8, dtype=np.float64)
        x = RNG.standard_normal(8)
        self.put("st/buf", buf, "x=4", "P('x')")
        self.run_ok("--mesh", "x=4", "--fn", "accumulate",
                    "--arg", self.file(x), "--in-spec", "P('x')",
                    "--state", "buffer=@st/buf", "--state-spec", "P('x')",
                    "--state-out-spec", "buffer=P()", "--out-spec", "P('x')")
        info = self.ls("st/")["st/buf"]
        self.assertEqual(info["spec"], "P()")
        np.testing.assert_array_equal(self.get("st/buf"), buf + x)
        # Read replicated (P()), written back split over 'x'.
        x2 = RNG.standard_normal(8)
        self.run_ok("--mesh", "x=4", "--fn", "accumulate",
                    "--arg", self.file(x2), "--in-spec", "P()",
                    "--state", "buffer=@st/buf",
                    "--state-out-spec", "buffer=P('x')", "--out-spec", "P()")
        self.assertEqual(self.ls("st/")["st/buf"]["spec"], "P('x',)")
        np.testing.assert_array_equal(self.get("st/buf"), buf + x + x2)

    # --- get-tree --------------------------------------------------------

    def test_get_tree_inverts_put_tree_bit_for_bit(self):
        arrays = {
            "linear1/kernel": RNG.standard_normal((8, 16)).astype(np.float32),
            "linear1/bias": np.array([np.nan, -0.0, np.inf, 1.5], np.float64),
            "linear2/kernel": np.arange(12, dtype=np.int64).reshape(4, 3),
            "step": np.array([7], np.int32)}
        src = self.npz(**arrays)
        code, _, err = self.ctl(
            self.up, "put-tree", "gt", src, "--mesh", "model=4", "--rules",
            "linear1/kernel=P(None, 'model'); linear2/*=P('model'); *=P()")
        self.assertEqual(code, 0, err)
        back = self.path("back.npz")
        code, out, err = self.ctl(self.up, "get-tree", "gt", back, "--json")
        self.assertEqual(code, 0, err)
        self.assertEqual(len(json.loads(out)["arrays"]), 4)
        got = np.load(back)
        self.assertEqual(sorted(got.files), sorted(arrays))
        for key, want in arrays.items():
            self.assertEqual(got[key].dtype, want.dtype)
            self.assertEqual(got[key].tobytes(), want.tobytes(), key)
        code, _, err = self.ctl(self.up, "get-tree", "nothing-here", back)
        self.assertEqual(code, DATA_ERR, err)
        self.assertIn("no resident arrays are named nothing-here/", err)


if __name__ == "__main__":
    unittest.main()
