"""Watched keys and streams on a real redis-server loaded like queue systems keep their data: values exact, a pattern
count over 20,000 keys exact, keys deleted or retyped under the probes, budgets that say when they cut a count
short, and never an error reply."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from helpers import call, exact_samples, make_app, sample
from proxy import StallableProxy
from servers import start_redis, wait_until

from exporter.common.errors import ConfigError
from exporter.config import build_config
from exporter.redis.keys import KeySpec, QueueSpec, glob_regex, parse_key_list
from exporter.redis.node import CLIENT_NAME

MATCHING = 20_000
OTHER = 30_000


def errors(client) -> int:
    return client.info("stats")["total_error_replies"]


@pytest.fixture(scope="module")
def queues():
    """Sidekiq-, Celery-, BullMQ- and RQ-like keys beside tens of thousands of others."""
    server = start_redis()
    client = server.client()
    pipe = client.pipeline(transaction=False)
    for i in range(MATCHING):
        pipe.set(f"session:{i}", "x")
    for i in range(OTHER):
        pipe.set(f"cache:{i}", "y")
    pipe.execute()
    client.rpush("queue:default", *[f"job{i}" for i in range(37)])  # Sidekiq / RQ / Celery lists
    client.zadd("schedule", {f"job{i}": i for i in range(12)})  # Sidekiq's scheduled set
    client.hset("bull:emails:meta", mapping={"opts": "{}", "paused": "0", "version": "5"})
    client.set("stat:processed", "123456")
    client.set("stat:label", "warm")
    client.set("big", "z" * 5000)
    client.pfadd("visitors", *[f"v{i}" for i in range(100)])
    client.sadd("workers", "w1", "w2", "w3")
    client2 = server.client(db=2)
    client2.rpush("queue:low", "a", "b")
    for i in range(25):
        client.xadd("events", {"n": str(i)})
    client.xgroup_create("events", "billing", id="0")
    client.xgroup_create("events", "audit", id="0")
    client.xreadgroup("billing", "worker-1", {"events": ">"}, count=10)
    client.xreadgroup("billing", "worker-2", {"events": ">"}, count=5)
    client.xack("events", "billing", *[entry[0] for entry in client.xrange("events", count=3)])
    client.xreadgroup("audit", "auditor", {"events": ">"}, count=25)
    yield server
    server.stop()


def scrape(server, keys: dict, client) -> dict:
    """One /metrics scrape. ``client``: the test's one connection (each new redis-py connection sends CLIENT SETINFO,
    which Redis 7.0 answers with an error reply of its own)."""
    app = make_app({"redis": {"addr": server.addr}, "keys": keys})
    try:
        samples = exact_samples(call(app, "/metrics").text)
        # the exporter's connection is back in its own database for the next scrape's INFO and heartbeat reads
        ours = [c for c in client.client_list() if c["name"] == CLIENT_NAME]
        assert [c["db"] for c in ours] == ["0"]
        return samples
    finally:
        app.close()


def test_key_sizes_values_and_memory_are_exact(queues):
    client = queues.client()
    before = errors(client)
    samples = scrape(
        queues,
        {"check_single_keys": "queue:default,schedule,bull:emails:meta,stat:processed,stat:label,big,visitors,workers,missing,db2=queue:low"},
        client,
    )
    node = {"instance": f"127.0.0.1:{queues.port}", "db": "db0"}
    assert sample(samples, "redis_key_size", **node, key="queue:default") == 37
    assert sample(samples, "redis_key_size", **node, key="schedule") == 12
    assert sample(samples, "redis_key_size", **node, key="bull:emails:meta") == 3
    assert sample(samples, "redis_key_size", **node, key="workers") == 3
    assert sample(samples, "redis_key_size", **node, key="stat:processed") == 6  # a string's length
    assert sample(samples, "redis_key_value", **node, key="stat:processed") == 123456
    assert sample(samples, "redis_key_value_as_string", **node, key="stat:label", val="warm") == 1
    assert sample(samples, "redis_key_size", **node, key="visitors") == client.pfcount("visitors")  # a HyperLogLog: its count
    assert ("redis_key_value", tuple(sorted({**node, "key": "visitors"}.items()))) not in samples
    assert sample(samples, "redis_key_size", **node, key="big") == 5000
    assert not any(name.startswith("redis_key_value") and dict(labels).get("key") == "big" for name, labels in samples)  # too long
    assert sample(samples, "redis_key_size", **node, key="missing") == 0  # as redis_exporter: a missing key is 0
    assert sample(samples, "redis_key_size", **{**node, "db": "db2"}, key="queue:low") == 2
    assert sample(samples, "redis_key_memory_usage_bytes", **node, key="queue:default") == client.memory_usage("queue:default")
    assert sample(samples, "elasticache_exporter_key_probes_complete", instance=node["instance"]) == 1
    assert errors(client) == before


def test_a_pattern_count_over_20000_keys_is_exact_and_patterns_expand(queues):
    client = queues.client()
    before = errors(client)
    samples = scrape(queues, {"count_keys": "db0=session:*", "check_keys": "stat:*", "check_keys_batch_size": 500}, client)
    node = {"instance": f"127.0.0.1:{queues.port}", "db": "db0"}
    assert sample(samples, "redis_keys_count", **node, key="session:*") == MATCHING
    assert sample(samples, "elasticache_exporter_key_pattern_complete", **node, option="count_keys", pattern="session:*") == 1
    assert sample(samples, "redis_key_value", **node, key="stat:processed") == 123456
    assert sample(samples, "elasticache_exporter_key_pattern_keys", **node, option="check_keys", pattern="stat:*") == 2
    assert errors(client) == before


def test_budgets_say_that_they_cut_a_count_short(queues):
    client = queues.client()
    samples = scrape(queues, {"count_keys": "session:*", "check_keys": "session:*", "max_counted": 1000, "max_keys": 10}, client)
    node = {"instance": f"127.0.0.1:{queues.port}", "db": "db0"}
    assert not any(name == "redis_keys_count" for name, _ in samples)  # no partial number served as a count
    assert sample(samples, "elasticache_exporter_key_pattern_complete", **node, option="count_keys", pattern="session:*") == 0
    assert sample(samples, "elasticache_exporter_key_pattern_complete", **node, option="check_keys", pattern="session:*") == 0
    assert sum(1 for name, _ in samples if name == "redis_key_size") == 10


def test_streams_groups_consumers_pending_and_lag(queues):
    client = queues.client()
    before = errors(client)
    samples = scrape(queues, {"check_single_streams": "events,queue:default,nostream"}, client)
    stream = {"instance": f"127.0.0.1:{queues.port}", "db": "db0", "stream": "events"}
    info = client.xinfo_stream("events")
    assert sample(samples, "redis_stream_length", **stream) == 25
    assert sample(samples, "redis_stream_groups", **stream) == 2
    assert sample(samples, "redis_stream_entries_added_total", **stream) == 25
    assert sample(samples, "redis_stream_first_entry_id", **stream) == int(info["first-entry"][0].split(b"-")[0])
    assert sample(samples, "redis_stream_last_generated_id", **stream) == int(info["last-generated-id"].split(b"-")[0])
    billing = {**stream, "group": "billing"}
    assert sample(samples, "redis_stream_group_consumers", **billing) == 2
    assert sample(samples, "redis_stream_group_messages_pending", **billing) == 12  # 15 read, 3 acknowledged
    assert sample(samples, "redis_stream_group_entries_read", **billing) == 15
    assert sample(samples, "redis_stream_group_lag", **billing) == 10
    assert sample(samples, "redis_stream_group_lag", **stream, group="audit") == 0
    assert sample(samples, "redis_stream_group_consumer_messages_pending", **billing, consumer="worker-1") == 7
    assert sample(samples, "redis_stream_group_consumer_messages_pending", **billing, consumer="worker-2") == 5
    assert 0 <= sample(samples, "redis_stream_group_consumer_idle_seconds", **billing, consumer="worker-2") < 600
    assert not any(dict(labels).get("stream") in ("queue:default", "nostream") for _, labels in samples)  # not streams
    assert errors(client) == before


def test_keys_deleted_and_retyped_under_the_probes_add_no_error_replies():
    server = start_redis()
    client = server.client()
    try:
        stop = threading.Event()
        other = server.client()
        other.ping()  # connected (and its own CLIENT SETINFO error replies counted) before the count starts

        def churn() -> None:
            i = 0
            while not stop.is_set():
                key = f"flip:{i % 50}"
                step = i % 4
                if step == 0:
                    other.delete(key)
                    other.rpush(key, "a", "b")
                elif step == 1:
                    other.delete(key)
                    other.set(key, "7")
                elif step == 2:
                    other.delete(key)
                    other.xadd(key, {"f": "v"})
                else:
                    other.delete(key)
                i += 1

        for i in range(50):
            client.set(f"flip:{i}", "1")
        thread = threading.Thread(target=churn, daemon=True)
        thread.start()
        before = errors(client)
        app = make_app(
            {
                "redis": {"addr": server.addr},
                "keys": {"check_keys": "flip:*", "check_streams": "flip:*", "count_keys": "flip:*", "check_keys_batch_size": 5},
            }
        )
        try:
            deadline = time.monotonic() + 5
            scrapes = 0
            while time.monotonic() < deadline and scrapes < 60:
                samples = exact_samples(call(app, "/metrics").text)
                assert samples[("redis_up", (("instance", f"127.0.0.1:{server.port}"),))] == 1
                scrapes += 1
        finally:
            stop.set()
            thread.join(timeout=5)
            app.close()
        assert scrapes >= 10
        assert errors(client) == before
    finally:
        server.stop()


@pytest.mark.unit
def test_the_list_syntax_is_redis_exporters():
    assert parse_key_list("a, db3=jobs:*,1=x%2Cy,,db0=q+1") == (
        KeySpec(0, "a"),
        KeySpec(3, "jobs:*"),
        KeySpec(1, "x,y"),
        KeySpec(0, "q 1"),
    )
    assert KeySpec(3, "jobs:*").is_pattern
    assert not KeySpec(0, "jobs").is_pattern


@pytest.mark.unit
@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"check_keys": "db=x"}, "'keys.check_keys': 'db=x': 'db' is not a database such as db3"),
        ({"count_keys": ["ok", "a=b=c"]}, "'keys.count_keys[1]': 'a=b=c' has more than one '='"),
        ({"check_keys_batch_size": 0}, "keys.check_keys_batch_size"),
        ({"check_key": "a"}, "check_keys"),  # a typo: the nearest key is named
        ({"check_keys": "queue:*", "queues": {"db0=queu:jobs": 10}}, "'keys.queues['db0=queu:jobs']': matches none of the watched"),
        ({"check_single_keys": "q", "queues": {"db1=q": 10}}, "matches none of the watched keys (check_keys, check_single_keys) in db1"),
        ({"check_single_keys": "q", "queues": {"q": 0}}, "'keys.queues['q']': must be between 1 and"),
        ({"check_single_keys": "q", "queues": 5}, "'keys.queues': must map keys to a maximum length"),
    ],
)
def test_bad_key_settings_are_one_line_errors(keys, message):
    with pytest.raises(ConfigError) as caught:
        build_config({"redis": {"addr": "redis://127.0.0.1:1"}, "keys": keys})
    text = str(caught.value)
    assert message in text
    assert "\n" not in text


@pytest.mark.unit
def test_a_targets_own_keys_replace_the_defaults():
    config = build_config(
        {
            "keys": {"check_single_keys": "everywhere"},
            "targets": [
                {"name": "a", "addr": "redis://127.0.0.1:1", "keys": {"check_single_keys": "db1=only-here"}},
                {"name": "b", "addr": "redis://127.0.0.1:2"},
            ],
        }
    )
    assert config.targets[0].keys.check_single_keys == (KeySpec(1, "only-here"),)
    assert config.targets[1].keys is None
    assert config.keys.check_single_keys == (KeySpec(0, "everywhere"),)


def test_a_deadline_that_passes_in_another_database_closes_the_connection_instead_of_failing_the_scrape(queues):
    """Probes stopped by the deadline after a SELECT: the connection cannot be put back in its database in time, so it
    is closed (the next scrape connects afresh) and the probes report incomplete; nothing is raised into the scrape."""
    from exporter.redis.key_probe import KeyProber
    from exporter.redis.keys import KeyProbes
    from exporter.redis.resp import RespConnection

    conn = RespConnection.open("127.0.0.1", queues.port, time.monotonic() + 5)
    try:
        prober = KeyProber(
            conn,
            KeyProbes(check_single_keys=(KeySpec(2, "queue:low"),)),
            time.monotonic() - 1,
            cluster=False,
            owns=lambda key: True,
            current_db=0,
            memory_usage=True,
        )
        prober.db = 2  # a SELECT 2 went out before the deadline passed
        result = prober.run()
    finally:
        conn.close()
    assert not result.complete
    assert conn.closed


def test_queue_limits_are_served_for_the_watched_keys_that_are_queues(queues):
    client = queues.client()
    samples = scrape(
        queues,
        {"check_keys": "queue:*", "check_single_keys": "schedule,workers,db2=queue:low", "queues": {"db0=queue:*": 20, "schedule": None}},
        client,
    )
    node = {"instance": f"127.0.0.1:{queues.port}", "db": "db0"}
    limit_family = "elasticache_exporter_queue_length_limit"
    limits = {dict(labels)["key"]: (dict(labels)["db"], v) for (name, labels), v in samples.items() if name == limit_family}
    assert limits == {"queue:default": ("db0", 20), "schedule": ("db0", float("inf"))}  # not workers, not db2's queue:low
    assert sample(samples, "redis_key_size", **node, key="queue:default") == 37


@pytest.mark.unit
def test_queues_may_be_a_list_and_match_by_redis_glob():
    config = build_config(
        {"redis": {"addr": "redis://127.0.0.1:1"}, "keys": {"check_keys": "bull:*", "queues": ["bull:*:wait", "db0=bull:[^x]*:active"]}}
    )
    assert config.keys.queues == (QueueSpec(0, "bull:*:wait"), QueueSpec(0, "bull:[^x]*:active"))
    assert config.keys.queues[0].matches(0, "bull:emails:wait")
    assert not config.keys.queues[0].matches(1, "bull:emails:wait")
    assert not config.keys.queues[1].matches(0, "bull:xyz:active")
    for pattern, key, expected in (
        ("a\\*", "a*", True),
        ("a\\*", "ab", False),
        ("q?", "qa", True),
        ("x.y", "xzy", False),
        ("[a-c]1", "b1", True),
        ("[a-c]1", "d1", False),
    ):
        assert (glob_regex(pattern).fullmatch(key) is not None) is expected, (pattern, key)


def test_a_node_that_hangs_on_the_probes_keeps_its_info_metrics_within_the_deadline(queues):
    """The node answers INFO and then hangs on the probes' first script: the scrape ends at its deadline with the INFO
    metrics and ``elasticache_exporter_key_probes_complete 0``, and the next scrape reconnects."""
    proxy = StallableProxy(queues.port, stall_on=b"EVAL")
    app = make_app({"redis": {"addr": f"redis://127.0.0.1:{proxy.port}", "timeout": "1s"}, "keys": {"check_single_keys": "queue:default"}})
    try:
        for _ in range(2):
            started = time.monotonic()
            samples = exact_samples(call(app, "/metrics").text)
            elapsed = time.monotonic() - started
            instance = f"127.0.0.1:{proxy.port}"
            assert 0.9 < elapsed < 3, elapsed
            assert sample(samples, "redis_up", instance=instance) == 1
            assert sample(samples, "redis_connected_clients", instance=instance) >= 1
            assert sample(samples, "elasticache_exporter_key_probes_complete", instance=instance) == 0
            assert not any(name == "redis_key_size" for name, _ in samples)
            proxy.resume()  # the stalled connection is gone; a new one stalls again on its own EVAL
    finally:
        app.close()
        proxy.close()


def test_a_user_without_eval_gets_info_metrics_and_one_refusal_per_connection(queues):
    client = queues.client()
    client.acl_setuser("noeval", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-eval", "-evalsha"])
    app = make_app({"redis": {"addr": f"redis://noeval:pw@127.0.0.1:{queues.port}"}, "keys": {"check_single_keys": "queue:default"}})
    try:
        before = errors(client)
        for _ in range(3):
            samples = exact_samples(call(app, "/metrics").text)
            instance = f"127.0.0.1:{queues.port}"
            assert sample(samples, "redis_up", instance=instance) == 1
            assert sample(samples, "redis_connected_clients", instance=instance) >= 1
            assert not any(name == "redis_key_size" for name, _ in samples)
        assert errors(client) - before == 1  # the refused EVAL, once: not retried on the same connection
    finally:
        app.close()
        client.acl_deluser("noeval")


def test_the_stalling_proxy_leaves_no_connection_behind(fresh_redis):
    """The proxy's close() ends its connection to the server even while a pump is blocked reading it (a connection left
    open there would be counted by the next test that reads CLIENT LIST)."""
    proxy = StallableProxy(fresh_redis.port, stall_on=b"EVAL")
    client = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    client.sendall(b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$7\r\nthrough\r\n")
    assert client.recv(100) == b"+OK\r\n"  # both pumps run; the server's side now waits in recv

    def named() -> list[dict]:
        return [c for c in fresh_redis.client().client_list() if c.get("name") == "through"]

    assert len(named()) == 1
    proxy.close()
    client.close()
    wait_until(lambda: named() == [], timeout=5, what="the proxy's connection to the server closed")
