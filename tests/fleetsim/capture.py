"""One shard (a primary and its replica, real redis-servers) put through each state an incident brings, and what a live
exporter process serves in each: the samples, and the rate at which each counter rose while in the state."""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families
from servers import ExporterProcess, RedisProcess, free_port, start_exporter, start_redis, wait_until

EXPORTER = {"job": "elasticache", "instance": "exporter:9769"}  # what Prometheus adds to the exporter's own series
CAPTURED = ("orders-001", "orders-002")  # the captured shard's nodes: the primary, then its replica
CAPTURED_GROUP = "orders"
Sample = tuple[str, tuple[tuple[str, str], ...]]
Samples = dict[Sample, float]


@dataclasses.dataclass
class State:
    samples: Samples
    rates: Samples  # a counter's increase a second while in this state (traffic, evictions)
    captured_at: float = 0.0  # the Unix time of the capture: a timestamp sample keeps its age from it


def exposition(text: str) -> tuple[Samples, set[str]]:
    """The samples of one /metrics as Prometheus stores them (honor_labels), and the names of its counters."""
    samples, counters = {}, set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not math.isfinite(sample.value) or sample.name.endswith("_created"):
                continue
            labels = {**EXPORTER, **{k: v for k, v in sample.labels.items() if v}}
            samples[(sample.name, tuple(sorted(labels.items())))] = sample.value
            if family.type == "counter":
                counters.add(sample.name)
    return samples, counters


def renamed(sample: Sample, names: dict[str, str], ports: dict[str, str] | None = None) -> Sample:
    """``sample`` with each label value that is a key of ``names`` replaced, and each port of ``ports`` in a value."""

    def value(v: str) -> str:
        if v in names:
            return names[v]
        for old, new in (ports or {}).items():
            v = v.replace(old, new)
        return v

    name, labels = sample
    return name, tuple((k, value(v)) for k, v in labels)


def node_of(sample: Sample) -> str | None:
    """The captured node a sample is about, or the shard's group; None for the exporter's own series."""
    labels = dict(sample[1])
    for key in ("instance", "target"):
        if labels.get(key) in CAPTURED:
            return labels[key]
    return CAPTURED_GROUP if labels.get("replication_group") == CAPTURED_GROUP else None


class _Traffic:
    """Commands reaching the primary between scrapes, as production traffic does (bounded in count)."""

    def __init__(self, server: RedisProcess) -> None:
        self._client = server.client()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for n in range(2_000_000):
            if self._stop.is_set():
                return
            try:
                self._client.set(f"key:{n}", b"v" * 64)
                self._client.get(f"key:{n // 2}")
            except Exception:  # the server stopped under it: the capture says which state it is in
                self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class _Shard:
    def __init__(self, workdir: Path) -> None:
        self.primary = start_redis()
        self.replica = start_redis("--replicaof", "127.0.0.1", str(self.primary.port))
        self.exporter: ExporterProcess | None = None
        self.traffic: _Traffic | None = None
        self.states: dict[str, State] = {}
        wait_until(lambda: self.replica.info().get("master_link_status") == "up", timeout=30, what="replica link")
        config = workdir / "exporter.yml"
        shard = {"replication_group": CAPTURED_GROUP, "shard": "0001"}
        targets = [{"name": name, "addr": node.addr, **shard} for name, node in zip(CAPTURED, (self.primary, self.replica), strict=True)]
        config.write_text(yaml.safe_dump({"targets": targets}))
        self.exporter = start_exporter("--config.file", str(config))
        self.traffic = _Traffic(self.primary)

    def close(self) -> None:
        if self.traffic is not None:
            self.traffic.stop()
        if self.exporter is not None:
            self.exporter.stop()
        self.replica.stop()
        self.primary.stop()

    def scrape(self) -> tuple[Samples, set[str]]:
        assert self.exporter is not None
        status, body = self.exporter.get("/metrics")
        assert status == 200
        return exposition(body)

    def capture(self, name: str, condition: Callable[[Samples], bool], *, measure: float = 0.0) -> None:
        """The first scrape in which ``condition`` holds; with ``measure``, a second one that many seconds of traffic
        later, and the counters' rates between the two."""

        def met() -> tuple[Samples, set[str]] | None:
            scraped = self.scrape()
            return scraped if condition(scraped[0]) else None

        samples, counters = wait_until(met, timeout=60, what=f"state {name}")
        rates: Samples = {}
        if measure:
            started = time.monotonic()
            time.sleep(measure)  # an interval of traffic measured, not a wait for a condition
            later, _ = self.scrape()
            elapsed = time.monotonic() - started
            rates = {s: max(0.0, (later[s] - v) / elapsed) for s, v in samples.items() if s[0] in counters and s in later}
            samples = later
        self.states[name] = State(samples, rates, time.time())

    def wait_linked(self, what: str, timeout: float = 60) -> None:
        wait_until(lambda: self.linked(self.scrape()[0]), timeout=timeout, what=what)

    @staticmethod
    def of(samples: Samples, name: str, node: str) -> float | None:
        return next((v for (n, labels), v in samples.items() if n == name and ("instance", node) in labels), None)

    def linked(self, s: Samples) -> bool:
        """Both nodes up, the replica linked and caught up (a lag caught mid-sync would be held for hours)."""
        p, r = CAPTURED
        lags = [v for (name, _), v in s.items() if name == "elasticache_replication_lag_bytes"]
        caught_up = all(lag < 100_000 for lag in lags)
        return (
            self.of(s, "redis_up", p) == 1
            and self.of(s, "redis_master_link_up", r) == 1
            and self.of(s, "redis_connected_slaves", p) == 1
            and caught_up
        )

    def memory_full(self) -> None:
        primary = self.primary.client()
        primary.config_set("maxmemory-policy", "allkeys-lru")
        primary.config_set("maxmemory", str(int(self.primary.info()["used_memory"]) + 512 * 1024))
        self.capture("memory_full", lambda s: self.linked(s) and (self.of(s, "redis_evicted_keys_total", CAPTURED[0]) or 0) > 0, measure=3.0)
        primary.config_set("maxmemory", "0")

    def link_down(self) -> int:
        p, r = CAPTURED
        dead = free_port()
        self.replica.client().execute_command("REPLICAOF", "127.0.0.1", str(dead))
        self.capture("link_down", lambda s: self.of(s, "redis_master_link_up", r) == 0 and self.of(s, "redis_connected_slaves", p) == 0)
        self.replica.client().execute_command("REPLICAOF", "127.0.0.1", str(self.primary.port))
        self.wait_linked("the link back")
        return dead

    def replica_restart(self) -> None:
        """The replica stopped, then started again into a full resync: the primary writes its snapshot slowly (about 20
        seconds in all), so the resync can be seen under way."""
        r = CAPTURED[1]
        primary = self.primary.client()
        primary.config_set("repl-diskless-sync", "no")
        primary.config_set("rdb-key-save-delay", str(max(1, 20_000_000 // max(1, primary.dbsize()))))
        self.replica.stop()
        self.capture("replica_down", lambda s: self.of(s, "redis_up", r) == 0)
        self.replica.start()
        self.capture("resyncing", lambda s: self.of(s, "redis_master_link_up", r) == 0 and self.of(s, "redis_master_sync_in_progress", r) == 1)
        primary.config_set("rdb-key-save-delay", "0")
        self.wait_linked("the resync done", timeout=90)

    def failover_and_back(self) -> None:
        p, r = CAPTURED
        self.replica.client().execute_command("REPLICAOF", "NO", "ONE")
        self.primary.client().execute_command("REPLICAOF", "127.0.0.1", str(self.replica.port))
        self.capture(
            "swapped",
            lambda s: (
                self.of(s, "redis_master_link_up", p) == 1
                and self.of(s, "redis_connected_slaves", r) == 1
                and all(v < 100_000 for (name, _), v in s.items() if name == "elasticache_replication_lag_bytes")
            ),
        )
        self.primary.client().execute_command("REPLICAOF", "NO", "ONE")
        self.replica.client().execute_command("REPLICAOF", "127.0.0.1", str(self.primary.port))
        self.wait_linked("the roles back")

    def primary_down(self) -> None:
        p, r = CAPTURED
        assert self.traffic is not None
        self.traffic.stop()
        self.primary.stop()
        self.capture("primary_down", lambda s: self.of(s, "redis_up", p) == 0 and self.of(s, "redis_master_link_up", r) == 0)


def capture_states(workdir: Path) -> dict[str, State]:
    """healthy (under traffic), memory_full (evicting), link_down, replica_down, resyncing, swapped (after a failover)
    and primary_down; each node's address is given a fixed port, as a real node's does not change."""
    shard = _Shard(workdir)
    try:
        shard.capture("healthy", shard.linked, measure=3.0)
        shard.memory_full()
        dead = shard.link_down()
        shard.replica_restart()
        shard.failover_and_back()
        ports = {str(shard.primary.port): "6379", str(shard.replica.port): "6380", str(dead): "6381"}
        shard.primary_down()
        return {
            name: State(
                {renamed(s, {}, ports): v for s, v in state.samples.items()},
                {renamed(s, {}, ports): v for s, v in state.rates.items()},
                state.captured_at,
            )
            for name, state in shard.states.items()
        }
    finally:
        shard.close()
