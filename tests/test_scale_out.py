"""Past one core: several exporter processes share one target list by ``scrape.shard``, each target scraped by
exactly one of them; the shard hash is Prometheus' own hashmod, checked against a real Prometheus."""

from __future__ import annotations

import hashlib
import json
import urllib.request

import pytest
from helpers import parse_samples
from servers import start_exporter, start_prometheus, start_redis, wait_until

from exporter.common.sharding import hashmod, parse_shard

SHARDS = 3
TARGETS = 9


def reference_hashmod(value: str, modulus: int) -> int:
    """Prometheus' relabel hashmod as its documentation states it: md5 of the value, the low 8 bytes, modulo."""
    return int.from_bytes(hashlib.md5(value.encode()).digest()[8:], "big") % modulus  # noqa: S324 - the hash Prometheus uses


def commandstat_calls(server, command: str) -> int:
    stats = server.client().info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def test_shards_scrape_every_target_exactly_once(tmp_path):
    servers = [start_redis() for _ in range(TARGETS)]
    names = [f"cache-{i:03d}" for i in range(TARGETS)]
    config = tmp_path / "targets.yml"
    config.write_text("targets:\n" + "".join(f"  - name: {name}\n    addr: {server.addr}\n" for name, server in zip(names, servers, strict=True)))
    exporters = [start_exporter("--config.file", str(config), "--scrape.shard", f"{index}/{SHARDS}") for index in range(SHARDS)]
    try:
        served: dict[str, list[int]] = {}
        for index, exporter in enumerate(exporters):
            status, body = exporter.get("/metrics")
            assert status == 200
            samples = parse_samples(body)
            assert samples[("elasticache_exporter_shard_info", (("count", str(SHARDS)), ("index", str(index))))] == 1
            for (name, labels), value in samples.items():
                if name == "redis_up":
                    assert value == 1
                    served.setdefault(dict(labels)["instance"], []).append(index)
        assert served == {name: [reference_hashmod(name, SHARDS)] for name in names}
        # and on the servers' side: one INFO each, from its one owner; no other exporter connected to scrape it
        assert [commandstat_calls(server, "info") for server in servers] == [2] * TARGETS  # the owner's INFO, then this one
    finally:
        for exporter in exporters:
            exporter.stop()
        for server in servers:
            server.stop()


def test_a_shard_of_one_serves_everything_and_bad_shards_are_refused(tmp_path):
    assert all(parse_shard("0/1").owns(f"node-{i}") for i in range(50))
    for text in ("3/3", "-1/3", "1", "a/b", "1/0", "0/2000", "1/3/5"):
        with pytest.raises(ValueError, match=r"must|count|index"):
            parse_shard(text)
    server = start_redis()
    config = tmp_path / "one.yml"
    config.write_text(f"targets:\n  - name: only\n    addr: {server.addr}\n")
    exporter = start_exporter("--config.file", str(config), "--scrape.shard", "0/1")
    try:
        assert 'redis_up{instance="only"} 1' in exporter.get("/metrics")[1]
    finally:
        exporter.stop()
        server.stop()


def test_the_shard_hash_is_prometheus_hashmod(tmp_path):
    names = [f"sessions-{i:03d}" for i in range(60)] + ["redis://master.cache.example:6379", "node-ä"]
    assert [hashmod(name, 7) for name in names] == [reference_hashmod(name, 7) for name in names]
    rules = tmp_path / "empty.rules.yml"
    rules.write_text("groups: []\n")
    scrape = {
        "job_name": "shards",
        "static_configs": [{"targets": [f"127.0.0.1:{1 + i}"], "labels": {"name": name}} for i, name in enumerate(names)],
        "relabel_configs": [{"source_labels": ["name"], "modulus": 7, "target_label": "shard", "action": "hashmod"}],
    }
    prometheus = start_prometheus(tmp_path, rules, [scrape])
    try:

        def targets() -> list[dict]:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{prometheus.port}/api/v1/targets", timeout=2) as response:
                    active = json.load(response)["data"]["activeTargets"]
            except OSError:
                return []
            return active if len(active) == len(names) else []

        active = wait_until(targets, timeout=30, what="Prometheus' targets")
        assert {t["labels"]["name"]: int(t["labels"]["shard"]) for t in active} == {name: hashmod(name, 7) for name in names}
    finally:
        prometheus.stop()
