"""The exporter's own state: its version, how close it is to its own bounds (scrape workers, HTTP connections), and
the outcome of the last configuration reload."""

from __future__ import annotations

import sys
import threading
from typing import Any

from exporter import __version__
from exporter.common.families import COUNTER, GAUGE, FamilyCollector, FamilySet


class BuildInfo(FamilyCollector):
    def write(self, out: FamilySet) -> None:
        labels = {"version": __version__, "python_version": "{}.{}.{}".format(*sys.version_info[:3])}
        out.add("elasticache_exporter_build_info", GAUGE, "The exporter's version and Python version.", labels, 1.0)


class Limits(FamilyCollector):
    """How close the exporter is to its own bounds: scrape workers, HTTP connections and workers."""

    def __init__(self, app: Any) -> None:
        self._app = app

    def write(self, out: FamilySet) -> None:
        pool = self._app.pool
        out.add("elasticache_exporter_scrape_workers", GAUGE, "Scrape workers (scrape.concurrency).", {}, pool.size)
        out.add("elasticache_exporter_scrape_workers_busy", GAUGE, "Scrape workers running a target's scrape now.", {}, pool.busy)
        out.add("elasticache_exporter_scrape_queue_length", GAUGE, "Target scrapes waiting for a free worker.", {}, pool.queued)
        shard = self._app.targets.shard  # an automatic count changes at run time; unknown yet: no shard to tell
        if shard is not None and shard.known:
            out.add(
                "elasticache_exporter_shard_info",
                GAUGE,
                "This exporter's shard (scrape.shard): it serves the targets whose name hashes to index, of count shards.",
                {"index": str(shard.index), "count": str(shard.count)},
                1.0,
            )
        shard_count = self._app.shard_count
        if shard_count is not None:
            out.add(
                "elasticache_exporter_shard_count_read_errors_total",
                COUNTER,
                "Reads of the StatefulSet's replicas (scrape.shard INDEX/auto) that failed; the last count is kept.",
                {},
                shard_count.failures,
            )
        http = self._app.http
        if http is not None:
            out.add("elasticache_exporter_http_connections", GAUGE, "Open HTTP connections.", {}, http.open_connections)
            out.add("elasticache_exporter_http_connections_max", GAUGE, "The bound on open HTTP connections.", {}, http.max_connections)
            out.add("elasticache_exporter_http_workers_busy", GAUGE, "HTTP workers answering a request now.", {}, http.busy_workers)
            out.add(
                "elasticache_exporter_http_connections_evicted_total",
                COUNTER,
                "Connections closed to make room at the connection bound (the longest idle first).",
                {},
                http.evicted,
            )
            out.add(
                "elasticache_exporter_http_request_head_timeouts_total",
                COUNTER,
                "Connections closed because their request head did not arrive in time.",
                {},
                http.timed_out,
            )


class ConfigReloads:
    """The outcome of the last load of the configuration: the start's, then each reload's (SIGHUP). It outlives the
    app each reload replaces; the reload thread writes it and scrapes read it, under one lock."""

    def __init__(self, loaded_at: float) -> None:
        self._lock = threading.Lock()
        self._successful = True
        self._success_at = loaded_at

    def succeeded(self, at: float) -> None:
        with self._lock:
            self._successful, self._success_at = True, at

    def failed(self) -> None:
        with self._lock:
            self._successful = False

    def state(self) -> tuple[bool, float]:
        """Whether the last load succeeded, and when the last one that did was."""
        with self._lock:
            return self._successful, self._success_at


class ConfigReloadMetrics(FamilyCollector):
    """The reload's outcome as Prometheus and Alertmanager serve theirs."""

    def __init__(self, reloads: ConfigReloads) -> None:
        self._reloads = reloads

    def write(self, out: FamilySet) -> None:
        successful, success_at = self._reloads.state()
        out.add(
            "elasticache_exporter_config_last_reload_successful",
            GAUGE,
            "Whether the last configuration reload succeeded (1; 0 while a refused file leaves the previous configuration running).",
            {},
            1.0 if successful else 0.0,
        )
        out.add(
            "elasticache_exporter_config_last_reload_success_timestamp_seconds",
            GAUGE,
            "When the configuration was last loaded successfully (at the start or by a reload), in seconds since the epoch.",
            {},
            success_at,
        )
