"""The podman side of compose_test.py: the engine's configuration, the base
images, the image build (reusing the host build's ccache) and the compose
commands. Everything runs as root (directly, or through `sudo -n`).

Podman here is configured by a containers.conf of the test's own
(CONTAINERS_CONF: the machine's files are left alone): runtime runc,
netavark (its DNS resolves the compose service names) and ulimits within
the machine's hard limits, which podman's defaults exceed.
"""
import os
import re
import resource
import shutil
import subprocess
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IMAGE = "shardmap:0.1.0"
# The Dockerfile's deps stage, tagged so its apt layer survives the prune
# of untagged images below and the next build skips the apt step.
DEPS_IMAGE = "shardmap-build-deps:latest"
LABEL = "io.shardmap.project=shardmap"
BASE = "docker.io/library/debian:bookworm-slim"
# What the test needs on the machine (scripts/setup.sh installs them).
COMMANDS = ("podman", "podman-compose", "runc", "debootstrap", "netavark")


class Skip(Exception):
    """Podman cannot run containers here: the test is skipped (exit 77)."""


class Failure(Exception):
    pass


def log(message):
    print(f"compose_test: {message}", flush=True)


def tail(text, lines=40):
    return "\n".join(text.splitlines()[-lines:])


class Engine:
    def __init__(self, tmp):
        self.tmp = tmp
        self.conf = os.path.join(tmp, "containers.conf")
        nofile = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 65536)
        nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 4096)
        with open(self.conf, "w") as f:
            f.write(f'[containers]\ndefault_ulimits = ["nofile={nofile}:'
                    f'{nofile}", "nproc={nproc}:{nproc}"]\n'
                    '[engine]\nruntime = "runc"\n'
                    '[network]\nnetwork_backend = "netavark"\n')
        self.sudo = []
        if os.geteuid() != 0:
            if subprocess.run(["sudo", "-n", "true"],
                              capture_output=True).returncode != 0:
                raise Skip("needs root or password-less sudo (podman and "
                           "debootstrap as root)")
            self.sudo = ["sudo", "-n"]

    def argv(self, *cmd):
        return [*self.sudo, "env", f"CONTAINERS_CONF={self.conf}", *cmd]

    def run(self, *cmd, timeout=120, check=True, log_file=None):
        """Runs `cmd` (as root, with the test's podman configuration);
        raises Failure with its output when `check` and it fails."""
        out = open(log_file, "w") if log_file else subprocess.PIPE
        try:
            p = subprocess.run(self.argv(*cmd), stdout=out,
                               stderr=subprocess.STDOUT, text=True,
                               timeout=timeout)
        finally:
            if log_file:
                out.close()
        text = p.stdout or ""
        if log_file:
            with open(log_file) as f:
                text = f.read()
        if check and p.returncode != 0:
            raise Failure(f"{' '.join(cmd)} exited {p.returncode}:\n"
                          f"{tail(text)}")
        return p.returncode, text

    def podman(self, *args, **kw):
        return self.run("podman", *args, **kw)

    def ensure_installed(self):
        missing = [c for c in COMMANDS if not shutil.which(c) and not
                   os.path.exists(f"/usr/lib/podman/{c}")]
        if missing:
            log(f"installing with scripts/setup.sh (missing: {missing})")
            self.run("bash", os.path.join(REPO, "scripts", "setup.sh"),
                     timeout=1200)

    def ensure_base_images(self):
        t = time.monotonic()
        self.run("bash", os.path.join(REPO, "deploy", "debian-base.sh"),
                 timeout=1200)
        log(f"base images ready in {time.monotonic() - t:.0f} s")
        code, out = self.podman("run", "--rm", BASE, "true", check=False)
        if code != 0:
            raise Skip(f"podman cannot run a container here: {tail(out, 5)}")

    def build_image(self):
        """Builds IMAGE from deploy/Dockerfile; returns (seconds, ccache hits,
        ccache calls) (hits None when no ccache was used)."""
        dockerfile = os.path.join(REPO, "deploy", "Dockerfile")
        t = time.monotonic()
        self.podman("build", "--network", "host", "-f", dockerfile,
                    "--target", "deps", "-t", DEPS_IMAGE, REPO, timeout=1800,
                    log_file=os.path.join(self.tmp, "deps.log"))
        args = ["build", "--network", "host", "-f", dockerfile, "-t", IMAGE]
        ccache_dir = host_ccache_dir()
        if ccache_dir:
            # Same path and locale as scripts/build.sh's compiles: their
            # objects are reused (see deploy/Dockerfile).
            args += ["-v", f"{ccache_dir}:/ccache",
                     "--build-arg", f"SHARDMAP_SRC={REPO}"]
            for name in ("LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES"):
                if name in os.environ:
                    args += ["--build-arg", f"{name}={os.environ[name]}"]
        build_log = os.path.join(self.tmp, "build.log")
        self.podman(*args, REPO, timeout=2400, log_file=build_log)
        seconds = time.monotonic() - t
        # The untagged images earlier builds left (an old build stage is
        # ~1.9 GB); only this Dockerfile's, by its label.
        self.podman("image", "prune", "-f", "--filter", f"label={LABEL}",
                    check=False)
        with open(build_log) as f:
            text = f.read()
        m = re.search(r"ccache for this build:\s*\n.*?Hits:\s+(\d+)\s*/\s*(\d+)",
                      text, re.S)
        hits, calls = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        if ccache_dir and m is None and "Using cache" not in text:
            log("the build stage did not use the host's ccache")
        return seconds, hits, calls

    def image_bytes(self):
        return int(self.podman("image", "inspect", "--format", "{{.Size}}",
                               IMAGE)[1].strip())


def host_ccache_dir():
    """The ccache directory scripts/build.sh's compiles used, or None."""
    if not shutil.which("ccache"):
        return None
    p = subprocess.run(["ccache", "-k", "cache_dir"], capture_output=True,
                       text=True)
    d = p.stdout.strip()
    return d if p.returncode == 0 and os.path.isdir(d) else None


class Compose:
    """podman-compose on a copy of the repository's docker-compose.yml."""

    def __init__(self, engine, project, compose_file):
        self.engine = engine
        self.project = project
        self.file = compose_file

    def __call__(self, *args, timeout=300, check=True):
        return self.engine.run("podman-compose", "-p", self.project, "-f",
                               self.file, *args, timeout=timeout, check=check)

    def containers(self):
        """{service: container name} of the project's containers."""
        out = self.engine.podman(
            "ps", "-a", "--filter",
            f"label=io.podman.compose.project={self.project}", "--format",
            '{{.Names}} {{index .Labels "com.docker.compose.service"}}')[1]
        return dict(reversed(line.split()) for line in out.splitlines()
                    if len(line.split()) == 2)

    def healthy(self, name):
        return self.engine.podman("healthcheck", "run", name,
                                  check=False, timeout=60)[0] == 0

    def wait_healthy(self, names, timeout=240):
        """Runs the healthchecks (podman schedules none without systemd)
        until every container passes; bounded."""
        deadline = time.monotonic() + timeout
        pending = set(names)
        while pending:
            pending = {n for n in pending if not self.healthy(n)}
            if pending and time.monotonic() > deadline:
                raise Failure(f"not healthy after {timeout} s: "
                              f"{sorted(pending)}")
            if pending:
                time.sleep(0.5)

    def state(self, name, field):
        return self.engine.podman("inspect", "--format",
                                  "{{.State.%s}}" % field, name)[1].strip()

    def cleanup(self):
        """down with time for the drain, then the network; True when no
        container or network of the project is left."""
        self("down", "-t", "30", timeout=300, check=False)
        network = f"{self.project}_default"
        if self.engine.podman("network", "exists", network,
                              check=False)[0] == 0:
            self.engine.podman("network", "rm", "-f", network, check=False)
        left = self.containers()
        return not left and self.engine.podman(
            "network", "exists", network, check=False)[0] != 0
