"""`--out` onto what is not a regular file (docs/RELIABILITY.md scenario 40),
through shardctl run and get on a real cluster:

- a FIFO is written into (its reader gets the array) and stays a FIFO;
- a character device is written into and stays a device node: a null
  device takes the data, a full device gives "No space left on device"
  (exit 73). Tested on /dev/null and /dev/full through symlinks, and on
  device nodes made with mknod in a scratch directory where that is
  allowed (skipped, with the reason, where it is not or the scratch
  directory is mounted nodev);
- a symlink (relative, absolute, chained or dangling) is followed: the
  target gets the data and the link stays a link;
- a regular file is replaced atomically and keeps its permission bits;
  a directory is refused (exit 73).

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import io
import os
import stat
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SHARDCTL = harness.SHARDCTL
CLUSTER = None
SCRATCH = None


def setUpModule():
    global CLUSTER, SCRATCH
    SCRATCH = harness.Scratch("shardmap-output-file-")
    CLUSTER = harness.UpCluster(1)


def tearDownModule():
    CLUSTER.close()
    SCRATCH.cleanup()


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


class OutTest(unittest.TestCase):

    def setUp(self):
        self.x = np.arange(12, dtype=np.float64).reshape(3, 4) * 0.25
        self.arg = SCRATCH.save(self.x)

    def run_to(self, out):
        return harness.shardctl(
            "run", "--coordinator", CLUSTER.address, "--mesh", "x=1",
            "--fn", "identity", "--arg", self.arg, "--in-spec", "P()",
            "--out-spec", "P()", "--out", out, "--timeout", "60")

    def get_to(self, out):
        name = SCRATCH.fresh("a")
        code, _, err = harness.shardctl(
            "put", name, self.arg, "--mesh", "x=1", "--spec", "P()",
            "--coordinator", CLUSTER.address)
        self.assertEqual(code, 0, err)
        return harness.shardctl("get", name, "--out", out, "--coordinator",
                                CLUSTER.address)

    def test_fifo_is_written_into(self):
        for write in (self.run_to, self.get_to):
            with self.subTest(command=write.__name__):
                fifo = os.path.join(SCRATCH.name, SCRATCH.fresh("fifo"))
                os.mkfifo(fifo)
                reader = subprocess.Popen(["cat", fifo],
                                          stdout=subprocess.PIPE)
                try:
                    code, _, err = write(fifo)
                    self.assertEqual(code, 0, err)
                    data, _ = reader.communicate(timeout=30)
                finally:
                    if reader.poll() is None:
                        reader.kill()
                        reader.wait()
                self.assertEqual(data, npy_bytes(self.x))
                self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))

    def check_devices(self, null, full, shown=None):
        """--out onto a null device takes the data and onto a full device
        fails with exit 73 naming `shown` (the path given); both stay
        device nodes."""
        shown = shown or full
        for write in (self.run_to, self.get_to):
            with self.subTest(command=write.__name__, device=null):
                code, _, err = write(null)
                self.assertEqual(code, 0, err)
                self.assertTrue(stat.S_ISCHR(os.stat(null).st_mode))
        code, _, err = self.run_to(full)
        self.assertEqual(code, 73, err)
        self.assertIn("No space left on device", err)
        self.assertIn(shown, err)
        self.assertTrue(stat.S_ISCHR(os.stat(full).st_mode))

    def test_system_devices_through_symlinks(self):
        # /dev/null and /dev/full exist on every Linux system and can be
        # written by anyone; through a symlink, the link must be followed
        # into the device, and the link and the device stay as they were.
        for dev in ("/dev/null", "/dev/full"):
            if not stat.S_ISCHR(os.stat(dev).st_mode):
                self.skipTest(f"{dev} is not a character device here")
        d = os.path.join(SCRATCH.name, SCRATCH.fresh("devlinks"))
        os.makedirs(d)
        null, full = os.path.join(d, "null"), os.path.join(d, "full")
        os.symlink("/dev/null", null)
        os.symlink("/dev/full", full)
        self.check_devices(null, full)
        self.assertEqual(os.readlink(null), "/dev/null")
        self.assertEqual(os.readlink(full), "/dev/full")
        self.assertEqual(sorted(os.listdir(d)), ["full", "null"])

    def make_char_device(self, minor):
        """A device node like /dev/null (minor 3) or /dev/full (7) made in
        the scratch directory, so that a faulty write cannot harm the
        system's own. Skips the test, saying why, where device nodes cannot
        be made (no CAP_MKNOD) or not opened (a file system mounted
        nodev)."""
        path = os.path.join(SCRATCH.name, SCRATCH.fresh("dev"))
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        except OSError as e:
            self.skipTest(f"cannot make a device node in {SCRATCH.name}: "
                          f"{e.strerror}")
        try:
            os.close(os.open(path, os.O_WRONLY))
        except OSError as e:
            self.skipTest(f"cannot open a device node in {SCRATCH.name} "
                          f"({e.strerror}): is it mounted nodev?")
        return path

    def test_device_nodes_are_written_into_not_replaced(self):
        self.check_devices(self.make_char_device(3), self.make_char_device(7))

    def test_symlinks_are_followed(self):
        d = os.path.join(SCRATCH.name, SCRATCH.fresh("links"))
        os.makedirs(os.path.join(d, "sub"))
        target = os.path.join(d, "sub", "target.npy")
        np.save(target, np.zeros(1))
        os.symlink("sub/target.npy", os.path.join(d, "relative"))
        os.symlink(os.path.join(d, "relative"), os.path.join(d, "chained"))
        os.symlink(os.path.join(d, "sub", "new.npy"),
                   os.path.join(d, "dangling"))
        for link, dest in (("relative", target), ("chained", target),
                           ("dangling", os.path.join(d, "sub", "new.npy"))):
            with self.subTest(link=link):
                path = os.path.join(d, link)
                code, _, err = self.run_to(path)
                self.assertEqual(code, 0, err)
                self.assertTrue(os.path.islink(path))
                np.testing.assert_array_equal(np.load(dest), self.x)
                self.assertEqual(
                    [n for n in os.listdir(os.path.join(d, "sub"))
                     if ".tmp." in n], [], "a temporary file was left")

    def test_regular_file_is_replaced_keeping_its_mode(self):
        out = SCRATCH.out_path()
        with open(out, "wb") as f:
            f.write(b"old")
        os.chmod(out, 0o640)
        code, _, err = self.run_to(out)
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(np.load(out), self.x)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o640)

    def test_directory_is_refused(self):
        code, _, err = self.run_to(SCRATCH.name)
        self.assertEqual(code, 73, err)
        self.assertIn("Is a directory", err)


if __name__ == "__main__":
    harness.main()
