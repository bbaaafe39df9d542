"""Checkpoints and state directories as a trust boundary, and writes that
are checked: docs/RELIABILITY.md scenarios 34 (tampered checkpoints, odd names),
35 (`save` onto what is not a checkpoint) and 36 (a write that fails, a
damaged state directory), through the real binaries on 127.0.0.1.

Environment: SHARDMAP_BIN_DIR.
"""
import json
import os
import resource
import shutil
import signal
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SHARDCTL = harness.SHARDCTL
RNG = np.random.default_rng(34)


class Base(harness.ClusterTestCase):

    scratch_prefix = "shardmap-storage-"

    def put(self, c, name, array, mesh="x=2", spec="P('x')", *extra):
        return self.ctl(c, "put", name, self.file(array), "--mesh", mesh,
                        "--spec", spec, *extra)

    def get(self, c, name):
        out = self.path(f"got{self.count}.npy")
        self.count += 1
        code, _, err = self.ctl(c, "get", name, "--out", out)
        return code, (np.load(out) if code == 0 else None), err

    def listing(self, c):
        code, out, err = self.ctl(c, "ls", "--json")
        self.assertEqual(code, 0, err)
        return {a["name"]: a for a in json.loads(out)["arrays"]}

    def assert_error(self, result, exit_code, status, *fragments):
        code, _, err = result
        self.assertEqual(code, exit_code, err)
        self.assertIn(f"error: {status}:", err)
        for f in fragments:
            self.assertIn(f, err)

    def tree(self, root):
        """Every path under `root`, for "nothing else was touched"."""
        found = set()
        for d, dirs, files in os.walk(root):
            for name in dirs + files:
                found.add(os.path.relpath(os.path.join(d, name), root))
        return found


class CheckpointTrustTest(Base):
    """Scenario 34: a checkpoint is read as untrusted input."""

    @classmethod
    def setUpClass(cls):
        cls.c = harness.ProcessCluster(2)
        cls.a = RNG.standard_normal((6, 4))
        cls.b = np.arange(5, dtype=np.int32)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def setUp(self):
        super().setUp()
        self.assertEqual(self.put(self.c, "t/a", self.a)[0], 0)
        self.assertEqual(self.put(self.c, "t/b", self.b, "x=2", "P()")[0], 0)
        self.ckpt = self.path("ckpt")
        code, _, err = self.ctl(self.c, "save", self.ckpt)
        self.assertEqual(code, 0, err)
        with open(os.path.join(self.ckpt, "manifest.json")) as f:
            self.manifest = json.load(f)

    def tampered(self, edit):
        """A copy of the checkpoint whose manifest `edit` changed."""
        self.count += 1
        copy = self.path(f"tampered{self.count}")
        shutil.copytree(self.ckpt, copy)
        m = json.loads(json.dumps(self.manifest))
        edit(m)
        with open(os.path.join(copy, "manifest.json"), "w") as f:
            json.dump(m, f)
        return copy

    def assert_refused(self, edit, *fragments):
        before = self.listing(self.c)
        copy = self.tampered(edit)
        files = self.tree(self.tmp.name)
        code, _, err = self.ctl(self.c, "restore", copy)
        self.assertEqual(code, 65, err)
        self.assertIn("error: DATA_LOSS:", err)
        self.assertIn(os.path.join(copy, "manifest.json"), err)
        for f in fragments:
            self.assertIn(f, err)
        # Nothing published, nothing written.
        self.assertEqual(self.listing(self.c), before)
        self.assertEqual(self.tree(self.tmp.name), files)

    def test_restore_of_the_saved_checkpoint_is_bit_exact(self):
        self.assertEqual(self.manifest["format"], "shardmap-checkpoint-v2")
        self.assertEqual(self.ctl(self.c, "rm", "t/a")[0], 0)
        code, _, err = self.ctl(self.c, "restore", self.ckpt)
        self.assertEqual(code, 0, err)
        code, got, err = self.get(self.c, "t/a")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, self.a)

    def entry(self, m, name):
        return next(a for a in m["arrays"] if a["name"] == name)

    def test_absolute_and_climbing_block_files_are_refused(self):
        secret = self.file(np.arange(3, dtype=np.int32))  # any .npy on disk
        for bad in (secret, "../../" + os.path.basename(secret),
                    "blocks/../../x.npy"):
            with self.subTest(file=bad):
                def edit(m, bad=bad):
                    self.entry(m, "t/b")["blocks"][0]["file"] = bad
                self.assert_refused(edit, ".blocks[0].file:")

    def test_odd_names_are_refused(self):
        for bad, why in (("", "is empty"),
                         ("../../escape", "'.' or '..'"),
                         ("/abs/name", "non-empty segments"),
                         ("a\nb", "the character '\\n'"),
                         ("x" * 256, "segment of 256 bytes")):
            with self.subTest(name=bad[:20]):
                def edit(m, bad=bad):
                    self.entry(m, "t/b")["name"] = bad
                self.assert_refused(edit, ".name:", why)

    def test_a_non_numeric_digest_is_refused(self):
        def edit(m):
            self.entry(m, "t/a")["blocks"][1]["digest"] = "12ab"
        self.assert_refused(edit, ".blocks[1].digest:",
                            "'12ab' is not a decimal 64-bit number")

    def test_missing_or_null_arrays_are_refused(self):
        def null(m):
            m["arrays"] = None
        self.assert_refused(null, "arrays: must be a list")

        def missing(m):
            del m["arrays"]
        self.assert_refused(missing, "arrays: is missing")

    def test_a_damaged_block_file_publishes_nothing(self):
        # t/a is restored before t/b: t/b's damaged block must not leave
        # t/a replaced.
        before = self.listing(self.c)
        copy = self.tampered(lambda m: None)
        n = self.manifest["arrays"].index(self.entry(self.manifest, "t/b"))
        block = os.path.join(copy, "blocks", f"{n}-0.npy")
        with open(block, "r+b") as f:
            f.truncate(os.path.getsize(block) - 4)
        code, _, err = self.ctl(self.c, "restore", copy)
        self.assertEqual(code, 65, err)
        self.assertIn("error: DATA_LOSS:", err)
        self.assertIn(block, err)
        self.assertEqual(self.listing(self.c), before)

    def test_odd_names_are_refused_at_put_and_run(self):
        for bad in ("", "a/../b", "/abs", "a\nb", "y" * 256):
            with self.subTest(name=bad[:20]):
                # shardctl itself refuses an empty NAME (a usage error).
                self.assert_error(self.put(self.c, bad, self.a),
                                  65 if bad else 64, "INVALID_ARGUMENT")
                self.assert_error(
                    self.ctl(self.c, "run", "--mesh", "x=2", "--fn",
                             "identity", "--arg", self.file(self.a),
                             "--in-spec", "P('x')", "--out", "@" + bad,
                             "--out-spec", "P('x')"),
                    65 if bad else 64, "INVALID_ARGUMENT")
        self.assertEqual(set(self.listing(self.c)), {"t/a", "t/b"})


class SaveTargetTest(Base):
    """Scenario 35: `save DIR` replaces only an empty directory or an
    earlier checkpoint."""

    def setUp(self):
        super().setUp()
        self.c = self.cluster(2)
        self.assertEqual(self.put(self.c, "s/a", np.ones((4, 2)))[0], 0)

    def assert_untouched_refusal(self, target, why):
        parent = self.tree(self.tmp.name)
        code, _, err = self.ctl(self.c, "save", target)
        self.assertEqual(code, 73, err)
        self.assertIn("error: FAILED_PRECONDITION:", err)
        self.assertIn(f"refusing to save into {target}", err)
        self.assertIn(why, err)
        # Nothing deleted, nothing left behind.
        self.assertEqual(self.tree(self.tmp.name), parent)

    def test_a_directory_with_other_files_is_refused(self):
        home = self.path("home")
        os.makedirs(os.path.join(home, "docs"))
        with open(os.path.join(home, "docs", "thesis.txt"), "w") as f:
            f.write("years of work")
        self.assert_untouched_refusal(home, "holds docs")
        with open(os.path.join(home, "docs", "thesis.txt")) as f:
            self.assertEqual(f.read(), "years of work")

    def test_a_regular_file_is_refused(self):
        target = self.path("notes.txt")
        with open(target, "w") as f:
            f.write("keep me")
        self.assert_untouched_refusal(target, "is not a directory")
        with open(target) as f:
            self.assertEqual(f.read(), "keep me")

    def test_a_checkpoint_with_an_extra_file_is_refused(self):
        ckpt = self.path("ckpt")
        self.assertEqual(self.ctl(self.c, "save", ckpt)[0], 0)
        with open(os.path.join(ckpt, "README"), "w") as f:
            f.write("mine")
        self.assert_untouched_refusal(ckpt, "holds README")

    def test_a_symbolic_link_is_refused(self):
        os.makedirs(self.path("real"))
        os.symlink(self.path("real"), self.path("link"))
        self.assert_untouched_refusal(self.path("link"), "symbolic link")

    def test_an_empty_directory_and_a_checkpoint_are_replaced(self):
        ckpt = self.path("empty")
        os.makedirs(ckpt)
        code, _, err = self.ctl(self.c, "save", ckpt)
        self.assertEqual(code, 0, err)
        self.assertTrue(os.path.exists(os.path.join(ckpt, "manifest.json")))
        code, _, err = self.ctl(self.c, "save", ckpt)
        self.assertEqual(code, 0, err)
        self.assertEqual(sorted(os.listdir(self.tmp.name)).count("empty"), 1)
        self.assertEqual(sorted(os.listdir(ckpt)), ["blocks", "manifest.json"])


def limit_file_size(limit):
    """preexec_fn: files the process writes stop at `limit` bytes, with
    EFBIG (not SIGXFSZ), as on a full disk."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


class StateDirTest(Base):
    """Scenario 36: writes to the state directory are checked; one bad
    array costs that array only."""

    def start_worker(self, c, state_dir, preexec_fn=None, log=None,
                     listen="127.0.0.1:0"):
        return c.add_worker("--state-dir", state_dir, stderr=log,
                            listen=listen, preexec_fn=preexec_fn)

    def test_a_put_that_cannot_be_persisted_fails_and_commits_nothing(self):
        c = self.cluster(0)
        state = [self.path("state0"), self.path("state1")]
        self.start_worker(c, state[0])
        self.start_worker(c, state[1], preexec_fn=limit_file_size(64 << 10))
        c.wait_for_workers(2)
        small = RNG.standard_normal((16, 4))
        code, _, err = self.put(c, "w", small)
        self.assertEqual(code, 0, err)
        big = RNG.standard_normal((64 << 10, 2))  # 512 KiB per block
        code, _, err = self.put(c, "w", big, "x=2", "P('x')", "--overwrite")
        self.assertEqual(code, 75, err)
        self.assertIn("RESOURCE_EXHAUSTED", err)
        self.assertIn(os.path.join(state[1], "arrays", "w"), err)
        self.assertIn("File too large", err)
        self.assertIn("not committed", err)
        # The array is what it was, and stays so across a worker restart.
        code, got, err = self.get(c, "w")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, small)
        for w in list(c.workers):
            c.kill_worker(w)
        for d in state:
            self.start_worker(c, d)
        c.wait_for_workers(2)
        for d in state:
            names = os.listdir(os.path.join(d, "arrays", "w"))
            self.assertFalse([n for n in names if ".tmp." in n], names)

    def restart(self, c, worker, state_dir, log=None):
        """Kills `worker` and starts it again on its state directory, at
        its address: the pool takes it as the same worker, back."""
        address = worker.address
        c.kill_worker(worker)
        self.start_worker(c, state_dir, log=log, listen=address)

    def test_a_worker_with_one_truncated_block_serves_the_rest(self):
        c = self.cluster(0)
        state = [self.path("state0"), self.path("state1")]
        for d in state:
            self.start_worker(c, d)
        c.wait_for_workers(2)
        a, b = RNG.standard_normal((8, 4)), RNG.standard_normal((6, 2))
        self.assertEqual(self.put(c, "d/a", a)[0], 0)
        self.assertEqual(self.put(c, "d/b", b)[0], 0)
        worker = c.workers[1]
        worker.proc.kill()
        worker.proc.wait()
        adir = os.path.join(state[1], "arrays", "d%2Fa")
        data = [n for n in os.listdir(adir) if n.endswith(".npy")]
        self.assertEqual(len(data), 1, data)
        with open(os.path.join(adir, data[0]), "r+b") as f:
            f.truncate(100)
        log_path = self.path("worker1.log")
        with open(log_path, "w") as log:
            self.restart(c, worker, state[1], log=log)
            c.wait_for_workers(2)
        code, got, err = self.get(c, "d/b")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, b)
        code, _, err = self.get(c, "d/a")
        self.assertNotEqual(code, 0, err)
        with open(log_path) as f:
            logged = f.read()
        self.assertIn(os.path.join(adir, data[0]), logged)
        self.assertIn("truncated", logged)

    def test_a_worker_with_empty_metadata_starts(self):
        c = self.cluster(0)
        d = self.path("state0")
        self.start_worker(c, d)
        c.wait_for_workers(1)
        self.assertEqual(self.put(c, "m/a", np.ones(4), "x=1", "P()")[0], 0)
        self.assertEqual(self.put(c, "m/b", np.arange(4.0), "x=1", "P()")[0],
                         0)
        worker = c.workers[0]
        worker.proc.kill()
        worker.proc.wait()
        open(os.path.join(d, "arrays", "m%2Fa", "current.json"), "w").close()
        self.restart(c, worker, d)
        c.wait_for_workers(1)
        code, got, err = self.get(c, "m/b")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, np.arange(4.0))


if __name__ == "__main__":
    harness.main()
