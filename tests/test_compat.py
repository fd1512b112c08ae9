"""docs/metrics.md, generated from the code, against two references: what the exporter serves from real servers
(a primary with keys, a slow log and a latency event, its replica, a cluster-mode node, an ElastiCache-like node,
each with a node type), and the families a real redis_exporter serves by default (tests/data/redis_exporter_families.tsv,
recorded by bench/redis_exporter_families.py: names, types and label names)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from helpers import call, exact_samples, exposition_types, make_app
from servers import WATCHED_KEYS, seed_reference_primary, seed_watched_keys, start_redis, wait_until

from exporter.redis.compat import OTHER_SERVER_FAMILIES, OTHER_SERVERS, OURS_ONLY, UPSTREAM_DIFFERENCES
from exporter.service.metrics_doc import all_docs, label_names, relation

UPSTREAM = Path(__file__).parent / "data" / "redis_exporter_families.tsv"
UPSTREAM_KEYS = Path(__file__).parent / "data" / "redis_exporter_key_families.tsv"  # with its key and stream flags
NOT_NAMES = {"instance", "quantile", "le"}  # labels Prometheus or the family type adds


VALKEY_ONLY_LABELS = {"valkey_version", "valkey_release_stage"}


def upstream_families() -> dict[str, tuple[str, set[str]]]:
    families = {}
    for line in [*UPSTREAM.read_text().splitlines(), *UPSTREAM_KEYS.read_text().splitlines()]:
        if line and not line.startswith("#"):
            name, kind, labels = line.split("\t")
            families[name] = (kind, set(filter(None, labels.split(","))))
    for recorded in UPSTREAM.parent.glob("upstream_values/client_list_*.prom"):  # --export-client-list (test_compat_client_list.py)
        text = recorded.read_text()
        for name, kind in exposition_types(text).items():
            labels = families.get(name, (kind, set()))[1]
            families[name] = (kind, labels | {key for (sample, pairs) in exact_samples(text) if sample == name for key, _ in pairs})
    return families


def documented(name: str):
    """The doc row of a served family name, placeholders (redis_db_<field>, aws_elasticache_<metric>_<statistic>) included."""
    for doc in all_docs():
        pattern = "^" + re.sub(r"<[a-z]+>", ".+", re.escape(doc.name).replace(r"\<", "<").replace(r"\>", ">")) + "$"
        if doc.name == name or ("<" in doc.name and re.match(pattern, name)):
            return doc
    return None


@pytest.fixture(scope="module")
def served():
    """{family: (TYPE, label names, HELP)} served by /metrics for the reference servers, after two scrapes."""
    primary = start_redis()
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    cluster_node = start_redis("--cluster-enabled", "yes")
    renames = [arg for command in ("CONFIG", "LATENCY", "SLOWLOG") for arg in ("--rename-command", command, "")]
    elasticache_like = start_redis(*renames)
    servers = [primary, replica, cluster_node, elasticache_like]
    try:
        subprocess.run(
            ["redis-cli", "-p", str(cluster_node.port), "CLUSTER", "ADDSLOTSRANGE", "0", "16383"], check=True, capture_output=True, timeout=30
        )
        seed_reference_primary(primary.client())
        seed_watched_keys(primary.client())
        wait_until(lambda: replica.info().get("master_link_status") == "up", what="replica link up")
        targets = [{"name": f"n{i}", "addr": server.addr, "node_type": "cache.r6g.large"} for i, server in enumerate(servers)]
        app = make_app({"targets": targets, "heartbeat": {"read": True}, "keys": WATCHED_KEYS})
        try:
            call(app, "/metrics")
            text = call(app, "/metrics").text
        finally:
            app.close()
    finally:
        for server in servers:
            server.stop()
    types = exposition_types(text)
    helps = {line.split()[2]: line.split(" ", 3)[3] for line in text.splitlines() if line.startswith("# HELP ")}
    labels: dict[str, set[str]] = {name: set() for name in types}
    for (name, pairs), _ in exact_samples(text).items():
        family = name if name in types else re.sub(r"_(bucket|sum|count)$", "", name)
        labels[family].update(key for key, _ in pairs)
    return {name: (kind, labels[name] - NOT_NAMES, helps.get(name, "")) for name, kind in types.items()}


def test_every_served_family_is_documented_with_its_type_and_labels(served):
    assert len(served) > 200
    for name, (kind, labels, help_text) in served.items():
        if help_text.endswith("exported as found."):  # an INFO field the table does not know: the documented generic rule
            assert kind == "gauge"
            assert labels == set()
            continue
        doc = documented(name)
        assert doc is not None, f"{name} is served but not in docs/metrics.md"
        assert doc.type == kind, f"{name}: served as {kind}, documented as {doc.type}"
        assert labels <= label_names(doc), f"{name}: served with {sorted(labels)}, documented with {sorted(label_names(doc))}"


@pytest.mark.unit
def test_the_relation_column_agrees_with_redis_exporters_families():
    upstream = upstream_families()
    assert len(upstream) > 150
    for doc in all_docs():
        if "<" in doc.name:
            continue
        if relation(doc.name) == "same":
            assert doc.name in upstream, f"{doc.name} is documented as redis_exporter's, which does not serve it"
            kind, labels = upstream[doc.name]
            assert doc.type == kind, f"{doc.name}: {doc.type} here, {kind} in redis_exporter"
            assert labels <= label_names(doc), f"{doc.name}: redis_exporter's labels {sorted(labels)}"
        else:
            assert doc.name not in upstream, f"{doc.name} is documented as ours only, but redis_exporter serves it"
    assert {doc.name for doc in all_docs()} >= OURS_ONLY, "OURS_ONLY names a family nothing serves"


@pytest.mark.unit
def test_every_redis_exporter_family_is_served_alike_or_listed_with_its_rewrite(served):
    for name, (kind, labels) in upstream_families().items():
        if name in UPSTREAM_DIFFERENCES:
            assert name not in served
            continue
        if name.startswith(OTHER_SERVERS) or name in OTHER_SERVER_FAMILIES:
            continue
        doc = documented(name)
        assert doc is not None, f"redis_exporter's {name} is neither served here nor listed in UPSTREAM_DIFFERENCES"
        assert doc.type == kind, f"{name}: {doc.type} here, {kind} in redis_exporter"
        if name in served:  # what these servers show: served exactly alike, with this exporter's target on top
            assert served[name][0] == kind
            # redis_exporter's labels found on any engine; those of Valkey alone are checked on Valkey (test_engines.py)
            everywhere = labels - VALKEY_ONLY_LABELS
            assert everywhere <= served[name][1], f"{name}: served with {sorted(served[name][1])}, redis_exporter's {sorted(everywhere)}"
