"""The HTTP side: a WSGI app (testable without sockets) and the threaded server that runs it."""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import platform
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote

from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector

from exporter import __version__
from exporter.baselines.table import BaselineTable, load_table
from exporter.common.exposition import CONTENT_TYPE as TEXT_CONTENT_TYPE
from exporter.common.exposition import encode_text
from exporter.config import Config, listen_host_port
from exporter.redis.heartbeat import HeartbeatWriter, HeartbeatWriterCollector

from .baseline_collector import BaselineCollector
from .redis_collector import RedisCollector
from .targets import Target, TargetRefused, TargetSet
from .webconfig import WebConfig

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
SCRAPE_TIMEOUT_HEADER = "HTTP_X_PROMETHEUS_SCRAPE_TIMEOUT_SECONDS"
DEADLINE_MARGIN = 0.1  # seconds kept back from Prometheus' timeout to write the reply


class _Families:
    """Adapts a list of collectors to what prometheus_client's encoders expect."""

    def __init__(self, collectors: Iterable[Any]) -> None:
        self._collectors = list(collectors)

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            yield from collector.collect()

    def families(self) -> Iterator[Any]:
        """For the text encoder: collectors that can skip building prometheus_client objects do."""
        for collector in self._collectors:
            yield from (collector.families() if hasattr(collector, "families") else collector.collect())


class _BuildInfo:
    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "elasticache_exporter_build_info",
            "The exporter's version and Python version.",
            labels=["version", "python_version"],
        )
        family.add_metric([__version__, platform.python_version()], 1.0)
        yield family


class ExporterApp:
    """Routes: the telemetry path, /scrape?target=, /-/healthy and the status page."""

    def __init__(self, config: Config, targets: TargetSet | None = None) -> None:
        self.config = config
        self.targets = targets or TargetSet(config)
        self.executor = ThreadPoolExecutor(max_workers=config.scrape_concurrency, thread_name_prefix="scrape")
        self._process = ProcessCollector(registry=None)
        self._build_info = _BuildInfo()
        self.started = time.time()
        self._baselines: BaselineTable | None = None
        if config.baselines.file or any(target.node_type for target in config.targets) or config.aws.enabled:
            self._baselines = load_table(config.baselines.file, config.baselines.basis)  # a bad file stops start-up
        self.heartbeat_writer: HeartbeatWriter | None = None
        self._extra_collectors: list[Any] = []
        if config.heartbeat.write:
            self.heartbeat_writer = HeartbeatWriter(config.heartbeat, list(config.targets))
            self._extra_collectors.append(HeartbeatWriterCollector(self.heartbeat_writer))
            self.heartbeat_writer.start()
        self.aws_monitor: Any = None
        if config.aws.enabled:
            from exporter.aws.monitor import AwsCollector, AwsMonitor

            on_nodes = self.targets.set_discovered if config.aws.scrape_discovered else None
            self.aws_monitor = AwsMonitor(config.aws, on_nodes=on_nodes)
            self._extra_collectors.append(AwsCollector(self.aws_monitor))
            self.aws_monitor.start()

    @property
    def baselines(self) -> BaselineTable:
        """The table; the shipped one is read only when some target has a node type (it costs 1.5 MiB)."""
        if self._baselines is None:
            self._baselines = load_table(self.config.baselines.file, self.config.baselines.basis)
        return self._baselines

    def close(self) -> None:
        if self.heartbeat_writer is not None:
            self.heartbeat_writer.stop()
        if self.aws_monitor is not None:
            self.aws_monitor.stop()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.targets.close()

    def deadline(self, environ: dict[str, Any]) -> float:
        timeout = self.config.scrape_timeout
        header = environ.get(SCRAPE_TIMEOUT_HEADER)
        if header:
            with contextlib.suppress(ValueError):
                timeout = min(timeout, max(0.05, float(header) - DEADLINE_MARGIN))
        return time.monotonic() + timeout

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        path = environ.get("PATH_INFO", "/")
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            if method not in ("GET", "HEAD"):
                return _plain(start_response, "405 Method Not Allowed", "only GET and HEAD\n")
            if path == self.config.telemetry_path:
                targets = self.targets.configured
                collectors = [self._redis_collector(targets, environ), self._baseline_collector(targets)]
                collectors += [*self._extra_collectors, self._build_info, self._process]
                return self._metrics(environ, start_response, [c for c in collectors if c is not None])
            if path == "/scrape":
                return self._scrape(environ, start_response)
            if path == "/discovery":
                return self._discovery(start_response)
            if path in ("/-/healthy", "/health"):
                return _plain(start_response, "200 OK", "OK\n")
            if path == "/":
                from .status import render_status_page

                last_poll = self.aws_monitor.last_poll if self.aws_monitor is not None else None
                body = render_status_page(self.config, self.targets.all(), self.started, self.baselines, last_poll).encode()
                start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))])
                return [body]
            return _plain(start_response, "404 Not Found", "not found\n")
        except Exception:
            log.exception("internal error serving %s", path)
            return _plain(start_response, "500 Internal Server Error", "internal error\n")

    def _scrape(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        values = query.get("target", [])
        if len(values) != 1 or not values[0]:
            return _plain(start_response, "400 Bad Request", "give exactly one 'target' parameter\n")
        try:
            target = self.targets.resolve(values[0])
        except TargetRefused as err:
            return _plain(start_response, "400 Bad Request", f"target refused: {err}\n")
        collectors = [self._redis_collector([target], environ), self._baseline_collector([target]), self._build_info]
        return self._metrics(environ, start_response, [c for c in collectors if c is not None])

    def _discovery(self, start_response: StartResponse) -> list[bytes]:
        """Prometheus HTTP service discovery: one group per discovered node, its address as the target
        (so that /scrape on any exporter whose allow-list covers it can serve it: shards need no shared state)."""
        groups = [
            {
                "targets": [f"{'rediss' if target.node.endpoint.tls else 'redis'}://{target.node.endpoint.host_port}"],
                "labels": {
                    "__meta_elasticache_node": target.name,
                    "__meta_elasticache_replication_group": node.replication_group,
                    "__meta_elasticache_shard": node.shard,
                    "__meta_elasticache_role": node.role,
                    "__meta_elasticache_node_type": node.node_type,
                    "__meta_elasticache_engine": node.engine,
                    "__meta_elasticache_engine_version": node.engine_version,
                    "__meta_elasticache_region": node.region,
                    "__meta_elasticache_az": node.az,
                },
            }
            for target, node in self.targets.discovered_nodes()
        ]
        body = json.dumps(groups, sort_keys=True).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def _baseline_collector(self, targets: list[Target]) -> BaselineCollector | None:
        if not any(target.node_type for target in targets):
            return None
        return BaselineCollector(targets, self.baselines, self.config.baselines.window, self.aws_monitor)

    def _redis_collector(self, targets: list[Target], environ: dict[str, Any]) -> RedisCollector:
        return RedisCollector(
            targets,
            self.executor,
            self.deadline(environ),
            heartbeat_sources=self.targets.heartbeat_sources,
            address_names=self.targets.address_names,
        )

    def _metrics(self, environ: dict[str, Any], start_response: StartResponse, collectors: list[Any]) -> list[bytes]:
        accept = environ.get("HTTP_ACCEPT", "")
        if "application/openmetrics-text" in accept:
            encoder, content_type = choose_encoder(accept)
            body = encoder(_Families(collectors))
        else:
            content_type = TEXT_CONTENT_TYPE
            body = encode_text(_Families(collectors).families())
        headers = [("Content-Type", content_type)]
        if "gzip" in environ.get("HTTP_ACCEPT_ENCODING", ""):
            body = gzip.compress(body, compresslevel=1)
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(len(body))))
        start_response("200 OK", headers)
        return [body]


def _plain(start_response: StartResponse, status: str, text: str) -> list[bytes]:
    body = text.encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
    return [body]


class _Handler(BaseHTTPRequestHandler):
    """Runs the WSGI app over HTTP/1.1 with keep-alive, as Prometheus scrapes."""

    protocol_version = "HTTP/1.1"
    server_version = f"elasticache-exporter/{__version__}"
    timeout = 120  # an idle keep-alive connection is closed after this many seconds

    def setup(self) -> None:
        context = self.server.web_config.ssl_context if self.server.web_config else None  # type: ignore[attr-defined]
        if context is not None:
            # the handshake happens here, in the connection's own thread, not in the accept loop
            self.request.settimeout(10)
            self.request = context.wrap_socket(self.request, server_side=True)
        super().setup()
        # headers and body go out in two writes; without NODELAY the second waits for a delayed ACK (40 ms)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _serve(self) -> None:
        self._discard_body()
        web_config = self.server.web_config  # type: ignore[attr-defined]
        if web_config is not None and not web_config.authorized(self.headers.get("Authorization")):
            body = b"unauthorized\n"
            self.send_response(401, "Unauthorized")
            self.send_header("WWW-Authenticate", 'Basic realm="elasticache-exporter"')
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        path, _, query = self.path.partition("?")
        environ: dict[str, Any] = {
            "REQUEST_METHOD": self.command,
            "PATH_INFO": unquote(path),
            "QUERY_STRING": query,
            "SERVER_PROTOCOL": self.request_version,
            "REMOTE_ADDR": self.client_address[0],
        }
        for name, value in self.headers.items():
            environ["HTTP_" + name.upper().replace("-", "_")] = value
        reply: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]]) -> None:
            reply["status"], reply["headers"] = status, headers

        body = b"".join(self.server.app(environ, start_response))  # type: ignore[attr-defined]
        code, _, reason = reply["status"].partition(" ")
        self.send_response(int(code), reason)
        for name, value in reply["headers"]:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _discard_body(self) -> None:
        """No route takes a body; read a small one so the kept-alive connection stays in step."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if 0 < length <= 65536:
            self.rfile.read(length)
        elif length != 0 or self.headers.get("Transfer-Encoding"):
            self.close_connection = True

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _serve

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)


class _ThreadingServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the default of 5 drops the SYNs of a burst of parallel /scrape requests

    def __init__(self, address: tuple[str, int], app: ExporterApp, web_config: WebConfig | None = None) -> None:
        super().__init__(address, _Handler)
        self.app = app
        self.web_config = web_config

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s failed", client_address, exc_info=True)


class _ThreadingServerV6(_ThreadingServer):
    address_family = socket.AF_INET6


def make_http_server(app: ExporterApp, listen_address: str, web_config: WebConfig | None = None) -> ThreadingHTTPServer:
    """A threaded HTTP/1.1 server for ``app``, with TLS and basic auth when configured; the caller runs ``serve_forever()``."""
    host, port = listen_host_port(listen_address)
    server_class = _ThreadingServerV6 if ":" in host else _ThreadingServer
    return server_class((host or "0.0.0.0", port), app, web_config)
