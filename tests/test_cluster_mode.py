"""A real 3-master cluster-mode set with replicas, on each engine: scrapes and the heartbeat writer add no error replies."""

from __future__ import annotations

import time

import pytest
import redis
from helpers import call, make_app, sample
from servers import ENGINES, start_cluster, wait_until

from exporter.redis.heartbeat import ELASTICACHE_KEY
from exporter.redis.slots import key_slot, owned_slots

EXPORTER_KEY = "elasticache-exporter:heartbeat"


def _error_counts(client: redis.Redis) -> dict[str, int]:
    stats = {k: v for k, v in client.info("errorstats").items()}
    stats["total_error_replies"] = client.info("stats")["total_error_replies"]
    return {key: value["count"] if isinstance(value, dict) else value for key, value in stats.items()}


@pytest.fixture(scope="module", params=sorted(ENGINES))
def cluster(request):
    nodes = start_cluster(request.param, node_timeout_ms=2000)
    try:
        for node in nodes:
            if node.info().get("role") == "slave":
                wait_until(lambda node=node: node.info().get("master_link_status") == "up", timeout=30, what="replica link")
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def test_owned_slots_match_the_cluster(cluster):
    covered: set[int] = set()
    for node in cluster:
        slots = owned_slots(node.client().execute_command("CLUSTER", "NODES").decode())
        assert slots
        if node.info()["role"] == "master":
            assert not covered & slots
            covered |= slots
    assert covered == set(range(16384))


def test_scrapes_and_heartbeats_add_no_error_replies(cluster):
    writer = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster[0].port)
    writer.set(ELASTICACHE_KEY, time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()))
    wait_until(lambda: all(node.info().get("master_link_status", "up") == "up" for node in cluster), what="links")
    # one connection per node, opened now: redis-py's own hello (CLIENT SETINFO, an error before Redis 7.2) is not counted
    clients = {node.port: node.client(single_connection_client=True) for node in cluster}
    before = {port: _error_counts(client) for port, client in clients.items()}
    exporter_slot = key_slot(EXPORTER_KEY.encode())
    master = next(
        i
        for i, node in enumerate(cluster)
        if node.info()["role"] == "master" and exporter_slot in owned_slots(node.client().execute_command("CLUSTER", "NODES").decode())
    )
    before = {port: _error_counts(client) for port, client in clients.items()}
    targets = [{"name": f"n{i}", "addr": node.addr} for i, node in enumerate(cluster)]
    app = make_app({"targets": targets, "heartbeat": {"write": True, "interval": "200ms", "ttl": "60s"}})
    try:
        for _ in range(15):
            samples = call(app, "/metrics").samples()
            time.sleep(0.05)
        for i in range(len(cluster)):
            assert sample(samples, "redis_up", instance=f"n{i}") == 1
        wait_until(lambda: clients[cluster[master].port].get(EXPORTER_KEY) is not None, what="the exporter's heartbeat written")
        samples = call(app, "/metrics").samples()
    finally:
        app.close()
    after = {port: _error_counts(client) for port, client in clients.items()}
    assert after == before, "scrapes or heartbeat writes drew error replies"

    # the heartbeats are read (and written) only where their slot lives: the owning shard reports lag
    slot = key_slot(ELASTICACHE_KEY.encode())
    owners = [i for i, node in enumerate(cluster) if slot in owned_slots(node.client().execute_command("CLUSTER", "NODES").decode())]
    replica = next(i for i in owners if cluster[i].info()["role"] == "slave")
    assert sample(samples, "elasticache_replication_heartbeat_lag_seconds", instance=f"n{replica}", source="elasticache") >= 0
    lag_targets = {labels for (name, labels) in samples if name == "elasticache_replication_heartbeat_lag_seconds"}
    assert all(dict(labels)["instance"] in {f"n{i}" for i in range(6)} for labels in lag_targets)
    assert sample(samples, "elasticache_exporter_heartbeat_writes_total", instance=f"n{master}") > 0
    assert not [key for key in samples if key[0] == "elasticache_exporter_heartbeat_write_errors_total"]


def test_watched_keys_are_reported_once_by_the_primary_that_owns_them(cluster):
    writer = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster[0].port)
    names = [f"job:{i}" for i in range(300)]
    for name in names:
        writer.set(name, "1")
    for queue in ("queue:a", "queue:b", "queue:c", "queue:d"):
        writer.rpush(queue, "x", "y", "z")
    writer.xadd("events", {"f": "v"})
    writer.xgroup_create("events", "workers", id="0")
    wait_until(lambda: all(node.info().get("master_link_status", "up") == "up" for node in cluster), what="links")

    def caught_up() -> bool:
        sizes = {role: sum(node.client().dbsize() for node in cluster if node.info()["role"] == role) for role in ("master", "slave")}
        return sizes["master"] == sizes["slave"] >= 305

    wait_until(caught_up, what="replicas caught up")
    clients = {node.port: node.client(single_connection_client=True) for node in cluster}
    before = {port: _error_counts(client) for port, client in clients.items()}
    keys = {"check_single_keys": "queue:a,queue:b,queue:c,queue:d", "count_keys": "job:*", "check_keys": "queue:*", "check_single_streams": "events"}
    app = make_app({"targets": [{"name": f"n{i}", "addr": node.addr} for i, node in enumerate(cluster)], "keys": keys})
    try:
        for _ in range(3):
            samples = call(app, "/metrics").samples()
    finally:
        app.close()
    assert {port: _error_counts(client) for port, client in clients.items()} == before, "key probes drew error replies"
    masters = {f"n{i}" for i, node in enumerate(cluster) if node.info()["role"] == "master"}
    sizes = [(dict(labels)["instance"], dict(labels)["key"], value) for (name, labels), value in samples.items() if name == "redis_key_size"]
    assert sorted(key for _, key, _ in sizes) == ["queue:a", "queue:b", "queue:c", "queue:d"]  # once each, from single and pattern alike
    for instance, key, value in sizes:
        assert value == 3
        owner = next(
            f"n{i}"
            for i, node in enumerate(cluster)
            if node.info()["role"] == "master" and key_slot(key.encode()) in owned_slots(node.client().execute_command("CLUSTER", "NODES").decode())
        )
        assert instance == owner
    counts = {dict(labels)["instance"]: value for (name, labels), value in samples.items() if name == "redis_keys_count"}
    assert set(counts) == masters
    assert sum(counts.values()) == 300  # every key counted once, by its shard's primary
    streams = [dict(labels)["instance"] for (name, labels), value in samples.items() if name == "redis_stream_length"]
    assert len(streams) == 1
    assert streams[0] in masters


def test_the_keyspace_profile_counts_each_key_once(cluster):
    """Sampled on every node of 3 masters and 3 replicas: only the primaries are profiled, and their estimates add up to
    the cluster's keys."""
    writer = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster[0].port)
    pipe = writer.pipeline()
    for i in range(30_000):
        pipe.set(f"profile:item:{i}", "v" * 50)
    pipe.execute()
    wait_until(lambda: sum(node.client().dbsize() for node in cluster) >= 60_000, timeout=30, what="replicas in sync")
    clients = [node.client(single_connection_client=True) for node in cluster]  # each connection's own SETINFO errors come first
    before = [client.info("stats")["total_error_replies"] for client in clients]
    targets = [{"name": f"n{i}", "addr": node.addr} for i, node in enumerate(cluster)]
    app = make_app({"targets": targets, "keyspace": {"enabled": True, "sample": 3000}})
    try:
        app.keyspace_profiler.visit_all()
        samples = call(app, "/metrics").samples()
    finally:
        app.close()
    profiled = {
        dict(labels)["instance"]: value
        for (name, labels), value in samples.items()
        if name == "elasticache_keyspace_prefix_keys" and dict(labels)["prefix"] == "profile:item"
    }
    primaries = {f"n{i}" for i, client in enumerate(clients) if client.info("replication")["role"] == "master"}
    assert set(profiled) == primaries
    assert sum(profiled.values()) == pytest.approx(30_000, rel=0.05)  # each primary's sample is most of its ~10,000 keys
    assert [client.info("stats")["total_error_replies"] for client in clients] == before


def _shards(app) -> dict[str, tuple[str, str, str]]:
    samples = call(app, "/metrics").samples()
    found = [dict(labels) for metric, labels in samples if metric == "elasticache_shard_member_info"]
    return {labels["instance"]: (labels["shard"], labels["shard_source"], labels["role"]) for labels in found}


def test_a_shard_in_a_named_group_is_named_by_its_slots_and_without_one_by_its_primary(cluster):
    """Listed node by node: in a named replication group a shard is its slot ranges (a failover keeps them, as the
    discovery tests show); without a group, slot ranges would be the same in every cluster, so its primary's node id."""
    ids = {node.port: node.client().execute_command("CLUSTER", "MYID").decode() for node in cluster}
    expected_slots, expected_ids = {}, {}
    for i, node in enumerate(cluster):
        view = node.client().execute_command("CLUSTER", "NODES").decode()
        primary = node.port if node.info()["role"] == "master" else node.info()["master_port"]
        served = sorted(owned_slots(view))
        expected_slots[f"n{i}"] = f"{served[0]}-{served[-1]}"
        expected_ids[f"n{i}"] = ids[primary]
    for grouped, expected in ((True, expected_slots), (False, expected_ids)):
        group = {"replication_group": "orders"} if grouped else {}
        app = make_app({"targets": [{"name": f"n{i}", "addr": node.addr, **group} for i, node in enumerate(cluster)]})
        try:
            wait_until(lambda app=app: len(_shards(app)) == len(cluster), what="every node in its shard")
            shards = _shards(app)
            assert {name: shard for name, (shard, _, _) in shards.items()} == expected
            # slot ranges are unique within the group only, a node id anywhere: the inhibitions match them so
            assert {source for _, source, _ in shards.values()} == {"slots" if grouped else "cluster"}
            assert sorted(role for _, _, role in shards.values()) == ["master"] * 3 + ["slave"] * 3
        finally:
            app.close()
