"""Who holds the connections: CLIENT LIST read in the background on real servers, 5,000 connections from three client
names counted exactly, the largest output buffer found, the reply bounded by the reply-size limit, and no error reply
where CLIENT is renamed away."""

from __future__ import annotations

import resource
import socket

import pytest
from helpers import call, make_app, sample
from servers import start_redis, wait_until

from exporter.redis.clients import OTHER, UNNAMED, parse_client_list, profile

NAMES = {"orders-api": 3000, "billing-worker": 1500, "cron": 400}
UNNAMED_COUNT = 100


def command(*parts: bytes) -> bytes:
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in parts)


def open_clients(port: int, names: dict[str, int], unnamed: int) -> list[socket.socket]:
    """Connections named with CLIENT SETNAME (pipelined: each connection answers +OK once all are open)."""
    named, plain = [], []
    for name, count in names.items():
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(command(b"CLIENT", b"SETNAME", name.encode()))
            named.append(sock)
    plain = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(unnamed)]
    for sock in named:
        assert sock.recv(16) == b"+OK\r\n"
    return named + plain


@pytest.fixture(scope="module")
def crowded():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 12000:
        pytest.skip(f"5,000 connections need more file descriptors than this machine allows ({hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 12000), hard))
    server = start_redis("--maxclients", "10000")
    sockets = open_clients(server.port, NAMES, UNNAMED_COUNT)
    yield server
    for sock in sockets:
        sock.close()
    server.stop()


def truth(server) -> dict[str, int]:
    counts: dict[str, int] = {}
    for client in server.client().client_list():
        name = client["name"] or UNNAMED
        counts[name] = counts.get(name, 0) + 1
    return counts


def test_five_thousand_connections_of_three_names_are_counted_exactly(crowded):
    app = make_app({"targets": [{"name": "node", "addr": crowded.addr}], "clients": {"enabled": True, "interval": "5s"}})
    try:
        wait_until(lambda: app.client_profiler.snapshot()[0].get("node") is not None, timeout=20, what="a CLIENT LIST read")
        samples = call(app, "/metrics").samples()
    finally:
        app.close()
    expected = truth(crowded)
    for name, count in NAMES.items():
        assert sample(samples, "elasticache_clients_connected", instance="node", client_name=name) == count
    # the profiler's own connection and the test's: counted as the server lists them
    assert sample(samples, "elasticache_clients_connected", instance="node", client_name=UNNAMED) >= UNNAMED_COUNT
    served = {dict(labels)["client_name"]: value for (name, labels), value in samples.items() if name == "elasticache_clients_connected"}
    assert sum(served.values()) == pytest.approx(sum(expected.values()), abs=2)  # the test's connection comes and goes
    assert sample(samples, "elasticache_clients_connected_by_source", instance="node", source="127.0.0.1") == sum(served.values())
    assert sample(samples, "elasticache_clients_output_buffer_bytes_max", instance="node", client_name="orders-api") == 0
    assert not [key for key in samples if key[0] == "elasticache_clients_idle"]  # nothing has been idle for a minute yet


def test_the_top_names_and_the_rest(crowded):
    app = make_app({"targets": [{"name": "node", "addr": crowded.addr}], "clients": {"enabled": True, "top": 2}})
    try:
        wait_until(lambda: app.client_profiler.snapshot()[0].get("node") is not None, timeout=20, what="a CLIENT LIST read")
        samples = call(app, "/metrics").samples()
    finally:
        app.close()
    served = {dict(labels)["client_name"]: value for (name, labels), value in samples.items() if name == "elasticache_clients_connected"}
    assert set(served) == {"orders-api", "billing-worker", UNNAMED, OTHER}
    assert served[OTHER] >= NAMES["cron"]  # cron and the exporter's own connection


def test_a_client_that_does_not_read_its_replies_shows_in_the_output_buffer():
    server = start_redis()
    slow = socket.create_connection(("127.0.0.1", server.port))
    try:
        server.client().set("big", "x" * 1_000_000)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.sendall(command(b"CLIENT", b"SETNAME", b"slow-reader") + command(b"GET", b"big") * 20)  # never read
        wait_until(
            lambda: any(c["name"] == "slow-reader" and int(c["omem"]) > 1_000_000 for c in server.client().client_list()), what="replies piling up"
        )
        app = make_app({"targets": [{"name": "node", "addr": server.addr}], "clients": {"enabled": True}})
        try:
            wait_until(lambda: app.client_profiler.snapshot()[0].get("node") is not None, timeout=20, what="a CLIENT LIST read")
            samples = call(app, "/metrics").samples()
        finally:
            app.close()
        truth_omem = max(int(c["omem"]) for c in server.client().client_list() if c["name"] == "slow-reader")
        served = sample(samples, "elasticache_clients_output_buffer_bytes_max", instance="node", client_name="slow-reader")
        assert served > 1_000_000
        assert served == pytest.approx(truth_omem, rel=0.5)
    finally:
        slow.close()
        server.stop()


def test_a_reply_past_the_size_limit_is_an_error_not_a_crash(crowded):
    app = make_app({"targets": [{"name": "node", "addr": crowded.addr}], "clients": {"enabled": True, "max_reply_size": "64KiB"}})
    try:
        wait_until(lambda: app.client_profiler.snapshot()[1], timeout=20, what="a refused CLIENT LIST")
        samples = call(app, "/metrics").samples()
        assert sample(samples, "elasticache_exporter_client_list_errors_total", instance="node", kind="reply_too_large") >= 1
        assert sample(samples, "redis_up", instance="node") == 1  # the scrape itself is unaffected
    finally:
        app.close()


def test_no_error_reply_where_client_is_renamed_away():
    server = start_redis("--rename-command", "CLIENT", "")
    try:
        client = server.client(single_connection_client=True)  # redis-py's CLIENT SETINFO fails here, once, before counting
        before = client.info("stats")["total_error_replies"]
        app = make_app({"targets": [{"name": "node", "addr": server.addr}], "clients": {"enabled": True, "interval": "5s"}})
        try:
            app.client_profiler.visit_all()
            samples = call(app, "/metrics").samples()
        finally:
            app.close()
        assert not [key for key in samples if key[0].startswith("elasticache_clients_")]
        assert client.info("stats")["total_error_replies"] == before
    finally:
        server.stop()


@pytest.mark.unit
def test_idle_buckets_and_unnamed_from_a_client_list_text():
    text = (
        b"id=3 addr=10.0.0.5:50380 laddr=10.0.0.1:6379 fd=8 name=api age=900 idle=700 flags=N db=0 omem=0\n"
        b"id=4 addr=10.0.0.5:50381 laddr=10.0.0.1:6379 fd=9 name=api age=90 idle=61 flags=N db=0 omem=2048\n"
        b"id=5 addr=[::1]:50382 laddr=[::1]:6379 fd=10 name= age=5000 idle=4000 flags=N db=0 omem=0\n"
        b"id=6 addr=10.0.0.6:50383 laddr=10.0.0.1:6379 fd=11 name=api age=1 idle=0 flags=N db=0 omem=0\n"
    )
    result = profile(parse_client_list(text), top=20)
    assert result.connected == {"api": 3, UNNAMED: 1}
    assert result.idle == {("api", "1m"): 2, ("api", "10m"): 1, (UNNAMED, "1m"): 1, (UNNAMED, "10m"): 1, (UNNAMED, "1h"): 1}
    assert result.by_source == {"10.0.0.5": 2, "::1": 1, "10.0.0.6": 1}
    assert result.output_buffer_max == {"api": 2048, UNNAMED: 0}


@pytest.mark.unit
@pytest.mark.parametrize("engine", ["redis_7_0", "valkey_8_1", "redis_8_2"])
def test_the_fast_reading_agrees_with_reading_each_field(engine):
    """CLIENT LIST as three engines print it (tests/data/upstream_values/client_list_*): the one-pattern reading of
    name, address, idle and omem gives what splitting every field of every line gives."""
    import json
    from pathlib import Path

    from exporter.redis.clients import _parse_each_line

    entries = json.loads((Path(__file__).parent / "data" / "upstream_values" / f"client_list_{engine}.json").read_text())
    bulk = next(entry["reply"] for entry in entries if entry["command"] == ["CLIENT", "LIST"]).encode("latin-1")
    reply = bulk.split(b"\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
    assert len(list(parse_client_list(reply))) >= 10
    assert list(parse_client_list(reply)) == list(_parse_each_line(reply))
    odd = reply + b"id=99 addr=10.0.0.9:5000 fd=30 name=legacy age=1 idle=700\n"  # a line without omem: each line read alone
    assert list(parse_client_list(odd))[-1] == ("legacy", "10.0.0.9", 700, 0)


def test_discovered_nodes_are_profiled_while_they_are_there(aws_credentials):
    """With aws.scrape_discovered, the nodes discovery finds are profiled too, each on a connection of the profiler's
    own; a node discovery no longer finds is dropped with what was kept of it."""
    from moto import mock_aws
    from servers import wait_until

    from exporter.aws.discovery import Node

    server = start_redis()
    try:
        with mock_aws():
            app = make_app(
                {
                    "redis": {"addr": ""},
                    "aws": {"regions": ["eu-west-1"], "scrape_discovered": True, "discovery_interval": "1h"},
                    "clients": {"enabled": True, "interval": "5s"},
                }
            )
            try:
                wait_until(lambda: app.aws_monitor.last_discovery, what="the first discovery (of nothing)")
                node = Node(
                    region="eu-west-1",
                    cluster_id="orders-0001-001",
                    node_id="0001",
                    node_type="cache.r6g.large",
                    engine="redis",
                    engine_version="7.1",
                    replication_group="orders",
                    shard="0001",
                    role="primary",
                    address="127.0.0.1",
                    port=server.port,
                )
                app.targets.set_discovered([("orders-0001-001", node)])
                app.client_profiler.visit_all()
                assert app.client_profiler.snapshot()[0]["orders-0001-001"].total >= 1
                samples = call(app, "/metrics").samples()
                assert sample(samples, "elasticache_clients_profile_age_seconds", instance="orders-0001-001") < 60
                app.targets.set_discovered([])
                app.client_profiler.visit_all()
                assert "orders-0001-001" not in app.client_profiler.snapshot()[0]
            finally:
                app.close()
    finally:
        server.stop()
