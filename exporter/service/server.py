"""The HTTP side: the routes as an app that takes a request and returns status, headers and body (testable without
sockets), and the bounded server that runs it."""

from __future__ import annotations

import contextlib
import logging
import time
import zlib
from typing import TYPE_CHECKING, Any

from exporter import __version__
from exporter.baselines.table import BaselineTable, load_table
from exporter.common.exposition import LabelledTextFamilySet, RenderingFamilySet, TextFamilySet
from exporter.common.families import FamilyCollector
from exporter.common.urltext import query_values
from exporter.config import Config, listen_host_port
from exporter.redis.heartbeat import HeartbeatWriter
from exporter.redis.latency import NATIVE_HISTOGRAMS

from .collectors.baselines import BaselineCollector
from .collectors.exporter import BuildInfo, ConfigReloadMetrics, ConfigReloads, Limits
from .collectors.heartbeat import HeartbeatWriterCollector
from .collectors.process import ProcessMetrics
from .collectors.redis import RedisCollector
from .http import HttpServer, Request
from .negotiation import OPENMETRICS_1_0_0, PROTOBUF_DELIMITED, FormatCache, accepts_gzip
from .pool import ScrapePool
from .targets import Target, TargetRefused, TargetSet

if TYPE_CHECKING:
    from exporter.common.sharding import Shard

    from .webconfig import WebConfig

log = logging.getLogger(__name__)

Reply = tuple[int, list[tuple[str, str]], bytes | bytearray]  # status, headers, body
SCRAPE_TIMEOUT_HEADER = "x-prometheus-scrape-timeout-seconds"
DEADLINE_MARGIN = 0.1  # seconds kept back from Prometheus' timeout to write the reply
AWS_STOP_SECONDS = 60.0  # how long a reload waits for the AWS calls under way to end (each has its own timeout)


class ExporterApp:
    """Routes: the telemetry path, /scrape?target=, /-/healthy and the status page."""

    def __init__(
        self,
        config: Config,
        targets: TargetSet | None = None,
        reloads: ConfigReloads | None = None,
        running_shard: Shard | None = None,
        running: ExporterApp | None = None,
    ) -> None:
        """``running``: the app a reload replaces; what the process learned from AWS, and its shard, pass from it to this one
        (``running_shard``: that shard alone)."""
        self.config = config
        self.reloads = reloads or ConfigReloads(time.time())  # a reload hands the new app the process's record
        self.targets = targets or TargetSet(config)
        if targets is None:
            self.targets.prepare_passwords()  # a secret that cannot be read, or IAM without credentials, stops the start
        self.shard_count: Any = None
        if config.shard is not None and config.shard.auto:
            self._start_shard_count(config, running_shard or (running.targets.shard if running is not None else None))
        self.pool = ScrapePool(config.scrape_concurrency)
        self.formats = FormatCache()  # the format each Accept value gets, as Prometheus repeats it every scrape
        self.http: HttpServer | None = None
        self._process = ProcessMetrics()
        self._build_info = BuildInfo()
        self._limits = Limits(self)
        self.started = time.time()
        self._baselines: BaselineTable | None = None
        if config.baselines.file or any(target.node_type for target in config.targets) or config.aws.enabled:
            self._baselines = load_table(config.baselines.file, config.baselines.basis)  # a bad file stops start-up
        self.heartbeat_writer: HeartbeatWriter | None = None
        self._extra_collectors: list[FamilyCollector] = [ConfigReloadMetrics(self.reloads)]
        if config.heartbeat.write:
            self.heartbeat_writer = HeartbeatWriter(config.heartbeat, list(config.targets))
            self._extra_collectors.append(HeartbeatWriterCollector(self.heartbeat_writer))
            self.heartbeat_writer.start()
        self.client_profiler: Any = None
        profiled = bool(config.targets) or (config.aws.enabled and config.aws.scrape_discovered)
        if config.clients.enabled and profiled:
            from exporter.redis.clients import ClientProfiler

            from .collectors.clients import ClientProfileCollector

            self.client_profiler = self._start_profiler(ClientProfiler(config.clients, self._profiled_targets), ClientProfileCollector)
        self.keyspace_profiler: Any = None
        if config.keyspace.enabled and profiled:
            from exporter.redis.keyspace import KeyspaceProfiler

            from .collectors.keyspace import KeyspaceCollector

            self.keyspace_profiler = self._start_profiler(
                KeyspaceProfiler(config.keyspace, self._profiled_targets, config.scrape_max_reply_bytes), KeyspaceCollector
            )
        self.cluster_discovery: Any = None
        if self.targets.cluster_seeds:
            from .cluster_discovery import ClusterDiscovery

            self.cluster_discovery = ClusterDiscovery(self.targets, config.cluster_refresh)
            self.targets.member_down = self.cluster_discovery.wake
            self.cluster_discovery.start()
        self.slot_stats_profiler: Any = None
        if config.slot_stats.enabled and profiled:
            from exporter.redis.slot_stats import SlotStatsProfiler

            from .collectors.slot_stats import SlotStatsCollector

            # the primaries of this shard's targets and of the groups it owns, on any shard: a share is of the whole group
            self.slot_stats_profiler = SlotStatsProfiler(config.slot_stats, self._group_profiled_targets, config.scrape_max_reply_bytes)
            self._extra_collectors.append(SlotStatsCollector(self.slot_stats_profiler, self.targets.owns))
            self.slot_stats_profiler.start()
        self._start_aws(config, running)

    def _start_aws(self, config: Config, running: ExporterApp | None) -> None:
        """Discovery and CloudWatch in the background, served by the AWS collector. On a reload whose AWS settings did
        not change, the running monitor is taken over whole (its minutes, poll marks, schedule and counters); otherwise
        it is stopped before a new one starts, which counts on from its counters."""
        self.aws_monitor: Any = None
        self._aws_collector: Any = None
        # the AWS calls' counters, the process's: a monitor built anew on a reload counts on from them
        self.aws_stats: Any = running.aws_stats if running is not None else None
        if not config.aws.enabled:
            if running is not None:
                running.stop_aws()
            return
        from exporter.aws.api import ApiStats
        from exporter.aws.monitor import AwsMonitor

        from .collectors.aws import AwsCollector

        kept = running.aws_monitor if running is not None else None
        if kept is not None and kept.config == config.aws:
            assert running is not None
            running.aws_monitor = None  # handed over: closing the old app leaves it polling
            self.aws_monitor = kept
            kept.attach(self._on_discovery, self.targets.owns, self.targets.answered_lately)
        else:
            if running is not None:
                running.stop_aws()
            self.aws_stats = self.aws_stats or ApiStats()
            self.aws_monitor = AwsMonitor(
                config.aws,
                on_nodes=self._on_discovery,
                owns=self.targets.owns,
                info_answers=self.targets.answered_lately,
                stats=self.aws_stats,
            )
            self.aws_monitor.start()
        self.targets.credentials_for = self.aws_monitor.credentials_for
        self._aws_collector = AwsCollector(self.aws_monitor, self._baselines)
        self._extra_collectors.append(self._aws_collector)

    def stop_aws(self) -> None:
        """Stop this app's AWS monitor and wait for its poll to end (at its next batch): a new one never polls beside it."""
        monitor, self.aws_monitor = self.aws_monitor, None
        if monitor is not None and not monitor.stop(timeout=AWS_STOP_SECONDS):
            log.warning("AWS: the last poll had not ended %.0f s after it was asked to stop", AWS_STOP_SECONDS)

    def _start_shard_count(self, config: Config, running_shard: Shard | None) -> None:
        """scrape.shard INDEX/auto: the count read from the pod's StatefulSet in the background. A reload keeps the count
        the running app knew (same index) until this app's first read, so the shard never stops serving."""
        import os

        from .kubernetes import start_shard_count

        assert config.shard is not None  # build_config requires a StatefulSet with INDEX/auto
        assert config.shard_statefulset is not None
        shard = config.shard
        if running_shard is not None and running_shard.auto and running_shard.index == shard.index:
            shard = shard.with_count(running_shard.count)
        self.targets.set_shard(shard)
        self.shard_count = start_shard_count(
            shard, config.shard_statefulset, self.targets.set_shard, config.shard_refresh, config.shard_service_account_dir, os.environ
        )

    def _start_profiler(self, profiler: Any, collector: Any) -> Any:
        """A background profiler of the targets, served by its collector."""
        self._extra_collectors.append(collector(profiler))
        profiler.start()
        return profiler

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
        for profiler in (self.client_profiler, self.keyspace_profiler, self.slot_stats_profiler, self.cluster_discovery, self.shard_count):
            if profiler is not None:
                profiler.stop()
        self.pool.close()
        self.targets.close()

    def deadline(self, request: Request) -> float:
        timeout = self.config.scrape_timeout
        header = request.headers.get(SCRAPE_TIMEOUT_HEADER)
        if header:
            with contextlib.suppress(ValueError):
                timeout = min(timeout, max(0.05, float(header) - DEADLINE_MARGIN))
        return time.monotonic() + timeout

    def handle(self, request: Request) -> Reply:
        path = request.path
        try:
            if request.method not in ("GET", "HEAD"):
                return _plain(405, "only GET and HEAD\n")
            if path == self.config.telemetry_path:
                targets = self.targets.on_metrics()
                collectors: list[FamilyCollector | None] = [
                    self._redis_collector(targets, request),
                    self._baseline_collector(targets, discovered=True),
                ]
                collectors += [*self._extra_collectors, self._build_info, self._limits, self._process]
                # many nodes on one page: each node's series carry instance=<target name>, the label a scrape of
                # that node alone would get from Prometheus (the documented job keeps it with honor_labels: true),
                # and the target's static labels, as its relabelling would add them
                return self._metrics(request, [c for c in collectors if c is not None], static=self._static_labels())
            if path == "/scrape":
                return self._scrape(request)
            if path == "/discovery":
                return self._discovery()
            if path in ("/-/healthy", "/health"):
                return _plain(200, "OK\n")
            if path == "/-/ready":
                return self._ready()
            if path == "/":
                from .status import render_status_page

                monitor = self.aws_monitor
                last_poll = monitor.last_poll if monitor is not None else None
                events = monitor.fleet.newest_events() if monitor is not None and monitor.fleet is not None else []
                shares, support = None, None
                if monitor is not None:
                    from exporter.aws.engine_support import affected_rows, cluster_support

                    from .collectors.aws_baseline import aws_shares

                    fresh_after = monitor.now() - monitor.fresh_seconds()
                    shares = lambda name: aws_shares(monitor, name, fresh_after)  # noqa: E731 - read once per target
                    support = affected_rows(cluster_support(monitor.nodes(), self._aws_collector.support_table), time.time())
                targets = self.targets.every()
                # nodes AWS discovery found that no target reads (aws.scrape_discovered off): shown with AWS's view
                known = {target.name for target in targets}
                discovered = [(name, node) for name, node in monitor.named_nodes() if name not in known] if monitor is not None else []
                body = render_status_page(
                    self.config, targets, self.started, lambda: self.baselines, last_poll, events, shares, support, discovered
                ).encode()
                return 200, [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))], body
            return _plain(404, "not found\n")
        except Exception:
            log.exception("internal error serving %s", path)
            return _plain(500, "internal error\n")

    def _ready(self) -> Reply:
        """Ready when a scrape would start now: a scrape worker is free or nothing waits for one. A shard whose automatic
        count is not known yet is ready too: it serves no target meanwhile, and Prometheus must scrape it to see why
        (``elasticache_exporter_shard_count_read_errors_total``, ElastiCacheExporterShardCountUnread)."""
        busy, size, queued = self.pool.busy, self.pool.size, self.pool.queued
        if busy >= size and queued > 0:
            return _plain(503, f"not ready: all {size} scrape workers busy, {queued} scrapes waiting\n")
        return _plain(200, "OK\n")

    def _scrape(self, request: Request) -> Reply:
        values = query_values(request.query, "target")
        if len(values) != 1 or not values[0]:
            return _plain(400, "give exactly one 'target' parameter\n")
        try:
            target = self.targets.resolve(values[0])
        except TargetRefused as err:
            return _plain(400, f"target refused: {err}\n")
        collectors = [self._redis_collector([target], request), self._baseline_collector([target]), self._build_info]
        # one node: its instance is the one Prometheus' relabelling gives the scrape, as with redis_exporter
        static = {target.name: dict(target.labels)} if target.labels else None
        return self._metrics(request, [c for c in collectors if c is not None], drop_instance=True, static=static)

    def _static_labels(self) -> dict[str, dict[str, str]] | None:
        """The static labels of /metrics, by instance: the targets' and, with aws.discovered.labels, those of the
        discovered nodes no target reads (their CloudWatch-side series); None where none has any."""
        static = self.targets.static_labels
        labels = self.config.discovered_labels
        monitor = self.aws_monitor
        if labels and monitor is not None:
            missing = {name: dict(labels) for name, _ in monitor.named_nodes() if name not in static}
            if missing:
                static = {**static, **missing}
        return static or None

    def _profiled_targets(self) -> list[Any]:
        """What the profilers read: the targets of /metrics (the configured ones and, with aws.scrape_discovered, the
        discovered nodes of this shard), each on a connection of the profiler's own."""
        return _as_configs(self.targets.on_metrics())

    def _group_profiled_targets(self) -> list[Any]:
        """The targets of /metrics and every member of the replication groups this shard owns (``of_owned_groups``)."""
        return _as_configs(self.targets.of_owned_groups())

    def _on_discovery(self, named: list[tuple[str, Any]]) -> None:
        """Discovered nodes and serverless caches become targets that /scrape resolves (and /metrics serves when
        aws.scrape_discovered is on)."""
        from exporter.aws.discovery import serverless_as_nodes

        monitor = self.aws_monitor
        if monitor is None:  # handed over on a reload while this discovery ran: the new app's targets get its nodes
            return
        taken = {name for name, _ in named}
        self.targets.set_discovered(named + serverless_as_nodes(monitor.serverless(), taken))

    def _discovery(self) -> Reply:
        """Prometheus HTTP service discovery: one group per target the exporter found (a discovered node or serverless
        cache, a cluster's node), its address as the target, which /scrape resolves here (and on any exporter whose
        allow-list covers it: shards need no shared state)."""
        groups = [{"targets": [target.address], "labels": _discovery_labels(target)} for target in self.targets.listed()]
        import json  # only discovery answers in JSON

        body = json.dumps(groups, sort_keys=True).encode()
        return 200, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body

    def _baseline_collector(self, targets: list[Target], *, discovered: bool = False) -> BaselineCollector | None:
        """``discovered``: also every discovered node of this exporter that is not among ``targets``, from CloudWatch."""
        cloudwatch_only: list[tuple[str, str]] = []
        if discovered and self.aws_monitor is not None:
            names = {target.name for target in targets}
            cloudwatch_only = [
                (name, node.node_type)
                for name, node in self.aws_monitor.named_nodes()
                if name not in names and node.node_type and self.targets.owns(name)
            ]
        if not cloudwatch_only and not any(target.node_type for target in targets):
            return None
        return BaselineCollector(targets, self.baselines, self.config.baselines.window, self.aws_monitor, cloudwatch_only)

    def _redis_collector(self, targets: list[Target], request: Request) -> RedisCollector:
        return RedisCollector(
            targets,
            self.pool,
            self.deadline(request),
            heartbeat_sources=self.targets.heartbeat_sources,
            address_names=self.targets.address_names,
            share=self.config.scrape_target_timeout,
        )

    def _metrics(
        self, request: Request, collectors: list[FamilyCollector], *, drop_instance: bool = False, static: dict[str, dict[str, str]] | None = None
    ) -> Reply:
        """``static``: the targets' static labels by instance, where some have any."""
        choice = self.formats.choose(request.headers.get("accept"))
        out: RenderingFamilySet
        if choice.format is PROTOBUF_DELIMITED:
            # only a client that asks for protobuf loads it
            from exporter.common.protobuf import LabelledProtobufFamilySet, ProtobufFamilySet

            if static:
                out = LabelledProtobufFamilySet(static, drop_instance=drop_instance, native=NATIVE_HISTOGRAMS)
            else:
                out = ProtobufFamilySet(drop_instance=drop_instance, native=NATIVE_HISTOGRAMS)
        else:
            out = LabelledTextFamilySet(static, drop_instance=drop_instance) if static else TextFamilySet(drop_instance=drop_instance)
        for collector in collectors:
            collector.write(out)
        # text 1.0.0 writes legacy-valid names exactly as 0.0.4 does, and OpenMetrics differs only in each family's
        # HELP and TYPE lines and its end; every name is legacy-valid, so each escaping writes it as it is (the
        # Content-Type echoes the one the client asked for)
        body: bytes | bytearray = out.body(openmetrics=choice.format is OPENMETRICS_1_0_0)
        # the reply depends on both: a cache between Prometheus and the exporter must not hand one client's to another
        headers = [("Content-Type", choice.content_type), ("Vary", "Accept, Accept-Encoding")]
        if accepts_gzip(request.headers.get("accept-encoding")):
            body = gzip_compress(body)
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(len(body))))
        return 200, headers, body


def _as_configs(targets: list[Target]) -> list[Any]:
    """Targets as the profilers take them, each read on a connection of the profiler's own."""
    from exporter.redis.settings import TargetConfig

    return [TargetConfig(t.name, t.node.endpoint, t.node.credentials, t.node_type, t.replication_group, t.shard) for t in targets]


def _scraped_role(target: Target, listed: str) -> str:
    """A target's role as /metrics serves it, where its last scrape is newer than the last change the cluster or discovery
    told (``listed``, which lag a failover by their refresh): "primary" or "replica" from INFO, "" while it is down."""
    with target.lock:
        state = target.state
        scraped, up, role, at = state.scraped, state.up, state.role, state.scraped_at
    if not scraped or at < target.role_listed_at:
        return listed
    if not up:
        return ""
    return {"master": "primary", "slave": "replica"}.get(role, listed)


def _discovery_labels(target: Target) -> dict[str, str]:
    """A listed target's ``__meta_elasticache_`` labels: a discovered node's as AWS knows it, a cluster member's as its
    cluster says, but its role as its last scrape saw it."""
    node = target.aws_node
    if node is None:
        return {
            "__meta_elasticache_node": target.name,
            "__meta_elasticache_replication_group": target.replication_group,
            "__meta_elasticache_shard": target.shard,
            "__meta_elasticache_role": _scraped_role(target, target.member_role),
            "__meta_elasticache_node_type": target.node_type,
        }
    return {
        "__meta_elasticache_node": target.name,
        "__meta_elasticache_account_id": node.account_id,
        "__meta_elasticache_region": node.region,
        "__meta_elasticache_cluster": node.cluster_id,
        "__meta_elasticache_replication_group": node.replication_group,
        "__meta_elasticache_shard": node.shard,
        "__meta_elasticache_role": _scraped_role(target, node.role),
        "__meta_elasticache_node_type": node.node_type,
        "__meta_elasticache_engine": node.engine,
        "__meta_elasticache_engine_version": node.engine_version,
        "__meta_elasticache_az": node.az,
    }


def _plain(status: int, text: str) -> Reply:
    body = text.encode()
    return status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))], body


def make_http_server(app: ExporterApp, listen_address: str, web_config: WebConfig | None = None) -> HttpServer:
    """The bounded HTTP/1.1 server for ``app``, with TLS and basic auth when configured; the caller runs ``serve_forever()``."""
    host, port = listen_host_port(listen_address)

    def handle(request: Request, peer: Any) -> Reply:
        peer_host = peer[0] if isinstance(peer, tuple) else ""
        if web_config is not None and not web_config.allows(request.path, request.headers.get("authorization"), peer_host):
            headers = [("WWW-Authenticate", 'Basic realm="elasticache-exporter"'), ("Content-Type", "text/plain; charset=utf-8")]
            return 401, headers, b"unauthorized\n"
        return server.app.handle(request)  # read per request: a reload swaps the app

    server = HttpServer(
        (host or "0.0.0.0", port),
        handle,
        ssl_context=web_config.ssl_context if web_config else None,
        server_name=f"elasticache-exporter/{__version__}",
        extra_headers=web_config.headers if web_config else None,
        peer_check=web_config.peer_allowed if web_config and web_config.allowed_sans else None,
        loopback_ssl_context=web_config.loopback_ssl_context if web_config else None,
        certificate_free_path="/-/healthy",  # webconfig.HEALTH_PATH, without loading ssl in a plain exporter
    )
    server.app = app
    app.http = server
    return server


def gzip_compress(body: bytes | bytearray) -> bytes:
    """A gzip member at level 1 (zlib's wbits=31 writes the gzip header and trailer itself)."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    return compressor.compress(body) + compressor.flush()
