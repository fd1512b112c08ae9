"""Per-slot load from CLUSTER SLOT-STATS: the pure parts, and real 3-primary, 3-replica clusters on Valkey 8.1 and
Redis 8.2 with a load whose keys share one hash tag (one slot hot); Redis 7.0, which has no SLOT-STATS, gets no
command and no error reply."""

from __future__ import annotations

import pytest
import redis
from helpers import parse_samples, sample
from servers import ENGINES, start_cluster
from tools import missing

from exporter.common.exposition import encode_text
from exporter.config import build_config
from exporter.redis.slot_stats import SlotStatsProfiler, parse_slot_stats, profile, with_rates
from exporter.redis.slots import key_slot
from exporter.service.collectors.slot_stats import SlotStatsCollector, add_shard_shares

HOT_TAG = "{hot}"


@pytest.mark.unit
def test_a_reply_becomes_the_top_slots_and_the_totals():
    reply = [
        [0, [b"key-count", 5, b"cpu-usec", 100, b"network-bytes-in", 10, b"network-bytes-out", 20]],
        [1, [b"key-count", 50, b"cpu-usec", 10, b"network-bytes-in", 1, b"network-bytes-out", 2]],
        [2, [b"key-count", 1, b"cpu-usec", 900, b"network-bytes-in", 90, b"network-bytes-out", 800]],
        [b"odd", []],
    ]
    stats = parse_slot_stats(reply)
    assert [stat.slot for stat in stats] == [0, 1, 2]
    one = profile(stats, "abc", 1, 100.0)
    assert [stat.slot for stat in one.top] == [1, 2]  # the top slot by CPU (2) and by keys (1)
    assert (one.slot_count, one.keys, one.cpu_usec, one.bytes_in, one.bytes_out) == (3, 56, 1010, 101, 822)
    # without cluster-slot-stats-enabled: keys only, no CPU or network totals
    keys_only = profile(parse_slot_stats([[7, [b"key-count", 3]]]), "abc", 20, 100.0)
    assert (keys_only.keys, keys_only.cpu_usec, keys_only.bytes_in) == (3, None, None)
    later = profile(
        parse_slot_stats([[0, [b"key-count", 5, b"cpu-usec", 2_100_100, b"network-bytes-in", 1010, b"network-bytes-out", 20]]]), "abc", 1, 110.0
    )
    first = profile(parse_slot_stats([[0, [b"key-count", 5, b"cpu-usec", 100, b"network-bytes-in", 10, b"network-bytes-out", 20]]]), "abc", 1, 100.0)
    rated = with_rates(first, later)
    assert rated.cpu_per_second == pytest.approx(0.21)
    assert rated.bytes_per_second == pytest.approx(100.0)
    assert with_rates(first, profile(stats, "other-node", 1, 110.0)).cpu_per_second is None  # another node: no rate


@pytest.mark.unit
def test_shares_and_skew_of_a_group():
    from exporter.common.families import FamilySet

    def shard(cpu: float, keys: int):
        return with_rates(profile([], "n", 1, 0.0), profile([], "n", 1, 1.0)).__class__(
            node_id="n", slot_count=1, keys=keys, cpu_usec=0, bytes_in=0, bytes_out=0, top=(), read_at=1.0, cpu_per_second=cpu, bytes_per_second=None
        )

    out = FamilySet()
    add_shard_shares("g", {"a": shard(0.6, 10), "b": shard(0.2, 10), "c": shard(0.2, 10)}, out)
    samples = parse_samples(encode_text(out).decode())
    assert sample(samples, "elasticache_cluster_shard_share_ratio", replication_group="g", shard="a", resource="cpu") == pytest.approx(0.6)
    assert sample(samples, "elasticache_cluster_skew_ratio", replication_group="g", resource="cpu") == pytest.approx(1.8)
    assert sample(samples, "elasticache_cluster_skew_ratio", replication_group="g", resource="keys") == pytest.approx(1.0)
    assert not [key for key in samples if ("resource", "network") in key[1]]  # no shard has a network figure: none served


def _error_counter(nodes):
    """The nodes' error replies, read on one connection each, opened now: a client's own handshake is not counted."""
    clients = [node.client(single_connection_client=True) for node in nodes]
    for client in clients:
        client.ping()
    return lambda: [client.info("stats")["total_error_replies"] for client in clients]


@pytest.mark.parametrize("engine", ["valkey-8.1", "redis-8.2"])
def test_the_hot_slot_ranks_first_and_the_skew_shows_it(engine):
    if ENGINES.get(engine) is None:
        missing(engine)  # skipped outside CI; under CI a missing engine fails
    nodes = start_cluster(engine, "--cluster-slot-stats-enabled", "yes")
    try:
        config = build_config(
            {
                "targets": [{"name": f"n{i}", "addr": node.addr, "replication_group": "rg"} for i, node in enumerate(nodes)],
                "cluster": {"slot_stats": {"enabled": True, "top": 5}},
            },
            environ={},
        )
        profiler = SlotStatsProfiler(config.slot_stats, list(config.targets), config.scrape_max_reply_bytes)
        errors = _error_counter(nodes)
        before = errors()
        profiler.visit_all()
        assert errors() == before  # nothing sent drew an error reply
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=nodes[0].port)
        for i in range(3000):  # one slot hot: every key shares the hash tag
            client.incr(f"{HOT_TAG}:counter:{i % 50}")
        for i in range(300):  # and a little everywhere else
            client.set(f"cold:{i}", "x")
        profiler.visit_all()
        samples = parse_samples(encode_text(SlotStatsCollector(profiler).build()).decode())
    finally:
        profiler.stop()
        for node in nodes:
            node.stop()
    hot_slot = str(key_slot(f"{HOT_TAG}:counter:0".encode()))
    cpu = {
        (dict(labels)["instance"], dict(labels)["slot"]): value
        for (name, labels), value in samples.items()
        if name == "redis_cluster_slot_cpu_seconds_total"
    }
    owner = next(instance for instance, slot in cpu if slot == hot_slot)
    assert max((value, slot) for (instance, slot), value in cpu.items() if instance == owner)[1] == hot_slot
    assert sample(samples, "redis_cluster_slot_keys", instance=owner, slot=hot_slot) == 50
    primaries = {dict(labels)["instance"] for (name, labels) in samples if name == "redis_cluster_node_slots"}
    assert len(primaries) == 3  # replicas are not read
    assert sum(sample(samples, "redis_cluster_node_slots", instance=name) for name in primaries) == 16384
    assert sample(samples, "elasticache_cluster_skew_ratio", replication_group="rg", resource="cpu") > 2
    assert sample(samples, "redis_cluster_node_slots_keys", instance=owner) >= 50
    shares = {
        dict(labels)["shard"]: value
        for (name, labels), value in samples.items()
        if name == "elasticache_cluster_shard_share_ratio" and ("resource", "cpu") in labels
    }
    assert len(shares) == 3
    assert sum(shares.values()) == pytest.approx(1.0)


def test_no_slot_stats_command_or_error_where_the_server_lacks_it():
    nodes = start_cluster("redis-7.0")
    try:
        config = build_config(
            {"targets": [{"name": f"n{i}", "addr": node.addr} for i, node in enumerate(nodes)], "cluster": {"slot_stats": {"enabled": True}}},
            environ={},
        )
        profiler = SlotStatsProfiler(config.slot_stats, list(config.targets), config.scrape_max_reply_bytes)
        errors = _error_counter(nodes)
        before = errors()
        profiler.visit_all()
        profiler.visit_all()
        after = errors()
        commands = [node.client().info("commandstats") for node in nodes]
        samples = parse_samples(encode_text(SlotStatsCollector(profiler).build()).decode())
    finally:
        profiler.stop()
        for node in nodes:
            node.stop()
    assert after == before
    assert not any("cmdstat_cluster|slot-stats" in stats for stats in commands)
    assert not [key for key in samples if key[0].startswith(("redis_cluster_slot", "redis_cluster_node_slots", "elasticache_cluster_"))]


@pytest.mark.unit
def test_the_plan_moves_the_hot_shards_heaviest_slots_and_names_a_dominant_one():
    from exporter.redis.cluster_plan import Shard, even_split_skew, plan

    shards = [Shard("a", "10.0.0.1:6379", tuple(range(0, 5461))), Shard("b", "10.0.0.2:6379", tuple(range(5461, 10923))),
              Shard("c", "10.0.0.3:6379", tuple(range(10923, 16384)))]  # fmt: skip
    loads = {slot: 1.0 for slot in range(16384)}
    for slot in range(0, 600):  # shard a's first 600 slots are ten times as busy
        loads[slot] = 10.0
    result = plan(shards, loads, "cpu", 1.2)
    assert result.skew_before > 1.2
    assert result.skew_after <= 1.2
    assert result.moves
    assert all(move.source == "a" for move in result.moves)  # the hot shard's load moves first, and only its
    assert all(loads[slot] == 10.0 for move in result.moves for slot in range(move.first, move.last + 1))  # heaviest first
    assert result.dominant == ()
    # one slot with most of its shard's load: named, never moved
    hot = {**{slot: 1.0 for slot in range(16384)}, 42: 20_000.0}
    pinned = plan(shards, hot, "cpu", 1.2)
    assert [slot for slot, _, _ in pinned.dominant] == [42]
    assert all(not move.first <= 42 <= move.last for move in pinned.moves)
    # ElastiCache's even spread: more shards help where the load is spread, not where one slot holds it
    assert even_split_skew(loads, 3) == pytest.approx(result.rebalance_skew)
    assert result.more_shards == 2  # five shards of 3,276 slots: the busiest holds 8,676 of today's mean 7,261 (under 1.2)
    assert result.more_shards_peak <= 1.2
    assert pinned.more_shards is None


def test_cluster_plan_on_a_real_cluster(tmp_path, capsys):
    """Keys piled into one shard's slots: the plan moves that shard's slots first and brings the skew (by keys) under
    the limit; the commands it prints carry the moves out."""
    import json

    from exporter.cli.main import main
    from exporter.redis.slots import owned_slots

    engine = "valkey-8.1"
    if ENGINES.get(engine) is None:
        missing(engine)  # skipped outside CI; under CI a missing engine fails
    nodes = start_cluster(engine, "--cluster-slot-stats-enabled", "yes")
    try:
        primary = next(node for node in nodes if node.info()["role"] == "master")
        mine = owned_slots(primary.client().execute_command("CLUSTER", "NODES").decode())
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=primary.port)
        piled = [key for key in (f"k:{i}" for i in range(20000)) if key_slot(key.encode()) in mine][:3000]
        for key in piled:
            client.set(key, "x")
        for i in range(300):
            client.set(f"spread:{i}", "x")
        out = tmp_path / "plan.json"
        args = ["cluster", "plan", "--target", primary.addr, "--resource", "keys", "--format", "json", "--out", str(out)]
        assert main(args) == 0
        result = json.loads(out.read_text())
        assert main(["cluster", "plan", "--target", primary.addr, "--resource", "keys"]) == 0
        text = capsys.readouterr().out
    finally:
        for node in nodes:
            node.stop()
    assert result["skew_before"] > 2
    assert result["skew_after_moves"] <= 1.2
    assert {move["from_address"] for move in result["moves"]} == {f"127.0.0.1:{primary.port}"}
    assert 'CLUSTER SETSLOT "$slot" IMPORTING' in text
    assert "move(s) bring the skew to" in text
