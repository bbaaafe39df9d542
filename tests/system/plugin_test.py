"""Plugins end to end, as a user meets them: the SDK installed with
`cmake --install`, the example plugin (examples/plugin/) configured and
built out of tree against that install, loaded by real workers
(--plugin, and $SHARDMAP_PLUGINS under `shardctl run --local`), listed by
`shardctl functions` and checked against numpy. Then the refusals: each
bad plugin stops the worker's start with exit 78 naming the file and the
problem; a function that throws fails its job with INTERNAL and the worker
serves the next job; an output of the wrong shape is caught; a mesh with a
worker that lacks the function is refused before anything runs.

Environment: SHARDMAP_BIN_DIR (build/bin); the build directory is its
parent, and tests/plugins' libraries are in <build>/plugins.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from harness import BIN, SHARDCTL, ProcessCluster  # noqa: E402

BUILD = os.path.abspath(os.path.join(BIN, ".."))
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEST_PLUGINS = os.path.join(BUILD, "plugins")
CONFIG_EXIT = 78  # a worker refused to start (EX_CONFIG)
STEP_TIMEOUT = 600  # seconds for one cmake step on a busy machine


def sdk_abi_version():
    """SHARDMAP_SDK_ABI_VERSION, as include/shardmap/version.h defines it."""
    with open(os.path.join(SOURCE, "include", "shardmap", "version.h")) as f:
        return int(re.search(r"#define SHARDMAP_SDK_ABI_VERSION (\d+)",
                             f.read()).group(1))


ABI_VERSION = sdk_abi_version()


def test_plugin(name):
    return os.path.join(TEST_PLUGINS, f"lib{name}.so")


def layernorm_ref(x, gamma, beta, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def step(cmd, **kwargs):
    p = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=STEP_TIMEOUT, **kwargs)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")


class PluginTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="shardmap-plugin-")
        prefix = os.path.join(cls.tmp.name, "sdk")
        # What a user does: install the SDK, then build the example plugin
        # against it (from a copy, so nothing of the source tree is used).
        step(["cmake", "--install", BUILD, "--prefix", prefix])
        example = os.path.join(cls.tmp.name, "example")
        shutil.copytree(os.path.join(SOURCE, "examples", "plugin"), example)
        out = os.path.join(cls.tmp.name, "example-build")
        step(["cmake", "-S", example, "-B", out,
              f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"])
        step(["cmake", "--build", out])
        cls.layernorm = os.path.join(out, "liblayernorm_tp.so")
        cls.good = test_plugin("test_plugin_good")
        # Four workers with both plugins, then one with none (device 4 of a
        # 5-device mesh: workers are placed in registration order).
        # Each waited for before the next starts: a worker prints its
        # address before it has registered.
        cls.cluster = ProcessCluster(0)
        for i in range(4):
            cls.cluster.add_worker("--plugin", cls.layernorm,
                                   "--plugin", cls.good)
            cls.cluster.wait_for_workers(i + 1)
        cls.cluster.add_worker()
        cls.cluster.wait_for_workers(5)
        cls.count = 0

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()
        cls.tmp.cleanup()

    def file(self, array):
        PluginTest.count += 1
        path = os.path.join(self.tmp.name, f"a{self.count}.npy")
        np.save(path, array)
        return path

    def run_job(self, mesh, fn, args, in_specs, out_spec, kwargs=None,
                where=("--coordinator",)):
        out = self.file(np.zeros(1))
        cmd = [SHARDCTL, "run", *where, "--mesh", mesh, "--fn", fn,
               "--out", out, "--out-spec", out_spec]
        if where == ("--coordinator",):
            cmd.insert(3, self.cluster.address)
        if kwargs is not None:
            cmd += ["--kwargs", json.dumps(kwargs)]
        for a, s in zip(args, in_specs):
            cmd += ["--arg", self.file(a), "--in-spec", s]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                           env=self.env)
        got = np.load(out) if p.returncode == 0 else None
        return p.returncode, got, p.stderr

    env = None

    def layernorm_args(self):
        rng = np.random.default_rng(14)
        x = rng.standard_normal((6, 16))
        gamma = rng.standard_normal(16)
        beta = rng.standard_normal(16)
        return x, gamma, beta

    def test_functions_lists_plugins_with_origin(self):
        code, out, err = harness.shardctl("functions", "--coordinator",
                                          self.cluster.address)
        self.assertEqual(code, 0, err)
        line = next(l for l in out.splitlines()
                    if l.startswith("layernorm_tp("))
        self.assertIn("layernorm_tp(x, y, z; axes, eps=1e-5)", line)
        self.assertIn(f"[plugin {self.layernorm}]", line)
        code, out, err = harness.shardctl("functions", "--coordinator",
                                          self.cluster.address, "--json")
        self.assertEqual(code, 0, err)
        fns = {f["name"]: f for f in json.loads(out)["functions"]}
        self.assertEqual(fns["plug_twice"]["origin"], f"plugin {self.good}")
        self.assertEqual(len(fns["plug_twice"]["workers"]), 4)
        self.assertEqual(fns["add"]["origin"], "builtin")
        self.assertEqual(len(fns["add"]["workers"]), 5)

    def test_layernorm_tp_equals_numpy(self):
        x, gamma, beta = self.layernorm_args()
        code, got, err = self.run_job(
            "x=4", "layernorm_tp", [x, gamma, beta],
            ["P(None, 'x')", "P('x')", "P('x')"], "P(None, 'x')",
            {"axes": "x", "eps": 1e-3})
        self.assertEqual(code, 0, err)
        np.testing.assert_allclose(got, layernorm_ref(x, gamma, beta, 1e-3),
                                   rtol=1e-10, atol=1e-12)

    def test_local_cluster_with_env(self):
        """The README's command: SHARDMAP_PLUGINS and `run --local 4`."""
        x, gamma, beta = self.layernorm_args()
        x = x.astype(np.float32)
        gamma = gamma.astype(np.float32)
        beta = beta.astype(np.float32)
        self.env = dict(os.environ, SHARDMAP_PLUGINS=self.layernorm)
        try:
            code, got, err = self.run_job(
                "x=4", "layernorm_tp", [x, gamma, beta],
                ["P(None, 'x')", "P('x')", "P('x')"], "P(None, 'x')",
                {"axes": "x"}, where=("--local", "4"))
        finally:
            self.env = None
        self.assertEqual(code, 0, err)
        self.assertEqual(got.dtype, np.float32)
        np.testing.assert_allclose(
            got, layernorm_ref(x.astype(np.float64), gamma, beta, 1e-5),
            rtol=1e-4, atol=1e-5)

    def test_throwing_function_fails_and_worker_survives(self):
        x = np.arange(8.0)
        code, _, err = self.run_job("x=4", "plug_throws", [x], ["P('x')"],
                                    "P('x')")
        self.assertNotEqual(code, 0)
        self.assertIn("INTERNAL", err)
        self.assertIn("plug_throws threw a C++ exception", err)
        code, got, err = self.run_job("x=4", "plug_twice", [x], ["P('x')"],
                                      "P('x')")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, 2 * x)

    def test_wrong_output_shape_is_caught(self):
        code, _, err = self.run_job("x=4", "plug_bad_shape", [np.arange(8.0)],
                                    ["P('x')"], "P('x')")
        self.assertNotEqual(code, 0)
        self.assertIn("INTERNAL", err)
        self.assertIn("plug_bad_shape returned output 0 as float64[1]", err)
        self.assertIn("float64[2]", err)

    def test_mesh_with_a_worker_lacking_the_function_is_refused(self):
        code, _, err = self.run_job("x=5", "plug_twice", [np.arange(10.0)],
                                    ["P('x')"], "P('x')")
        self.assertEqual(code, 69, err)  # FAILED_PRECONDITION
        self.assertIn("FAILED_PRECONDITION", err)
        self.assertIn("'plug_twice' is missing on worker w4", err)
        self.assertIn(self.cluster.workers[4].address, err)

    def refused(self, plugins, problem):
        cmd = [f"{BIN}/shardmap-worker", "--coordinator", "127.0.0.1:1"]
        for path in plugins:
            cmd += ["--plugin", path]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, CONFIG_EXIT, p.stderr)
        self.assertIn(f"plugin {plugins[-1]}: ", p.stderr)
        self.assertIn(problem, p.stderr)

    def test_bad_plugins_refuse_the_start(self):
        not_elf = os.path.join(self.tmp.name, "libtext.so")
        with open(not_elf, "w") as f:
            f.write("not a library\n")
        cases = [
            ([os.path.join(self.tmp.name, "missing.so")], "no such file"),
            ([not_elf], "cannot load it as a shared library"),
            ([test_plugin("test_plugin_no_symbol")], "no registration symbol"),
            ([test_plugin("test_plugin_bad_abi")],
             "built against SDK ABI version 999 (SDK 9.9.9), but this worker "
             f"has ABI version {ABI_VERSION}"),
            ([test_plugin("test_plugin_clash")],
             "function 'add' (plugin"),
            ([test_plugin("test_plugin_malformed")],
             "keyword argument 'alpha' has unknown type 'bogus_type'"),
            ([self.good, self.good], "'plug_twice'"),
        ]
        for plugins, problem in cases:
            with self.subTest(problem=problem):
                self.refused(plugins, problem)

    def test_environment_variable_is_read(self):
        missing = os.path.join(self.tmp.name, "from-env.so")
        cmd = [f"{BIN}/shardmap-worker", "--coordinator", "127.0.0.1:1"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, SHARDMAP_PLUGINS=missing))
        self.assertEqual(p.returncode, CONFIG_EXIT, p.stderr)
        self.assertIn(f"plugin {missing}: no such file", p.stderr)


if __name__ == "__main__":
    harness.main()
