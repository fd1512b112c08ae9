"""The keyspace by prefix on a real server: 200,000 keys in five prefixes with known sizes and TTLs, estimated from a
sample within 10 % of the truth; the expiry wave seen before it happens; the biggest keys of a small database; no
error reply and no memory figures where MEMORY is renamed away."""

from __future__ import annotations

import pytest
from helpers import call, make_app, sample
from servers import start_redis, wait_until

from exporter.redis.keyspace import NO_PREFIX, key_prefix

# prefix: (keys, value bytes, TTL in seconds or None)
PREFIXES = {
    "session:user": (80_000, 60, 3600),  # third by memory, well behind the two largest
    "cache:page": (40_000, 300, 240),  # written together, all expiring within 5 minutes: a wave ahead
    "queue:job": (30_000, 500, None),
    "feature:flag": (30_000, 50, None),
    "tmp:lock": (20_000, 20, 40),
}


@pytest.fixture(scope="module")
def loaded():
    server = start_redis()
    client = server.client()
    for prefix, (count, size, ttl) in PREFIXES.items():
        for start in range(0, count, 10_000):
            pipe = client.pipeline(transaction=False)
            for i in range(start, min(count, start + 10_000)):
                pipe.set(f"{prefix}:{i}", "v" * size, ex=ttl)
            pipe.execute()
    small = server.client(db=1)
    for i in range(300):
        small.set(f"small:item:{i}", "s" * 10)
    small.set("blob:one", "b" * 500_000)
    small.set("blob:two", "b" * 300_000)
    small.set("k" * 150, "b" * 200_000)  # a long key name, cut at 100 bytes in its label
    yield server
    server.stop()


def memory_truth(server, prefix: str, count: int) -> int:
    client = server.client()
    total = 0
    for start in range(0, count, 20_000):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(count, start + 20_000)):
            pipe.memory_usage(f"{prefix}:{i}", samples=5)
        total += sum(value or 0 for value in pipe.execute())
    return total


def profiled(server, **settings) -> dict:
    app = make_app({"targets": [{"name": "node", "addr": server.addr}], "keyspace": {"enabled": True, "interval": "1h", **settings}})
    try:
        app.keyspace_profiler.visit_all()  # one sample now (the background thread's first is the same work)
        return call(app, "/metrics").samples()
    finally:
        app.close()


def test_prefixes_keys_memory_and_ttls_are_estimated_within_ten_percent(loaded):
    # 20,000 draws with replacement from 200,000 keys: about 19,000 different ones. The smallest prefix (tmp:lock, 10 %)
    # is then estimated with a relative standard deviation of about 2.2 %, so 10 % is 4.6 of them (a few in a million
    # runs); with 10,000 draws it was 3.3 (about one run in a thousand missed by more than 10 %).
    samples = profiled(loaded, sample=20_000)
    db0 = {"instance": "node", "db": "db0"}
    assert 18_000 <= sample(samples, "elasticache_keyspace_sample_keys", **db0) <= 20_000
    for prefix, (count, _, ttl) in PREFIXES.items():
        keys = sample(samples, "elasticache_keyspace_prefix_keys", **db0, prefix=prefix)
        assert keys == pytest.approx(count, rel=0.10), prefix
        without_ttl = sample(samples, "elasticache_keyspace_prefix_keys_without_ttl", **db0, prefix=prefix)
        assert without_ttl == (pytest.approx(count, rel=0.10) if ttl is None else 0), prefix
        memory = sample(samples, "elasticache_keyspace_prefix_memory_bytes", **db0, prefix=prefix)
        assert memory == pytest.approx(memory_truth(loaded, prefix, count), rel=0.10), prefix
    # the wave ahead: the locks within the minute, the cached pages within five, everything with a TTL within the hour
    expiring = {window: sample(samples, "elasticache_keyspace_expiring_keys", **db0, within=window) for window in ("1m", "5m", "1h")}
    assert expiring["1m"] == pytest.approx(20_000, rel=0.10)
    assert expiring["5m"] == pytest.approx(60_000, rel=0.10)
    assert expiring["1h"] == pytest.approx(140_000, rel=0.10)


def test_the_biggest_keys_of_the_sample(loaded):
    samples = profiled(loaded, sample=2_000)  # more than the small database holds: read whole with SCAN
    assert sample(samples, "elasticache_keyspace_sample_keys", instance="node", db="db1") == 303
    assert sample(samples, "elasticache_keyspace_prefix_keys", instance="node", db="db1", prefix="small:item") == 300
    big = {
        dict(labels)["key"]: value
        for (name, labels), value in samples.items()
        if name == "elasticache_keyspace_big_key_memory_bytes" and dict(labels)["db"] == "db1"
    }
    assert len(big) == 10
    client = loaded.client(db=1)
    assert big["blob:one"] == client.memory_usage("blob:one", samples=5)
    assert big["k" * 100] == client.memory_usage("k" * 150, samples=5)  # the name cut at 100 bytes
    assert set(list(big)[:3]) <= {"blob:one", "blob:two", "k" * 100}


def test_top_prefixes_by_memory_and_the_rest(loaded):
    samples = profiled(loaded, sample=5_000, top=2)
    prefixes = {
        dict(labels)["prefix"] for (name, labels) in samples if name == "elasticache_keyspace_prefix_memory_bytes" and dict(labels)["db"] == "db0"
    }
    assert prefixes == {"queue:job", "cache:page", "(other)"}  # the two largest by memory: 30,000 of 500 bytes, 40,000 of 300 (then 80,000 of 60)


def profiled_without(command: str) -> dict:
    """500 keys of one prefix, half with a TTL, sampled 1,000 times on a server where ``command`` is renamed away; the
    server gets no error reply from the profile."""
    server = start_redis("--rename-command", command, "")
    try:
        client = server.client(single_connection_client=True)
        for i in range(500):
            client.set(f"a:b:{i}", "v", ex=600 if i % 2 else None)
        before = client.info("stats")["total_error_replies"]
        samples = profiled(server, sample=1_000)
        assert client.info("stats")["total_error_replies"] == before
        return samples
    finally:
        server.stop()


def test_no_error_reply_and_no_memory_where_memory_is_renamed_away():
    samples = profiled_without("MEMORY")
    assert sample(samples, "elasticache_keyspace_prefix_keys", instance="node", db="db0", prefix="a:b") == pytest.approx(500)
    assert sample(samples, "elasticache_keyspace_prefix_keys_without_ttl", instance="node", db="db0", prefix="a:b") == 250  # read whole
    assert not [key for key in samples if key[0] in ("elasticache_keyspace_prefix_memory_bytes", "elasticache_keyspace_big_key_memory_bytes")]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("key", "delimiters", "depth", "prefix"),
    [
        ("session:user:42", ":", 2, "session:user"),
        ("cache:42", ":", 2, "cache"),
        ("plain", ":", 2, NO_PREFIX),
        ("a/b:c/d", ":/", 3, "a/b:c"),
        ("a:b:c:d", ":", 1, "a"),
    ],
)
def test_key_prefixes(key, delimiters, depth, prefix):
    assert key_prefix(key, delimiters, depth) == prefix


def test_random_draws_where_scan_is_renamed_away():
    samples = profiled_without("SCAN")
    drawn = sample(samples, "elasticache_keyspace_sample_keys", instance="node", db="db0")
    assert 300 < drawn < 500  # 1,000 draws with replacement from 500 keys: about 432 different ones
    assert sample(samples, "elasticache_keyspace_prefix_keys", instance="node", db="db0", prefix="a:b") == pytest.approx(500)


def test_hot_keys_under_an_lfu_policy_and_none_otherwise():
    for policy in ("allkeys-lfu", "allkeys-lru"):
        # no decay of the LFU counters: OBJECT FREQ gives a counter less a minute's decay once the server's minute clock
        # has ticked since the key's last use, so a minute starting between the profile's read and the test's made them
        # differ by one (about one run in a thousand)
        server = start_redis("--maxmemory-policy", policy, "--maxmemory", "100mb", "--lfu-decay-time", "0")
        try:
            client = server.client(single_connection_client=True)
            for i in range(200):
                client.set(f"item:{i}", "v")
            for _ in range(300):  # the LFU counter grows with use, logarithmically
                client.get("item:7")
                client.get("item:42")
            before = client.info("stats")["total_error_replies"]
            samples = profiled(server, sample=5_000)  # 1,000 draws of 200 keys miss a given key once in 150 runs
            assert client.info("stats")["total_error_replies"] == before  # OBJECT FREQ is asked only under LFU
            hot = {dict(labels)["key"]: value for (name, labels), value in samples.items() if name == "elasticache_keyspace_hot_key_frequency"}
            if policy == "allkeys-lru":
                assert hot == {}
                continue
            assert hot["item:7"] == client.object("freq", "item:7")
            assert sorted(hot, key=hot.get, reverse=True)[:2] == sorted(["item:7", "item:42"], key=hot.get, reverse=True)
        finally:
            server.stop()


def test_a_replication_group_is_sampled_once_on_its_replica():
    """A primary and its replica, both targets of group "orders": the replica is sampled (it holds the same keys)
    and the primary, which serves the application, gets no RANDOMKEY. A node of no group is sampled as before."""
    primary = start_redis()
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    alone = start_redis()
    try:
        for i in range(500):
            primary.client().set(f"order:{i}", "v" * 50)
        alone.client().set("solo:1", "v")
        wait_until(lambda: replica.client().dbsize() == 500, what="the replica in sync")
        calls = primary.client(single_connection_client=True)
        app = make_app(
            {
                "targets": [
                    {"name": "orders-001", "addr": primary.addr, "replication_group": "orders", "shard": "0001"},
                    {"name": "orders-002", "addr": replica.addr, "replication_group": "orders", "shard": "0001"},
                    {"name": "solo", "addr": alone.addr},
                ],
                "keyspace": {"enabled": True, "interval": "1h", "sample": 100},
            }
        )
        try:
            app.keyspace_profiler.visit_all()
            profiles = app.keyspace_profiler.snapshot()[0]
            samples = call(app, "/metrics").samples()
        finally:
            app.close()
        assert set(profiles) == {"orders-002", "solo"}
        assert sample(samples, "elasticache_keyspace_prefix_keys", instance="orders-002", db="db0", prefix="order") == pytest.approx(500)
        assert "cmdstat_randomkey" not in calls.info("commandstats")
    finally:
        for server in (alone, replica, primary):
            server.stop()


def test_a_table_a_fork_keeps_sparse_is_drawn_from_not_walked_in_part():
    """While a fork child runs (BGSAVE, a replica's sync, an ElastiCache backup) Redis does not shrink its tables: after
    mass deletes 300 keys sit in a table of 131,072 buckets, which SCAN cannot walk within the budget. Part of a walk
    would be a small and lopsided sample; random draws take the place of the whole database."""
    server = start_redis()
    try:
        client = server.client()
        for start in range(0, 100_000, 20_000):
            pipe = client.pipeline(transaction=False)
            for i in range(start, start + 20_000):
                pipe.set(f"k:{i}", "v")
            pipe.execute()
        client.config_set("rdb-key-save-delay", 200)  # the child takes about 20 s: the profile is read meanwhile
        client.bgsave()
        wait_until(lambda: client.info("persistence")["rdb_bgsave_in_progress"] == 1, what="the BGSAVE child")
        pipe = client.pipeline(transaction=False)
        for i in range(300, 100_000):
            pipe.delete(f"k:{i}")
        pipe.execute()
        samples = profiled(server, sample=2_000)
        assert client.info("persistence")["rdb_bgsave_in_progress"] == 1  # still running: the table stayed sparse
        assert sample(samples, "elasticache_keyspace_sample_keys", instance="node", db="db0") >= 280  # a walk in part gave about 40
        assert sample(samples, "elasticache_keyspace_prefix_keys", instance="node", db="db0", prefix="k") == pytest.approx(300)
    finally:
        server.stop()


def test_scan_refused_by_an_acl_is_asked_once_and_random_draws_stand_in():
    """COMMAND INFO shows a command that an ACL refuses: the first refusal closes the gate, the draws stand in."""
    server = start_redis()
    try:
        client = server.client(single_connection_client=True)
        for i in range(500):
            client.set(f"a:b:{i}", "v")
        client.execute_command("ACL", "SETUSER", "default", "-scan")
        before = client.info("stats")["total_error_replies"]
        app = make_app({"targets": [{"name": "node", "addr": server.addr}], "keyspace": {"enabled": True, "interval": "1h", "sample": 1_000}})
        try:
            app.keyspace_profiler.visit_all()
            app.keyspace_profiler.visit_all()
            samples = call(app, "/metrics").samples()
        finally:
            app.close()
        assert client.info("stats")["total_error_replies"] == before + 1
        assert 300 < sample(samples, "elasticache_keyspace_sample_keys", instance="node", db="db0") < 500
    finally:
        server.stop()
