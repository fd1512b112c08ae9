"""Exactly what a scrape sends to a real server, read off the wire: the scrape table's commands in order, CONFIG only
where allowed and once a minute, nothing the node renamed away, and the connection's set-up once."""

from __future__ import annotations

import time

import pytest
from helpers import call, exact_samples, make_app
from proxy import StallableProxy
from servers import start_redis

from exporter.redis.latency import SCRAPE_READS, bucket_pairs, parse_histograms
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
        call(app, "/metrics")  # finds the commands the first scrape made the most called ones, and reads theirs
        proxy.commands()
        call(app, "/metrics")
        second = proxy.commands()
    finally:
        app.close()
    # the first scrape learns the most called commands from its INFO, and reads their histograms in a second round trip
    assert first[-1][:2] == ("LATENCY", "HISTOGRAM")
    assert first[:-1] == [
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
    assert "mget" in second[4][2:]  # the heartbeat read is also an application command: called every scrape
    assert not set(second[4][2:]) & SCRAPE_READS  # the scrape's own reads, whose histograms would measure the exporter
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
        asked = [words[2:] for words in proxy.commands() if words[:2] == ("LATENCY", "HISTOGRAM")]
    finally:
        app.close()
    # nobody has called SET since it was last read, and the scrape's own reads are not asked for: nothing is
    assert asked == []
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


def test_a_command_called_between_scrapes_is_served_as_the_server_holds_it_at_every_scrape(proxied):
    """Production's case: a command called between every two scrapes, and one that wakes up after standing still. Each
    scrape serves the histogram the server holds at that scrape, never the one before (as the scrape after a histogram
    was read did when it compared the calls it had planned with that read, which match)."""
    server, proxy = proxied
    client = server.client()
    client.set("k", "v")
    app = make_app({"redis": {"addr": f"redis://127.0.0.1:{proxy.port}"}, "heartbeat": {"read": False}})
    connection = RespConnection.open("127.0.0.1", server.port, time.monotonic() + 5)
    try:
        for _ in range(2):
            call(app, "/metrics")
        # SET between each two scrapes, then not, then again; GET once after standing still since the first scrape
        plan = [("set", 1), ("set", 2), ("set", 3), (None, 0), (None, 0), ("set", 1), ("get", 1), ("set", 4)]
        asked_per_scrape = []
        for command, times in plan:
            for _ in range(times):
                client.execute_command(command.upper(), "k", *(["v"] if command == "set" else []))
            proxy.commands()
            samples = exact_samples(call(app, "/metrics").text)
            asked_per_scrape.append([words[2:] for words in proxy.commands() if words[:2] == ("LATENCY", "HISTOGRAM")])
            held = parse_histograms(connection.call([("LATENCY", "HISTOGRAM", "set", "get")], time.monotonic() + 5)[0])
            for cmd in ("set", "get"):
                calls, buckets = held.get(cmd, (0, ((), [])))
                served = {
                    dict(labels)["le"]: value
                    for (name, labels), value in samples.items()
                    if name == "redis_commands_latencies_usec_bucket" and dict(labels)["cmd"] == cmd
                }
                assert served == ({**dict(bucket_pairs(buckets)), "+Inf": float(calls)} if calls else {}), (command, times, cmd)
                if calls:
                    (total,) = [value for (name, labels), value in samples.items() if name == "redis_commands_total" and ("cmd", cmd) in labels]
                    assert total == calls
    finally:
        connection.close()
        app.close()
    # a command that stood still over the last interval is not asked for; one that wakes up costs one more round trip
    # in the scrape that finds it called, the next asks for it in the pipeline
    assert [sum("set" in asked for asked in scrape) for scrape in asked_per_scrape] == [1, 1, 1, 1, 0, 1, 1, 1]
    assert all(len(scrape) <= 2 for scrape in asked_per_scrape)


def test_a_histogram_whose_second_read_fails_is_left_out_of_that_scrape_not_served_late():
    server = start_redis()
    client = server.client()
    client.set("k", "v")
    # the node hangs on the second round trip that reads SET's histogram alone, as a node that stalls mid-scrape
    proxy = StallableProxy(server.port, stall_on=b"*3\r\n$7\r\nLATENCY\r\n$9\r\nHISTOGRAM\r\n$3\r\nset\r\n")
    config = {"redis": {"addr": f"redis://127.0.0.1:{proxy.port}"}, "heartbeat": {"read": False}, "scrape": {"timeout": "1s"}}
    app = make_app({**config, "keys": {"check_single_keys": "k"}})

    def served(text: str) -> set[str]:
        return {dict(labels)["cmd"] for (name, labels) in exact_samples(text) if name == "redis_commands_latencies_usec_count"}

    try:
        for _ in range(3):
            assert "set" in served(call(app, "/metrics").text)
        client.set("k", "w")  # SET wakes up after standing still: read in a second round trip, which hangs
        text = call(app, "/metrics").text
        assert "set" not in served(text)  # not served with the calls of two scrapes ago
        samples = exact_samples(text)
        assert [value for (name, _), value in samples.items() if name == "redis_up"] == [1.0]  # the scrape stands
        # and the watched keys, probed before the histograms
        assert [value for (name, _), value in samples.items() if name == "elasticache_exporter_key_probes_complete"] == [1.0]
        assert [name for name, _ in samples if name == "redis_key_size"] == ["redis_key_size"]
        proxy.resume()
        assert "set" in served(call(app, "/metrics").text)
    finally:
        app.close()
        proxy.close()
        server.stop()


def test_no_histogram_is_asked_for_a_read_the_scrape_sends_itself_in_cluster_mode_too():
    """SCRAPE_READS names every command a scrape sends, on connecting and every scrape, but those applications send as
    well (the heartbeat's MGET and TYPE, CLUSTER NODES, the connection's set-up)."""
    server = start_redis("--cluster-enabled", "yes")
    proxy = StallableProxy(server.port)
    app = make_app({"redis": {"addr": f"redis://127.0.0.1:{proxy.port}"}})
    try:
        sent = []
        for _ in range(4):
            call(app, "/metrics")
            sent += proxy.commands()
    finally:
        app.close()
        proxy.close()
        server.stop()
    containers = ("CLUSTER", "COMMAND", "CONFIG", "CLIENT", "LATENCY", "SLOWLOG", "COMMANDLOG")
    names = {words[0].lower() + ("|" + words[1].lower() if words[0] in containers else "") for words in sent}
    assert names - SCRAPE_READS <= {"mget", "type", "cluster|nodes", "readonly"}  # a node without slots reads no key
    asked = {cmd for words in sent if words[:2] == ("LATENCY", "HISTOGRAM") for cmd in words[2:]}
    assert not asked & SCRAPE_READS
    assert "cluster|info" in names


def test_a_user_narrowed_to_refuse_latency_is_served_no_histogram_rather_than_the_last_ones_read():
    server = start_redis()
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "exporter", "on", ">pw", "+@all", "~*")
    admin.set("k", "v")
    app = make_app({"redis": {"addr": server.addr, "user": "exporter", "password": "pw"}, "heartbeat": {"read": False}})
    try:
        for _ in range(3):
            assert "set" in _histogram_commands(call(app, "/metrics").text)
        admin.execute_command("ACL", "SETUSER", "exporter", "-latency")  # an operator narrows the exporter's user
        for _ in range(3):
            admin.set("k", "v")
            assert _histogram_commands(call(app, "/metrics").text) == set()
    finally:
        app.close()
        server.stop()


def test_a_user_denied_latency_histogram_draws_one_error_only():
    server = start_redis()
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "exporter", "on", ">pw", "+@all", "-latency|histogram", "~*")
    admin.set("k", "v")
    app = make_app({"redis": {"addr": server.addr, "user": "exporter", "password": "pw"}, "heartbeat": {"read": False}})
    try:
        for _ in range(4):
            admin.set("k", "v")
            assert _histogram_commands(call(app, "/metrics").text) == set()
        assert sum(int(entry["count"]) for entry in admin.acl_log()) == 1
    finally:
        app.close()
        server.stop()


def _histogram_commands(text: str) -> set[str]:
    return {dict(labels)["cmd"] for (name, labels) in exact_samples(text) if name == "redis_commands_latencies_usec_count"}
