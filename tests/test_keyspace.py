"""The keyspace by prefix on a real server: 200,000 keys in five prefixes with known sizes and TTLs, estimated from a
sample within 10 % of the truth; the expiry wave seen before it happens; the biggest keys of a small database; no
error reply and no memory figures where MEMORY is renamed away."""

from __future__ import annotations

import math
import random

import pytest
from helpers import call, make_app, sample
from servers import start_redis, wait_until

from exporter.redis.keyspace import DRAW_SPREAD, NO_PREFIX, OTHER, Z95, KeyspaceConfig, count_bounds, key_prefix, profile_db

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


# the served bounds, against a real server: 50,000 keys in db0 (one prefix of 20 %, eight of 10 %) and 2,200 in db1 (ten
# of 10 %: 2,000 draws take about 1,300 of them, where the finite-population correction narrows the bounds by a third)
BOUND_LAYOUT = {
    "db0": {"orders:id": 10_000, **{f"set{i}:id": 5_000 for i in range(8)}},
    "db1": {f"small{i}:id": 220 for i in range(10)},
}
PROFILES = 40


def test_the_served_bounds_hold_the_true_counts():
    """40 profiles of 2,000 draws each: the true count of each prefix lies between the served bounds in 19 of 20, the
    estimates are unbiased, and they spread as the bounds say.

    Each check fails by chance about once in 10,000 runs or less: the bounds hold 760 counts, of which about 38 fall
    outside, and 88 % asks for at most 91 outside. The errors over their standard deviation (the half-width over 1.96)
    square to 1 on average, over 360 and 400 of them: 0.7 is 4 standard errors below, 1.45 more than 5 above; bounds
    missing the finite-population correction average 0.4 in db1, bounds half as wide 4. The mean of 40 estimates of a
    prefix is off by chance with a standard deviation of 1.1 % in db0 and, with the error of the table's layout, 1.3 %
    in db1: 6 % is 4.5 of them."""
    server = start_redis()
    try:
        for db, prefixes in BOUND_LAYOUT.items():
            pipe = server.client(db=int(db[2:])).pipeline(transaction=False)
            for prefix, count in prefixes.items():
                for i in range(count):
                    pipe.set(f"{prefix}:{i}", "v")
            pipe.execute()
        app = make_app({"targets": [{"name": "node", "addr": server.addr}], "keyspace": {"enabled": True, "interval": "1h", "sample": 2_000}})
        served: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        try:
            for _ in range(PROFILES):
                app.keyspace_profiler.visit_all()
                samples = call(app, "/metrics").samples()
                for db, prefixes in BOUND_LAYOUT.items():
                    for prefix in prefixes:
                        labels = {"instance": "node", "db": db, "prefix": prefix}
                        served.setdefault((db, prefix), []).append(
                            tuple(sample(samples, f"elasticache_keyspace_prefix_keys{end}", **labels) for end in ("", "_lower", "_upper"))
                        )
        finally:
            app.close()
    finally:
        server.stop()
    held = [lower <= BOUND_LAYOUT[db][prefix] <= upper for (db, prefix), rows in served.items() for _, lower, upper in rows]
    assert sum(held) >= 0.88 * len(held), f"the bounds held {sum(held)} of {len(held)} true counts"
    for db, prefixes in BOUND_LAYOUT.items():
        squares = [
            ((estimate - prefixes[prefix]) / ((upper - lower) / 2 / Z95)) ** 2
            for (of, prefix), rows in served.items()
            if of == db
            for estimate, lower, upper in rows
        ]
        assert 0.7 <= sum(squares) / len(squares) <= 1.45, f"{db}: errors {sum(squares) / len(squares):.2f} times as variable as the bounds say"
        for prefix, truth in prefixes.items():
            mean = sum(estimate for estimate, _, _ in served[(db, prefix)]) / PROFILES
            assert mean == pytest.approx(truth, rel=0.06), f"{db} {prefix}: mean estimate {mean:.0f} of {truth}"


@pytest.mark.unit
def test_a_database_read_whole_is_known_exactly():
    assert count_bounds(30, 300, 300) == (30.0, 30.0)
    assert count_bounds(30, 300, 290) == (29.0, 29.0)  # keys added since INFO was read: still all of them


@pytest.mark.unit
def test_bounds_of_a_large_keyspace_are_the_normal_ones():
    """2,000 keys of a billion, 200 of them of the prefix: ±1.96·sqrt(0.1·0.9/2000) of the keyspace, ±13.1 % of the
    count; Wilson's interval is centred a little above the estimate, by z²(1-2p)/2n of the keyspace."""
    lower, upper = count_bounds(200, 2_000, 10**9, spread=0.0)
    assert (upper - lower) / 2 == pytest.approx(Z95 * math.sqrt(0.1 * 0.9 / 2_000) * 10**9, rel=0.002)
    assert (lower + upper) / 2 == pytest.approx(10**8 * (1 + Z95**2 / 2 / 2_000 * (1 - 2 * 0.1) / 0.1), rel=1e-4)


@pytest.mark.unit
def test_the_finite_population_correction_narrows_the_bounds():
    """1,313 distinct keys of 2,200 (2,000 draws): the bounds narrow by sqrt((N-n)/(N-1)), to 0.64 of a large keyspace's."""
    lower, upper = count_bounds(131, 1_313, 2_200, spread=0.0)
    wide_lower, wide_upper = count_bounds(131, 1_313, 10**9, spread=0.0)
    assert (upper - lower) / 2_200 == pytest.approx((wide_upper - wide_lower) / 10**9 * math.sqrt((2_200 - 1_313) / 2_199), rel=0.01)


@pytest.mark.unit
def test_uneven_draws_widen_the_bounds_by_their_layout_error():
    """Draws whose chances vary by 26 % from key to key add 0.26²·p(1-p)/N to the share's variance, less where the
    sample takes a key more than once: 0.27 % of the sampling variance at 1,998 of 50,000 keys (0.26² times 0.98² of
    1/N against (N-n)/((N-1)n)), 3.2 % at 1,460 of 3,000 (0.26² times 0.70²)."""
    for sampled, population, added in ((1_998, 50_000, 0.0027), (1_460, 3_000, 0.032)):
        even = count_bounds(sampled // 10, sampled, population, spread=0.0)
        uneven = count_bounds(sampled // 10, sampled, population, spread=DRAW_SPREAD)
        assert ((uneven[1] - uneven[0]) / (even[1] - even[0])) ** 2 - 1 == pytest.approx(added, rel=0.05)


@pytest.mark.unit
def test_a_prefix_seen_once_or_never_has_bounds_above_zero():
    """Seen once in 2,000 of 50,000 keys: at least the key seen, at most about 140, more above the estimate (25) than
    below; never seen: 0 to about 95 (Wilson's z²/(n+z²) of the keyspace)."""
    lower, upper = count_bounds(1, 2_000, 50_000)
    assert lower >= 1
    assert upper - 25 > 25 - lower
    assert 130 < upper < 150
    lower, upper = count_bounds(0, 2_000, 50_000)
    assert lower == 0
    assert upper == pytest.approx(50_000 * Z95**2 / (2_000 / (48_000 / 49_999) + Z95**2), rel=0.02)


@pytest.mark.unit
@pytest.mark.parametrize(("population", "sampled"), [(5_000, 500), (1_000, 500)])
def test_bounds_hold_the_true_count_of_simulated_samples_19_times_in_20(population, sampled):
    """1,000 simple random samples (seeded) of a keyspace with prefixes of 2 %, 10 % and 40 %: the bounds of an even
    draw hold the truth 95 times in 100, within 2.5 points (3.6 standard errors); at 500 of 1,000 keys only with the
    finite-population correction, which halves the variance (without it they would hold it 99.5 times in 100)."""
    rng = random.Random(7)
    shares = {0.02: 0, 0.10: 0, 0.40: 0}
    for _ in range(1_000):
        drawn = rng.sample(range(population), sampled)
        for share in shares:
            truth = round(population * share)
            lower, upper = count_bounds(sum(key < truth for key in drawn), sampled, population, spread=0.0)
            shares[share] += lower <= truth <= upper
    for share, held in shares.items():
        assert 925 <= held <= 975, f"{share:.0%}: the bounds held {held} of 1,000"


@pytest.mark.unit
def test_a_profile_serves_bounds_for_every_prefix_and_the_rest():
    """60, 30 and 10 sampled keys of 1,000, two prefixes served by name: the rest's bounds are those of its 10 keys."""
    sampled = [(f"{prefix}:x:{i}", "string", -1, 100) for prefix, count in (("a", 60), ("b", 30), ("c", 10)) for i in range(count)]
    profile = profile_db(1_000, sampled, KeyspaceConfig(top=2, depth=1))
    assert set(profile.prefix_keys_bounds) == set(profile.prefix_keys) == {"a", "b", OTHER}
    assert profile.prefix_keys_bounds[OTHER] == count_bounds(10, 100, 1_000)
    for prefix, (lower, upper) in profile.prefix_keys_bounds.items():
        assert lower < profile.prefix_keys[prefix] < upper
    whole = profile_db(100, sampled, KeyspaceConfig(top=2, depth=1))
    assert whole.prefix_keys_bounds == {prefix: (keys, keys) for prefix, keys in whole.prefix_keys.items()}
