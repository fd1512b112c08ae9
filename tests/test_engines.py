"""Each engine ElastiCache runs that runs here (Redis 7.0, Valkey 8.1, Redis 8.2), as a real server: no error reply in
standalone, behind ElastiCache's renamed commands and as a replica, and the families each engine adds."""

from __future__ import annotations

import pytest
import redis
from helpers import call, make_app, sample
from servers import ENGINES, start_redis, wait_until

RENAMED_AWAY = ("CONFIG", "SLOWLOG", "LATENCY", "DEBUG", "MONITOR", "SHUTDOWN", "BGSAVE", "REPLICAOF", "SLAVEOF", "ACL")
COMMANDLOG_LENGTHS = ("redis_commandlog_slow_length", "redis_commandlog_large_request_length", "redis_commandlog_large_reply_length")
COMMANDLOG_THRESHOLDS = (
    "redis_commandlog_execution_slower_than", "redis_commandlog_slow_execution_max_len", "redis_commandlog_request_larger_than",
    "redis_commandlog_large_request_max_len", "redis_commandlog_reply_larger_than", "redis_commandlog_large_reply_max_len",
)  # fmt: skip


@pytest.fixture(params=sorted(ENGINES))
def engine(request) -> str:
    return request.param


def errors(client: redis.Redis) -> int:
    return client.info("stats")["total_error_replies"]


def scrape_twice(addr: str) -> dict:
    """Two scrapes (the first learns the most called commands, the second asks their histograms); the second's samples."""
    app = make_app({"redis": {"addr": addr}})
    try:
        call(app, "/metrics")
        return call(app, "/metrics").samples()
    finally:
        app.close()


def names(samples: dict) -> set[str]:
    return {name for name, _ in samples}


def has_commandlog(client: redis.Redis) -> bool:
    """COMMAND INFO's own answer (redis-py's parser of it fails on the nil of an unknown command)."""
    connection = client.connection_pool.get_connection()
    try:
        connection.send_command("COMMAND", "INFO", "COMMANDLOG")
        return connection.read_response() != [None]
    finally:
        client.connection_pool.release(connection)


def test_standalone_no_error_reply_and_the_engine_s_own_families(engine):
    server = start_redis(engine=engine)
    try:
        client = server.client(single_connection_client=True)
        for i in range(20):
            client.set(f"k{i}", "v", ex=600)
            client.get(f"k{i}")
        client.hset("fields", mapping={"a": "1", "b": "2"})
        subexpiry = client.info("keyspace")["db0"].get("subexpiry")
        if subexpiry is not None:
            client.execute_command("HEXPIRE", "fields", 600, "FIELDS", 1, "a")  # a hash field with a TTL: 1 key with expiring items
        before = errors(client)
        samples = scrape_twice(server.addr)
        assert errors(client) == before, f"the scrape drew error replies from {engine}"
        target = f"127.0.0.1:{server.port}"
        assert sample(samples, "redis_up", instance=target) == 1
        assert sample(samples, "redis_db_keys", instance=target, db="db0") == 21
        assert any(name == "redis_commands_latencies_usec_bucket" for name in names(samples))  # LATENCY HISTOGRAM on all three
        info_labels = {dict(labels).get("valkey_version") for name, labels in samples if name == "redis_instance_info"}
        assert info_labels == {client.info("server").get("valkey_version")}  # a label where the server has it, as redis_exporter
        if subexpiry is not None:  # Redis 7.4+: the keys with expiring items, as redis_exporter 1.90 names them
            expiring_items = sample(samples, "redis_db_keys_with_expiring_items", instance=target, db="db0")
            assert expiring_items == client.info("keyspace")["db0"]["subexpiry"] == 1
        else:
            assert "redis_db_keys_with_expiring_items" not in names(samples)
        assert "redis_db_keys_cached" not in names(samples)  # keyspace's cached_keys only (KeyDB)
        if has_commandlog(client):  # Valkey 8.1+
            assert names(samples) >= {*COMMANDLOG_LENGTHS, *COMMANDLOG_THRESHOLDS}
            config = client.config_get("commandlog-*")
            assert sample(samples, "redis_commandlog_execution_slower_than", instance=target) == float(config["commandlog-execution-slower-than"])
            assert sample(samples, "redis_commandlog_large_reply_max_len", instance=target) == float(config["commandlog-large-reply-max-len"])
        else:
            assert not names(samples) & {*COMMANDLOG_LENGTHS, *COMMANDLOG_THRESHOLDS}
    finally:
        server.stop()


def test_commandlog_lengths_are_the_server_s(engine):
    server = start_redis(engine=engine)
    try:
        client = server.client(single_connection_client=True)
        if not has_commandlog(client):
            pytest.skip(f"{engine} has no COMMANDLOG")
        client.config_set("commandlog-execution-slower-than", 0)  # every command is slow
        client.config_set("commandlog-reply-larger-than", 10)
        client.set("big", "x" * 100)
        for _ in range(5):
            client.get("big")
        client.config_set("commandlog-execution-slower-than", 10_000_000)  # the scrape's own commands are not logged
        client.config_set("commandlog-reply-larger-than", 1_000_000_000)
        expected = {log: client.execute_command("COMMANDLOG", "LEN", log) for log in ("slow", "large-request", "large-reply")}
        newest_slow = client.execute_command("COMMANDLOG", "GET", "1", "slow")[0]
        newest_reply = client.execute_command("COMMANDLOG", "GET", "1", "large-reply")[0]
        assert expected["slow"] >= 8
        assert expected["large-reply"] >= 5
        samples = scrape_twice(server.addr)
        target = f"127.0.0.1:{server.port}"
        assert sample(samples, "redis_commandlog_slow_length", instance=target) == expected["slow"]
        assert sample(samples, "redis_commandlog_large_request_length", instance=target) == expected["large-request"]
        assert sample(samples, "redis_commandlog_large_reply_length", instance=target) == expected["large-reply"]
        assert sample(samples, "redis_commandlog_execution_slower_than", instance=target) == 10_000_000
        # SLOWLOG reads the slow command log on these engines: its newest entry is COMMANDLOG's, at no extra command
        assert sample(samples, "redis_slowlog_last_id", instance=target) == newest_slow[0]
        assert sample(samples, "redis_last_slow_execution_duration_seconds", instance=target) == newest_slow[2] / 1e6
        assert sample(samples, "redis_slowlog_length", instance=target) == expected["slow"]
        assert sample(samples, "elasticache_commandlog_last_id", instance=target, log="large-reply") == newest_reply[0] > 0
        assert sample(samples, "elasticache_commandlog_last_entry_bytes", instance=target, log="large-reply") == newest_reply[2] >= 100
        assert sample(samples, "elasticache_commandlog_last_id", instance=target, log="large-request") == 0  # empty
    finally:
        server.stop()


def test_elasticache_renamed_commands_draw_no_error_reply(engine):
    """CONFIG, SLOWLOG, LATENCY and the like renamed away as on ElastiCache: COMMAND INFO says so, nothing is sent."""
    renames = [arg for command in RENAMED_AWAY for arg in ("--rename-command", command, "")]
    server = start_redis(*renames, engine=engine)
    try:
        client = server.client(single_connection_client=True)
        client.set("k", "v")
        before = errors(client)
        samples = scrape_twice(server.addr)
        assert errors(client) == before, f"the scrape drew error replies from {engine} with CONFIG renamed away"
        target = f"127.0.0.1:{server.port}"
        assert sample(samples, "redis_up", instance=target) == 1
        assert not names(samples) & set(COMMANDLOG_THRESHOLDS)  # they come from CONFIG
        if has_commandlog(client):
            assert names(samples) >= set(COMMANDLOG_LENGTHS)
    finally:
        server.stop()


def test_primary_and_replica_draw_no_error_reply(engine):
    primary = start_redis(engine=engine)
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port), engine=engine)
    try:
        wait_until(lambda: replica.info().get("master_link_status") == "up", timeout=30, what="replica link")
        clients = [node.client(single_connection_client=True) for node in (primary, replica)]
        clients[0].set("k", "v")
        wait_until(lambda: clients[1].get("k") == b"v", what="replicated write")
        before = [errors(client) for client in clients]
        app = make_app({"targets": [{"name": "primary", "addr": primary.addr}, {"name": "replica", "addr": replica.addr}]})
        try:
            call(app, "/metrics")
            samples = call(app, "/metrics").samples()
        finally:
            app.close()
        assert [errors(client) for client in clients] == before, f"the scrape drew error replies from {engine}"
        assert sample(samples, "redis_instance_role", instance="primary", role="master") == 1
        assert sample(samples, "redis_instance_role", instance="replica", role="slave") == 1
        assert sample(samples, "redis_connected_slaves", instance="primary") == 1
    finally:
        replica.stop()
        primary.stop()


def test_key_probes_and_the_heartbeat_writer(engine):
    """Watched keys, a pattern count, a stream and the exporter's own heartbeat on a primary and its replica: exact
    values, the heartbeat read back on the replica, no error reply from either."""
    primary = start_redis(engine=engine)
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port), engine=engine)
    try:
        wait_until(lambda: replica.info().get("master_link_status") == "up", timeout=30, what="replica link")
        clients = [node.client(single_connection_client=True) for node in (primary, replica)]
        writer = clients[0]
        writer.rpush("queue:default", *[f"job{i}" for i in range(7)])
        writer.zadd("schedule", {"a": 1, "b": 2})
        writer.set("stat:processed", "4242")
        writer.mset({f"session:{i}": "x" for i in range(150)})
        for i in range(5):
            writer.xadd("events", {"n": str(i)})
        writer.xgroup_create("events", "billing", id="0")
        writer.xreadgroup("billing", "worker-1", {"events": ">"}, count=2)
        wait_until(lambda: clients[1].xlen("events") == 5, what="replicated stream")
        before = [errors(client) for client in clients]
        keys = {"check_single_keys": "queue:default,schedule,stat:processed", "count_keys": "session:*", "check_single_streams": "events"}
        app = make_app(
            {
                "targets": [{"name": "primary", "addr": primary.addr}, {"name": "replica", "addr": replica.addr}],
                "keys": keys,
                "heartbeat": {"write": True, "interval": "100ms", "ttl": "10s"},
            }
        )
        try:

            def exporter_lag() -> float | None:
                samples = call(app, "/metrics").samples()
                return samples.get(("elasticache_replication_heartbeat_lag_seconds", (("instance", "replica"), ("source", "exporter"))))

            wait_until(lambda: (lag := exporter_lag()) is not None and lag < 1.0, timeout=15, what=f"a heartbeat on the {engine} replica")
            samples = call(app, "/metrics").samples()
        finally:
            app.close()
        assert [errors(client) for client in clients] == before, f"the probes or the writer drew error replies from {engine}"
        for node in ("primary", "replica"):
            labels = {"instance": node, "db": "db0"}
            assert sample(samples, "redis_key_size", **labels, key="queue:default") == 7
            assert sample(samples, "redis_key_size", **labels, key="schedule") == 2
            assert sample(samples, "redis_key_value", **labels, key="stat:processed") == 4242
            assert sample(samples, "redis_keys_count", **labels, key="session:*") == 150
            assert sample(samples, "redis_stream_length", **labels, stream="events") == 5
            assert sample(samples, "redis_stream_group_messages_pending", **labels, stream="events", group="billing") == 2
        assert sample(samples, "elasticache_exporter_heartbeat_writes_total", instance="primary") >= 1
        assert 0 < clients[0].pttl("elasticache-exporter:heartbeat") <= 10_000
    finally:
        replica.stop()
        primary.stop()
