"""Security end to end (docs/RELIABILITY.md, scenario 29, principle 6): mutual
TLS and bearer tokens on every channel, the plaintext-off-loopback rule,
rogue clients, workers and peers refused, reflection off by default.

Certificates are made at test time with the openssl CLI: a CA, a node
certificate (SAN IP:127.0.0.1, server and client use) shared by the
coordinator, the workers and shardctl, and a second, untrusted CA with a
client certificate of its own. Rogue processes are Python gRPC clients
calling methods by name with raw bytes: the auth layer refuses them before
any message is parsed.

Environment: SHARDMAP_BIN_DIR = directory of the binaries.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

BIN = harness.BIN
SHARDCTL = harness.SHARDCTL
TMP = None
CERTS = {}
TOKEN = "mtls-cluster-token-" + os.urandom(8).hex()
MTLS = None  # the mutual-TLS cluster: coordinator + 2 workers


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True,
                   cwd=TMP.name, timeout=30)


def make_ca(name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
            f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem")


def make_cert(name, ca, ext):
    with open(os.path.join(TMP.name, f"{name}.ext"), "w") as f:
        f.write(ext)
    openssl("req", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
            "-CAkey", f"{ca}.key", "-set_serial", str(len(CERTS) + 2),
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")
    CERTS[name] = (os.path.join(TMP.name, f"{name}.pem"),
                   os.path.join(TMP.name, f"{name}.key"))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def tls_flags(name="node", ca="ca"):
    cert, key = CERTS[name]
    return ["--tls-cert", cert, "--tls-key", key, "--tls-ca",
            os.path.join(TMP.name, f"{ca}.pem")]


def env_with(token):
    env = dict(os.environ)
    env.pop("SHARDMAP_TOKEN", None)
    if token is not None:
        env["SHARDMAP_TOKEN"] = token
    return env


def start(cmd, token):
    """Starts a server with SHARDMAP_TOKEN=token; returns it and the
    address it announces."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True,
                            env=env_with(token))
    line = proc.stdout.readline().strip()
    if not line:
        harness.stop(proc)
        raise AssertionError(f"{cmd[0]} did not start")
    return proc, line.rsplit(" ", 1)[-1]


class Cluster:
    """A coordinator and workers with the given extra flags and token."""

    def __init__(self, workers, flags, token):
        self.procs = []
        proc, self.address = start(
            [f"{BIN}/shardmap-coordinator", "--listen", "127.0.0.1:0",
             *flags], token)
        self.procs.append(proc)
        self.workers = []
        for _ in range(workers):
            proc, address = start(
                [f"{BIN}/shardmap-worker", "--coordinator", self.address,
                 "--listen", "127.0.0.1:0", *flags], token)
            self.procs.append(proc)
            self.workers.append(address)

    def close(self):
        for p in self.procs:  # all at once: each may take its grace period
            p.terminate()
        for p in self.procs:
            harness.stop(p)


def shardctl(*args, token=TOKEN, timeout=60):
    return subprocess.run([SHARDCTL, *args], capture_output=True, text=True,
                          env=env_with(token), timeout=timeout)


def wait_for_workers(address, n, flags, token):
    for _ in range(200):
        p = shardctl("status", "--coordinator", address, *flags, token=token)
        if p.returncode == 0 and f"{n} live worker" in p.stdout:
            return
        subprocess.run(["sleep", "0.05"])
    raise AssertionError(f"{n} workers never registered at {address}")


def setUpModule():
    global TMP, MTLS
    TMP = tempfile.TemporaryDirectory(prefix="shardmap-security-test-")
    make_ca("ca")
    make_ca("rogue-ca")
    make_cert("node", "ca",
              "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
              "extendedKeyUsage=serverAuth,clientAuth\n")
    make_cert("rogue", "rogue-ca",
              "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
              "extendedKeyUsage=serverAuth,clientAuth\n")
    MTLS = Cluster(2, tls_flags(), TOKEN)
    try:
        wait_for_workers(MTLS.address, 2, tls_flags(), TOKEN)
    except AssertionError:  # tearDownModule does not run then
        MTLS.close()
        raise


def tearDownModule():
    if MTLS:
        MTLS.close()
    TMP.cleanup()


def channel(address, cert=None, ca="ca"):
    """A Python gRPC channel: plaintext (ca=None) or TLS, with an optional
    client certificate."""
    if ca is None:
        return grpc.insecure_channel(address)
    creds = grpc.ssl_channel_credentials(
        root_certificates=read(os.path.join(TMP.name, f"{ca}.pem")),
        private_key=read(CERTS[cert][1]) if cert else None,
        certificate_chain=read(CERTS[cert][0]) if cert else None)
    return grpc.secure_channel(address, creds)


def call(ch, method, kind="unary", token=None, request=b""):
    """Calls `method` with raw request bytes; returns the status code."""
    md = [("authorization", f"Bearer {token}")] if token else None
    try:
        if kind == "unary":
            ch.unary_unary(method)(request, metadata=md, timeout=10)
        elif kind == "server_stream":
            list(ch.unary_stream(method)(request, metadata=md, timeout=10))
        else:  # bidirectional stream
            list(ch.stream_stream(method)(iter([request]), metadata=md,
                                          timeout=10))
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


# Methods a rogue would use: submit jobs, read resident arrays, register as
# a worker, inject peer collective data, read blocks off a worker.
COORDINATOR_METHODS = [
    ("/shardmap.v1.Coordinator/RunJob", "stream"),
    ("/shardmap.v1.Coordinator/ListArrays", "unary"),
    ("/shardmap.v1.Coordinator/GetClusterStatus", "unary"),
    ("/shardmap.v1.WorkerRegistry/Register", "unary"),
    ("/shardmap.v1.WorkerRegistry/Heartbeat", "unary"),
]
WORKER_METHODS = [
    ("/shardmap.v1.Peer/Exchange", "stream"),
    ("/shardmap.v1.Worker/RunShard", "stream"),
    ("/shardmap.v1.Worker/ReadBlock", "server_stream"),
]


def arrays(a, b):
    pa = os.path.join(TMP.name, "a.npy")
    pb = os.path.join(TMP.name, "b.npy")
    np.save(pa, a)
    np.save(pb, b)
    return pa, pb


class MutualTlsTest(unittest.TestCase):

    def test_jobs_and_resident_arrays_under_mtls_and_token(self):
        rng = np.random.default_rng(29)
        a = rng.standard_normal((8, 6)).astype(np.float32)
        b = rng.standard_normal((6, 4)).astype(np.float32)
        pa, pb = arrays(a, b)
        out = os.path.join(TMP.name, "c.npy")
        # matmul_psum: x split by columns, w by rows, partial products
        # summed worker to worker over the TLS peer streams.
        p = shardctl("run", "--coordinator", MTLS.address, *tls_flags(),
                     "--mesh", "k=2", "--fn", "matmul_psum", "--kwargs",
                     '{"axes": "k"}', "--arg", pa, "--in-spec",
                     "P(None, 'k')", "--arg", pb, "--in-spec", "P('k')",
                     "--out", out, "--out-spec", "P()")
        self.assertEqual(p.returncode, 0, p.stderr)
        np.testing.assert_allclose(np.load(out), a @ b, rtol=1e-5, atol=1e-5)
        # A resident array put split one way and read back whole: the
        # coordinator's and the workers' TLS channels carry it.
        p = shardctl("put", "sec/a", pa, "--mesh", "k=2", "--spec", "P('k')",
                     "--overwrite", "--coordinator", MTLS.address,
                     *tls_flags())
        self.assertEqual(p.returncode, 0, p.stderr)
        got = os.path.join(TMP.name, "got.npy")
        p = shardctl("run", "--coordinator", MTLS.address, *tls_flags(),
                     "--mesh", "k=2", "--fn", "identity", "--arg", "@sec/a",
                     "--in-spec", "P(None, 'k')", "--out", got, "--out-spec",
                     "P(None, 'k')")
        self.assertEqual(p.returncode, 0, p.stderr)
        np.testing.assert_array_equal(np.load(got), a)

    def test_without_client_certificate_the_handshake_fails(self):
        p = shardctl("status", "--coordinator", MTLS.address, "--tls-ca",
                     os.path.join(TMP.name, "ca.pem"))
        self.assertEqual(p.returncode, 69, p.stderr)
        for address in [MTLS.address] + MTLS.workers:
            ch = channel(address, cert=None)
            self.assertEqual(
                call(ch, "/shardmap.v1.Coordinator/GetClusterStatus",
                     token=TOKEN), grpc.StatusCode.UNAVAILABLE)

    def test_certificate_of_another_ca_is_refused(self):
        for address in [MTLS.address] + MTLS.workers:
            ch = channel(address, cert="rogue")
            self.assertEqual(
                call(ch, "/shardmap.v1.WorkerRegistry/Register", token=TOKEN),
                grpc.StatusCode.UNAVAILABLE)
        p = shardctl("status", "--coordinator", MTLS.address,
                     *tls_flags("rogue"))
        self.assertEqual(p.returncode, 69, p.stderr)

    def test_plaintext_client_cannot_talk_to_tls_servers(self):
        for address in [MTLS.address] + MTLS.workers:
            self.assertEqual(
                call(channel(address, ca=None),
                     "/shardmap.v1.Coordinator/ListArrays", token=TOKEN),
                grpc.StatusCode.UNAVAILABLE)

    def test_valid_certificate_without_or_with_wrong_token(self):
        for token in (None, "wrong-" + TOKEN, TOKEN[:-1]):
            p = shardctl("status", "--coordinator", MTLS.address,
                         *tls_flags(), token=token)
            self.assertEqual(p.returncode, 77, p.stderr)
            self.assertIn("UNAUTHENTICATED", p.stderr)
            self.assertNotIn(TOKEN, p.stderr)
            ch = channel(MTLS.address, cert="node")
            for method, kind in COORDINATOR_METHODS:
                self.assertEqual(call(ch, method, kind, token),
                                 grpc.StatusCode.UNAUTHENTICATED, method)
            for address in MTLS.workers:
                ch = channel(address, cert="node")
                for method, kind in WORKER_METHODS:
                    self.assertEqual(call(ch, method, kind, token),
                                     grpc.StatusCode.UNAUTHENTICATED, method)
        # The control: the same certificate with the token gets through.
        ch = channel(MTLS.address, cert="node")
        self.assertEqual(call(ch, "/shardmap.v1.Coordinator/ListArrays",
                              token=TOKEN), grpc.StatusCode.OK)

    def test_health_needs_no_token_and_reflection_is_off(self):
        ch = channel(MTLS.address, cert="node")
        self.assertEqual(call(ch, "/grpc.health.v1.Health/Check"),
                         grpc.StatusCode.OK)
        # ServerReflectionRequest{list_services: ""}.
        self.assertEqual(
            call(ch, "/grpc.reflection.v1alpha.ServerReflection/"
                 "ServerReflectionInfo", "stream", TOKEN, b"\x3a\x00"),
            grpc.StatusCode.UNIMPLEMENTED)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HealthPortTest(unittest.TestCase):
    """--health-listen under mutual TLS: Kubernetes' grpc probes, which
    send neither a certificate nor a token, read health there and nothing
    else."""

    def probe(self, address, *args):
        p = shardctl("health", "--addr", address, "--timeout", "3", *args,
                     token=None)
        return p.returncode, p.stdout.strip()

    def wait_probe(self, address, code, *args):
        for _ in range(200):
            got = self.probe(address, *args)
            if got[0] == code:
                return got
            time.sleep(0.05)
        raise AssertionError(f"probe of {address} never exited {code}")

    def test_plaintext_health_port_beside_mtls(self):
        coordinator_health = f"127.0.0.1:{free_port()}"
        worker_health = f"127.0.0.1:{free_port()}"
        proc, address = start(
            [f"{BIN}/shardmap-coordinator", "--listen", "127.0.0.1:0",
             "--expect-workers", "1", "--health-listen", coordinator_health,
             *tls_flags()], TOKEN)
        self.addCleanup(harness.stop, proc)
        # Not ready without its worker, but alive.
        self.assertEqual(self.probe(coordinator_health),
                         (75, "NOT_SERVING"))
        self.assertEqual(self.probe(coordinator_health, "--service",
                                    "liveness"), (0, "SERVING"))
        worker, _ = start(
            [f"{BIN}/shardmap-worker", "--coordinator", address, "--listen",
             "127.0.0.1:0", "--health-listen", worker_health, *tls_flags()],
            TOKEN)
        self.addCleanup(harness.stop, worker)
        self.wait_probe(coordinator_health, 0)
        self.wait_probe(worker_health, 0)
        self.assertEqual(self.probe(worker_health, "--service", "liveness"),
                         (0, "SERVING"))
        self.assertEqual(self.probe(worker_health, "--service",
                                    "shardmap.v1.Worker"), (0, "SERVING"))
        # The port serves health only: no job, array or peer method, with
        # or without the token.
        for port, methods in ((coordinator_health, COORDINATOR_METHODS),
                              (worker_health, WORKER_METHODS)):
            ch = channel(port, ca=None)
            for method, kind in methods:
                self.assertEqual(call(ch, method, kind, TOKEN),
                                 grpc.StatusCode.UNIMPLEMENTED, method)
        # The main port still refuses a plaintext client.
        p = shardctl("health", "--addr", address, "--timeout", "3",
                     token=None)
        self.assertEqual(p.returncode, 69, p.stderr)
        # On SIGTERM it stops being ready (NOT_SERVING while it drains,
        # then gone with the process).
        worker.send_signal(signal.SIGTERM)
        for _ in range(200):
            if self.probe(worker_health)[0] != 0:
                break
            time.sleep(0.05)
        self.assertIn(self.probe(worker_health)[0], (69, 75))


class PlaintextTokenTest(unittest.TestCase):
    """A loopback plaintext cluster with a token (what harness.py starts
    for every system test)."""

    @classmethod
    def setUpClass(cls):
        cls.token = "plain-" + os.urandom(8).hex()
        cls.cluster = Cluster(1, [], cls.token)
        try:
            wait_for_workers(cls.cluster.address, 1, [], cls.token)
        except AssertionError:
            cls.cluster.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def test_rogue_without_token_is_refused_everywhere(self):
        for token in (None, "not-" + self.token):
            ch = channel(self.cluster.address, ca=None)
            for method, kind in COORDINATOR_METHODS:
                self.assertEqual(call(ch, method, kind, token),
                                 grpc.StatusCode.UNAUTHENTICATED, method)
            ch = channel(self.cluster.workers[0], ca=None)
            for method, kind in WORKER_METHODS:
                self.assertEqual(call(ch, method, kind, token),
                                 grpc.StatusCode.UNAUTHENTICATED, method)
            p = shardctl("ls", "--coordinator", self.cluster.address,
                         token=token)
            self.assertEqual(p.returncode, 77, p.stderr)
        # With the token: through, and the cluster still computes.
        ch = channel(self.cluster.address, ca=None)
        self.assertEqual(call(ch, "/shardmap.v1.Coordinator/ListArrays",
                              token=self.token), grpc.StatusCode.OK)
        x = np.arange(12, dtype=np.int64).reshape(4, 3)
        pa, _ = arrays(x, x)
        p = shardctl("run", "--coordinator", self.cluster.address, "--mesh",
                     "d=1", "--fn", "scale", "--kwargs", '{"alpha": 3}',
                     "--arg", pa, "--in-spec", "P('d')", "--out-spec",
                     "P('d')", "--json", token=self.token)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_reflection_only_when_asked(self):
        proc, address = start([f"{BIN}/shardmap-coordinator", "--listen",
                               "127.0.0.1:0", "--reflection"], self.token)
        try:
            ch = channel(address, ca=None)
            method = ("/grpc.reflection.v1alpha.ServerReflection/"
                      "ServerReflectionInfo")
            self.assertEqual(call(ch, method, "stream", None, b"\x3a\x00"),
                             grpc.StatusCode.UNAUTHENTICATED)
            answers = list(ch.stream_stream(method)(
                iter([b"\x3a\x00"]), timeout=10,
                metadata=[("authorization", f"Bearer {self.token}")]))
            self.assertIn(b"shardmap.v1.Coordinator", answers[0])
            ch.close()
        finally:
            harness.stop(proc)


class ListenRuleTest(unittest.TestCase):
    """Plaintext only on loopback unless --insecure; exit 78 otherwise,
    before anything is bound."""

    def refused(self, *flags):
        p = subprocess.run([f"{BIN}/shardmap-coordinator", *flags],
                           capture_output=True, text=True, timeout=30,
                           env=env_with("t"))
        self.assertEqual(p.returncode, 78, p.stderr)
        self.assertIn("--insecure", p.stderr)
        return p.stderr

    def test_non_loopback_needs_tls_and_client_auth_or_insecure(self):
        self.assertIn("without TLS", self.refused("--listen", "0.0.0.0:0"))
        self.assertIn("without TLS", self.refused("--listen", "[::]:0"))
        cert, key = CERTS["node"]
        p = subprocess.run([f"{BIN}/shardmap-coordinator", "--listen",
                            "0.0.0.0:0", "--tls-cert", cert, "--tls-key",
                            key], capture_output=True, text=True, timeout=30,
                           env=env_with(None))
        self.assertEqual(p.returncode, 78, p.stderr)
        self.assertIn("no client authentication", p.stderr)
        p = subprocess.run([f"{BIN}/shardmap-worker", "--coordinator",
                            "127.0.0.1:1", "--listen", "10.1.2.3:0"],
                           capture_output=True, text=True, timeout=30,
                           env=env_with(None))
        self.assertEqual(p.returncode, 78, p.stderr)

    def test_bad_security_files_exit_78(self):
        for flags in (["--tls-cert", "/nonexistent.pem", "--tls-key", "k"],
                      ["--tls-cert", CERTS["node"][0]],
                      ["--token-file", "/nonexistent-token"]):
            p = subprocess.run([f"{BIN}/shardmap-coordinator", "--listen",
                                "127.0.0.1:0", *flags], capture_output=True,
                               text=True, timeout=30, env=env_with(None))
            self.assertEqual(p.returncode, 78, (flags, p.stderr))
        p = shardctl("status", "--token-file", "/nonexistent-token")
        self.assertEqual(p.returncode, 78, p.stderr)

    @unittest.skipUnless(shutil.which("unshare"), "needs unshare")
    def test_insecure_serves_with_a_loud_warning(self):
        # 0.0.0.0 only inside a private network namespace of our own: skip
        # only where the environment cannot make one.
        probe = subprocess.run(["unshare", "--net", "true"],
                               capture_output=True, text=True, timeout=30)
        if probe.returncode != 0:
            self.skipTest("cannot create a network namespace: " +
                          probe.stderr.strip())
        cmd = ["unshare", "--net", f"{BIN}/shardmap-coordinator", "--listen",
               "0.0.0.0:0", "--insecure"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=env_with("t"))
        self.addCleanup(harness.stop, proc)
        # A coordinator that neither prints nor exits is killed: readline
        # then returns "" instead of blocking forever.
        watchdog = threading.Timer(60, proc.kill)
        watchdog.start()
        try:
            line = proc.stdout.readline()
        finally:
            watchdog.cancel()
        # Stop it, then read its stderr to the end: bounded, it has exited.
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if not line:
            self.fail(f"{' '.join(cmd)} printed no address (exit status "
                      f"{proc.returncode}); stderr: {err}")
        self.assertIn("listening on", line)
        warning = err.splitlines()[0] if err else ""
        self.assertIn("WARNING", warning, err)
        self.assertIn("0.0.0.0:0 without TLS", warning, err)

if __name__ == "__main__":
    unittest.main(verbosity=2)
