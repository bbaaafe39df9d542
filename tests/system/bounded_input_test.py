"""Bounded parsing end to end (docs/RELIABILITY.md scenario 37) and the smaller
input checks that go with it, through the real binaries:

- JSON nested deeper than 64 levels is refused before it is parsed: by
  shardctl, and by the coordinator when a raw client sends 75,000 levels
  (which used to overflow its stack); the coordinator keeps serving.
- Values echoed in error messages are truncated, so a long --kwargs value
  gives its own error and not gRPC's "metadata size exceeds limit".
- .npz zip bombs: a member that inflates past what its .npy header
  declares is refused without inflating it, and --max-bytes bounds the
  declared total before anything is inflated (put-tree --dry-run too).
- --timeout accepts only a finite, positive number of seconds (exit 64).
- --metrics refuses an address off loopback without --insecure (exit 78)
  and names the address it bound; function names no worker registered are
  counted as function="unknown", not as new label values.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import os
import re
import subprocess
import sys
import unittest
import urllib.request
import zipfile

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

BIN = harness.BIN
SHARDCTL = harness.SHARDCTL
SCRATCH = None


def setUpModule():
    global SCRATCH
    SCRATCH = harness.Scratch("shardmap-bounded-input-")


def tearDownModule():
    SCRATCH.cleanup()


def deep(depth):
    return "[" * depth + "]" * depth


# Hand-encoded protobuf (only the fields a RunJob needs), so that the test
# can send what shardctl itself would refuse.
varint, field = harness.pb_varint, harness.pb_field


def run_job_request(function, kwargs_json):
    """RunJobRequest{spec: scale-like job on mesh x=1, one float32[4]
    argument, P() in and out}."""
    axis = field(1, "x") + varint(2 << 3) + varint(1)
    mesh = field(1, axis)
    header = varint(1 << 3) + varint(1) + field(2, varint(4))
    spec = (field(1, function) + field(2, mesh) + field(3, header) +
            field(4, b"") + field(5, b"") + field(6, kwargs_json))
    return field(1, spec)


def max_rss_kib_of(cmd):
    """Runs `cmd` under a fresh Python and returns (exit code, stderr, the
    child's peak RSS in KiB)."""
    probe = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True,"
        " timeout=120)\n"
        "sys.stderr.write(p.stderr)\n"
        "print(p.returncode, resource.getrusage("
        "resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    p = subprocess.run([sys.executable, "-c", probe, *cmd],
                       capture_output=True, text=True, timeout=180)
    code, rss = p.stdout.split()
    return int(code), p.stderr, int(rss)


def npy_header(shape, descr="<f4"):
    """A version 1.0 .npy header for `shape`, padded as numpy pads it."""
    d = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    d += " " * (64 - (10 + len(d) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d.encode()


def write_npz(path, members):
    """members: [(name, header bytes, data bytes, zero bytes after)]; the
    trailing zeros are streamed, so a bomb costs little memory to make."""
    chunk = bytes(16 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED,
                         compresslevel=1) as z:
        for name, header, data, zeros in members:
            with z.open(name, "w", force_zip64=True) as f:
                f.write(header + data)
                while zeros > 0:
                    n = min(zeros, len(chunk))
                    f.write(chunk[:n])
                    zeros -= n
    return path


def put_tree_dry_run(npz, *extra):
    return [SHARDCTL, "put-tree", "p", npz, "--mesh", "x=1", "--rules",
            "*=P()", "--dry-run", *extra]


class DeepJsonTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.c = harness.ProcessCluster(1)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def run_scale(self, kwargs):
        x = SCRATCH.save(np.arange(4, dtype=np.float32))
        return harness.shardctl(
            "run", "--coordinator", self.c.address, "--mesh", "x=1", "--fn",
            "scale", "--arg", x, "--in-spec", "P()", "--out-spec", "P()",
            "--kwargs", kwargs, "--out", SCRATCH.out_path())

    def test_shardctl_refuses_deep_kwargs_with_a_short_message(self):
        code, _, err = self.run_scale('{"alpha": %s}' % deep(5000))
        self.assertEqual(code, 64, err)
        self.assertIn("nests deeper than 64 levels", err)
        self.assertNotIn("metadata", err)
        self.assertLess(len(err), 2000, err)

    def test_64_levels_are_still_parsed(self):
        code, _, err = self.run_scale('{"alpha": %s}' % deep(63))
        # Parsed, then refused for its type: alpha must be a number.
        self.assertEqual(code, 65, err)
        self.assertIn("keyword argument 'alpha' must be a JSON number", err)

    def test_long_echoed_value_is_truncated(self):
        code, _, err = self.run_scale('{"alpha": "%s"}' % ("v" * 20000))
        self.assertEqual(code, 65, err)
        self.assertIn("keyword argument 'alpha' must be a JSON number", err)
        self.assertIn("(20002 bytes)", err)
        self.assertNotIn("metadata", err)
        self.assertLess(len(err), 2000, err)


class RawDeepJsonTest(unittest.TestCase):
    """Its own cluster: before the bound, this killed the coordinator."""

    def setUp(self):
        self.c = harness.ProcessCluster(1)
        self.addCleanup(self.c.close)

    def test_coordinator_survives_75000_levels_from_a_raw_client(self):
        kwargs = '{"alpha": %s}' % deep(75000)  # 150 KB, under 8 MiB
        with grpc.insecure_channel(self.c.address) as ch:
            call = ch.stream_stream("/shardmap.v1.Coordinator/RunJob")
            with self.assertRaises(grpc.RpcError) as e:
                list(call(iter([run_job_request("scale", kwargs)]),
                          metadata=harness.AUTH_METADATA,
                          timeout=30))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT,
                         e.exception.details())
        self.assertIn("nests deeper than 64 levels", e.exception.details())
        self.assertIsNone(self.c.coordinator.poll(),
                          "the coordinator died")
        self.assertEqual(self.c.live(), 1)


class ZipBombTest(unittest.TestCase):

    def test_member_inflating_past_its_header_is_refused_in_bounded_memory(
            self):
        # Declares 4 float32s; inflates to 1 GiB (about 1 MiB on disk).
        npz = write_npz(os.path.join(SCRATCH.name, "bomb.npz"), [
            ("w.npy", npy_header("(4,)"), bytes(16), 1 << 30)])
        self.assertLess(os.path.getsize(npz), 16 << 20)
        code, err, rss_kib = max_rss_kib_of(put_tree_dry_run(npz))
        self.assertEqual(code, 65, err)
        self.assertIn("w.npy", err)
        self.assertIn(f"declares {len(npy_header('(4,)')) + 16}", err)
        self.assertLess(rss_kib, 256 << 10, "the bomb was inflated")

    def test_declared_total_over_max_bytes_is_refused_before_inflating(self):
        npz = write_npz(os.path.join(SCRATCH.name, "big.npz"), [
            ("a.npy", npy_header("(16,)"), bytes(64), 0),
            ("b.npy", npy_header("(67108864,)"), b"", 256 << 20)])
        code, err, rss_kib = max_rss_kib_of(
            put_tree_dry_run(npz, "--max-bytes", "1000000"))
        self.assertEqual(code, 65, err)
        self.assertIn("holds more than 1000000 bytes", err)
        self.assertIn("'b.npy'", err)
        self.assertLess(rss_kib, 128 << 10)
        # The same archive within the limit is read, values intact.
        code, out, err = harness.shardctl(
            *put_tree_dry_run(npz, "--json")[1:])
        self.assertEqual(code, 0, err)
        self.assertIn('"shape":[67108864]', out.replace(" ", ""))

    def test_member_shorter_than_its_header_is_refused(self):
        npz = write_npz(os.path.join(SCRATCH.name, "short.npz"), [
            ("s.npy", npy_header("(1000,)"), bytes(40), 0)])
        code, _, err = harness.shardctl(*put_tree_dry_run(npz)[1:])
        self.assertEqual(code, 65, err)
        self.assertIn("short.npz:s.npy", err)
        self.assertIn(f"declares {len(npy_header('(1000,)')) + 4000}", err)


class TimeoutFlagTest(unittest.TestCase):

    def test_timeouts_that_are_not_positive_finite_are_usage_errors(self):
        x = SCRATCH.save(np.zeros(4, np.float32))
        for value in ("0", "-1", "nan", "-inf", "inf", "1e300", "soon"):
            with self.subTest(value=value):
                code, _, err = harness.shardctl(
                    "run", "--coordinator", "127.0.0.1:1", "--mesh", "x=1",
                    "--fn", "identity", "--arg", x, "--in-spec", "P()",
                    "--out-spec", "P()", f"--timeout={value}", timeout=30)
                self.assertEqual(code, 64, err)
                self.assertIn("--timeout", err)
                code, _, err = harness.shardctl(
                    "health", "--addr", "127.0.0.1:1", f"--timeout={value}",
                    timeout=30)
                self.assertEqual(code, 64, err)

    def test_a_positive_timeout_is_accepted(self):
        code, _, err = harness.shardctl(
            "health", "--addr", "127.0.0.1:1", "--timeout", "0.5",
            timeout=30)
        self.assertEqual(code, 69, err)  # unreachable, not a usage error


def scrape(address):
    with urllib.request.urlopen(f"http://{address}/metrics",
                                timeout=10) as r:
        return r.read().decode()


class MetricsTest(unittest.TestCase):

    def start(self, *flags):
        p = subprocess.Popen(
            [f"{BIN}/shardmap-coordinator", "--listen", "127.0.0.1:0",
             *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        self.addCleanup(harness.stop, p)
        return p

    def test_off_loopback_needs_insecure_and_the_bound_address_is_named(
            self):
        p = self.start("--metrics", "0.0.0.0:0")
        self.assertEqual(p.wait(timeout=30), 78)
        err = p.stderr.read()
        self.assertIn("0.0.0.0:0", err)
        self.assertIn("--insecure", err)

        p = self.start("--metrics", "0.0.0.0:0", "--insecure")
        p.stdout.readline()  # listening on ...
        line = p.stdout.readline().strip()
        m = re.fullmatch(r"shardmap-coordinator metrics on 0\.0\.0\.0:(\d+)",
                         line)
        self.assertIsNotNone(m, line)
        self.assertIn("shardmap_workers_up",
                      scrape(f"127.0.0.1:{m.group(1)}"))

    def test_unknown_function_names_do_not_become_labels(self):
        c = harness.ProcessCluster(1, coordinator_args=[
            "--metrics", "127.0.0.1:0"])
        self.addCleanup(c.close)
        metrics = c.coordinator.stdout.readline().split()[-1]
        x = SCRATCH.save(np.zeros(4, np.float32))
        for i in range(3):
            code, _, err = harness.shardctl(
                "run", "--coordinator", c.address, "--mesh", "x=1", "--fn",
                f"no_such_fn_{i}", "--arg", x, "--in-spec", "P()",
                "--out-spec", "P()")
            self.assertNotEqual(code, 0, err)
        code, _, err = harness.shardctl(
            "run", "--coordinator", c.address, "--mesh", "x=1", "--fn",
            "identity", "--arg", x, "--in-spec", "P()", "--out-spec", "P()",
            "--out", SCRATCH.out_path())
        self.assertEqual(code, 0, err)
        text = scrape(metrics)
        self.assertNotIn("no_such_fn", text)
        self.assertRegex(
            text, r'shardmap_jobs_total\{(code="NOT_FOUND",function="unknown"'
            r'|function="unknown",code="NOT_FOUND")\} 3\n')
        self.assertRegex(text, r'function="identity"')


if __name__ == "__main__":
    harness.main()
