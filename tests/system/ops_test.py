"""Operations with real processes on 127.0.0.1: grpc.health.v1 and
`shardctl health`, worker ranks, bring-up with --expect-workers, metrics,
JSON logs with traceparent, and the SIGTERM drain.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SHARDCTL = harness.SHARDCTL
BIN = harness.BIN


def health(addr, *args, timeout=5):
    p = subprocess.run([SHARDCTL, "health", "--addr", addr,
                        "--timeout", str(timeout), *args],
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout.strip(), p.stderr


def wait_health(addr, code, timeout=10, *args):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = health(addr, *args)
        if last[0] == code:
            return last
        time.sleep(0.05)
    raise AssertionError(f"health of {addr} never exited {code}: {last}")


class Procs:
    """Processes a test starts; all are killed at the end."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []

    def coordinator(self, *args):
        proc, addr = harness._start(
            [f"{BIN}/shardmap-coordinator", "--listen", "127.0.0.1:0",
             "--heartbeat-timeout", "1", *args])
        self.procs.append(proc)
        return proc, addr

    def worker(self, coordinator, *args, env=None, log=None):
        """A worker; its stderr goes to `log` (a file name) if given."""
        stderr = open(os.path.join(self.tmp, log), "w") if log else \
            subprocess.DEVNULL
        proc = subprocess.Popen(
            [f"{BIN}/shardmap-worker", "--coordinator", coordinator,
             "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=stderr, text=True,
            env=dict(os.environ, **(env or {})))
        if log:
            stderr.close()
        addr = proc.stdout.readline().strip().rsplit(" ", 1)[-1]
        self.procs.append(proc)
        return proc, addr

    def kill(self, proc):
        proc.kill()
        proc.wait()

    def cluster(self, *coordinator_args, worker_args=()):
        """A coordinator and two live workers; returns the coordinator's
        process and address and the workers' (process, address)."""
        proc, addr = self.coordinator(*coordinator_args)
        workers = [self.worker(addr, *worker_args) for _ in range(2)]
        harness.wait_for_workers(addr, 2)
        return proc, addr, workers

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            if p.stdout:
                p.stdout.close()


def scrape(addr):
    """{(name, frozenset of label pairs): value} from /metrics."""
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$', line)
        if not m:
            continue
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def status(addr):
    p = subprocess.run([SHARDCTL, "status", "--coordinator", addr, "--json"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


class OpsTest(unittest.TestCase):

    def setUp(self):
        self.tmpdir = tempfile.TemporaryDirectory()
        self.tmp = self.tmpdir.name
        self.procs = Procs(self.tmp)
        self.x = os.path.join(self.tmp, "x.npy")
        np.save(self.x, np.arange(8, dtype=np.float64))

    def tearDown(self):
        self.procs.close()
        self.tmpdir.cleanup()

    def run_job(self, addr, *extra, mesh="x=2", timeout=30):
        return subprocess.run(
            [SHARDCTL, "run", "--coordinator", addr, "--mesh", mesh,
             "--fn", "identity", "--arg", self.x, "--in-spec", "P('x')",
             "--out-spec", "P('x')", "--timeout", str(timeout), *extra],
            capture_output=True, text=True, timeout=timeout + 30)

    def test_health_ranks_and_bring_up(self):
        """Scenarios 6, 7 and 30."""
        _, coord = self.procs.coordinator("--expect-workers", "2",
                                          "--init-timeout", "2")
        t0 = time.monotonic()
        # Up, but not all expected workers: NOT_SERVING (exit 75).
        for service in ([], ["--service", "shardmap.v1.Coordinator"]):
            code, out, err = health(coord, *service)
            self.assertEqual((code, out), (75, "NOT_SERVING"), err)
        code, out, err = health(coord, "--service", "unknown")
        self.assertEqual(code, 64, err)
        self.assertIn("error: NOT_FOUND: no service named 'unknown'", err)
        code, _, err = health(coord, "--json")
        self.assertEqual(json.loads(_)["status"], "NOT_SERVING")

        w1, w1_addr = self.procs.worker(coord, "--rank", "1")
        wait_health(w1_addr, 0)
        self.assertEqual(health(w1_addr, "--service",
                                "shardmap.v1.Worker")[0], 0)
        # A second worker claiming rank 1 is refused and never serves.
        dup, dup_addr = self.procs.worker(coord, env={"SHARDMAP_RANK": "1"},
                                          log="dup.log")
        # Bring-up: a job waits for the missing rank until the init
        # timeout (2 s after the coordinator started), then fails naming it.
        p = self.run_job(coord)
        self.assertEqual(p.returncode, 69, p.stderr)
        self.assertIn("error: UNAVAILABLE: the cluster did not come up", p.stderr)
        self.assertIn("1/2 workers registered, missing rank 0", p.stderr)
        self.assertGreater(time.monotonic() - t0, 1.9)
        self.assertEqual(health(dup_addr)[0], 75)
        with open(os.path.join(self.tmp, "dup.log")) as f:
            log = f.read()
        self.assertIn("ALREADY_EXISTS: rank 1 is held by live worker w0 at "
                      f"{w1_addr}", log)
        self.assertEqual([w["address"] for w in status(coord)["workers"]],
                         [w1_addr])
        self.procs.kill(dup)

        # Rank 0 from the Indexed Job variable, registering second.
        w0, w0_addr = self.procs.worker(
            coord, env={"JOB_COMPLETION_INDEX": "0"})
        wait_health(coord, 0)
        code, out, _ = health(coord, "--service", "shardmap.v1.Coordinator")
        self.assertEqual((code, out), (0, "SERVING"))
        st = status(coord)
        self.assertTrue(st["complete"])
        ranks = {w["id"]: w["rank"] for w in st["workers"]}
        by_addr = {w["address"]: w["rank"] for w in st["workers"]}
        self.assertEqual(by_addr, {w0_addr: 0, w1_addr: 1})
        # Device i is placed on rank i, not in registration order.
        p = subprocess.run([SHARDCTL, "put", "a", self.x, "--mesh", "x=2",
                            "--spec", "P('x')", "--coordinator", coord],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run([SHARDCTL, "ls", "--json", "--coordinator", coord],
                           capture_output=True, text=True, timeout=30)
        holders = json.loads(p.stdout)["arrays"][0]["workers"]
        self.assertEqual([ranks[w] for w in holders], [0, 1])
        p = self.run_job(coord)
        self.assertEqual(p.returncode, 0, p.stderr)

        # Watch across a worker death: SERVING, then NOT_SERVING.
        watch = subprocess.Popen(
            [SHARDCTL, "health", "--addr", coord, "--watch", "--timeout", "20"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertEqual(watch.stdout.readline().strip(), "SERVING")
            self.procs.kill(w0)
            killed = time.monotonic()
            self.assertEqual(watch.stdout.readline().strip(), "NOT_SERVING")
            # heartbeat timeout 1 s + the 100 ms poll
            self.assertLess(time.monotonic() - killed, 3.0)
        finally:
            watch.kill()
            watch.communicate()
        # A restarted rank 0 (a new address) replaces its dead predecessor.
        _, w0b_addr = self.procs.worker(coord, "--rank", "0")
        wait_health(coord, 0)
        self.assertEqual({w["address"]: w["rank"]
                          for w in status(coord)["workers"]},
                         {w0b_addr: 0, w1_addr: 1})

        # Unreachable: 69.
        port = coord.rsplit(":", 1)[1]
        self.procs.close()
        code, _, err = health(f"127.0.0.1:{port}", timeout=2)
        self.assertEqual(code, 69, err)
        self.assertIn("error: UNAVAILABLE:", err)

    def slow_job(self, addr, seconds, timeout=30):
        """psum(x) over x=2 after device 0 spins for `seconds` (the
        workers' --test-functions)."""
        return subprocess.Popen(
            [SHARDCTL, "run", "--coordinator", addr, "--mesh", "x=2",
             "--fn", "spin", "--kwargs",
             json.dumps({"axes": "x", "seconds": seconds, "device": 0}),
             "--arg", self.x, "--in-spec", "P('x')", "--out-spec", "P()",
             "--json", "--timeout", str(timeout)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def test_sigterm_drains_the_coordinator(self):
        """Scenario 16: NOT_SERVING, new jobs UNAVAILABLE, the job in
        flight finishes, exit 0."""
        coord_proc, coord, _ = self.procs.cluster(
            "--grace", "20", worker_args=("--test-functions",))
        # Long enough that the refused job below surely arrives while this
        # one still runs, even on a loaded machine.
        job = self.slow_job(coord, 4.0)
        time.sleep(0.7)
        self.assertIsNone(job.poll())
        coord_proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        wait_health(coord, 75, 2)
        p = self.run_job(coord)
        self.assertEqual(p.returncode, 69, p.stderr)
        self.assertIn("error: UNAVAILABLE: the coordinator is shutting down",
                      p.stderr)
        out, err = job.communicate(timeout=30)
        self.assertEqual(job.returncode, 0, err)
        x = np.load(self.x)
        np.testing.assert_array_equal(
            json.loads(out)["outputs"][0]["values"], x[:4] + x[4:])
        self.assertEqual(coord_proc.wait(timeout=10), 0)
        self.assertLess(time.monotonic() - signalled, 7)

    def test_sigterm_cancels_jobs_past_the_grace(self):
        coord_proc, coord, _ = self.procs.cluster(
            "--grace", "0.5", worker_args=("--test-functions",))
        job = self.slow_job(coord, 8.0)
        time.sleep(0.5)
        coord_proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        self.assertEqual(coord_proc.wait(timeout=10), 0)
        _, err = job.communicate(timeout=30)
        self.assertEqual(job.returncode, 69, err)
        self.assertIn("--grace period ended before the job did", err)
        # 0.5 s grace plus settling, well before the 8 s job would end.
        self.assertLess(time.monotonic() - signalled, 4)

    def test_sigterm_drains_a_worker(self):
        _, coord, [(w, w_addr), _] = self.procs.cluster(
            worker_args=("--grace", "20", "--test-functions"))
        wait_health(w_addr, 0)
        job = self.slow_job(coord, 1.5)
        time.sleep(0.5)
        w.send_signal(signal.SIGTERM)
        wait_health(w_addr, 75, 1)
        # It says so in a heartbeat; the coordinator places no new job on
        # it (registered first, it would get device 0), so this one runs
        # on the other worker.
        end = time.monotonic() + 5
        while not any(x.get("draining") for x in status(coord)["workers"]):
            self.assertLess(time.monotonic(), end, "never marked draining")
            time.sleep(0.05)
        p = self.run_job(coord, mesh="x=1")
        self.assertEqual(p.returncode, 0, p.stderr)
        out, err = job.communicate(timeout=30)
        self.assertEqual(job.returncode, 0, err)
        self.assertEqual(w.wait(timeout=10), 0)

    def test_metrics(self):
        on = ("--metrics", "127.0.0.1:0")
        coord_proc, coord, procs = self.procs.cluster(*on, worker_args=on)
        coord_metrics = coord_proc.stdout.readline().split()[-1]
        workers = [(addr, proc.stdout.readline().split()[-1])
                   for proc, addr in procs]
        big = os.path.join(self.tmp, "big.npy")
        np.save(big, np.arange(1 << 16, dtype=np.float64))
        # A put (an identity job storing its output), a good identity,
        # a bad one, and a psum whose blocks are 256 KiB per device.
        p = subprocess.run([SHARDCTL, "put", "a", self.x, "--mesh", "x=2",
                            "--spec", "P('x')", "--coordinator", coord],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.run_job(coord)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.run_job(coord, mesh="y=2")
        self.assertEqual(p.returncode, 65, p.stderr)
        p = subprocess.run(
            [SHARDCTL, "run", "--coordinator", coord, "--mesh", "x=2",
             "--fn", "psum", "--kwargs", '{"axes": "x"}', "--arg", big,
             "--in-spec", "P('x')", "--out-spec", "P()",
             "--out", os.path.join(self.tmp, "s.npy")],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)

        c = scrape(coord_metrics)
        jobs = "shardmap_jobs_total"
        self.assertEqual(metric(c, jobs, function="identity", code="OK"), 2)
        self.assertEqual(metric(
            c, jobs, function="identity", code="INVALID_ARGUMENT"), 1)
        self.assertEqual(metric(c, jobs, function="psum", code="OK"), 1)
        self.assertEqual(metric(c, "shardmap_job_duration_seconds_count"), 4)
        self.assertGreater(metric(c, "shardmap_job_duration_seconds_sum"), 0)
        # The coordinator's health poll (every 100 ms) sets this gauge: on a
        # busy machine the jobs above may all run before the first poll
        # after the workers registered, so wait (bounded) for one.
        end = time.monotonic() + 10
        while (metric(c, "shardmap_workers_up") != 2 and
               time.monotonic() < end):
            time.sleep(0.05)
            c = scrape(coord_metrics)
        self.assertEqual(metric(c, "shardmap_workers_up"), 2)
        # Every job above ended before its client had its answer.
        self.assertEqual(metric(c, "shardmap_jobs_running"), 0)
        self.assertEqual(metric(c, "shardmap_jobs_waiting"), 0)

        block = (1 << 16) * 8 // 2
        for (addr, maddr), (peer, _) in zip(workers, reversed(workers)):
            w = scrape(maddr)
            self.assertEqual(metric(w, "shardmap_collective_duration_seconds"
                                    "_count", op="psum"), 1)
            # With 2 devices every all-reduce algorithm sends one block's
            # bytes to the other device, and receives as many.
            self.assertEqual(metric(w, "shardmap_peer_bytes_sent_total",
                                    peer=peer), block)
            self.assertEqual(metric(w, "shardmap_peer_bytes_received_total",
                                    peer=peer), block)
            # Each holds half of the resident float64[8] "a".
            self.assertEqual(metric(w, "shardmap_resident_bytes"), 32)

    def test_json_logs_carry_the_trace(self):
        trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        parent = "00f067aa0ba902b7"
        coord_log = os.path.join(self.tmp, "coordinator.log")
        with open(coord_log, "w") as f:
            proc = subprocess.Popen(
                [f"{BIN}/shardmap-coordinator", "--listen", "127.0.0.1:0",
                 "--log-format", "json", "--log-level", "debug"],
                stdout=subprocess.PIPE, stderr=f, text=True)
        self.procs.procs.append(proc)
        coord = proc.stdout.readline().split()[-1]
        for r in range(2):
            self.procs.worker(coord, "--log-format", "json", "--log-level",
                              "debug", "--rank", str(r), log=f"w{r}.log")
        harness.wait_for_workers(coord, 2)
        p = self.run_job(coord, "--json", "--traceparent",
                         f"00-{trace}-{parent}-01")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["traceparent"],
                         f"00-{trace}-{parent}-01")
        job_id = json.loads(p.stdout)["job_id"]
        # A job without a traceparent gets a new trace.
        p = self.run_job(coord, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        other = json.loads(p.stdout)["traceparent"].split("-")[1]
        self.assertNotEqual(other, trace)
        p = self.run_job(coord, "--traceparent", "00-xyz-01")
        self.assertEqual(p.returncode, 65, p.stderr)
        self.assertIn("traceparent must be", p.stderr)
        self.procs.close()  # flush and end the logs

        spans = set()
        for name, component, rank in (("coordinator.log", "coordinator",
                                       None),
                                      ("w0.log", "worker", 0),
                                      ("w1.log", "worker", 1)):
            with open(os.path.join(self.tmp, name)) as f:
                lines = [json.loads(line) for line in f if line.strip()]
            self.assertTrue(lines, name)
            for line in lines:
                self.assertEqual(
                    list(line), ["ts", "level", "component", "rank", "job_id",
                                 "trace_id", "span_id", "msg"])
                self.assertEqual(line["component"], component)
                self.assertEqual(line["rank"], rank)
                self.assertRegex(line["ts"], r"^\d{4}-\d\d-\d\dT[\d:.]+Z$")
            traced = [l for l in lines if l["trace_id"] == trace]
            self.assertTrue(traced, f"{name} never logs trace {trace}")
            for line in traced:
                # Workers know the job as job-N@<coordinator start>.
                if component == "coordinator":
                    self.assertEqual(line["job_id"], job_id)
                else:
                    self.assertTrue(line["job_id"].startswith(job_id + "@"),
                                    line)
                self.assertRegex(line["span_id"], r"^[0-9a-f]{16}$")
                self.assertNotEqual(line["span_id"], parent)
                spans.add((name, line["span_id"]))
            self.assertTrue(any(l["trace_id"] == other for l in lines), name)
        # Each process has its own span of the trace.
        self.assertEqual(len({s for _, s in spans}), 3, spans)

    def test_job_waits_for_expected_workers(self):
        """A job submitted before the expected workers are up runs once they
        are (scenario 6, the good case)."""
        _, coord = self.procs.coordinator("--expect-workers", "2",
                                          "--init-timeout", "20")
        job = subprocess.Popen(
            [SHARDCTL, "run", "--coordinator", coord, "--mesh", "x=2",
             "--fn", "identity", "--arg", self.x, "--in-spec", "P('x')",
             "--out", os.path.join(self.tmp, "y.npy"), "--out-spec", "P('x')",
             "--timeout", "30"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        self.assertIsNone(job.poll())
        self.procs.worker(coord)
        self.procs.worker(coord)
        _, err = job.communicate(timeout=30)
        self.assertEqual(job.returncode, 0, err)
        np.testing.assert_array_equal(
            np.load(os.path.join(self.tmp, "y.npy")), np.load(self.x))


if __name__ == "__main__":
    unittest.main(verbosity=2)
