"""The compose cluster for real: builds the image from deploy/Dockerfile
with podman (reusing the host build's ccache), makes the certificates with
deploy/make-certs.sh, brings docker-compose.yml up with podman-compose,
waits for every container's healthcheck, runs psum and all_gather from the
host's shardctl over mutual TLS and the token and checks them against
numpy, crashes one worker's process (kill -9: its restart policy brings it
back) and stops and starts another (`podman kill` + `start`), runs the jobs
again as soon as the cluster is healthy (they must succeed at once), then
`down -t 30` and removes the network.

The compose file is used as it is, but for the coordinator's published
port: still on 127.0.0.1, a free port instead of 7070. Prints the image
size, the build time and ccache hits, the time from `up` to healthy.

Run by scripts/test.sh after ctest (SHARDMAP_COMPOSE=0 leaves it out).
Exit 0: passed; 77: skipped, podman cannot run containers here (the reason
is printed); else failed. Needs root (or password-less sudo), Debian's
/usr/bin/python3 (numpy, yaml) and SHARDMAP_BIN_DIR (default build/bin).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compose_env as env  # noqa: E402
import shardmap_ref as ref  # noqa: E402
from compose_env import Failure, Skip, log  # noqa: E402

BIN = os.environ.get("SHARDMAP_BIN_DIR", os.path.join(env.REPO, "build",
                                                      "bin"))
SHARDCTL = os.path.join(BIN, "shardctl")
PROJECT = "shardmap-composetest"
MESH = "x=2,y=2"
WORKERS = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_compose(directory, port):
    """The repository's compose file with the coordinator published on
    127.0.0.1:`port`."""
    with open(os.path.join(env.REPO, "docker-compose.yml")) as f:
        compose = yaml.safe_load(f)
    compose["services"]["coordinator"]["ports"] = [f"127.0.0.1:{port}:7070"]
    path = os.path.join(directory, "docker-compose.yml")
    with open(path, "w") as f:
        yaml.safe_dump(compose, f, sort_keys=False)
    return path


class Client:
    """shardctl on the host, over mutual TLS and the token."""

    def __init__(self, certs, address, tmp):
        self.address = address
        self.tmp = tmp
        self.flags = ["--tls-ca", os.path.join(certs, "ca.crt"),
                      "--tls-cert", os.path.join(certs, "client.crt"),
                      "--tls-key", os.path.join(certs, "client.key"),
                      "--token-file", os.path.join(certs, "token")]
        self.count = 0

    def ctl(self, *args, timeout=60):
        return subprocess.run([SHARDCTL, *args, *self.flags], text=True,
                              capture_output=True, timeout=timeout)

    def live_workers(self):
        p = self.ctl("status", "--coordinator", self.address, "--json")
        if p.returncode != 0:
            return -1
        return len(json.loads(p.stdout)["workers"])

    def wait_for_workers(self, n, timeout=120):
        deadline = time.monotonic() + timeout
        while self.live_workers() != n:
            if time.monotonic() > deadline:
                raise Failure(f"shardctl status: not {n} live workers after "
                              f"{timeout} s: "
                              f"{self.ctl('status', '--coordinator', self.address).stdout}")
            time.sleep(0.5)

    def run(self, fn, x, in_spec, out_spec, kwargs):
        self.count += 1
        arg = os.path.join(self.tmp, f"in{self.count}.npy")
        out = os.path.join(self.tmp, f"out{self.count}.npy")
        np.save(arg, x)
        p = self.ctl("run", "--coordinator", self.address, "--mesh", MESH,
                     "--fn", fn, "--kwargs", json.dumps(kwargs), "--arg",
                     arg, "--in-spec", in_spec, "--out", out, "--out-spec",
                     out_spec, timeout=120)
        if p.returncode != 0:
            raise Failure(f"shardctl run {fn} {kwargs} exited "
                          f"{p.returncode}: {p.stderr}")
        return np.load(out)

    def check_jobs(self, when):
        """psum and all_gather over the 4 workers equal numpy's."""
        rng = np.random.default_rng(self.count)
        mesh = ref.parse_mesh(MESH)
        cases = [("psum", ref.c_psum, "P('x', 'y')", "P('x', 'y')",
                  {"axes": ["x", "y"]}, np.float32),
                 ("psum", ref.c_psum, "P('x', 'y')", "P('x', 'y')",
                  {"axes": ["y"]}, np.int32),
                 ("all_gather", ref.c_all_gather, "P('x', 'y')",
                  "P(None, 'y')", {"axes": ["x"], "axis": 0, "tiled": True},
                  np.float64)]
        for fn, collective, in_spec, out_spec, kwargs, dtype in cases:
            x = (rng.standard_normal((8, 6)) * 10).astype(dtype)
            t = time.monotonic()
            got = self.run(fn, x, in_spec, out_spec, kwargs)
            want = ref.shard_map_collective(
                collective, mesh, ref.parse_spec(in_spec),
                ref.parse_spec(out_spec), x, **kwargs)
            if got.shape != want.shape or got.dtype != want.dtype:
                raise Failure(f"{when}: {fn} {kwargs}: got {got.dtype}"
                              f"{list(got.shape)}, want {want.dtype}"
                              f"{list(want.shape)}")
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{when}: {fn} {kwargs}")
            log(f"{when}: {fn} {kwargs} = numpy's "
                f"({(time.monotonic() - t) * 1000:.0f} ms)")


def restarted(compose, name, old_pid, timeout=120):
    """Waits (bounded) until `name` runs again with another process."""
    deadline = time.monotonic() + timeout
    while True:
        if (compose.state(name, "Status") == "running" and
                compose.state(name, "Pid") not in ("0", str(old_pid))):
            return
        if time.monotonic() > deadline:
            raise Failure(f"{name} not restarted after {timeout} s")
        time.sleep(0.5)


def flow(engine, tmp, figures):
    engine.ensure_installed()
    engine.ensure_base_images()
    log("building the image (log in the test's build.log)...")
    seconds, hits, calls = engine.build_image()
    figures["build"] = seconds
    size = engine.image_bytes()
    log(f"image {env.IMAGE}: {size / 1e6:.1f} MB, built in {seconds:.0f} s"
        + (f", ccache hits {hits}/{calls}" if calls else ""))

    project_dir = os.path.join(tmp, "project")
    certs = os.path.join(project_dir, "deploy", "certs")
    engine.run("bash", os.path.join(env.REPO, "deploy", "make-certs.sh"),
               certs)
    port = free_port()
    compose = env.Compose(engine, PROJECT,
                          write_compose(project_dir, port))
    compose.cleanup()  # a previous run's leftovers, if any
    figures["compose"] = compose
    t = time.monotonic()
    compose("up", "-d", timeout=600)
    names = compose.containers()
    if len(names) != WORKERS + 1:
        raise Failure(f"up -d made {sorted(names)}")
    compose.wait_healthy(names.values())
    client = Client(certs, f"127.0.0.1:{port}", tmp)
    client.wait_for_workers(WORKERS)
    figures["healthy"] = time.monotonic() - t
    log(f"up -d to all {len(names)} healthy and registered: "
        f"{figures['healthy']:.1f} s")

    logs = engine.podman("logs", names["coordinator"])[1]
    for line in ("listening on 0.0.0.0:7070", "metrics on 0.0.0.0:9090"):
        if line not in logs:
            raise Failure(f"coordinator's log lacks {line!r}:\n{logs}")
    client.check_jobs("first jobs")

    # A crash: kill -9 of worker1's process; restart: unless-stopped brings
    # it back. A stop and start: podman kill (a manual stop, no restart by
    # policy) and start of worker2.
    crashed, stopped = names["worker1"], names["worker2"]
    pid = int(compose.state(crashed, "Pid"))
    if engine.sudo:
        engine.run("kill", "-9", str(pid))
    else:
        os.kill(pid, signal.SIGKILL)
    engine.podman("kill", stopped)
    restarted(compose, crashed, pid)
    engine.podman("start", stopped)
    t = time.monotonic()
    compose.wait_healthy(names.values())
    log(f"after kill -9 of {crashed} and kill + start of {stopped}: healthy "
        f"in {time.monotonic() - t:.1f} s; jobs at once:")
    client.check_jobs("after the restarts")
    client.wait_for_workers(WORKERS)


def main():
    figures = {}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="shardmap-compose-") as tmp:
        os.chmod(tmp, 0o755)
        try:
            engine = env.Engine(tmp)
            flow(engine, tmp, figures)
            code = 0
        except Skip as e:
            log(f"skipped: {e}")
            return 77
        except (Failure, AssertionError, subprocess.TimeoutExpired) as e:
            log(f"FAILED: {e}")
            code = 1
        finally:
            compose = figures.get("compose")
            if compose is not None:
                t = time.monotonic()
                if not compose.cleanup():
                    log("FAILED: containers or network left after down")
                    code = 1
                log(f"down -t 30 and network rm: {time.monotonic() - t:.1f} s")
    log(f"{'passed' if code == 0 else 'failed'} in "
        f"{time.monotonic() - start:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
