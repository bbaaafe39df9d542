"""End-to-end tests of shardctl's resident arrays (put, get, ls, rm,
put-tree, save, restore, run --arg/--out @NAME, --state) against real
coordinator and worker processes on 127.0.0.1, checked bit for bit against
numpy and the numpy reference in shardmap_ref.py. Run with Debian's
/usr/bin/python3 (it has numpy).

Environment: SHARDMAP_BIN_DIR = directory of shardctl and the servers;
SHARDMAP_CLUSTER_LOG = a file for the cluster's logs (info level), else
they are dropped.
"""
import json
import os
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
    TMP = harness.Scratch("shardmap-resident-test-")
    CLUSTER = harness.UpCluster(workers=8)
    ADDRESS = CLUSTER.address


def tearDownModule():
    CLUSTER.close()
    TMP.cleanup()


def fresh(stem):
    return TMP.fresh(stem)


def save(array):
    return TMP.save(array)


def out_path():
    return TMP.out_path()


shardctl = harness.shardctl


def ctl(*args):
    """A subcommand against the test cluster."""
    return shardctl(*args, "--coordinator", ADDRESS)


def put(name, array, mesh, spec, *extra):
    return ctl("put", name, save(array), "--mesh", mesh, "--spec", spec,
               *extra)


def get(name):
    """(exit code, array or None, stderr)."""
    out = out_path()
    code, _, err = ctl("get", name, "--out", out)
    return code, (np.load(out) if code == 0 else None), err


def ls(prefix):
    code, out, err = ctl("ls", prefix, "--json")
    if code != 0:
        raise AssertionError(f"ls {prefix}: exit {code}: {err}")
    return {a["name"]: a for a in json.loads(out)["arrays"]}


RNG = np.random.default_rng(4321)


def rand(shape, dtype):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-1000, 1000, size=shape).astype(dtype)
    x = RNG.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    # Values whose bits a sloppy copy would change.
    for i, v in enumerate([np.nan, -0.0, np.inf, -np.inf][:flat.size]):
        flat[i] = v
    return x


class Case(unittest.TestCase):

    def assertBitExact(self, got, want, what=""):
        self.assertIsNotNone(got, what)
        self.assertEqual(got.dtype, want.dtype, what)
        self.assertEqual(got.shape, want.shape, what)
        self.assertEqual(got.tobytes(), want.tobytes(), what)

    def assertOk(self, result, what=""):
        code, _, err = result[:3]
        self.assertEqual(code, 0, f"{what}: {err}")

    def assertError(self, result, exit_code, status, *fragments):
        code, _, err = result[:3]
        self.assertEqual(code, exit_code, err)
        self.assertIn(f"error: {status}:", err)
        for f in fragments:
            self.assertIn(f, err)


class PutGetTest(Case):

    def test_round_trips_over_1d_2d_3d_meshes(self):
        cases = [
            ("i=4", (8, 12), ["P()", "P('i')", "P(None, 'i')", "None"]),
            ("i=8", (16,), ["P('i')", "P()"]),
            ("x=2,y=2", (4, 8), ["P('x', 'y')", "P('y', 'x')", "P(('x', 'y'))",
                                 "P(None, ('y', 'x'))", "P('y')", "P()"]),
            ("x=2,y=2,z=2", (8, 4, 6), ["P('x', 'y', 'z')", "P(('z', 'x'), 'y')",
                                        "P(('x', 'y', 'z'))",
                                        "P(None, ('y', 'z'))", "P()"]),
        ]
        for mesh, shape, specs in cases:
            for spec in specs:
                for dtype in (np.float32, np.float64, np.int32, np.int64):
                    a = rand(shape, dtype)
                    name = fresh("rt/a")
                    with self.subTest(mesh=mesh, spec=spec, dtype=dtype):
                        self.assertOk(put(name, a, mesh, spec))
                        code, got, err = get(name)
                        self.assertEqual(code, 0, err)
                        self.assertBitExact(got, a)

    def test_scalar_and_empty_arrays(self):
        for a, spec in [(np.array(2.5, np.float32), "P()"),
                        (np.zeros((0, 3), np.int32), "P('x')")]:
            name = fresh("rt/edge")
            with self.subTest(shape=a.shape):
                self.assertOk(put(name, a, "x=2", spec))
                code, got, err = get(name)
                self.assertEqual(code, 0, err)
                self.assertBitExact(got, a)

    def test_get_prints_like_run_and_json(self):
        x = np.arange(6, dtype=np.int32).reshape(2, 3)
        name = fresh("print/a")
        self.assertOk(put(name, x, "x=2", "P('x')"))
        code, out, err = ctl("get", name)
        self.assertEqual(code, 0, err)
        self.assertEqual(out.strip(), "[[0 1 2]\n [3 4 5]]")
        code, out, err = ctl("get", "@" + name, "--json")
        self.assertEqual(code, 0, err)
        j = json.loads(out)
        self.assertEqual(j["name"], name)
        self.assertEqual(j["dtype"], "int32")
        self.assertEqual(j["shape"], [2, 3])
        self.assertEqual(j["values"], x.tolist())

    def test_put_json_describes_the_array(self):
        name = fresh("putjson/a")
        code, out, err = put(name, rand((4, 6), np.float32), "x=2,y=2",
                             "P('x', 'y')", "--json")
        self.assertEqual(code, 0, err)
        info = json.loads(out)
        self.assertEqual(info["name"], name)
        self.assertEqual(info["shape"], [4, 6])
        self.assertEqual(info["spec"], "P('x', 'y')")
        self.assertEqual(info["bytes"], 96)

    def test_ls_table_and_json(self):
        prefix = fresh("ls") + "/"
        self.assertOk(put(prefix + "w", rand((4, 6), np.float32), "x=2,y=2",
                          "P('x', 'y')"))
        self.assertOk(put(prefix + "b", rand((6,), np.int64), "x=2,y=2", "P()"))
        code, out, err = ctl("ls", prefix)
        self.assertEqual(code, 0, err)
        lines = out.strip().splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "ARRAY", "MESH", "SPEC",
                                            "VERSION", "BYTES", "STATUS"])
        self.assertEqual(len(lines), 3, out)
        # Sorted by name: b, then w.
        self.assertTrue(lines[1].startswith(prefix + "b "), out)
        self.assertIn("int64[6]", lines[1])
        self.assertIn("P()", lines[1])
        self.assertTrue(lines[1].rstrip().endswith("ok"), out)
        self.assertTrue(lines[2].startswith(prefix + "w "), out)
        for part in ("float32[4,6]", "x=2,y=2", "P('x', 'y')", " 96 "):
            self.assertIn(part, lines[2])
        arrays = ls(prefix)
        self.assertEqual(sorted(arrays), [prefix + "b", prefix + "w"])
        w = arrays[prefix + "w"]
        self.assertEqual((w["dtype"], w["shape"], w["mesh"], w["spec"]),
                         ("float32", [4, 6], "x=2,y=2", "P('x', 'y')"))
        self.assertEqual(w["bytes"], 96)
        self.assertFalse(w["lost"])
        self.assertEqual(len(w["workers"]), 4)
        self.assertEqual(ls(prefix + "nothing-here"), {})

    def test_rm_then_get_is_not_found(self):
        name = fresh("rm/a")
        self.assertOk(put(name, rand((4,), np.float32), "x=2", "P('x')"))
        self.assertOk(ctl("rm", name))
        self.assertNotIn(name, ls("rm/"))
        self.assertError(get(name), 65, "NOT_FOUND", name)
        self.assertError(ctl("rm", name), 65, "NOT_FOUND", name)
        code, out, err = ctl("get", name, "--json")
        self.assertEqual(code, 65, err)
        self.assertEqual(json.loads(out)["error"]["code"], "NOT_FOUND")

    def test_put_takes_its_spec_from_rules(self):
        prefix = fresh("rules")
        w, b = rand((4, 6), np.float32), rand((6,), np.float32)
        rules = "*/bias=P(); kernel=P(None, 'model'); *=P('data')"
        for name, array in ((f"{prefix}/l1/kernel", w),
                            (f"{prefix}/l1/bias", b)):
            self.assertOk(ctl("put", name, save(array), "--mesh",
                              "data=2,model=2", "--rules", rules))
            self.assertBitExact(get(name)[1], array, name)
        listed = ls(prefix)
        self.assertEqual(listed[f"{prefix}/l1/kernel"]["spec"],
                         "P(None, 'model')")
        self.assertEqual(listed[f"{prefix}/l1/bias"]["spec"], "P()")
        self.assertError(ctl("put", f"{prefix}/other", save(b), "--mesh",
                             "data=2", "--rules", "kernel=P('data')"), 64,
                         "INVALID_ARGUMENT", "--rules", f"{prefix}/other")
        self.assertNotIn(f"{prefix}/other", ls(prefix))

    def test_put_over_another_shape_needs_overwrite(self):
        name = fresh("ow/a")
        a, b, c = (rand((4,), np.float32), rand((6,), np.float32),
                   rand((6,), np.int32))
        self.assertOk(put(name, a, "x=2", "P('x')"))
        v1 = ls(name)[name]["version"]
        self.assertError(put(name, b, "x=2", "P('x')"), 73,
                         "FAILED_PRECONDITION", name)
        code, got, err = get(name)
        self.assertBitExact(got, a, "a refused put changes nothing")
        self.assertOk(put(name, b, "x=2", "P('x')", "--overwrite"))
        code, got, err = get(name)
        self.assertBitExact(got, b)
        # Another dtype is another array too.
        self.assertError(put(name, c, "x=2", "P('x')"), 73,
                         "FAILED_PRECONDITION", name)
        # The same dtype, shape and sharding needs no --overwrite (a new
        # version); another sharding does (docs/RELIABILITY.md, scenario 28).
        b2 = rand((6,), np.float32)
        self.assertOk(put(name, b2, "x=2", "P('x')"))
        code, got, err = get(name)
        self.assertBitExact(got, b2)
        self.assertGreater(ls(name)[name]["version"], v1)
        b3 = rand((6,), np.float32)
        self.assertError(put(name, b3, "x=2", "P()"), 73,
                         "FAILED_PRECONDITION", name)
        code, got, err = get(name)
        self.assertBitExact(got, b2, "a refused put changes nothing")
        self.assertOk(put(name, b3, "x=2", "P()", "--overwrite"))
        code, got, err = get(name)
        self.assertBitExact(got, b3)
        self.assertEqual(ls(name)[name]["spec"], "P()")

    def test_spec_that_does_not_fit(self):
        self.assertError(put(fresh("bad/a"), np.zeros(6, np.float32), "x=4",
                             "P('x')"), 65, "INVALID_ARGUMENT",
                         "4 does not evenly divide 6")
        self.assertError(put(fresh("bad/a"), np.zeros(4, np.float32), "x=2",
                             "P('z')"), 65, "INVALID_ARGUMENT",
                         "mesh axis 'z'")
        self.assertError(put(fresh("bad/a"), np.zeros(4, np.float32), "x=2",
                             "P('x', None)"), 65, "INVALID_ARGUMENT",
                         "rank 1")
        self.assertError(put(fresh("bad/a"), np.zeros(4, np.float32), "x=2",
                             "P('x'"), 64, "INVALID_ARGUMENT", "--spec")
        self.assertError(put(fresh("bad/a"), np.zeros(4, np.float32), "x=16",
                             "P()"), 69, "FAILED_PRECONDITION", "16 devices")
        self.assertError(ctl("put", "a", "/nonexistent/a.npy", "--mesh", "x=2"),
                         66, "NOT_FOUND", "a.npy")


SPECS_2X2 = ["P()", "P('x')", "P('y')", "P('x', 'y')", "P('y', 'x')",
             "P(('x', 'y'))", "P(None, 'x')"]


class JobsTest(Case):

    def run_file_out(self, mesh, fn, args, in_specs, out_spec, *extra):
        """run with --arg values (str: as given, arrays: saved) and one
        output to a file; (code, array or None, stderr)."""
        out = out_path()
        cmd = ["run", "--mesh", mesh, "--fn", fn]
        for a in args:
            cmd += ["--arg", a if isinstance(a, str) else save(a)]
        for s in in_specs:
            cmd += ["--in-spec", s]
        cmd += ["--out", out, "--out-spec", out_spec, *extra]
        code, _, err = ctl(*cmd)
        return code, (np.load(out) if code == 0 else None), err

    def test_resident_arg_resharded_for_every_pair_of_specs(self):
        a = rand((8, 8), np.float32)
        b = rand((8, 8), np.float32)
        mesh = "x=2,y=2"
        for src in SPECS_2X2:
            name = fresh("reshard/a")
            self.assertOk(put(name, a, mesh, src))
            for dst in SPECS_2X2:
                with self.subTest(src=src, dst=dst):
                    want = ref.shard_map(ref.reference("identity", {}),
                                         ref.parse_mesh(mesh),
                                         [ref.parse_spec(dst)],
                                         ref.parse_spec(dst), [a])
                    code, got, err = self.run_file_out(
                        mesh, "identity", ["@" + name], [dst], dst)
                    self.assertEqual(code, 0, err)
                    self.assertBitExact(got, want)
                    # A resident argument next to a file one.
                    want = ref.shard_map(ref.reference("add", {}),
                                         ref.parse_mesh(mesh),
                                         [ref.parse_spec(dst)] * 2,
                                         ref.parse_spec(dst), [a, b])
                    code, got, err = self.run_file_out(
                        mesh, "add", [save(b), "@" + name], [dst], dst)
                    self.assertEqual(code, 0, err)
                    self.assertBitExact(got, want)
            # Reading it did not change it or its sharding.
            code, got, err = get(name)
            self.assertBitExact(got, a, src)
            self.assertEqual(ls(name)[name]["spec"],
                             ref_repr(src), src)

    def test_out_at_name_then_get(self):
        a, b = rand((4, 6), np.float32), rand((4, 6), np.float32)
        name = fresh("jobout/sum")
        code, _, err = ctl("run", "--mesh", "x=2,y=2", "--fn", "add",
                           "--arg", save(a), "--arg", save(b),
                           "--in-spec", "P('x', 'y')", "--out", "@" + name,
                           "--out-spec", "P('y', 'x')")
        self.assertEqual(code, 0, err)
        self.assertIn(f"output 0: float32[4,6] -> @{name}", err)
        want = ref.shard_map(ref.reference("add", {}), ref.parse_mesh("x=2,y=2"),
                             [ref.parse_spec("P('x', 'y')")],
                             ref.parse_spec("P('y', 'x')"), [a, b])
        code, got, err = get(name)
        self.assertEqual(code, 0, err)
        self.assertBitExact(got, want)
        info = ls(name)[name]
        self.assertEqual((info["mesh"], info["spec"]), ("x=2,y=2", "P('y', 'x')"))
        # --json names it; a stored output has no values.
        other = fresh("jobout/scaled")
        code, out, err = ctl("run", "--mesh", "x=2", "--fn", "scale",
                             "--arg", "@" + name, "--in-spec", "P('x')",
                             "--out", "@" + other, "--out-spec", "P('x')",
                             "--kwargs", '{"alpha": 2.0}', "--json")
        self.assertEqual(code, 0, err)
        o = json.loads(out)["outputs"][0]
        self.assertEqual(o["stored_as"], other)
        self.assertEqual(o["shape"], [4, 6])
        self.assertNotIn("values", o)
        code, got, err = get(other)
        self.assertBitExact(got, want * np.float32(2.0))
        self.assertEqual(ls(other)[other]["mesh"], "x=2")

    def test_out_at_name_replacing_its_own_argument(self):
        x = rand((4, 6), np.float32)
        name = fresh("jobout/inplace")
        self.assertOk(put(name, x, "x=2,y=2", "P('x', 'y')"))
        # Stored on another mesh: a change of layout, so --overwrite.
        self.assertOk(ctl("run", "--mesh", "x=2", "--fn", "scale",
                          "--arg", "@" + name, "--in-spec", "P('x')",
                          "--out", "@" + name, "--out-spec", "P('x')",
                          "--kwargs", '{"alpha": 2.0}', "--overwrite"))
        code, got, err = get(name)
        self.assertEqual(code, 0, err)
        self.assertBitExact(got, x * np.float32(2.0))
        self.assertEqual(ls(name)[name]["spec"], "P('x',)")

    def test_out_at_name_over_another_shape_needs_overwrite(self):
        name = fresh("jobout/ow")
        self.assertOk(put(name, rand((4,), np.float32), "x=2", "P('x')"))
        x = rand((8,), np.float32)
        cmd = ["run", "--mesh", "x=2", "--fn", "identity", "--arg", save(x),
               "--in-spec", "P('x')", "--out", "@" + name, "--out-spec",
               "P('x')"]
        self.assertError(ctl(*cmd), 73, "FAILED_PRECONDITION", name)
        code, got, err = get(name)
        self.assertEqual(got.shape, (4,), "a refused job changes nothing")
        # Not enough workers stays 69, though the target exists.
        big = ["run", "--mesh", "x=16", "--fn", "identity", "--arg",
               save(rand((16,), np.float32)), "--in-spec", "P('x')", "--out",
               "@" + name, "--out-spec", "P('x')"]
        self.assertError(ctl(*big), 69, "FAILED_PRECONDITION", "16 devices")
        self.assertOk(ctl(*cmd, "--overwrite"))
        code, got, err = get(name)
        self.assertBitExact(got, x)

    def test_unknown_resident_arg_is_bad_input(self):
        self.assertError(
            self.run_file_out("x=2", "identity", ["@no/such/array"], ["P('x')"],
                              "P('x')"),
            65, "NOT_FOUND", "no/such/array")
        # An unknown function stays a usage error.
        self.assertError(
            self.run_file_out("x=2", "nope", ["@no/such/array"], ["P('x')"],
                              "P('x')"),
            64, "NOT_FOUND", "nope")

    def test_state_slot_bound_to_a_resident_array(self):
        acc = fresh("state/acc")
        x = rand((8,), np.float64)
        x[np.isnan(x)] = 1.0  # keep the sums comparable
        self.assertOk(put(acc, np.zeros(8), "x=2", "P('x')"))
        cmd = ["run", "--mesh", "x=2", "--fn", "accumulate", "--arg", save(x),
               "--in-spec", "P('x')", "--out-spec", "P('x')",
               "--state", f"buffer={acc}", "--state-spec", "buffer=P('x')"]
        self.assertOk(ctl(*cmd))
        out = out_path()
        code, _, err = ctl(*cmd, "--out", out)
        self.assertEqual(code, 0, err)
        self.assertIn(f"state buffer: @{acc} as P('x',)", err)
        want = np.zeros(8) + x + x
        self.assertBitExact(np.load(out), want)
        code, got, err = get(acc)
        self.assertBitExact(got, want)


def ref_repr(spec):
    """JAX's repr of a spec as written in SPECS_2X2 (what ls shows)."""
    entries = ref.parse_spec(spec)
    if entries is None or not entries:
        return "P()"
    parts = []
    for e in entries:
        if not e:
            parts.append("None")
        elif len(e) == 1:
            parts.append(repr(e[0]))
        else:
            parts.append("(" + ", ".join(repr(a) for a in e) + ")")
    return "P(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def save_npz(arrays):
    path = os.path.join(TMP.name, fresh("model") + ".npz")
    np.savez(path, **arrays)
    return path


MODEL_RULES = ("linear1/kernel=P(None, 'model'); */kernel=P('model'); "
               "*/bias=P()")


def model():
    return {
        "linear1/kernel": rand((4, 8), np.float32),
        "linear1/bias": rand((8,), np.float32),
        "linear2/kernel": rand((8, 2), np.float32),
        "linear2/bias": rand((2,), np.float32),
        "embed/table": rand((6, 4), np.float32),
    }


class PutTreeTest(Case):

    def test_rules_pick_specs_and_ls_shows_them(self):
        arrays = model()
        prefix = fresh("tree")
        code, out, err = ctl("put-tree", prefix, save_npz(arrays), "--mesh",
                             "data=2,model=2", "--rules", MODEL_RULES,
                             "--rule", "table=P('data', 'model')")
        self.assertEqual(code, 0, err)
        want = {"linear1/kernel": "P(None, 'model')",
                "linear2/kernel": "P('model',)",
                "linear1/bias": "P()", "linear2/bias": "P()",
                "embed/table": "P('data', 'model')"}
        listed = ls(prefix + "/")
        self.assertEqual(sorted(listed), sorted(f"{prefix}/{k}" for k in want))
        for key, spec in want.items():
            info = listed[f"{prefix}/{key}"]
            self.assertEqual((info["spec"], info["mesh"]),
                             (spec, "data=2,model=2"), key)
            code, got, err = get(f"{prefix}/{key}")
            self.assertEqual(code, 0, err)
            self.assertBitExact(got, arrays[key], key)
        code, out, err = ctl("ls", prefix + "/")
        self.assertIn("P(None, 'model')", out)

    def test_json_and_dry_run(self):
        arrays = model()
        prefix = fresh("treejson")
        path = save_npz(arrays)
        code, out, err = ctl("put-tree", prefix, path, "--mesh",
                             "data=2,model=2", "--rules",
                             MODEL_RULES + ";*=P()", "--dry-run", "--json")
        self.assertEqual(code, 0, err)
        plan = {a["key"]: a for a in json.loads(out)["arrays"]}
        self.assertEqual(plan["embed/table"]["rule"], "*")
        self.assertEqual(plan["linear2/kernel"]["rule"], "*/kernel")
        self.assertEqual(ls(prefix + "/"), {}, "a dry run puts nothing")
        code, out, err = ctl("put-tree", prefix, path, "--mesh",
                             "data=2,model=2", "--rules", MODEL_RULES + ";*=P()",
                             "--json")
        self.assertEqual(code, 0, err)
        done = {a["key"]: a for a in json.loads(out)["arrays"]}
        self.assertEqual(done["linear1/kernel"]["name"],
                         f"{prefix}/linear1/kernel")
        self.assertEqual(done["linear1/kernel"]["spec"], "P(None, 'model')")

    def test_no_rule_matches(self):
        prefix = fresh("treebad")
        code, out, err = ctl("put-tree", prefix, save_npz(model()), "--mesh",
                             "data=2,model=2", "--rules", MODEL_RULES)
        self.assertEqual(code, 65, err)
        self.assertIn("error: INVALID_ARGUMENT:", err)
        self.assertIn("no sharding rule matches path 'embed/table'", err)
        self.assertEqual(ls(prefix + "/"), {}, "nothing was put")

    def test_rule_spec_that_does_not_fit(self):
        prefix = fresh("treefit")
        code, out, err = ctl("put-tree", prefix, save_npz(model()), "--mesh",
                             "data=2,model=2", "--rules",
                             "*/bias=P(('data', 'model'));*=P()")
        self.assertEqual(code, 65, err)
        self.assertIn("error: INVALID_ARGUMENT:", err)
        self.assertIn("linear2/bias", err)
        self.assertEqual(ls(prefix + "/"), {}, "nothing was put")

    def test_malformed_rules_are_usage_errors(self):
        self.assertError(ctl("put-tree", "p", save_npz(model()), "--mesh",
                             "data=2", "--rules", "kernel"),
                         64, "INVALID_ARGUMENT", "FILTER=SPEC")

    def test_existing_arrays_of_another_shape(self):
        arrays = model()
        prefix = fresh("treeow")
        path = save_npz(arrays)
        rules = MODEL_RULES + ";*=P()"
        self.assertOk(put(f"{prefix}/linear2/bias", np.zeros(3, np.float32),
                          "data=2", "P()"))
        code, out, err = ctl("put-tree", prefix, path, "--mesh",
                             "data=2,model=2", "--rules", rules)
        self.assertEqual(code, 73, err)
        self.assertIn("error: FAILED_PRECONDITION:", err)
        self.assertIn(f"{prefix}/linear2/bias", err)
        self.assertEqual(sorted(ls(prefix + "/")), [f"{prefix}/linear2/bias"],
                         "nothing was put")
        self.assertOk(ctl("put-tree", prefix, path, "--mesh", "data=2,model=2",
                          "--rules", rules, "--overwrite"))
        code, got, err = get(f"{prefix}/linear2/bias")
        self.assertBitExact(got, arrays["linear2/bias"])


class CheckpointTest(Case):

    def test_save_then_restore(self):
        prefix = fresh("ckpt")
        a, b = rand((4, 6), np.float32), rand((8,), np.int64)
        self.assertOk(put(f"{prefix}/a", a, "x=2,y=2", "P('x', 'y')"))
        self.assertOk(put(f"{prefix}/b", b, "x=4", "P('x')"))
        directory = os.path.join(TMP.name, fresh("checkpoint"))
        code, out, err = ctl("save", directory, "--json")
        self.assertEqual(code, 0, err)
        saved = {x["name"] for x in json.loads(out)["arrays"]}
        self.assertTrue({f"{prefix}/a", f"{prefix}/b"} <= saved, saved)
        self.assertTrue(os.path.isdir(directory))
        self.assertOk(ctl("rm", f"{prefix}/a"))
        self.assertOk(put(f"{prefix}/b", np.zeros(8, np.int64), "x=4",
                          "P('x')"))
        code, out, err = ctl("restore", directory)
        self.assertEqual(code, 0, err)
        self.assertIn("restored", err)
        for name, want in ((f"{prefix}/a", a), (f"{prefix}/b", b)):
            code, got, err = get(name)
            self.assertEqual(code, 0, err)
            self.assertBitExact(got, want, name)
        self.assertEqual(ls(f"{prefix}/a")[f"{prefix}/a"]["spec"],
                         "P('x', 'y')")

    def test_restore_of_a_missing_directory(self):
        self.assertError(ctl("restore", os.path.join(TMP.name, "nope")), 66,
                         "NOT_FOUND")


if __name__ == "__main__":
    unittest.main(verbosity=2)
