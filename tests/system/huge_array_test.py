"""docs/RELIABILITY.md, scenario 11 past 2 GiB: an array of 2 GiB and more goes
from shardctl through the coordinator to two workers and back bit for bit
(the chunked streams never hold it in one message; sizes and offsets are
64-bit throughout). It needs about 12 GiB of memory and 5 GiB of disk, and
skips, saying so, where the machine has less.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

GIB = 1 << 30
N = (2 * GIB + (8 << 20)) // 8  # float64 elements: 2 GiB + 8 MiB


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


class HugeArrayTest(unittest.TestCase):

    def test_an_array_over_2_gib_round_trips_bit_exactly(self):
        tmp = tempfile.mkdtemp(prefix="shardmap-huge-")
        self.addCleanup(shutil.rmtree, tmp, True)
        if shutil.disk_usage(tmp).free < 5 * GIB + N * 8:
            self.skipTest(f"less than {5 + N * 8 // GIB} GiB free in {tmp}")
        if mem_available() < 12 * GIB:
            self.skipTest("less than 12 GiB of memory available")
        c = harness.ProcessCluster(2)
        self.addCleanup(c.close)
        # Scrambled words: NaNs with payloads and subnormals turn up among
        # them; words[1:6] add -0.0, +inf, -inf, a NaN with a payload and
        # the smallest subnormal for certain.
        words = np.arange(N, dtype=np.uint64)
        words *= np.uint64(0x9E3779B97F4A7C15)
        words[1:6] = np.array([
            0x8000000000000000,  # -0.0
            0x7FF0000000000000,  # +inf
            0xFFF0000000000000,  # -inf
            0x7FF8000000000123,  # NaN with a payload
            0x0000000000000001,  # smallest subnormal
        ], dtype=np.uint64)
        arg = os.path.join(tmp, "x.npy")
        np.save(arg, words.view(np.float64))
        out = os.path.join(tmp, "y.npy")
        t0 = time.monotonic()
        p = subprocess.run(
            [harness.SHARDCTL, "run", "--coordinator", c.address, "--mesh",
             "x=2", "--fn", "identity", "--arg", arg, "--in-spec", "P('x')",
             "--out", out, "--out-spec", "P('x')", "--timeout", "200"],
            capture_output=True, text=True, timeout=240)  # CTest's is 300
        seconds = time.monotonic() - t0
        self.assertEqual(p.returncode, 0, p.stderr)
        got = np.load(out, mmap_mode="r")
        self.assertEqual(got.shape, (N,))
        self.assertEqual(got.dtype, np.float64)
        step = 64 << 20
        for i in range(0, N, step):
            self.assertTrue(
                np.array_equal(got[i:i + step].view(np.uint64),
                               words[i:i + step]), f"differs in [{i}, +{step})")
        print(f"{N * 8 / GIB:.3f} GiB round trip in {seconds:.1f} s",
              file=sys.stderr)


if __name__ == "__main__":
    harness.main()
