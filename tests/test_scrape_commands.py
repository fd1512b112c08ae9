"""Exactly what a scrape sends to a real server, read off the wire: the scrape table's commands in order, CONFIG only
where allowed and once a minute, nothing the node renamed away, and the connection's set-up once."""

from __future__ import annotations

import time

import pytest
from helpers import call, exact_samples, make_app
from proxy import StallableProxy
from servers import start_redis

from exporter.redis.latency import bucket_pairs, parse_histograms
from exporter.redis.pipeline import PROBES
from exporter.redis.resp import RespConnection

HEARTBEATS = ("ElastiCacheMasterReplicationTimestamp", "elasticache-exporter:heartbeat")  # ElastiCache's key and ours
CONFIGS = [("CONFIG", "GET", parameter) for parameter in ("io-threads", "repl-backlog-size", "client-output-buffer-limit", "databases")]


@pytest.fixture
def proxied():
    server = start_redis()
    proxy = StallableProxy(server.port)
    yield server, proxy
    proxy.close()
    server.stop()


def test_a_scrape_sends_the_table_in_order(proxied):
    server, proxy = proxied
    admin = server.client()
    errors = admin.info("stats")["total_error_replies"]
    app = make_app({"redis": {"addr": f"redis://127.0.0.1:{proxy.port}"}})
    try:
        call(app, "/metrics")
        first = proxy.commands()
        call(app, "/metrics")
        second = proxy.commands()
    finally:
        app.close()
    assert first == [
        *PROBES,
        ("INFO", "cluster"),
        ("CLIENT", "SETNAME", "elasticache-exporter"),
        ("INFO", "ALL"),
        ("SLOWLOG", "LEN"),
        ("SLOWLOG", "GET", "1"),
        ("LATENCY", "LATEST"),
        *CONFIGS,
        ("MGET", *HEARTBEATS),
        *(("TYPE", key) for key in HEARTBEATS),
    ]
    # the connection is kept, CONFIG waits a minute, and LATENCY HISTOGRAM asks for the most called commands
    assert [words[:2] for words in second] == [
        ("INFO", "ALL"),
        ("SLOWLOG", "LEN"),
        ("SLOWLOG", "GET"),
        ("LATENCY", "LATEST"),
        ("LATENCY", "HISTOGRAM"),
        ("MGET", HEARTBEATS[0]),
        ("TYPE", HEARTBEATS[0]),
        ("TYPE", HEARTBEATS[1]),
    ]
    assert {"info", "command|info"} <= set(second[4][2:])
    assert admin.info("stats")["total_error_replies"] == errors


def test_a_node_without_config_and_latency_is_never_sent_them():
    renamed = start_redis("--rename-command", "CONFIG", "", "--rename-command", "LATENCY", "")
    proxy = StallableProxy(renamed.port)
    admin = renamed.client()
    errors = admin.info("stats")["total_error_replies"]
    try:
        app = make_app({"redis": {"addr": f"redis://127.0.0.1:{proxy.port}"}, "heartbeat": {"read": False}})
        try:
            for _ in range(3):
                call(app, "/metrics")
        finally:
            app.close()
        sent = proxy.commands()
        assert [words for words in sent if words[0] == "COMMAND"] == list(PROBES)  # one connection, probed once
        assert [words for words in sent if words[0] != "COMMAND"] == [("INFO", "cluster"), ("CLIENT", "SETNAME", "elasticache-exporter")] + [
            ("INFO", "ALL"),
            ("SLOWLOG", "LEN"),
            ("SLOWLOG", "GET", "1"),
        ] * 3
        assert admin.info("stats")["total_error_replies"] == errors
    finally:
        proxy.close()
        renamed.stop()


def test_histograms_of_commands_whose_calls_stand_are_served_without_asking_again(proxied):
    server, proxy = proxied
    client = server.client()
    client.set("k", "v")
    app = make_app({"redis": {"addr": f"redis://127.0.0.1:{proxy.port}"}, "heartbeat": {"read": False}})
    try:
        for _ in range(2):
            call(app, "/metrics")
        proxy.commands()
        text = call(app, "/metrics").text
        (asked,) = [words[2:] for words in proxy.commands() if words[:2] == ("LATENCY", "HISTOGRAM")]
    finally:
        app.close()
    assert "info" in asked  # the exporter's own INFO counts a call each scrape
    assert "set" not in asked  # nobody has called SET since it was last read
    # what is served for SET is what the server answers now, bucket for bucket
    served = {
        dict(labels)["le"]: value
        for (name, labels), value in exact_samples(text).items()
        if name == "redis_commands_latencies_usec_bucket" and dict(labels)["cmd"] == "set"
    }
    connection = RespConnection.open("127.0.0.1", server.port, time.monotonic() + 5)
    ((calls, buckets),) = parse_histograms(connection.call([("LATENCY", "HISTOGRAM", "set")], time.monotonic() + 5)[0]).values()
    connection.close()
    assert served == {**dict(bucket_pairs(buckets)), "+Inf": float(calls)}
    assert calls == 1
