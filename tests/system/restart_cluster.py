"""What the coordinator-restart tests share: a process cluster with a
scratch directory and shardctl shortcuts, and a way to pause workers.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

REPORT_TIMEOUT = 30  # seconds for the workers to re-register and report


class Cluster(harness.ProcessCluster):
    """A cluster with a scratch directory and shardctl shortcuts."""

    def __init__(self, n, state_dirs=0):
        self.tmp = tempfile.TemporaryDirectory(prefix="shardmap-restart-")
        self.files = 0
        self.files_lock = threading.Lock()
        super().__init__(0)
        # The first `state_dirs` workers keep their blocks in a directory.
        for i in range(n):
            extra = (["--state-dir", os.path.join(self.tmp.name, f"state{i}")]
                     if i < state_dirs else [])
            self.add_worker(*extra)
        self.wait_for_workers(n)

    def close(self):
        super().close()
        self.tmp.cleanup()

    def file(self, array=None):
        with self.files_lock:
            self.files += 1
            path = os.path.join(self.tmp.name, f"f{self.files}.npy")
        if array is not None:
            np.save(path, array)
        return path

    def ctl(self, *args, timeout=120):
        p = subprocess.run(
            [harness.SHARDCTL, *args, "--coordinator", self.address],
            capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def put(self, name, array, mesh, spec, *extra):
        return self.ctl("put", name, self.file(array), "--mesh", mesh,
                        "--spec", spec, *extra)

    def get(self, name):
        out = self.file()
        code, _, err = self.ctl("get", name, "--out", out)
        return code, (np.load(out) if code == 0 else None), err

    def ls(self):
        code, out, err = self.ctl("ls", "--json")
        assert code == 0, err
        return {a["name"]: a for a in json.loads(out)["arrays"]}

    def restart_coordinator(self, workers):
        """kill -9 the coordinator, start it again on the same port, and
        wait until `workers` workers registered again."""
        port = self.address.rsplit(":", 1)[1]
        self.kill_coordinator()
        self.start_coordinator(port)
        self.wait_for_workers(workers, timeout=REPORT_TIMEOUT)

    def wait_listed(self, names, timeout=REPORT_TIMEOUT):
        """Polls `ls` until every name is listed and not lost (the workers
        report as they register); returns the last listing."""
        end = time.monotonic() + timeout
        while True:
            listed = self.ls()
            if all(n in listed and not listed[n]["lost"] for n in names):
                return listed
            if time.monotonic() > end:
                raise AssertionError(f"not all of {names} came back: {listed}")
            time.sleep(0.1)


@contextlib.contextmanager
def paused(workers):
    """Stops `workers` (SIGSTOP) for the block, then lets them go on."""
    for w in workers:
        w.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for w in workers:
            w.proc.send_signal(signal.SIGCONT)


# What the listing says of an array, but for the holders' ids (a worker
# registers again under a new id).
LAYOUT = ("dtype", "shape", "mesh", "spec", "version", "bytes", "lost")
