"""A cluster found from one endpoint (``discover: cluster``): every node a target with its shard and role, on /metrics
and /discovery, following a failover; tested on real 3-primary, 3-replica clusters."""

from __future__ import annotations

import json
import re
import time

import pytest
from helpers import call, make_app, sample
from servers import ENGINES, fail_over, start_cluster, wait_until
from tools import missing

from exporter.redis.cluster_members import parse_cluster_nodes, parse_cluster_shards
from exporter.redis.slots import named_by_slots, shard_name
from exporter.service.cluster_discovery import EARLIEST as EARLIEST_READ

NODES_TEXT = """\
aaa 10.0.0.1:6379@16379 myself,master - 0 0 1 connected 0-5460
bbb 10.0.0.2:6379@16379 slave aaa 0 0 1 connected
ccc 10.0.0.3:6379@16379 master - 0 0 2 connected 5461-16383
ddd 10.0.0.4:6379@16379 slave,fail ccc 0 0 2 connected
"""


@pytest.mark.unit
def test_a_shard_is_named_by_its_slot_ranges():
    assert shard_name(frozenset(range(5461)), "aaa") == "0-5460"
    assert shard_name(frozenset({1, 2, 3, 7, 9, 10}), "aaa") == "1-3,7,9-10"
    assert shard_name(frozenset({1, 3, 5, 7, 9}), "aaa") == "1,+4"  # past three ranges: the first and how many more
    assert shard_name(frozenset(), "aaa") == "aaa"
    # told apart from a node id (40 hex digits, even all decimal ones): slot ranges are unique within a cluster only
    assert all(named_by_slots(name) for name in ("0-5460", "1-3,7,9-10", "1,+4", "16383"))
    assert not any(named_by_slots(name) for name in ("7c2f" * 10, "1234567890" * 4, "aaa", ""))


@pytest.mark.unit
def test_members_from_cluster_nodes_and_cluster_shards():
    members = parse_cluster_nodes(NODES_TEXT)
    assert [(m.name, m.role, m.shard, m.answering) for m in members] == [
        ("10.0.0.1:6379", "primary", "0-5460", True),
        ("10.0.0.2:6379", "replica", "0-5460", True),
        ("10.0.0.3:6379", "primary", "5461-16383", True),
        ("10.0.0.4:6379", "replica", "5461-16383", False),
    ]  # the failed replica is still a member of its shard, not answering; a shard is named by its slots
    shards = [
        [b"slots", [0, 5460], b"nodes", [
            [b"id", b"aaa", b"port", 6379, b"ip", b"10.0.0.1", b"endpoint", b"n1.example", b"role", b"master", b"health", b"online"],
            [b"id", b"bbb", b"port", 6379, b"tls-port", 6380, b"ip", b"10.0.0.2", b"endpoint", b"n2.example", b"role", b"replica",
             b"health", b"online"],
            [b"id", b"zzz", b"port", 6379, b"ip", b"10.0.0.9", b"endpoint", b"n9.example", b"role", b"replica", b"health", b"loading"],
        ]],
    ]  # fmt: skip
    assert [(m.name, m.role, m.shard, m.answering) for m in parse_cluster_shards(shards, tls=False)] == [
        ("n1.example:6379", "primary", "0-5460", True),
        ("n2.example:6379", "replica", "0-5460", True),
        ("n9.example:6379", "replica", "0-5460", False),
    ]
    # after a failover the failed old primary is still listed as a master: the shard keeps its name, its slots
    failed_over = [
        [b"slots", [0, 5460], b"nodes", [
            [b"id", b"aaa", b"port", 6379, b"ip", b"10.0.0.1", b"role", b"master", b"health", b"fail"],
            [b"id", b"bbb", b"port", 6379, b"ip", b"10.0.0.2", b"role", b"master", b"health", b"online"],
        ]],
    ]  # fmt: skip
    assert [(m.name, m.shard, m.answering) for m in parse_cluster_shards(failed_over, tls=False)] == [
        ("10.0.0.1:6379", "0-5460", False),
        ("10.0.0.2:6379", "0-5460", True),
    ]
    slotless = [[b"slots", [], b"nodes", [[b"id", b"eee", b"port", 6379, b"ip", b"10.0.0.5", b"role", b"master", b"health", b"online"]]]]
    assert [m.shard for m in parse_cluster_shards(slotless, tls=False)] == ["eee"]  # no slots yet: its primary's node id
    assert parse_cluster_shards(shards, tls=True)[1].port == 6380  # the TLS port where the seed speaks TLS


def _discovered(app) -> dict[str, dict[str, str]]:
    return {group["labels"]["__meta_elasticache_node"]: group["labels"] for group in json.loads(call(app, "/discovery").text)}


@pytest.mark.parametrize("engine", ["valkey-8.1", "redis-8.2"])
def test_one_endpoint_finds_every_node_and_follows_a_failover(engine):
    if ENGINES.get(engine) is None:
        missing(engine)  # skipped outside CI; under CI a missing engine fails
    nodes = start_cluster(engine, node_timeout_ms=3000)
    app = make_app({"targets": [{"name": "orders", "addr": nodes[0].addr, "discover": "cluster"}], "cluster": {"refresh": "5s"}})
    try:
        names = {f"127.0.0.1:{node.port}" for node in nodes}

        def roles() -> list[str]:
            return sorted(labels["__meta_elasticache_role"] for labels in _discovered(app).values())

        wait_until(lambda: set(_discovered(app)) == names, timeout=30, what="six nodes found")
        # just after the cluster is made, a replica may still stand alone as a primary: read again until it settles
        wait_until(lambda: roles() == ["primary"] * 3 + ["replica"] * 3, timeout=30, interval=1.0, what="three primaries, three replicas")
        found = _discovered(app)
        assert {labels["__meta_elasticache_replication_group"] for labels in found.values()} == {"orders"}
        samples = call(app, "/metrics").samples()
        assert all(sample(samples, "redis_up", instance=name) == 1 for name in names)
        assert "orders" not in {dict(labels).get("instance") for _, labels in samples}  # the endpoint itself is no target
        replica = next(node for node in nodes if node.info()["role"] == "slave")
        replica_name = f"127.0.0.1:{replica.port}"
        shard = found[replica_name]["__meta_elasticache_shard"]
        assert re.fullmatch(r"\d+-\d+", shard)  # its slot range, the same on the replica as on its primary
        fail_over(replica)

        def new_primary_found() -> bool:
            return _discovered(app)[replica_name]["__meta_elasticache_role"] == "primary"

        wait_until(new_primary_found, timeout=60, interval=1.0, what="the new primary found")
        assert _discovered(app)[replica_name]["__meta_elasticache_shard"] == shard  # a failover keeps the shard's name
        samples = call(app, "/metrics").samples()
        member = [labels for name, labels in samples if name == "elasticache_shard_member_info" and ("instance", replica_name) in labels]
        assert dict(member[0])["role"] == "master"
        assert dict(member[0])["shard"] == shard
    finally:
        app.close()
        for node in nodes:
            node.stop()


def test_discovery_tells_the_roles_the_last_scrape_saw_not_the_last_refresh():
    """The cluster's nodes are read again every 10 minutes only: after a failover, and after a primary is killed, the
    next /metrics serves the new roles, and /discovery tells the same at once (a down node with no role, as /metrics)."""
    engine = "redis-8.2"
    if ENGINES.get(engine) is None:
        missing(engine)
    nodes = start_cluster(engine, node_timeout_ms=3000)
    app = make_app({"targets": [{"name": "orders", "addr": nodes[0].addr, "discover": "cluster"}], "cluster": {"refresh": "10m"}})
    try:
        names = {f"127.0.0.1:{node.port}": node for node in nodes}
        wait_until(lambda: set(_discovered(app)) == set(names), timeout=30, what="six nodes found")

        def same_roles() -> bool:
            samples = call(app, "/metrics").samples()
            scraped = {dict(labels)["instance"]: dict(labels)["role"] for name, labels in samples if name == "redis_instance_info"}
            down = {name for name in names if sample(samples, "redis_up", instance=name) == 0}
            told = {name: labels["__meta_elasticache_role"] for name, labels in _discovered(app).items()}
            wanted = {name: "" if name in down else {"master": "primary", "slave": "replica"}[scraped[name]] for name in names}
            return told == wanted

        wait_until(lambda: same_roles() and sorted(n.info()["role"] for n in nodes) == ["master"] * 3 + ["slave"] * 3, timeout=30)
        replica = next(node for node in nodes if node.info()["role"] == "slave")
        fail_over(replica)
        wait_until(lambda: replica.info()["role"] == "master", timeout=30, what="the failover")
        assert same_roles()
        assert _discovered(app)[f"127.0.0.1:{replica.port}"]["__meta_elasticache_role"] == "primary"
        killed = next(node for node in nodes if node is not replica and node.info()["role"] == "master")
        killed.stop()
        assert same_roles()
        assert _discovered(app)[f"127.0.0.1:{killed.port}"]["__meta_elasticache_role"] == ""
    finally:
        app.close()
        for node in nodes:
            node.stop()


@pytest.mark.unit
def test_a_node_that_leaves_is_dropped_with_its_connection_and_the_flag_sets_discovery():
    from exporter.cli.config_flags import load_config
    from exporter.cli.main import build_parser
    from exporter.redis.cluster_members import Member
    from exporter.service.targets import TargetSet

    config = load_config(build_parser().parse_args(["serve", "--redis.addr", "redis://10.0.0.1:6379", "--redis.discover", "cluster"]), {})
    assert config.targets[0].discover == "cluster"
    targets = TargetSet(config)
    assert targets.on_metrics() == []  # the endpoint stands for its nodes, none known yet
    seed = targets.cluster_seeds[0]
    first = [Member("aaa", "10.0.0.1", 6379, "primary", "aaa"), Member("bbb", "10.0.0.2", 6379, "replica", "aaa")]
    targets.set_cluster_members(seed, first)
    kept = {target.name: target for target in targets.on_metrics()}
    assert set(kept) == {"10.0.0.1:6379", "10.0.0.2:6379"}
    assert {(t.replication_group, t.shard) for t in kept.values()} == {("10.0.0.1:6379", "aaa")}  # the seed's name as its group
    targets.set_cluster_members(seed, first[:1])
    assert [target.name for target in targets.on_metrics()] == ["10.0.0.1:6379"]
    assert kept["10.0.0.2:6379"].node._closed  # dropped with its connection
    assert targets.resolve("10.0.0.1:6379") is kept["10.0.0.1:6379"]


def test_a_stopped_node_stays_down_in_its_shard_until_the_cluster_forgets_it():
    """A node that stops is still a member of its cluster: it is scraped (redis_up 0) in the shard it had, through the
    failover its stop causes, so RedisDown fires for it with one label set; it leaves when the cluster forgets it."""
    engine = "valkey-8.1"
    if ENGINES.get(engine) is None:
        missing(engine)  # skipped outside CI; under CI a missing engine fails
    nodes = start_cluster(engine, node_timeout_ms=2000)
    # refreshed once an hour: only a failed scrape, or a cluster in flux, brings the next look sooner
    app = make_app({"targets": [{"name": "orders", "addr": nodes[0].addr, "discover": "cluster"}], "cluster": {"refresh": "1h"}})
    try:
        wait_until(lambda: len(_discovered(app)) == 6, timeout=30, what="six nodes found")
        gone = next(node for node in nodes[1:] if node.info()["role"] == "master")
        gone_id = gone.client().execute_command("CLUSTER", "MYID").decode()
        name = f"127.0.0.1:{gone.port}"

        def membership(of: str = name) -> dict[str, str]:
            samples = call(app, "/metrics").samples()
            found = [dict(labels) for metric, labels in samples if metric == "elasticache_shard_member_info" and ("instance", of) in labels]
            return found[0] if found else {}

        shard = membership()["shard"]
        assert re.fullmatch(r"\d+-\d+", shard)  # its slot range
        assert {k: membership()[k] for k in ("shard", "shard_source", "role")} == {"shard": shard, "shard_source": "slots", "role": "master"}
        replica = next(node for node in nodes if node.info().get("master_port") == gone.port)
        gone.stop()
        survivors = [node for node in nodes if node is not gone]

        wait_until(
            lambda: b"master,fail " in replica.client().execute_command("CLUSTER", "NODES"), timeout=30, interval=0.5, what="the primary held failed"
        )
        replica.client().execute_command("CLUSTER", "FAILOVER", "FORCE")  # its replica takes the shard over

        def failed_over() -> bool:
            ok = all(b"cluster_state:ok" in node.client().execute_command("CLUSTER", "INFO") for node in survivors)
            return ok and replica.info()["role"] == "master"

        wait_until(failed_over, timeout=60, interval=1.0, what="the cluster failed over and is ok")
        for _ in range(3):  # the cluster read again after the failed scrapes and the failover: the node is still there
            call(app, "/metrics")
            assert name in _discovered(app)
            assert sample(call(app, "/metrics").samples(), "redis_up", instance=name) == 0
            assert {k: membership()[k] for k in ("shard", "shard_source", "role")} == {"shard": shard, "shard_source": "slots", "role": ""}
            promoted = membership(f"127.0.0.1:{replica.port}")
            assert (promoted["shard"], promoted["role"]) == (shard, "master")  # the shard kept its name through the failover
            time.sleep(EARLIEST_READ)  # the cluster is read at most every 5 s: a read happens between two looks
        for node in survivors:
            node.client().execute_command("CLUSTER", "FORGET", gone_id)

        def left() -> bool:
            call(app, "/metrics")
            return name not in _discovered(app)

        wait_until(left, timeout=60, interval=1.0, what="the forgotten node dropped")
        assert len(_discovered(app)) == 5
        assert membership() == {}
    finally:
        app.close()
        for node in nodes:
            node.stop()
