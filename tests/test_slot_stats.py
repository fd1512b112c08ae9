"""Per-slot load from CLUSTER SLOT-STATS: the pure parts, and real 3-primary, 3-replica clusters on Valkey 8.1 and
Redis 8.2 with a load whose keys share one hash tag (one slot hot); Redis 7.0, which has no SLOT-STATS, gets no
command and no error reply."""

from __future__ import annotations

import itertools
import threading

import pytest
import redis
from helpers import call, make_app, parse_samples, sample
from servers import ENGINES, fail_over, start_cluster, wait_until
from tools import missing

from exporter.common.exposition import encode_text
from exporter.config import build_config
from exporter.redis.slot_stats import (
    TOP_MAX,
    SlotProfile,
    SlotStat,
    SlotStatsConfig,
    SlotStatsProfiler,
    parse_slot_stats,
    profile,
    with_rates,
)
from exporter.redis.slots import key_slot, shard_name
from exporter.service.collectors.slot_stats import SlotStatsCollector, add_shard_shares

HOT_TAG = "{hot}"


def _read(node_id: str, at: float, **slots: tuple[int, int, int]) -> SlotProfile:
    """A read of a node whose slots (``s<number>=(cpu_usec, bytes_in, bytes_out)``) hold one key each."""
    return profile([SlotStat(int(slot[1:]), 1, *values) for slot, values in slots.items()], node_id, 20, at)


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
    # the exporter's counted totals start at zero at its first read of a node; no rate yet
    assert (one.slot_count, one.keys, one.cpu_usec, one.bytes_in, one.bytes_out, one.cpu_per_second) == (3, 56, 0, 0, 0, None)
    # without cluster-slot-stats-enabled: keys only, no CPU or network totals
    keys_only = profile(parse_slot_stats([[7, [b"key-count", 3]]]), "abc", 20, 100.0)
    assert (keys_only.keys, keys_only.cpu_usec, keys_only.bytes_in) == (3, None, None)
    assert with_rates(_read("abc", 100.0, s7=(5, 5, 5)), keys_only).cpu_usec is None
    first = _read("abc", 100.0, s0=(100, 10, 20))
    rated = with_rates(first, _read("abc", 110.0, s0=(2_100_100, 1010, 20)))
    assert rated.cpu_per_second == pytest.approx(0.21)
    assert rated.bytes_per_second == pytest.approx(100.0)
    assert (rated.cpu_usec, rated.bytes_in, rated.bytes_out) == (2_100_000, 1000, 0)
    assert with_rates(first, _read("other-node", 110.0, s0=(2_100_100, 1010, 20))).cpu_per_second is None  # another node


@pytest.mark.unit
def test_a_slot_moving_away_never_makes_the_node_counters_fall_and_the_rates_count_each_slot_once():
    """Valkey's own sum over a node's slots falls when a slot with load moves away (measured: 0.65 s to 0.006 s), and a
    slot's stats start afresh on the node that gains it: the exporter counts each slot's increase instead."""
    source = _read("src", 0.0, s1=(650_000, 1000, 2000), s2=(5_000, 10, 20))
    target = _read("dst", 0.0, s3=(1_000, 1, 2))
    # 10 s later slot 1 has moved from src to dst, and carried 200 ms of CPU there since
    source = with_rates(source, _read("src", 10.0, s2=(6_000, 12, 24)))
    target = with_rates(target, _read("dst", 10.0, s1=(200_000, 300, 600), s3=(1_500, 2, 4)))
    # the node's own sum fell from 655,000 to 6,000 usec; what the exporter counted went up by slot 2's increase
    assert (source.cpu_usec, source.bytes_in, source.bytes_out) == (1_000, 2, 4)
    assert source.cpu_per_second == pytest.approx(0.0001)
    assert target.cpu_usec == 200_500  # slot 1 counted from zero on its new node, slot 3 by its increase
    assert target.cpu_per_second == pytest.approx(0.02005)
    assert target.bytes_per_second == pytest.approx((300 + 600 + 1 + 2) / 10)
    # 10 s on, slot 1 moved back and forth: its counter went down, so all of it is new
    target = with_rates(target, _read("dst", 20.0, s1=(50_000, 0, 0), s3=(1_500, 2, 4)))
    assert target.cpu_usec == 250_500
    assert target.cpu_per_second == pytest.approx(0.005)
    # the target now names another node (its id changed): a first read again, no rate
    renamed = with_rates(target, _read("new", 30.0, s1=(60_000, 0, 0)))
    assert (renamed.cpu_usec, renamed.cpu_per_second) == (0, None)


@pytest.mark.unit
def test_the_profiler_measures_rates_on_the_clock_it_is_given():
    ticks = iter([1000.0, 1030.0])
    profiler = SlotStatsProfiler(SlotStatsConfig(enabled=True), [], 1 << 20, clock=lambda: next(ticks))
    first = profiler.combine(None, _read("n", profiler.clock(), s0=(0, 0, 0)))
    second = profiler.combine(first, _read("n", profiler.clock(), s0=(3_000_000, 0, 0)))
    assert second.cpu_per_second == pytest.approx(0.1)  # 3 s of CPU over the 30 s the clock moved


@pytest.mark.unit
def test_shares_skew_and_load_over_the_mean_of_a_group():
    from exporter.common.families import FamilySet

    def shard(cpu: float, keys: int) -> SlotProfile:
        return SlotProfile(node_id="n", slot_count=1, keys=keys, top=(), read_at=1.0, cpu_usec=0, cpu_per_second=cpu)

    out = FamilySet()
    add_shard_shares("g", {"a": shard(0.6, 10), "b": shard(0.2, 10), "c": shard(0.2, 10)}, out)
    add_shard_shares("two", {"x": shard(0.8, 10), "y": shard(0.2, 30)}, out)
    samples = parse_samples(encode_text(out).decode())
    assert sample(samples, "elasticache_cluster_shard_share_ratio", replication_group="g", shard="a", resource="cpu") == pytest.approx(0.6)
    assert sample(samples, "elasticache_cluster_shard_load_over_mean", replication_group="g", shard="a", resource="cpu") == pytest.approx(1.8)
    assert sample(samples, "elasticache_cluster_load_skew", replication_group="g", resource="cpu") == pytest.approx(1.8)
    assert sample(samples, "elasticache_cluster_load_skew", replication_group="g", resource="keys") == pytest.approx(1.0)
    # two shards are skewed too: 80 % of the load is 1.6 times the mean (the skew runs from 1 to the number of shards)
    assert sample(samples, "elasticache_cluster_load_skew", replication_group="two", resource="cpu") == pytest.approx(1.6)
    assert sample(samples, "elasticache_cluster_shard_load_over_mean", replication_group="two", shard="y", resource="keys") == pytest.approx(1.5)
    assert not [key for key in samples if ("resource", "network") in key[1]]  # no shard has a network figure: none served


@pytest.mark.unit
def test_top_is_capped_where_the_series_stay_bounded():
    from exporter.common.errors import ConfigError

    assert build_config({"cluster": {"slot_stats": {"top": TOP_MAX}}}, environ={}).slot_stats.top == TOP_MAX
    with pytest.raises(ConfigError, match=r"cluster\.slot_stats\.top"):
        build_config({"cluster": {"slot_stats": {"top": TOP_MAX + 1}}}, environ={})


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
        # and CPU-heavy there: milliseconds a command, so a preemption of a cold command elsewhere cannot outweigh it
        client.rpush(f"{HOT_TAG}:numbers", *range(20_000, 0, -1))
        for _ in range(20):
            client.sort(f"{HOT_TAG}:numbers", store=f"{HOT_TAG}:sorted")
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
    assert sample(samples, "redis_cluster_slot_keys", instance=owner, slot=hot_slot) == 52  # the counters, the list, its sort
    primaries = {dict(labels)["instance"] for (name, labels) in samples if name == "redis_cluster_node_slots"}
    assert len(primaries) == 3  # replicas are not read
    assert sum(sample(samples, "redis_cluster_node_slots", instance=name) for name in primaries) == 16384
    # bytes are counted exactly; CPU is timed, and a busy machine's preemptions land on any command
    assert sample(samples, "elasticache_cluster_load_skew", replication_group="rg", resource="network") > 2.5
    assert sample(samples, "elasticache_cluster_load_skew", replication_group="rg", resource="cpu") > 1.5
    assert sample(samples, "redis_cluster_node_slots_keys", instance=owner) >= 50
    shares = {
        dict(labels)["shard"]: value
        for (name, labels), value in samples.items()
        if name == "elasticache_cluster_shard_share_ratio" and ("resource", "cpu") in labels
    }
    assert len(shares) == 3
    assert sum(shares.values()) == pytest.approx(1.0)


def _move_slot(slot: int, source, target, nodes) -> None:
    """Moves a slot and its keys from one primary to another as ``redis-cli --cluster reshard`` does."""
    source_id, target_id = (node.client().execute_command("CLUSTER", "MYID").decode() for node in (source, target))
    target.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.client().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    while keys := source.client().execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
        source.client().execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
    for node in (target, source, *[node for node in nodes if node not in (source, target)]):
        node.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)


def _move_slot_under_writes(slot: int, source, target, nodes) -> None:
    """Moves the hot slot while a client writes to it, and until the writes have gone on at the slot's new owner."""
    writing = threading.Event()
    writing.set()
    written: list[int] = []

    def write() -> None:
        writer = redis.cluster.RedisCluster(host="127.0.0.1", port=nodes[0].port)
        while writing.is_set():
            writer.incr(f"{HOT_TAG}:counter:{len(written) % 50}")
            written.append(1)

    load = threading.Thread(target=write, daemon=True)
    load.start()
    try:
        wait_until(lambda: len(written) > 200, what="writes under way")
        _move_slot(slot, source, target, nodes)
        moved = len(written)
        wait_until(lambda: len(written) > moved + 200, what="writes after the move")  # redirected to the new owner
    finally:
        writing.clear()
        load.join(timeout=10)


def _visit_a_minute_on(profiler: SlotStatsProfiler, now: list[float], minutes: itertools.count) -> None:
    now[0] = 60.0 * next(minutes)
    profiler.visit_all()


def _served(profiler: SlotStatsProfiler) -> dict[tuple[str, tuple], float]:
    return parse_samples(encode_text(SlotStatsCollector(profiler).build()).decode())


def _node_counters(samples: dict[tuple[str, tuple], float]) -> dict[tuple[str, tuple], float]:
    families = ("redis_cluster_node_slots_cpu_seconds_total", "redis_cluster_node_slots_network_bytes_total")
    return {key: value for key, value in samples.items() if key[0] in families}


def _slot_counters(samples: dict[tuple[str, tuple], float]) -> dict[tuple[str, tuple], float]:
    families = ("redis_cluster_slot_cpu_seconds_total", "redis_cluster_slot_network_bytes_total")
    return {key: value for key, value in samples.items() if key[0] in families}


def test_a_slot_moved_under_load_keeps_the_node_counters_rising_and_the_rates_right():
    """A hot slot moves from one primary to another while a client keeps writing to it: the node's own sum over its
    slots falls on the primary it left, the counters served never do, and afterwards the load is counted, to the
    byte, on the primary that gained the slot."""
    engine = "valkey-8.1"
    if ENGINES.get(engine) is None:
        missing(engine)  # skipped outside CI; under CI a missing engine fails
    nodes = start_cluster(engine, "--cluster-slot-stats-enabled", "yes", replicas=0)
    minutes = itertools.count()  # each round of reads a minute after the one before
    now = [0.0]
    profiler = None
    try:
        config = build_config(
            {"targets": [{"name": f"n{i}", "addr": node.addr, "replication_group": "rg"} for i, node in enumerate(nodes)],
             "cluster": {"slot_stats": {"enabled": True, "top": 5}}},
            environ={},
        )  # fmt: skip
        profiler = SlotStatsProfiler(config.slot_stats, list(config.targets), config.scrape_max_reply_bytes, clock=lambda: now[0])
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=nodes[0].port)
        for i in range(3000):
            client.incr(f"{HOT_TAG}:counter:{i % 50}")
        hot_slot = key_slot(f"{HOT_TAG}:counter:0".encode())
        source = next(node for node in nodes if node.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", hot_slot) > 0)
        target = next(node for node in nodes if node is not source)
        names = {node.port: f"n{i}" for i, node in enumerate(nodes)}
        _visit_a_minute_on(profiler, now, minutes)
        reads = [_served(profiler)]
        raw_before = sum(profiler.snapshot()[0][names[source.port]].counters.cpu_usec)

        _move_slot_under_writes(hot_slot, source, target, nodes)
        _visit_a_minute_on(profiler, now, minutes)
        reads.append(_served(profiler))
        raw_after = sum(profiler.snapshot()[0][names[source.port]].counters.cpu_usec)

        # a load counted to the byte: 200 SETs of a 100-byte value, each "+OK\r\n"
        keys = [f"{HOT_TAG}:value:{i}" for i in range(200)]
        for key in keys:
            client.set(key, "x" * 100)
        _visit_a_minute_on(profiler, now, minutes)
        reads.append(_served(profiler))
        profiles = profiler.snapshot()[0]
    finally:
        if profiler is not None:
            profiler.stop()
        for node in nodes:
            node.stop()
    assert raw_after < raw_before  # the node's own sum fell with the slot it lost: what rate() would read as a reset
    for earlier, later in itertools.pairwise(reads):
        counters_then, counters_now = _node_counters(earlier), _node_counters(later)
        assert set(counters_then) <= set(counters_now)
        assert all(counters_now[key] >= value for key, value in counters_then.items()), (counters_then, counters_now)
        # a slot's own counter: the series on the node it left ends, the one on the node that gained it starts from 0
        slots_then, slots_now = _slot_counters(earlier), _slot_counters(later)
        assert all(slots_now[key] >= value for key, value in slots_then.items() if key in slots_now)
    hot = str(hot_slot)
    assert any(dict(labels).get("slot") == hot and dict(labels)["instance"] == names[source.port] for _, labels in _slot_counters(reads[0]))
    assert not any(dict(labels).get("slot") == hot and dict(labels)["instance"] == names[source.port] for _, labels in _slot_counters(reads[1]))
    request = sum(len(f"*3\r\n$3\r\nSET\r\n${len(key)}\r\n{key}\r\n$100\r\n{'x' * 100}\r\n") for key in keys)
    gained, lost = names[target.port], names[source.port]
    assert profiles[gained].bytes_per_second == pytest.approx((request + 5 * len(keys)) / 60)
    assert profiles[lost].bytes_per_second == 0
    shard = shard_name(frozenset(profiles[gained].counters.slots), "")  # in a named group, a shard is its slot ranges
    assert sample(reads[-1], "elasticache_cluster_shard_share_ratio", replication_group="rg", shard=shard, resource="network") == 1
    assert sample(reads[-1], "elasticache_cluster_load_skew", replication_group="rg", resource="network") == pytest.approx(3)


def _slot_series_instances(samples: dict[tuple[str, tuple], float]) -> set[str]:
    return {dict(labels)["instance"] for name, labels in samples if name.startswith(("redis_cluster_node_slots", "redis_cluster_slot_"))}


def test_a_demoted_primary_s_slot_series_leave_metrics_after_a_failover():
    """A replica takes over its primary (CLUSTER FAILOVER): the old primary, a replica now, has no slots to serve, and
    its slot series leave /metrics with the next read; the new primary's take their place."""
    engine = "valkey-8.1"
    if ENGINES.get(engine) is None:
        missing(engine)  # skipped outside CI; under CI a missing engine fails
    nodes = start_cluster(engine, "--cluster-slot-stats-enabled", "yes", node_timeout_ms=3000)
    app = None
    try:
        # just after the cluster is made, a replica may still stand alone as a primary: wait until the roles settle
        wait_until(lambda: sorted(node.info()["role"] for node in nodes) == ["master"] * 3 + ["slave"] * 3, timeout=30, what="roles")
        names = {node.port: f"n{i}" for i, node in enumerate(nodes)}
        app = make_app({"targets": [{"name": names[node.port], "addr": node.addr} for node in nodes], "cluster": {"slot_stats": {"enabled": True}}})
        app.slot_stats_profiler.visit_all()
        before = call(app, "/metrics").samples()
        replica = next(node for node in nodes if node.info()["role"] == "slave")
        old_primary = next(node for node in nodes if node.port == replica.info()["master_port"])
        fail_over(replica)
        wait_until(lambda: replica.info()["role"] == "master" and old_primary.info()["role"] == "slave", timeout=30, what="the failover")
        app.slot_stats_profiler.visit_all()
        after = call(app, "/metrics").samples()
    finally:
        if app is not None:
            app.close()
        for node in nodes:
            node.stop()
    assert names[old_primary.port] in _slot_series_instances(before)
    assert names[replica.port] not in _slot_series_instances(before)
    assert names[old_primary.port] not in _slot_series_instances(after)  # before the fix, served until the exporter restarted
    assert names[replica.port] in _slot_series_instances(after)
    assert len(_slot_series_instances(after)) == 3
    assert sum(value for (name, _), value in after.items() if name == "redis_cluster_node_slots") == 16384


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


def test_two_exporter_shards_serve_each_shares_of_the_whole_group_once():
    """Two exporters (``scrape.shard 0/2`` and ``1/2``) over a 3-primary cluster found from one endpoint: each node's
    slot series on the exporter that owns the node, and the group's shares, from all three primaries, on the one that
    owns the group's name: three shares, summing to 1, served once."""
    engine = "valkey-8.1"
    if ENGINES.get(engine) is None:
        missing(engine)  # skipped outside CI; under CI a missing engine fails
    nodes = start_cluster(engine, "--cluster-slot-stats-enabled", "yes")
    apps = [
        make_app(
            {
                "targets": [{"name": "orders", "addr": nodes[0].addr, "discover": "cluster"}],
                "cluster": {"refresh": "1h", "slot_stats": {"enabled": True}},
                "scrape": {"shard": f"{index}/2"},
            }
        )
        for index in range(2)
    ]
    try:
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=nodes[0].port)
        for i in range(3000):
            client.set(f"key:{i}", "x")

        def read() -> list[dict]:
            for app in apps:
                app.slot_stats_profiler.visit_all()
            return [call(app, "/metrics").samples() for app in apps]

        def shares_of(samples: dict) -> dict[str, float]:
            return {
                dict(labels)["shard"]: value
                for (name, labels), value in samples.items()
                if name == "elasticache_cluster_shard_share_ratio" and ("resource", "keys") in labels
            }

        wait_until(lambda: sum(len(shares_of(samples)) for samples in read()) == 3, timeout=60, interval=1.0, what="three shares")
        served = [shares_of(samples) for samples in read()]
    finally:
        for app in apps:
            app.close()
        for node in nodes:
            node.stop()
    assert sorted(len(shares) for shares in served) == [0, 3]  # on one exporter, whole
    shares = next(shares for shares in served if shares)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert all(0.25 < share < 0.42 for share in shares.values()), shares  # keys spread evenly over three
