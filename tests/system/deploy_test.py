"""Checks of the deployment files: docker-compose.yml, deploy/Dockerfile,
deploy/k8s/ and deploy/make-certs.sh.

Every flag a manifest passes to shardmap-coordinator, shardmap-worker or
`shardctl health` must exist in that binary's --help; ports agree between
the flags, the container ports, the Services and the probes; files the
flags name are mounted from secrets; the runtime image installs the
package of every library the binaries link; the certificates name every
host the manifests dial. `docker-compose config` validates the compose file
(that part is skipped, saying so, only when docker-compose is not
installed). Run with Debian's /usr/bin/python3 (python3-yaml).

Environment: SHARDMAP_BIN_DIR = directory of the built binaries.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMPOSE = os.path.join(REPO, "docker-compose.yml")
DOCKERFILE = os.path.join(REPO, "deploy", "Dockerfile")
K8S = os.path.join(REPO, "deploy", "k8s")
BINARIES = ("shardmap-coordinator", "shardmap-worker", "shardctl")
# Flags whose value is a file the process reads.
FILE_FLAGS = ("--tls-cert", "--tls-key", "--tls-ca", "--token-file")
TIMEOUT = 30

_flags_cache = {}


def help_flags(*argv):
    """The long flags `argv --help` lists."""
    if argv not in _flags_cache:
        p = subprocess.run([os.path.join(harness.BIN, argv[0]), *argv[1:],
                            "--help"], capture_output=True, text=True,
                           timeout=TIMEOUT)
        _flags_cache[argv] = set(re.findall(r"(--[a-z][a-z0-9-]*)",
                                            p.stdout + p.stderr))
    return _flags_cache[argv]


def known_flags(argv):
    """The flags the command line `argv` may use (its binary's, plus the
    subcommand's for shardctl)."""
    binary = os.path.basename(argv[0])
    if binary == "shardctl":
        sub = argv[1] if len(argv) > 1 and not argv[1].startswith("-") else None
        return help_flags("shardctl") | (help_flags("shardctl", sub)
                                         if sub else set())
    return help_flags(binary)


def parse_flags(argv):
    """{flag: value} of a command line; a flag followed by another flag (or
    nothing) is a switch with value True."""
    out, i = {}, 1
    while i < len(argv):
        a = str(argv[i])
        if a.startswith("--"):
            if "=" in a:
                k, v = a.split("=", 1)
            elif i + 1 < len(argv) and not str(argv[i + 1]).startswith("--"):
                k, v = a, str(argv[i + 1])
                i += 1
            else:
                k, v = a, True
            out[k] = v
        i += 1
    return out


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def host_of(address):
    return address.rsplit(":", 1)[0]


class Findings:
    """Collects every problem, so one run names all of them."""

    def __init__(self):
        self.problems = []
        self.missing_flags = {}  # binary -> {flag: [where]}

    def check(self, ok, message):
        if not ok:
            self.problems.append(message)
        return ok

    def command(self, argv, where):
        """Checks that argv runs one of our binaries with flags it has;
        returns its flags."""
        argv = [str(a) for a in argv]
        binary = os.path.basename(argv[0])
        if not self.check(binary in BINARIES,
                          f"{where}: runs {argv[0]!r}, not one of {BINARIES}"):
            return {}
        name = binary + (f" {argv[1]}" if binary == "shardctl" else "")
        flags = parse_flags(argv)
        known = known_flags(argv)
        for flag in flags:
            if flag not in known:
                self.missing_flags.setdefault(name, {}).setdefault(
                    flag, []).append(where)
        return flags

    def tls(self, flags, where):
        """A server on a non-loopback address runs with mutual TLS (the
        deployments pass --insecure only for --metrics, which the binaries
        refuse off loopback without it)."""
        loopback = ("127.0.0.1", "localhost", "[::1]")
        listen = flags.get("--listen", "127.0.0.1:0")
        if host_of(listen) not in loopback:
            self.check(all(f in flags for f in ("--tls-cert", "--tls-key",
                                                "--tls-ca")),
                       f"{where}: listens on {listen} without --tls-cert, "
                       "--tls-key and --tls-ca")
        metrics = flags.get("--metrics")
        if isinstance(metrics, str) and host_of(metrics) not in loopback:
            self.check("--insecure" in flags,
                       f"{where}: --metrics {metrics} is off loopback "
                       "without --insecure (the binary refuses it)")

    def report(self, test):
        lines = list(self.problems)
        for binary, flags in sorted(self.missing_flags.items()):
            for flag, wheres in sorted(flags.items()):
                lines.append(f"flag missing from `{binary} --help`: {flag} "
                             f"(used in {', '.join(sorted(set(wheres)))})")
        if lines:
            test.fail("\n" + "\n".join(lines))


def load_compose():
    """The compose file as docker-compose normalizes it (None, reason when
    docker-compose is not installed) and as YAML."""
    with open(COMPOSE) as f:
        raw = yaml.safe_load(f)
    exe = shutil.which("docker-compose")
    if exe is None:
        return raw, None, "docker-compose is not installed"
    p = subprocess.run([exe, "--project-directory", REPO, "-f", COMPOSE,
                        "config"], capture_output=True, text=True,
                       timeout=TIMEOUT, cwd=REPO)
    if p.returncode != 0:
        raise AssertionError(f"docker-compose config failed:\n{p.stderr}")
    return raw, yaml.safe_load(p.stdout), None


def load_k8s():
    """{(kind, name): object} of every manifest in deploy/k8s, and the
    kustomization."""
    objects, kustomization = {}, None
    for path in sorted(glob.glob(os.path.join(K8S, "*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc:
                    continue
                if doc.get("kind") == "Kustomization":
                    kustomization = (os.path.basename(path), doc)
                    continue
                key = (doc["kind"], doc["metadata"]["name"])
                assert key not in objects, f"{key} defined twice"
                objects[key] = (os.path.basename(path), doc)
    return objects, kustomization


def dockerfile_stages():
    """[(from_image, [instruction lines])] of deploy/Dockerfile, with
    continuation lines joined."""
    with open(DOCKERFILE) as f:
        text = re.sub(r"\\\n", " ", f.read())
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append((line.split()[1], []))
        elif stages:
            stages[-1][1].append(line)
    return stages


def server_cert_names(certs_dir):
    p = subprocess.run(["openssl", "x509", "-in",
                        os.path.join(certs_dir, "shardmap.crt"), "-noout",
                        "-ext", "subjectAltName"], capture_output=True,
                       text=True, timeout=TIMEOUT, check=True)
    return set(re.findall(r"(?:DNS|IP Address):([^,\s]+)", p.stdout))


def cert_covers(names, host):
    if host in names:
        return True
    head, _, rest = host.partition(".")
    return bool(rest) and f"*.{rest}" in names


class ComposeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.raw, cls.config, cls.skip_reason = load_compose()
        # Checks run on what docker-compose makes of the file when it can.
        cls.compose = cls.config or cls.raw

    def test_docker_compose_config_validates(self):
        if self.skip_reason:
            self.skipTest(self.skip_reason)
        self.assertIn("services", self.config)

    def test_services(self):
        find = Findings()
        services = self.compose["services"]
        workers = sorted(s for s in services if s.startswith("worker"))
        find.check("coordinator" in services, "no coordinator service")
        find.check(workers == [f"worker{i}" for i in range(4)],
                   f"workers are {workers}, expected worker0..worker3")
        images = {s["image"] for s in services.values()}
        find.check(len(images) == 1, f"services use several images {images}")
        for name, svc in services.items():
            build = svc.get("build", {})
            find.check(build.get("dockerfile") == "deploy/Dockerfile",
                       f"{name}: not built from deploy/Dockerfile")
        coord = find.command(services["coordinator"]["command"],
                             "docker-compose.yml coordinator")
        coord_port = port_of(coord.get("--listen", ":7070"))
        published = [str(p) for p in services["coordinator"].get("ports", [])]
        find.check(any(re.search(rf":{coord_port}(/tcp)?$", p)
                       for p in published),
                   f"coordinator publishes {published}, not its --listen port "
                   f"{coord_port}")
        for p in published:
            find.check(p.startswith("127.0.0.1:"),
                       f"coordinator port {p} is published beyond loopback")
        ranks = []
        for name in ["coordinator"] + workers:
            svc = services[name]
            where = f"docker-compose.yml {name}"
            flags = find.command(svc["command"], where)
            find.tls(flags, where)
            self.check_secret_files(find, svc, flags, where)
            self.check_healthcheck(find, svc, flags, where)
            if name == "coordinator":
                continue
            listen = flags.get("--listen", "")
            find.check(flags.get("--advertise") == f"{name}:{port_of(listen)}",
                       f"{where}: --advertise {flags.get('--advertise')} is "
                       f"not {name}:<its --listen port {listen}>")
            find.check(flags.get("--coordinator") ==
                       f"coordinator:{coord_port}",
                       f"{where}: --coordinator {flags.get('--coordinator')} "
                       f"is not coordinator:{coord_port}")
            ranks.append(flags.get("--rank"))
            find.check(flags.get("--rank") == name[len("worker"):],
                       f"{where}: --rank {flags.get('--rank')}")
            dep = svc.get("depends_on", {})
            find.check(isinstance(dep, dict) and
                       dep.get("coordinator", {}).get("condition") ==
                       "service_healthy",
                       f"{where}: does not depend on the coordinator with "
                       "condition service_healthy")
        find.check(len(set(ranks)) == len(ranks), f"ranks repeat: {ranks}")
        find.report(self)

    def check_secret_files(self, find, svc, flags, where):
        """Each file flag names /run/secrets/<secret> of a secret the service
        mounts, defined at the top level from a file."""
        mounted = {s["source"] if isinstance(s, dict) else s
                   for s in svc.get("secrets", [])}
        top = self.compose.get("secrets", {})
        for flag in FILE_FLAGS:
            path = flags.get(flag)
            if not find.check(path is not None, f"{where}: no {flag}"):
                continue
            secret = path[len("/run/secrets/"):]
            find.check(path.startswith("/run/secrets/") and secret in mounted,
                       f"{where}: {flag} {path} is not a mounted secret "
                       f"(mounted: {sorted(mounted)})")
            find.check("file" in top.get(secret, {}),
                       f"{where}: secret {secret!r} has no top-level file")

    def check_healthcheck(self, find, svc, flags, where):
        hc = svc.get("healthcheck", {})
        for key in ("interval", "timeout", "retries", "start_period"):
            find.check(key in hc, f"{where}: healthcheck sets no {key}")
        test = hc.get("test", [])
        if not find.check(test[:1] == ["CMD"],
                          f"{where}: healthcheck test {test} is not exec form"):
            return
        hflags = find.command(test[1:], f"{where} healthcheck")
        find.check(test[1:3] == ["shardctl", "health"],
                   f"{where}: healthcheck does not run shardctl health")
        addr = hflags.get("--addr", "")
        find.check(addr and port_of(addr) == port_of(flags["--listen"]),
                   f"{where}: healthcheck asks {addr}, the server listens on "
                   f"{flags.get('--listen')}")
        self.check_secret_files(find, svc, hflags, f"{where} healthcheck")


class KubernetesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.objects, cls.kustomization = load_k8s()

    def of_kind(self, kind):
        return {n: o for (k, n), (_, o) in self.objects.items() if k == kind}

    def test_kustomization_lists_every_manifest(self):
        self.assertIsNotNone(self.kustomization, "no kustomization.yaml")
        files = {os.path.basename(p) for p in
                 glob.glob(os.path.join(K8S, "*.yaml"))}
        files.discard(self.kustomization[0])
        self.assertEqual(set(self.kustomization[1]["resources"]), files)

    def test_workloads(self):
        find = Findings()
        services = self.of_kind("Service")
        workloads = {**self.of_kind("Deployment"), **self.of_kind("StatefulSet")}
        find.check(set(workloads) == {"shardmap-coordinator",
                                      "shardmap-worker"},
                   f"workloads are {sorted(workloads)}")
        with open(COMPOSE) as f:
            compose_image = yaml.safe_load(f)["services"]["coordinator"]["image"]
        listen_ports = {}
        for name, obj in workloads.items():
            pod = obj["spec"]["template"]
            labels = pod["metadata"]["labels"]
            find.check(obj["spec"]["selector"]["matchLabels"].items() <=
                       labels.items(), f"{name}: selector misses its pods")
            for c in pod["spec"]["containers"]:
                where = f"deploy/k8s {name}/{c['name']}"
                find.check(c["image"] == compose_image,
                           f"{where}: image {c['image']}, compose uses "
                           f"{compose_image}")
                flags = find.command(c["command"] + c.get("args", []), where)
                find.tls(flags, where)
                listen_ports[name] = port_of(flags.get("--listen", ":0"))
                self.check_container(find, pod, c, flags, where)
                if obj["kind"] == "StatefulSet":
                    self.check_statefulset(find, obj, c, flags, services,
                                           where)
                else:
                    find.check(obj["spec"]["replicas"] == 1,
                               f"{where}: more than one coordinator")
        # Every Service selects a workload and targets a port it has.
        for sname, svc in services.items():
            target = [n for n, w in workloads.items()
                      if svc["spec"]["selector"].items() <=
                      w["spec"]["template"]["metadata"]["labels"].items()]
            if not find.check(len(target) == 1,
                              f"Service {sname} selects {target}"):
                continue
            c = workloads[target[0]]["spec"]["template"]["spec"]["containers"][0]
            names = {p["name"]: p["containerPort"] for p in c["ports"]}
            for p in svc["spec"]["ports"]:
                tp = p.get("targetPort", p["port"])
                find.check(tp in names or tp in names.values(),
                           f"Service {sname} port {p['port']} targets {tp}, "
                           f"not a port of {target[0]} ({names})")
        # Workers dial the coordinator through a Service that reaches it
        # before it is ready (it becomes ready once they registered).
        worker = workloads.get("shardmap-worker")
        if worker:
            c = worker["spec"]["template"]["spec"]["containers"][0]
            dial = parse_flags(c["command"] + c.get("args", [])).get(
                "--coordinator", ":")
            svc = services.get(host_of(dial))
            if find.check(svc is not None,
                          f"workers dial {dial}: no Service of that name"):
                find.check(svc["spec"].get("publishNotReadyAddresses") is True,
                           f"Service {host_of(dial)} hides a not-ready "
                           "coordinator from the workers")
                find.check(
                    any(p["port"] == port_of(dial) for p in
                        svc["spec"]["ports"]) and
                    port_of(dial) == listen_ports.get("shardmap-coordinator"),
                    f"workers dial port {port_of(dial)}; the coordinator "
                    f"listens on {listen_ports.get('shardmap-coordinator')}")
        find.report(self)

    def check_container(self, find, pod, c, flags, where):
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        listen = flags.get("--listen", ":0")
        find.check(ports.get("grpc") == port_of(listen),
                   f"{where}: containerPort grpc {ports.get('grpc')} is not "
                   f"the --listen port {listen}")
        if "--metrics" in flags:
            find.check(ports.get("metrics") == port_of(flags["--metrics"]),
                       f"{where}: containerPort metrics is not --metrics")
        for kind in ("readinessProbe", "livenessProbe"):
            probe = c.get(kind)
            if not find.check(probe is not None, f"{where}: no {kind}"):
                continue
            if "exec" in probe:
                argv = probe["exec"]["command"]
                pflags = find.command(argv, f"{where} {kind}")
                find.check(argv[:2] == ["shardctl", "health"] and
                           port_of(pflags.get("--addr", ":0")) ==
                           port_of(listen),
                           f"{where}: {kind} {argv[:4]} does not ask the "
                           "server's own port")
                self.check_mounted(find, pod, c, pflags, f"{where} {kind}")
            elif "grpc" in probe:
                # The kubelet speaks plaintext without a token: only the
                # health-only port can answer it, and liveness must not
                # depend on readiness.
                g = probe["grpc"]
                health = port_of(flags.get("--health-listen", ":0"))
                find.check(g.get("port") == health and
                           ports.get("health") == health,
                           f"{where}: {kind} grpc port {g.get('port')} is "
                           f"not the --health-listen port {health} (a "
                           "containerPort named health)")
                want = "liveness" if kind == "livenessProbe" else None
                find.check(g.get("service") == want,
                           f"{where}: {kind} asks service "
                           f"{g.get('service')!r}, not {want!r}")
            else:
                action = probe.get("tcpSocket") or {}
                port = action.get("port")
                find.check(port in ports or port in ports.values(),
                           f"{where}: {kind} port {port} is not a "
                           f"containerPort ({ports})")
        res = c.get("resources", {})
        for r in ("cpu", "memory"):
            find.check(r in res.get("requests", {}) and
                       r in res.get("limits", {}),
                       f"{where}: no {r} request and limit")
        if "--memory-budget" in flags and "memory" in res.get("limits", {}):
            find.check(int(flags["--memory-budget"]) <
                       quantity(res["limits"]["memory"]),
                       f"{where}: --memory-budget is not below the memory "
                       "limit")
        sc = {**pod["spec"].get("securityContext", {}),
              **c.get("securityContext", {})}
        find.check(sc.get("runAsNonRoot") is True,
                   f"{where}: does not run as non-root")
        self.check_mounted(find, pod, c, flags, where)
        # $(VAR) references need the variable in env.
        env = {e["name"] for e in c.get("env", [])}
        for arg in c["command"] + c.get("args", []):
            for var in re.findall(r"\$\((\w+)\)", str(arg)):
                find.check(var in env, f"{where}: $({var}) is not in env")

    def check_mounted(self, find, pod, c, flags, where):
        """Each file flag names a file in a mounted Secret volume."""
        volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
        mounts = c.get("volumeMounts", [])
        for flag in FILE_FLAGS:
            path = flags.get(flag)
            if not find.check(path is not None, f"{where}: no {flag}"):
                continue
            m = [m for m in mounts
                 if path.startswith(m["mountPath"].rstrip("/") + "/")]
            find.check(m and "secret" in volumes.get(m[0]["name"], {}),
                       f"{where}: {flag} {path} is not in a mounted Secret")

    def check_statefulset(self, find, sts, c, flags, services, where):
        svc_name = sts["spec"]["serviceName"]
        svc = services.get(svc_name)
        if find.check(svc is not None, f"{where}: no Service {svc_name}"):
            find.check(svc["spec"].get("clusterIP") == "None",
                       f"{where}: Service {svc_name} is not headless")
            find.check(svc["spec"].get("publishNotReadyAddresses") is True,
                       f"{where}: Service {svc_name} does not publish "
                       "not-ready peers")
        find.check("--rank-from-hostname" in flags,
                   f"{where}: no --rank-from-hostname")
        want = f"$(POD_NAME).{svc_name}:{port_of(flags.get('--listen', ':0'))}"
        find.check(flags.get("--advertise") == want,
                   f"{where}: --advertise {flags.get('--advertise')}, "
                   f"expected {want}")
        env = {e["name"]: e for e in c.get("env", [])}
        find.check(env.get("POD_NAME", {}).get("valueFrom", {}).get(
            "fieldRef", {}).get("fieldPath") == "metadata.name",
            f"{where}: POD_NAME does not come from metadata.name")


def quantity(text):
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
             "K": 10**3, "M": 10**6, "G": 10**9}
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", str(text))
    return int(m.group(1)) * units.get(m.group(2), 1)


class DockerfileTest(unittest.TestCase):
    def test_stages(self):
        stages = dockerfile_stages()
        self.assertGreaterEqual(len(stages), 2)
        with open(DOCKERFILE) as f:
            names = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", f.read(),
                               re.M | re.I)
        for i, (image, _) in enumerate(stages):
            if image in names[:i]:
                continue  # an earlier stage (the plugin SDK is FROM build)
            # Fully qualified: no registry search list needed (podman).
            self.assertRegex(image,
                             r"^docker\.io/library/debian:bookworm(-slim)?$")
        # The plugin SDK stage installs the SDK users build plugins against.
        self.assertIn("sdk", names)
        sdk = " ".join(stages[names.index("sdk")][1])
        self.assertIn("cmake --install", sdk)
        build = " ".join(stages[names.index("build")][1])
        for b in BINARIES:
            self.assertIn(b, build)
        # The flags of scripts/build.sh, so a host build's ccache serves it.
        with open(os.path.join(REPO, "scripts", "build.sh")) as f:
            build_type = re.search(r"-DCMAKE_BUILD_TYPE=(\w+)",
                                   f.read()).group(1)
        self.assertIn(f"-DCMAKE_BUILD_TYPE={build_type}", build)
        runtime = stages[-1][1]
        installs = [line for line in runtime if "apt-get install" in line]
        self.assertTrue(installs, "runtime stage installs no package")
        for line in installs:
            for part in ("--no-install-recommends", "apt-get clean",
                         "rm -rf /var/lib/apt/lists/*"):
                self.assertIn(part, line)
        users = [line.split()[1] for line in runtime if line.startswith("USER")]
        self.assertTrue(users and users[-1].split(":")[0] not in ("0", "root"),
                        f"runtime USER {users}")
        exposed = {int(p) for line in runtime if line.startswith("EXPOSE")
                   for p in line.split()[1:]}
        with open(COMPOSE) as f:
            compose = yaml.safe_load(f)
        used = set()
        for svc in compose["services"].values():
            flags = parse_flags(svc["command"])
            used |= {port_of(flags[k]) for k in ("--listen", "--metrics")
                     if k in flags}
        self.assertLessEqual(used, exposed, "ports the servers use vs EXPOSE")

    def test_runtime_installs_every_linked_library(self):
        """The package of each library a binary links directly is installed
        in the runtime stage (libc, libstdc++ and libgcc are in the base)."""
        runtime = " ".join(dockerfile_stages()[-1][1])
        base = {"libc6", "libstdc++6", "libgcc-s1"}
        libs = {}  # path -> [binary: soname]
        for b in BINARIES:
            path = os.path.join(harness.BIN, b)
            needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                                subprocess.run(["readelf", "-d", path],
                                               capture_output=True, text=True,
                                               timeout=TIMEOUT).stdout)
            found = dict(re.findall(r"^\s*(\S+) => (\S+)",
                                    subprocess.run(["ldd", path],
                                                   capture_output=True,
                                                   text=True,
                                                   timeout=TIMEOUT).stdout,
                                    re.M))
            for lib in needed:
                self.assertIn(lib, found, f"{b}: ldd does not find {lib}")
                libs.setdefault(found[lib], []).append(f"{b}: {lib}")
        # dpkg knows a file by the path its package installed it at: with
        # merged /usr, /lib/... and /usr/lib/... are the same file.
        owners = {}
        for path in libs:
            for alias in {path, os.path.realpath(path),
                          re.sub(r"^/usr/", "/", os.path.realpath(path))}:
                owners[alias] = path
        out = subprocess.run(["dpkg", "-S", *owners], capture_output=True,
                             text=True, timeout=TIMEOUT).stdout
        package = {}
        for line in out.splitlines():
            pkgs, _, file = line.partition(": ")
            if file in owners:
                package[owners[file]] = pkgs.split(":")[0].split(",")[0]
        missing = []
        for path, users in libs.items():
            pkg = package.get(path)
            if pkg is None:
                missing.append(f"{users[0]} ({path}) belongs to no package")
            elif pkg not in base and not re.search(
                    rf"(^|\s){re.escape(pkg)}(\s|$)", runtime):
                missing.append(f"{', '.join(users)} from {pkg}")
        if missing:
            self.fail("runtime stage lacks: " + "; ".join(missing))


class CertificatesTest(unittest.TestCase):
    def test_certificates_name_every_host_dialed(self):
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.run(["bash", os.path.join(REPO, "deploy",
                                                     "make-certs.sh"), tmp],
                               capture_output=True, text=True,
                               timeout=TIMEOUT)
            self.assertEqual(p.returncode, 0, p.stderr)
            for f in ("ca.crt", "shardmap.crt", "shardmap.key", "client.crt",
                      "client.key", "token"):
                self.assertTrue(os.path.getsize(os.path.join(tmp, f)) > 0, f)
            for cert in ("shardmap.crt", "client.crt"):
                v = subprocess.run(["openssl", "verify", "-CAfile",
                                    os.path.join(tmp, "ca.crt"),
                                    os.path.join(tmp, cert)],
                                   capture_output=True, text=True,
                                   timeout=TIMEOUT)
                self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
            names = server_cert_names(tmp)
        # Hosts the processes dial or advertise, and the probes ask.
        hosts = set()
        with open(COMPOSE) as f:
            compose = yaml.safe_load(f)
        for svc in compose["services"].values():
            flags = parse_flags(svc["command"])
            hosts |= {host_of(flags[k]) for k in ("--coordinator",
                                                  "--advertise") if k in flags}
            hflags = parse_flags(svc["healthcheck"]["test"][1:])
            hosts.add(host_of(hflags["--addr"]))
        objects, _ = load_k8s()
        for (kind, _), (_, obj) in objects.items():
            if kind not in ("Deployment", "StatefulSet"):
                continue
            sts = obj["spec"].get("serviceName")
            for c in obj["spec"]["template"]["spec"]["containers"]:
                flags = parse_flags(c["command"] + c.get("args", []))
                for k in ("--coordinator", "--advertise"):
                    if k in flags:
                        hosts.add(host_of(flags[k]).replace(
                            "$(POD_NAME)", f"{obj['metadata']['name']}-0"))
                if sts:
                    hosts.add(f"{obj['metadata']['name']}-0.{sts}")
        # Clients dial the Services with a cluster IP by name (headless ones
        # are dialed through the names above).
        for (kind, name), (_, obj) in objects.items():
            if kind == "Service" and obj["spec"].get("clusterIP") != "None":
                hosts.add(name)
        uncovered = sorted(h for h in hosts if not cert_covers(names, h))
        self.assertFalse(uncovered, f"certificate names {sorted(names)}")

    @unittest.skipUnless(os.geteuid() == 0, "needs root (make-certs.sh as sudo)")
    def test_sudo_gives_client_files_to_invoking_user(self):
        """As `sudo make-certs.sh`: the invoking user reads the client files
        and the token, uid 10001 the server key and the token; the invoking
        user cannot read the server key, nobody else the token."""
        user, other, server = 12345, 23456, 10001
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            out = os.path.join(tmp, "certs")
            env = dict(os.environ, SUDO_UID=str(user), SUDO_GID=str(user))
            p = subprocess.run(["bash", os.path.join(REPO, "deploy",
                                                     "make-certs.sh"), out],
                               capture_output=True, text=True, env=env,
                               timeout=TIMEOUT)
            self.assertEqual(p.returncode, 0, p.stderr)

            def readable(uid, name):
                def become():
                    os.setgroups([])
                    os.setgid(uid)
                    os.setuid(uid)
                r = subprocess.run(["cat", os.path.join(out, name)],
                                   capture_output=True, preexec_fn=become,
                                   timeout=TIMEOUT)
                return r.returncode == 0 and len(r.stdout) > 0

            want = {  # file: uids that must read it (the others must not)
                "client.key": {user}, "client.crt": {user, other, server},
                "ca.crt": {user, other, server}, "token": {user, server},
                "shardmap.key": {server}, "ca.key": set(),
            }
            for name, readers in want.items():
                for uid in (user, other, server):
                    self.assertEqual(readable(uid, name), uid in readers,
                                     f"{name} readable by uid {uid}")
            self.assertEqual(os.stat(out).st_uid, user)


if __name__ == "__main__":
    unittest.main(verbosity=2)
