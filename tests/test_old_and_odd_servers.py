"""Servers that are old, odd or broken: Redis 2.6 without INFO ALL and COMMAND, malformed replies, cluster mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_resp import FakeRespServer, bulk, error
from helpers import call, make_app, sample
from servers import start_redis

from exporter.redis.pipeline import PROBES

DATA = Path(__file__).parent / "data"

# what the exporter asks on connect: COMMAND INFO, eight names at a time
PROBES_SENT = [tuple(part.upper() for part in probe) for probe in PROBES]


@pytest.fixture
def redis_2_6():
    info = (DATA / "info_redis_2_6_replica.txt").read_text().replace("\n", "\r\n")
    server = FakeRespServer(
        {
            ("INFO",): bulk(info),
            ("INFO", "COMMANDSTATS"): bulk("# Commandstats\r\ncmdstat_get:calls=7,usec=70,usec_per_call=10.00\r\n"),
            ("INFO", "CLUSTER"): bulk(""),
            ("PING",): b"+PONG\r\n",
        }
    )
    yield server
    server.close()


def test_redis_2_6_falls_back_to_info_and_its_sections(redis_2_6):
    app = make_app({"targets": [{"name": "old", "addr": redis_2_6.addr}]})
    try:
        samples = call(app, "/metrics").samples()
        assert sample(samples, "redis_up", instance="old") == 1
        assert sample(samples, "redis_uptime_in_seconds", instance="old") == 3118
        assert sample(samples, "redis_commands_total", instance="old", cmd="get") == 7
        master = "xxxxx.xxx.0001.internal.apne1.cache.amazonaws.com"
        assert sample(samples, "redis_master_link_up", instance="old", master_host=master, master_port="6379") == 1
        sent_before = len(redis_2_6.received)
        for _ in range(3):
            samples = call(app, "/metrics").samples()
        later = [tuple(c) for c in redis_2_6.received[sent_before:]]
        # learnt once: no more INFO ALL, and the optional commands that failed are not sent again
        assert ("INFO", "ALL") not in later
        assert not any(command[0] in ("SLOWLOG", "LATENCY") for command in later)
        assert sample(samples, "redis_up", instance="old") == 1
    finally:
        app.close()


@pytest.mark.parametrize(
    "reply",
    [
        b"+OK\r\n",  # a status where a bulk string belongs
        b":12\r\n",
        b"*2\r\n$1\r\na\r\n:1\r\n",
        bulk(b"\xff\xfe\x00garbage\r\nno colon here\r\n# \r\nkey:\r\n"),
        bulk("# Server\r\nuptime_in_seconds:not-a-number\r\nredis_version:9\r\n"),
        b"$5\r\nab",  # truncated bulk: the read times out
        b"!!!! not RESP at all\r\n",
    ],
)
def test_malformed_replies_never_crash_the_exporter(reply):
    server = FakeRespServer({("INFO", "ALL"): reply, **dict.fromkeys(PROBES_SENT, b"*-1\r\n")})
    app = make_app({"targets": [{"name": "odd", "addr": server.addr, "timeout": "500ms"}]})
    try:
        response = call(app, "/metrics")
        assert response.code == 200
        samples = response.samples()
        assert sample(samples, "redis_up", instance="odd") in (0, 1)
        assert call(app, "/metrics").code == 200
    finally:
        app.close()
        server.close()


def test_malformed_info_lines_are_counted(fresh_redis):
    server = FakeRespServer(
        {
            ("INFO", "ALL"): bulk("# Server\r\nuptime_in_seconds:5\r\nthis line is broken\r\n:\r\n"),
            **{probe: b"*%d\r\n" % (len(probe) - 2) + b"*-1\r\n" * (len(probe) - 2) for probe in PROBES_SENT},
            ("INFO", "CLUSTER"): bulk(""),
        }
    )
    app = make_app({"targets": [{"name": "odd", "addr": server.addr}], "heartbeat": {"read": False}})
    try:
        call(app, "/metrics")
        samples = call(app, "/metrics").samples()
        assert sample(samples, "redis_up", instance="odd") == 1
        assert sample(samples, "elasticache_exporter_info_malformed_lines_total", instance="odd") == 4
        sent = {command[0] for command in server.received}
        assert sent <= {"COMMAND", "INFO"}  # every optional command was reported missing, so none was sent
    finally:
        app.close()
        server.close()


def test_loading_and_error_replies_count_as_failures():
    server = FakeRespServer({}, default=error("LOADING Redis is loading the dataset in memory"))
    app = make_app({"targets": [{"name": "loading", "addr": server.addr}]})
    try:
        samples = call(app, "/metrics").samples()
        assert sample(samples, "redis_up", instance="loading") == 0
        assert sample(samples, "elasticache_exporter_target_last_error", instance="loading", kind="loading") == 1
    finally:
        app.close()
        server.close()


def test_cluster_mode_exports_cluster_info():
    server = start_redis("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
    app = make_app({"targets": [{"name": "cluster", "addr": server.addr}]})
    try:
        samples = call(app, "/metrics").samples()
        assert sample(samples, "redis_cluster_enabled", instance="cluster") == 1
        assert sample(samples, "redis_cluster_known_nodes", instance="cluster") == 1
        assert sample(samples, "redis_cluster_state", instance="cluster") == 0  # no slots assigned
    finally:
        app.close()
        server.stop()
