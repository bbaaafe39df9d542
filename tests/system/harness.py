"""Clusters for the system tests: real shardmap processes on 127.0.0.1.

UpCluster runs `shardctl up` (the whole cluster as one command), for
suites that only submit jobs. ProcessCluster starts the coordinator and
each worker by hand, for suites that kill, stop or restart them.
Environment: SHARDMAP_BIN_DIR = directory of the binaries (default
build/bin); SHARDMAP_CLUSTER_LOG = a file for the cluster's log.
"""
import json
import os
import signal
import subprocess
import time

BIN = os.environ.get(
    "SHARDMAP_BIN_DIR",
    os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
SHARDCTL = os.path.join(BIN, "shardctl")


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


def live_workers(address):
    """How many workers the coordinator counts live, or -1 if unreachable."""
    p = subprocess.run([SHARDCTL, "status", "--coordinator", address,
                        "--json"], capture_output=True, text=True, timeout=30)
    return len(json.loads(p.stdout)["workers"]) if p.returncode == 0 else -1


def wait_for_workers(address, n, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if live_workers(address) == n:
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


def _start(cmd, stderr=subprocess.DEVNULL):
    """Starts a server and returns it with the address it announces."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr,
                            text=True)
    return proc, proc.stdout.readline().strip().rsplit(" ", 1)[-1]


class Worker:
    def __init__(self, proc, address):
        self.proc = proc
        self.address = address


class ProcessCluster:
    """A coordinator and workers started one by one, so a test can kill,
    stop and restart any of them."""

    def __init__(self, workers, heartbeat_timeout=1.0):
        self.heartbeat_timeout = heartbeat_timeout
        self.coordinator = None
        self.address = None
        self.workers = []
        self.start_coordinator()
        for _ in range(workers):
            self.add_worker()
        self.wait_for_workers(workers)

    def start_coordinator(self, port=0):
        self.coordinator, self.address = _start(
            [f"{BIN}/shardmap-coordinator", "--listen", f"127.0.0.1:{port}",
             "--heartbeat-timeout", str(self.heartbeat_timeout)])

    def kill_coordinator(self):
        self.coordinator.kill()
        self.coordinator.wait()
        self.coordinator.stdout.close()

    def add_worker(self, *extra, stderr=subprocess.DEVNULL):
        proc, address = _start(
            [f"{BIN}/shardmap-worker", "--coordinator", self.address,
             "--listen", "127.0.0.1:0", *extra], stderr=stderr)
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

    def live(self):
        return live_workers(self.address)

    def wait_for_workers(self, n, timeout=20):
        wait_for_workers(self.address, n, timeout)

    def close(self):
        self.kill_workers()
        stop(self.coordinator)
