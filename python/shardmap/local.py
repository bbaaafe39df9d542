"""A whole cluster on this machine, for a session: shardmap.local(4).

Runs `shardctl up --workers N` (a coordinator and N workers on 127.0.0.1,
a free port) and connects to it. The cluster stops when the LocalCluster
is closed, leaves a `with` block, when Python exits, and when this
process dies (the kernel signals it: PR_SET_PDEATHSIG). It runs in its own
session, so Ctrl-C in the terminal interrupts Python, not the cluster.
The binaries are looked for in bin_dir=, $SHARDMAP_BIN_DIR, the build's
bin/ next to this package (build/python/shardmap -> build/bin), then PATH.
"""
import atexit
import ctypes
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

from shardmap.client import Cluster
from shardmap.errors import DeadlineExceeded, InvalidArgument, Unavailable

_PR_SET_PDEATHSIG = 1


def find_shardctl(bin_dir=None):
    """The shardctl to run; Unavailable naming where it looked."""
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [bin_dir, os.environ.get("SHARDMAP_BIN_DIR"),
            os.path.join(here, "..", "..", "bin")]
    for d in dirs:
        if d and os.access(os.path.join(d, "shardctl"), os.X_OK):
            return os.path.join(d, "shardctl")
    found = shutil.which("shardctl")
    if found:
        return found
    raise Unavailable(
        "cannot find shardctl: looked in bin_dir, $SHARDMAP_BIN_DIR, "
        f"{os.path.normpath(dirs[2])} and PATH (build it with "
        f"scripts/build.sh)")


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _read_line(stream, deadline, proc, log_path):
    """The first line `shardctl up` prints (the address), bounded."""
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(
                f"the local cluster did not start in time (log: {log_path})")
        ready, _, _ = select.select([stream], [], [], min(left, 0.5))
        if ready:
            byte = os.read(stream.fileno(), 1)
            if not byte:
                proc.wait(timeout=10)
                raise Unavailable(
                    f"shardctl up exited with status {proc.returncode}: "
                    f"{_tail(log_path)}")
            line += byte
    return line.decode().strip()


def _tail(path, lines=5):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(f.read().strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


class LocalCluster(Cluster):
    """A Cluster whose processes this object started and stops."""

    def __init__(self, workers, bin_dir=None, log_level="warn",
                 start_timeout=60.0, **connect_kwargs):
        if not isinstance(workers, int) or workers < 1:
            raise InvalidArgument(
                f"local: workers must be a positive int, got {workers!r}")
        shardctl = find_shardctl(bin_dir)
        fd, self.log_path = tempfile.mkstemp(prefix="shardmap-local-",
                                             suffix=".log")
        with os.fdopen(fd, "wb") as log:
            self._proc = subprocess.Popen(
                [shardctl, "up", "--workers", str(workers), "--listen",
                 "127.0.0.1:0", "--log-level", log_level],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                preexec_fn=_die_with_parent, start_new_session=True)
        try:
            address = _read_line(self._proc.stdout,
                                 time.monotonic() + start_timeout,
                                 self._proc, self.log_path)
        except BaseException:
            self._stop()
            raise
        self.workers = workers
        atexit.register(self.close)
        super().__init__(address, **connect_kwargs)

    def _stop(self):
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        self._proc.stdout.close()

    def close(self):
        """Disconnects and stops the coordinator and the workers."""
        super().close()
        if self._proc.returncode is None:
            self._stop()
            atexit.unregister(self.close)

    def __repr__(self):
        return f"<shardmap.LocalCluster {self.address}, {self.workers} workers>"


def local(workers, **kwargs):
    """Starts a local cluster of `workers` workers and connects to it."""
    return LocalCluster(workers, **kwargs)
