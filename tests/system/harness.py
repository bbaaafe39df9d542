"""Clusters for the system tests: real shardmap processes on 127.0.0.1.

UpCluster runs `shardctl up` (the whole cluster as one command), for
suites that only submit jobs. ProcessCluster starts the coordinator and
each worker by hand, for suites that kill, stop or restart them.
Environment: SHARDMAP_BIN_DIR = directory of the binaries (default
build/bin); SHARDMAP_CLUSTER_LOG = a file for the cluster's log.
Every cluster requires a bearer token, as a deployed one would: the
servers and shardctl inherit it through SHARDMAP_TOKEN (set here unless
the caller set one).
"""
import errno
import json
import os
import secrets
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import numpy as np

BIN = os.environ.get(
    "SHARDMAP_BIN_DIR",
    os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
SHARDCTL = os.path.join(BIN, "shardctl")
os.environ.setdefault("SHARDMAP_TOKEN", secrets.token_hex(16))
# The metadata a raw gRPC call (one that bypasses shardctl) needs.
AUTH_METADATA = [("authorization", f"Bearer {os.environ['SHARDMAP_TOKEN']}")]
SUBPROCESS_TIMEOUT = 120  # seconds; every shardctl call is bounded
SKIPPED = 77  # exit status of a suite that skipped everything (CTest's
#               SKIP_RETURN_CODE)
CANNOT_LISTEN = 69  # a server's exit status when it cannot bind --listen
PORT_WAIT = 30  # seconds a restart at the same address waits for its port


def shardctl(*args, timeout=SUBPROCESS_TIMEOUT):
    """Runs shardctl; returns (exit code, stdout, stderr)."""
    p = subprocess.run([SHARDCTL, *args], capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def pb_varint(n):
    """A protobuf varint, for hand-encoded requests that shardctl itself
    would refuse to send."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pb_field(number, payload):
    """A length-delimited protobuf field (str payloads are UTF-8)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return pb_varint(number << 3 | 2) + pb_varint(len(payload)) + payload


class Scratch:
    """A temporary directory that hands out fresh names and .npy paths."""

    def __init__(self, prefix):
        self._dir = tempfile.TemporaryDirectory(prefix=prefix)
        self.name = self._dir.name
        self._count = 0

    def fresh(self, stem):
        self._count += 1
        return f"{stem}{self._count}"

    def save(self, array):
        path = os.path.join(self.name, self.fresh("in") + ".npy")
        np.save(path, array)
        return path

    def out_path(self):
        return os.path.join(self.name, self.fresh("out") + ".npy")

    def cleanup(self):
        self._dir.cleanup()


def stop(proc, timeout=10):
    """SIGTERM, then SIGKILL if the process does not exit in time."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def live_workers(address, prefix=()):
    """How many workers the coordinator counts live, or -1 if unreachable.
    `prefix` runs shardctl through another command (ip netns exec NS)."""
    s = status(address, prefix)
    return len(s["workers"]) if s is not None else -1


def status(address, prefix=()):
    """`shardctl status --json`, parsed; None if unreachable."""
    p = subprocess.run([*prefix, SHARDCTL, "status", "--coordinator", address,
                        "--json"], capture_output=True, text=True, timeout=30)
    return json.loads(p.stdout) if p.returncode == 0 else None


def wait_for_workers(address, n, timeout=20, prefix=()):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if live_workers(address, prefix) == n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{n} workers never became live at {address}")


class UpCluster:
    """`shardctl up --workers n` in the background; .address is the
    coordinator's."""

    def __init__(self, workers):
        log = os.environ.get("SHARDMAP_CLUSTER_LOG")
        self._log = open(log, "w") if log else None
        self.proc = subprocess.Popen(
            [SHARDCTL, "up", "--workers", str(workers), "--listen",
             "127.0.0.1:0"] + (["--log-level", "info"] if log else []),
            stdout=subprocess.PIPE,
            stderr=self._log or subprocess.DEVNULL, text=True)
        self.address = self.proc.stdout.readline().strip()
        if not self.address:
            stop(self.proc)
            raise RuntimeError("shardctl up did not print an address")

    def close(self):
        stop(self.proc)
        if self._log:
            self._log.close()


def _start(cmd, stderr=subprocess.DEVNULL, preexec_fn=None):
    """Starts a server and returns it with the address it announces."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr,
                            text=True, preexec_fn=preexec_fn)
    return proc, proc.stdout.readline().strip().rsplit(" ", 1)[-1]


def port_taken(address):
    """Whether another socket holds HOST:PORT so that a server cannot
    listen there (a lingering TIME_WAIT connection does not count: the
    servers set SO_REUSEADDR, as this probe does)."""
    host, port = address.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, int(port)))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def _start_at(cmd, address, stderr=subprocess.DEVNULL, preexec_fn=None):
    """_start for a server restarted at the address it had. Between the
    kill and the restart another process may take the port: the start is
    then retried once the port is free again, and the test is skipped if
    it stays taken for PORT_WAIT seconds. Any other failure to start is an
    AssertionError."""
    end = time.monotonic() + PORT_WAIT
    free_port_failures = 0
    while True:
        proc, announced = _start(cmd, stderr, preexec_fn)
        if announced:
            return proc, announced
        code = proc.wait(timeout=SUBPROCESS_TIMEOUT)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        taken = code == CANNOT_LISTEN and port_taken(address)
        if not taken:
            # The port was free when probed: a real failure, unless the
            # other process let go of it just before the probe.
            free_port_failures += 1
            if code != CANNOT_LISTEN or free_port_failures > 1:
                raise AssertionError(
                    f"{os.path.basename(cmd[0])} did not start at {address} "
                    f"(exit status {code})")
        while port_taken(address):  # bounded poll for the port
            if time.monotonic() > end:
                raise unittest.SkipTest(
                    f"port of {address} stayed taken by another process "
                    f"for {PORT_WAIT} s after the restart")
            time.sleep(0.05)


def _start_server(prefix, cmd, listen, stderr, preexec_fn=None):
    """Starts `cmd` (run through `prefix`) listening at `listen`: at a fixed
    port (a restart), robust to the port being taken meanwhile, as
    _start_at says. The probe runs in this network namespace, so a server
    run through a prefix (another namespace) is started once, as is one at
    port 0."""
    if prefix or listen.rsplit(":", 1)[1] == "0":
        return _start([*prefix, *cmd], stderr, preexec_fn)
    return _start_at(cmd, listen, stderr, preexec_fn)


class Worker:
    def __init__(self, proc, address):
        self.proc = proc
        self.address = address


class ProcessCluster:
    """A coordinator and workers started one by one, so a test can kill,
    stop and restart any of them. `prefix(who)` (who: "coordinator",
    "client" or a worker's index) gives the command that process runs
    through, e.g. ["ip", "netns", "exec", NS]; `host` is the coordinator's
    listen address."""

    def __init__(self, workers, heartbeat_timeout=1.0, coordinator_args=(),
                 worker_args=(), prefix=lambda who: [], host="127.0.0.1",
                 stderr=subprocess.DEVNULL):
        self.heartbeat_timeout = heartbeat_timeout
        self.stderr = stderr  # every process's, unless add_worker says
        self.coordinator_args = list(coordinator_args)
        self.worker_args = list(worker_args)
        self.prefix = prefix
        self.host = host
        self.coordinator = None
        self.address = None
        self.workers = []
        self.start_coordinator()
        for _ in range(workers):
            self.add_worker()
        self.wait_for_workers(workers)

    def start_coordinator(self, port=0):
        """Starts the coordinator; a port other than 0 is a restart at the
        port it had (see _start_at)."""
        listen = f"{self.host}:{port}"
        self.coordinator, self.address = _start_server(
            self.prefix("coordinator"),
            [f"{BIN}/shardmap-coordinator", "--listen", listen,
             "--heartbeat-timeout", str(self.heartbeat_timeout),
             *self.coordinator_args], listen, self.stderr)

    def kill_coordinator(self):
        self.coordinator.kill()
        self.coordinator.wait()
        self.coordinator.stdout.close()

    def add_worker(self, *extra, stderr=None, listen="127.0.0.1:0",
                   who=None, preexec_fn=None):
        """Starts a worker; `listen` at a fixed port is a restart at the
        address it had (see _start_at). `preexec_fn` runs in the child
        before the worker (e.g. to set a resource limit)."""
        stderr = self.stderr if stderr is None else stderr
        proc, address = _start_server(
            self.prefix(len(self.workers) if who is None else who),
            [f"{BIN}/shardmap-worker", "--coordinator", self.address,
             "--listen", listen, *self.worker_args, *extra], listen, stderr,
            preexec_fn)
        self.workers.append(Worker(proc, address))
        return self.workers[-1]

    def kill_worker(self, worker):
        worker.proc.kill()
        worker.proc.wait()
        for stream in (worker.proc.stdout, worker.proc.stderr):
            if stream is not None:
                stream.close()
        self.workers.remove(worker)

    def kill_workers(self):
        for w in list(self.workers):
            w.proc.send_signal(signal.SIGCONT)  # a stopped one must die too
            self.kill_worker(w)

    def worker_of_device(self, d):
        """The worker that runs device d of the next job: the pool places
        devices on live workers in registration order."""
        address = status(self.address, self.prefix("client"))["workers"][d][
            "address"]
        return next(w for w in self.workers if w.address == address)

    def live(self):
        return live_workers(self.address, self.prefix("client"))

    def wait_for_workers(self, n, timeout=20):
        wait_for_workers(self.address, n, timeout, self.prefix("client"))

    def close(self):
        self.kill_workers()
        stop(self.coordinator)


class ClusterTestCase(unittest.TestCase):
    """A test case with a scratch directory (self.tmp, removed after the
    test and after its clusters stop), ProcessClusters stopped after the
    test, and shardctl shortcuts."""

    scratch_prefix = "shardmap-test-"

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix=self.scratch_prefix)
        self.addCleanup(self.tmp.cleanup)
        self.count = 0  # numbers the files made here

    def path(self, *parts):
        return os.path.join(self.tmp.name, *parts)

    def cluster(self, n, **kwargs):
        """A ProcessCluster of n workers (kwargs as its own), closed after
        the test."""
        c = ProcessCluster(n, **kwargs)
        self.addCleanup(c.close)
        return c

    def file(self, array):
        """A new .npy file holding `array`."""
        self.count += 1
        path = self.path(f"a{self.count}.npy")
        np.save(path, array)
        return path

    def ctl(self, c, *args, timeout=60):
        """shardctl ARGS --coordinator (c's): (exit code, stdout, stderr)."""
        return shardctl(*args, "--coordinator", c.address, timeout=timeout)


def cpu_seconds(pid):
    """User + system CPU time the process has used, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid):
    """The process's resident set size now."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def wait_until_idle(pids, timeout=10, window=0.5, busy=0.1):
    """Seconds until none of `pids` uses more than `busy` of a core over
    `window`; AssertionError after `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        before = [cpu_seconds(p) for p in pids]
        time.sleep(window)
        used = [cpu_seconds(p) - b for p, b in zip(pids, before)]
        if max(used) <= busy * window:
            return time.monotonic() - start - window
    raise AssertionError(f"processes {pids} still busy after {timeout} s")


def wait_until_busy(pids, timeout=30, cpu=0.1):
    """Waits until each of `pids` has computed for `cpu` seconds since the
    call (cumulative, so a loaded shared machine only slows it down)."""
    start = [cpu_seconds(p) for p in pids]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if min(cpu_seconds(p) - s for p, s in zip(pids, start)) >= cpu:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes {pids} never got busy")


class ReplyCutProxy:
    """A TCP proxy on 127.0.0.1 to `target` (HOST:PORT of a plaintext gRPC
    server) that cuts a connection, both ways, at the first HTTP/2 DATA
    frame the server sends on a stream: the server has answered (so it
    applied the call), and the client loses the connection before it
    hears the answer. Only the next `cuts` connections that get that far
    are cut; the rest pass through."""

    def __init__(self, target, cuts=1):
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._lock = threading.Lock()
        self._cuts = cuts
        self.cut = 0  # connections cut so far
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, cuts=1):
        with self._lock:
            self._cuts = cuts

    def close(self):
        self._listener.close()

    def _take_cut(self):
        with self._lock:
            if self._cuts <= 0:
                return False
            self._cuts -= 1
            self.cut += 1
            return True

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,),
                             daemon=True).start()

    @staticmethod
    def _close(*socks):
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _serve(self, client):
        try:
            upstream = socket.create_connection(self._target, timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        threading.Thread(target=self._requests, args=(client, upstream),
                         daemon=True).start()
        self._replies(upstream, client)

    def _requests(self, client, upstream):
        try:
            while data := client.recv(1 << 16):
                upstream.sendall(data)
        except OSError:
            pass
        self._close(client, upstream)

    def _replies(self, upstream, client):
        pending = b""
        try:
            while data := upstream.recv(1 << 16):
                pending += data
                out = b""
                # HTTP/2 frames: 3 bytes length, type, flags, 4 bytes stream.
                while len(pending) >= 9:
                    length = int.from_bytes(pending[:3], "big")
                    if len(pending) < 9 + length:
                        break
                    stream = int.from_bytes(pending[5:9], "big") & 0x7FFFFFFF
                    if pending[3] == 0 and stream > 0 and self._take_cut():
                        client.sendall(out)
                        self._close(client, upstream)
                        return
                    out += pending[:9 + length]
                    pending = pending[9 + length:]
                client.sendall(out)
        except OSError:
            pass
        self._close(client, upstream)


class _Result(unittest.TextTestResult):
    """Counts tests (and subtests) that passed, to tell a suite that ran
    nothing but skips from one that passed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is None:
            self.passed += 1


class _Runner(unittest.TextTestRunner):
    resultclass = _Result


def main():
    """unittest.main for a suite's __main__, except that it exits with
    SKIPPED (77) when every test was skipped (a skip in setUpClass
    included) and none passed or failed: CTest then reports the suite as
    skipped, not passed. Otherwise 0 or 1, as unittest.main would."""
    result = unittest.main(testRunner=_Runner, exit=False,
                           verbosity=2).result
    if not result.wasSuccessful():
        raise SystemExit(1)
    if (result.skipped and result.passed == 0
            and not result.expectedFailures):
        raise SystemExit(SKIPPED)
    raise SystemExit(0)
