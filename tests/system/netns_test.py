"""Multi-host tests: the coordinator and every worker in a network
namespace of its own (a host with its own 10.77.0.x address), joined by
veth pairs to a bridge in one more namespace; each worker also has its own
IPC namespace, so workers do not count as co-located and their collectives
cross the network instead of shared memory (checked). Collectives over a 2x2 mesh
across the hosts, checked against numpy; a lossy, rate-limited network;
and a link cut mid-job (docs/RELIABILITY.md, scenario 3: no RST, the job must
fail within the bound and the cluster serve again once the link is back).

Needs root and `ip netns` (iproute2); skips with the reason otherwise.
Packet loss needs `nft` (nftables) and the tbf qdisc; netem is not
required (many kernels lack it). The namespaces are named after this
process and deleted even when a test fails; ones left by a killed earlier
run are deleted at start. Environment: SHARDMAP_BIN_DIR.
"""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import shardmap_ref as ref  # noqa: E402

SHARDCTL = harness.SHARDCTL
PREFIX = "shardmap-netns-"  # + pid + "-" + name
RNG = np.random.default_rng(77)
MESH = "x=2,y=2"


def ip(*args, check=True):
    p = subprocess.run(["ip", *args], capture_output=True, text=True,
                       timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip()}")
    return p


def delete_stale_namespaces():
    """Namespaces of earlier runs of this test whose process is gone."""
    for line in ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(re.escape(PREFIX) + r"(\d+)-\w+", name)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            ip("netns", "del", name, check=False)


class Lab:
    """`hosts` namespaces with 10.77.0.1, .2, ... on one bridge."""

    def __init__(self, hosts):
        tag = f"{PREFIX}{os.getpid()}-"
        self.bridge = tag + "br"
        self.ns = [f"{tag}h{i}" for i in range(hosts)]
        self.created = []
        atexit.register(self.close)
        try:
            self._add(self.bridge)
            ip("-n", self.bridge, "link", "add", "br0", "type", "bridge")
            ip("-n", self.bridge, "link", "set", "br0", "up")
            for i, ns in enumerate(self.ns):
                self._add(ns)
                ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer",
                   "name", f"p{i}", "netns", self.bridge)
                ip("-n", self.bridge, "link", "set", f"p{i}", "master", "br0")
                ip("-n", self.bridge, "link", "set", f"p{i}", "up")
                ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev",
                   "eth0")
                ip("-n", ns, "link", "set", "eth0", "up")
                ip("-n", ns, "link", "set", "lo", "up")
        except Exception:
            self.close()
            raise

    def _add(self, name):
        ip("netns", "add", name)
        self.created.append(name)

    @staticmethod
    def address(i):
        return f"10.77.0.{i + 1}"

    def prefix(self, i):
        return ["ip", "netns", "exec", self.ns[i]]

    def host_prefix(self, i):
        """Host i as another machine: its own network and IPC namespaces,
        so workers do not take each other for co-located (shared memory)."""
        return [*self.prefix(i), "unshare", "--ipc"]

    def run(self, i, *argv, check=True):
        p = subprocess.run([*self.prefix(i), *argv], capture_output=True,
                           text=True, timeout=30)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip()}")
        return p

    def cut(self, i, up=False):
        """Unplugs host i's cable: its packets vanish, nobody gets a RST."""
        ip("-n", self.bridge, "link", "set", f"p{i}", "up" if up else "down")

    def close(self):
        while self.created:
            ip("netns", "del", self.created.pop(), check=False)


def netns_unavailable():
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    probe = f"{PREFIX}{os.getpid()}-probe"
    p = subprocess.run(["ip", "netns", "add", probe], capture_output=True,
                       text=True)
    if p.returncode != 0:
        return f"ip netns add failed: {p.stderr.strip()}"
    # Entering one remounts / as a slave, which fails where / is not a mount
    # point (a chroot, some containers).
    p = subprocess.run(["ip", "-n", probe, "link", "set", "lo", "up"],
                       capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    if p.returncode != 0:
        return f"cannot enter a network namespace: {p.stderr.strip()}"
    return None


class NetnsCluster(harness.ProcessCluster):
    """Coordinator (and clients) on host 0, worker i on host i + 1. The
    servers listen off loopback in plaintext, so they need --insecure."""

    def __init__(self, lab, workers, log_dir=None, **kw):
        self.lab = lab
        super().__init__(
            0, host=lab.address(0),
            prefix=lambda who: (
                lab.prefix(0) if who in ("coordinator", "client")
                else lab.host_prefix(who + 1)),
            coordinator_args=["--insecure",
                              *kw.pop("coordinator_args", [])],
            worker_args=["--insecure", *kw.pop("worker_args", [])], **kw)
        self.logs = []
        for i in range(workers):
            extra, stderr = [], subprocess.DEVNULL
            if log_dir:
                self.logs.append(os.path.join(log_dir, f"worker{i}.log"))
                extra, stderr = ["--log-level", "debug"], open(
                    self.logs[-1], "w")
            self.add_worker(*extra, listen=f"{lab.address(i + 1)}:0", who=i,
                            stderr=stderr)
            if log_dir:
                stderr.close()  # the worker has its own copy
        self.wait_for_workers(workers)


class NetnsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        reason = netns_unavailable()
        if reason:
            raise unittest.SkipTest(reason)
        delete_stale_namespaces()
        cls.lab = Lab(5)

    @classmethod
    def tearDownClass(cls):
        cls.lab.close()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="shardmap-netns-")
        self.addCleanup(self.tmp.cleanup)
        self.count = 0

    def cluster(self, **kw):
        c = NetnsCluster(self.lab, 4, **kw)
        self.addCleanup(c.close)
        return c

    def run_job(self, c, fn, x, kwargs, in_spec="P(('x', 'y'))",
                out_spec="P(('x', 'y'))", extra=()):
        self.count += 1
        arg = os.path.join(self.tmp.name, f"in{self.count}.npy")
        out = os.path.join(self.tmp.name, f"out{self.count}.npy")
        np.save(arg, x)
        t0 = time.monotonic()
        p = subprocess.run(
            [*self.lab.prefix(0), SHARDCTL, "run",
             "--coordinator", c.address, "--mesh", MESH, "--fn", fn,
             "--arg", arg, "--in-spec", in_spec, "--out", out,
             "--out-spec", out_spec, "--kwargs", json.dumps(kwargs),
             "--timeout", "60", *extra],
            capture_output=True, text=True, timeout=90)
        got = np.load(out) if p.returncode == 0 else None
        return p.returncode, got, p.stderr, time.monotonic() - t0

    def check(self, c, fn, collective, x, kwargs):
        code, got, err, seconds = self.run_job(c, fn, x, kwargs)
        self.assertEqual(code, 0, f"{fn} {kwargs}: {err}")
        spec = ref.parse_spec("P(('x', 'y'))")
        want = ref.shard_map_collective(collective, ref.parse_mesh(MESH),
                                        spec, spec, x, **kwargs)
        self.assertEqual(got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{fn} {kwargs}")
        return seconds

    def check_collectives(self, c, rows=16):
        for axes in (["x"], ["y"], ["x", "y"]):
            n = 2 ** len(axes)
            with self.subTest(axes=axes):
                self.check(c, "psum", ref.c_psum,
                           RNG.standard_normal((rows, 5)), {"axes": axes})
                self.check(c, "all_gather", ref.c_all_gather,
                           RNG.standard_normal((rows, 3)).astype(np.float32),
                           {"axes": axes, "axis": 1, "tiled": True})
                self.check(c, "ppermute", ref.c_ppermute,
                           RNG.integers(-9, 9, (rows, 4)).astype(np.int32),
                           {"axes": axes,
                            "perm": [[i, (i + 1) % n] for i in range(n)]})
                self.check(c, "all_to_all", ref.c_all_to_all,
                           RNG.standard_normal((rows * n, 2 * n)),
                           {"axes": axes, "split_axis": 1, "concat_axis": 0,
                            "tiled": True})

    def test_collectives_across_hosts(self):
        c = self.cluster(log_dir=self.tmp.name)
        p = subprocess.run(
            [*self.lab.prefix(0), SHARDCTL, "status",
             "--coordinator", c.address, "--json"],
            capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        hosts = sorted(w["address"].rsplit(":", 1)[0]
                       for w in json.loads(p.stdout)["workers"])
        self.assertEqual(hosts, [self.lab.address(i) for i in range(1, 5)])
        self.check_collectives(c)
        # Separate hosts: the collectives crossed the network, not shared
        # memory (which co-located workers would use).
        for log in c.logs:
            with open(log) as f:
                self.assertNotIn("through shared memory", f.read(), log)

    def test_lossy_rate_limited_network(self):
        # netem is not needed: nftables drops 3% of every host's TCP
        # segments at random, and tbf limits worker 1 to 20 Mbit/s.
        if shutil.which("nft") is None:
            self.skipTest("nft (nftables) is not installed: no packet loss")
        for i in range(5):
            self.lab.run(i, "nft", "add", "table", "inet", "loss")
            self.addCleanup(self.lab.run, i, "nft", "delete", "table",
                            "inet", "loss", check=False)
            self.lab.run(i, "nft", "add", "chain", "inet", "loss", "out",
                         "{ type filter hook output priority 0; }")
            self.lab.run(i, "nft", "add", "rule", "inet", "loss", "out",
                         "meta", "l4proto", "tcp", "numgen", "random", "mod",
                         "100", "<", "3", "drop")
        tbf = self.lab.run(1, "tc", "qdisc", "add", "dev", "eth0", "root",
                           "tbf", "rate", "20mbit", "burst", "32kbit",
                           "latency", "100ms", check=False)
        if tbf.returncode != 0:
            print(f"\n  tbf unavailable ({tbf.stderr.strip()}): loss only",
                  file=sys.stderr)
        c = self.cluster(heartbeat_timeout=5.0)
        self.check_collectives(c)
        # 2 MiB a device through the 20 Mbit/s link: about a second.
        seconds = self.check(c, "psum", ref.c_psum,
                             RNG.standard_normal((4 << 16, 4)),
                             {"axes": ["x", "y"]})
        print(f"\n  8 MiB psum over the lossy network: {seconds:.1f} s",
              file=sys.stderr)

    def start_spin(self, c, kwargs):
        """A spin job over the 2x2 mesh in the background, killed at the
        end of the test."""
        arg = os.path.join(self.tmp.name, "spin.npy")
        np.save(arg, np.ones((8, 2)))
        job = subprocess.Popen(
            [*self.lab.prefix(0), SHARDCTL, "run",
             "--coordinator", c.address, "--mesh", MESH, "--fn", "spin",
             "--arg", arg, "--in-spec", "P(('x', 'y'))", "--out-spec", "P()",
             "--kwargs", json.dumps({"axes": ["x", "y"], **kwargs}),
             "--timeout", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(job.wait)
        self.addCleanup(job.kill)
        return job

    def unplug(self, host):
        self.lab.cut(host)
        self.addCleanup(self.lab.cut, host, True)

    def assert_serves_at_once(self, c):
        """Every worker left the failed job: the next one has its turn
        at once."""
        code, got, err, seconds = self.run_job(
            c, "spin", np.ones((8, 2)), {"axes": ["x", "y"], "seconds": 0},
            out_spec="P()")
        self.assertEqual(code, 0, err)
        np.testing.assert_array_equal(got, 4 * np.ones((2, 2)))
        self.assertLess(seconds, 10)

    def test_link_cut_mid_job_fails_within_the_bound(self):
        # docs/RELIABILITY.md, scenario 3. Every device spins for a
        # second, then psums; worker 3's cable is pulled while it spins, so
        # its peers and the coordinator hear nothing, not even a RST.
        c = self.cluster(coordinator_args=["--collective-timeout", "3"],
                         worker_args=["--test-functions"])
        self.check_collectives(c, rows=4)  # warm: every peer link is up
        victim = self.lab.address(4)
        job = self.start_spin(c, {"seconds": 1})
        time.sleep(0.5)
        self.unplug(4)
        t0 = time.monotonic()
        _, err = job.communicate(timeout=60)
        seconds = time.monotonic() - t0
        print(f"\n  link cut -> {err.strip()} ({seconds:.1f} s)",
              file=sys.stderr)
        self.assertEqual(job.returncode, 69, err)
        self.assertIn("error: UNAVAILABLE:", err)
        self.assertIn(victim, err)
        self.assertLess(seconds, 6)  # heartbeat timeout 1 s, not the 120 s
        # The cut worker gave up on its psum by the collective timeout;
        # back on the network it registers again and serves. The peers'
        # streams to it are the same TCP connections, whose retransmission
        # timer backed off during the cut (to seconds), so a first job may
        # still time out (bounded by the 3 s collective timeout) until
        # they flow again.
        time.sleep(3)
        self.lab.cut(4, up=True)
        c.wait_for_workers(4)
        t0 = time.monotonic()
        errors = []
        while True:
            code, got, err, _ = self.run_job(
                c, "spin", np.ones((8, 2)), {"axes": ["x", "y"],
                                             "seconds": 0}, out_spec="P()")
            if code == 0 or time.monotonic() - t0 > 20:
                break
            self.assertEqual(code, 75, err)  # a timeout, never a hang
            errors.append(err)
        self.assertEqual(code, 0, errors)
        np.testing.assert_array_equal(got, 4 * np.ones((2, 2)))
        print(f"\n  serves again {time.monotonic() - t0:.1f} s after the "
              f"re-registration ({len(errors)} timed out first)",
              file=sys.stderr)
        self.check_collectives(c, rows=4)

    def test_coordinator_cut_off_mid_job_workers_abort(self):
        # Scenario 3 from the workers' side, and 4 without a RST: the
        # coordinator's host is unplugged while device 3 computes and the
        # others wait in the psum. Nothing tells the workers; their servers'
        # keepalive pings (10 s, 5 s to answer) find the dead connection and
        # cancel the job's streams, which stops the compute.
        c = self.cluster(coordinator_args=["--collective-timeout", "120"],
                         worker_args=["--test-functions"])
        spinner = c.worker_of_device(3).proc.pid
        job = self.start_spin(c, {"seconds": 120, "device": 3})
        harness.wait_until_busy([spinner])
        self.unplug(0)
        t0 = time.monotonic()
        # The coordinator hears no heartbeat and fails the job.
        _, err = job.communicate(timeout=60)
        self.assertEqual(job.returncode, 69, err)
        self.assertIn("error: UNAVAILABLE:", err)
        self.assertLess(time.monotonic() - t0, 6, err)
        idle = harness.wait_until_idle([spinner], timeout=22, window=1.0)
        print(f"\n  coordinator cut off: device 3 idle after {idle:.1f} s",
              file=sys.stderr)
        self.lab.cut(0, up=True)
        c.wait_for_workers(4)
        self.assert_serves_at_once(c)


if __name__ == "__main__":
    harness.main()
