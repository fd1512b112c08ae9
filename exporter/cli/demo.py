"""``elasticache-exporter demo``: the exporter against a local Redis, started if none answers.

A throwaway server started here is made to show what the exporter is for: it is given a node type (the smallest
ElastiCache one) and a little GET traffic, so the status page and ``/metrics`` show traffic against the node type's
baseline, the utilization and the headroom left, and the first lines printed say where to look. Before printing them
the demo reads its own ``/metrics`` twice, ``WARM_UP_SECONDS`` apart (a rate needs two readings), so the first page
opened already shows the node scraped and its traffic, not "not scraped yet" or "measuring"."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable

from exporter.common.errors import ExporterError
from exporter.common.processes import stop_process
from exporter.common.records import replace
from exporter.config import Config

log = logging.getLogger(__name__)
DEMO_PORT = 6379
DEMO_NODE_TYPE = "cache.t4g.micro"  # 64 Mbit/s baseline: the demo's traffic is a visible share of it
DEMO_VALUE_BYTES = 16 * 1024
DEMO_GETS_PER_SECOND = 100  # about 1.6 MB/s out: a quarter of the baseline
WARM_UP_SECONDS = 2.0  # between the demo's own two scrapes at start: long enough for 200 GETs to show as a rate
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
    except OSError:
        return False
    return reply.startswith((b"+PONG", b"-NOAUTH"))


def demo_port(config: Config) -> int:
    """The port of the single local target (``--redis.addr redis://localhost:6390``), else 6379."""
    if len(config.targets) == 1 and config.targets[0].endpoint.host in _LOCAL_HOSTS and not config.targets[0].endpoint.tls:
        return config.targets[0].endpoint.port
    return DEMO_PORT


DEFAULT_LISTEN = ":9769"  # serve's: every interface
DEMO_LISTEN = "127.0.0.1:9769"


def on_loopback(config: Config) -> Config:
    """The demo listens on loopback unless told where (a laptop must not serve unauthenticated metrics to its network):
    serve's default of every interface becomes 127.0.0.1; ``--web.listen-address 0.0.0.0:9769`` still reaches them."""
    return replace(config, listen_address=DEMO_LISTEN) if config.listen_address == DEFAULT_LISTEN else config


def run_demo(config: Config, run_server: Callable[[Config], int]) -> int:
    config = on_loopback(config)
    port = demo_port(config)
    if _answers(port):
        log.info("a Redis answers on 127.0.0.1:%d; exporting it", port)
        return run_server(config)
    binary = shutil.which("redis-server") or shutil.which("valkey-server")
    if binary is None:
        raise ExporterError(f"no Redis answers on 127.0.0.1:{port} and no redis-server is installed (apt-get install redis-server)")
    workdir = tempfile.mkdtemp(prefix="elasticache-exporter-demo-")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    traffic = DemoTraffic(port)
    warm_up: WarmUp | None = None
    try:
        deadline = time.monotonic() + 10
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise ExporterError(f"the demo redis-server did not start on 127.0.0.1:{port}")
            time.sleep(0.05)
        log.info("started a throwaway redis-server on 127.0.0.1:%d (pid %d); it stops with the exporter", port, process.pid)
        config = with_demo_node_type(config)
        traffic.start()
        warm_up = WarmUp(local_base_url(config), announce=lambda: print(where_to_look(config, port), file=sys.stderr, flush=True))
        warm_up.start()
        return run_server(config)
    finally:
        if warm_up is not None:
            warm_up.stop()
        traffic.stop()
        stop_process(process, timeout=5)
        shutil.rmtree(workdir, ignore_errors=True)


def with_demo_node_type(config: Config) -> Config:
    """The throwaway node as a node of the demo's type (where the configuration gives it none)."""
    targets = tuple(target if target.node_type else replace(target, node_type=DEMO_NODE_TYPE) for target in config.targets)
    return replace(config, targets=targets)


def local_base_url(config: Config) -> str:
    """Where the exporter of ``config`` answers on this machine (``localhost`` for a wildcard listen address)."""
    host, _, listen_port = config.listen_address.rpartition(":")
    return f"http://{host.strip('[]') if host and host not in ('0.0.0.0', '::') else 'localhost'}:{listen_port}"


def where_to_look(config: Config, port: int) -> str:
    base = local_base_url(config)
    megabytes = DEMO_GETS_PER_SECOND * DEMO_VALUE_BYTES / 1e6
    return "\n".join(
        [
            f"demo: a throwaway redis-server on 127.0.0.1:{port}, exported as an ElastiCache {DEMO_NODE_TYPE} with about "
            f"{megabytes:.1f} MB/s of GET traffic. Look at:",
            f"  {base}/          the status page: traffic against the node type's baseline, utilization and headroom",
            f"  {base}/metrics   every series; elasticache_network_utilization_ratio is traffic / baseline",
            "  elasticache-exporter render prometheus   the alerts that warn before a node saturates (80 % and 90 % of the baseline)",
        ]
    )


class WarmUp:
    """The demo's own two scrapes at start, ``WARM_UP_SECONDS`` apart, then ``announce``: by the time the first lines
    say where to look, the status page has a scraped node and a rate of its traffic. A scrape that cannot be made (a
    web config with basic auth, say) is given up on after a deadline; the lines are printed all the same."""

    def __init__(self, base_url: str, announce: Callable[[], None], deadline_seconds: float = 10.0) -> None:
        self.url = base_url + "/metrics"
        self.announce = announce
        self.deadline_seconds = deadline_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-warm-up", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        deadline = time.monotonic() + self.deadline_seconds
        scraped = self._scrape_until(deadline) and not self._stop.wait(WARM_UP_SECONDS) and self._scrape_until(deadline + WARM_UP_SECONDS)
        if not scraped:
            log.debug("demo: the warm-up scrapes of %s did not complete", self.url)
        if not self._stop.is_set():
            self.announce()

    def _scrape_until(self, deadline: float) -> bool:
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=5) as reply:  # noqa: S310 (the exporter's own loopback URL)
                    reply.read()
                return True
            except OSError as err:
                if time.monotonic() > deadline:
                    log.debug("demo: warm-up scrape of %s: %s", self.url, err)
                    return False
            self._stop.wait(0.1)
        return False


class DemoTraffic:
    """GETs of one value at a steady rate on a connection of its own, until stopped; a failed connection is retried."""

    def __init__(self, port: int, per_second: int = DEMO_GETS_PER_SECOND, value_bytes: int = DEMO_VALUE_BYTES) -> None:
        self.port = port
        self.per_tick = max(1, per_second // 10)
        self.value_bytes = value_bytes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-traffic", daemon=True)
        self.gets = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._load()
            except OSError as err:
                log.debug("demo traffic: %s; retrying", err)
                self._stop.wait(1.0)

    def _load(self) -> None:
        key = b"demo:value"
        value = b"x" * self.value_bytes
        set_value = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value)
        gets = b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key) * self.per_tick
        reply_bytes = self.per_tick * len(b"$%d\r\n%s\r\n" % (len(value), value))
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(set_value)
            _read_exactly(sock, len(b"+OK\r\n"))
            while not self._stop.wait(0.1):
                sock.sendall(gets)
                _read_exactly(sock, reply_bytes)
                self.gets += self.per_tick


def _read_exactly(sock: socket.socket, size: int) -> None:
    while size > 0:
        chunk = sock.recv(min(size, 1 << 16))
        if not chunk:
            raise ConnectionError("the demo redis-server closed the connection")
        size -= len(chunk)
