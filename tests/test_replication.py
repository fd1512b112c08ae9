"""Replication lag from heartbeats and offsets, against a real primary and replica."""

from __future__ import annotations

import calendar
import contextlib
import threading
import time

import pytest
from helpers import call, make_app, sample
from hypothesis import given, settings
from hypothesis import strategies as st
from proxy import StallableProxy
from servers import start_redis, wait_until

from exporter.redis.heartbeat import ELASTICACHE_KEY, HeartbeatParseError, format_timestamp, parse_timestamp, utc_seconds


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2013-09-05T01:25:01.001Z", 1378344301.001),
        ("2013-09-05T01:25:01Z", 1378344301.0),
        ("2013-09-05T01:25:01.001", 1378344301.001),
        ("2013-09-05T01:25:01", 1378344301.0),
        ("2013-09-05 01:25:01.5", 1378344301.5),
        ("2013-09-05T03:25:01.001+02:00", 1378344301.001),
        ("1378344301", 1378344301.0),
        ("1378344301.25", 1378344301.25),
        ("1378344301001", 1378344301.001),
        (b"2013-09-05T01:25:01.001Z", 1378344301.001),
    ],
)
def test_heartbeat_formats(text, expected):
    assert parse_timestamp(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.unit
@pytest.mark.parametrize("text", ["", "yesterday", "2013-13-05T01:25:01Z", "2013-09-05T25:00:00Z", "12", "-5", "1e9", "0x10", "\xff"])
def test_bad_heartbeats_are_parse_errors(text):
    with pytest.raises(HeartbeatParseError):
        parse_timestamp(text)


@pytest.mark.unit
@settings(deadline=None)  # hypothesis' default of 200 ms an example fails a busy machine's pauses
@given(st.one_of(st.text(max_size=40), st.binary(max_size=40)))
def test_parse_never_raises_anything_else(raw):
    with contextlib.suppress(HeartbeatParseError):
        parse_timestamp(raw)


@pytest.mark.unit
def test_written_format_round_trips():
    now = time.time()
    assert parse_timestamp(format_timestamp(now)) == pytest.approx(now, abs=0.001)


class ElastiCacheHeartbeat:
    """Keeps ElastiCacheMasterReplicationTimestamp fresh on the primary, the way ElastiCache does."""

    def __init__(self, client, interval: float = 0.1) -> None:
        self.client = client
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
            self.client.set(ELASTICACHE_KEY, stamp)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=2)


@pytest.fixture
def proxied_pair():
    primary = start_redis()
    proxy = StallableProxy(primary.port)
    replica = start_redis("--replicaof", "127.0.0.1", str(proxy.port))
    wait_until(lambda: replica.info().get("master_link_status") == "up", what="replica link up")
    yield primary, proxy, replica
    proxy.resume()
    replica.stop()
    proxy.close()
    primary.stop()


def test_heartbeat_and_byte_lag_rise_during_a_stall_and_fall_after(proxied_pair):
    primary, proxy, replica = proxied_pair
    app = make_app({"targets": [{"name": "primary", "addr": primary.addr}, {"name": "replica", "addr": replica.addr}]})
    writer = primary.client()
    stall = 3.0
    try:
        with ElastiCacheHeartbeat(primary.client()):

            def lag() -> float:
                samples = call(app, "/metrics").samples()
                key = ("elasticache_replication_heartbeat_lag_seconds", (("instance", "replica"), ("source", "elasticache")))
                return samples.get(key, float("inf"))

            wait_until(lambda: lag() < 1.0, what="a fresh heartbeat on the replica")
            samples = call(app, "/metrics").samples()
            age = sample(samples, "elasticache_replication_heartbeat_age_seconds", instance="primary", source="elasticache")
            assert 0 <= age < 1.0
            assert (
                sample(
                    samples,
                    "elasticache_replication_primary_info",
                    instance="replica",
                    primary=f"127.0.0.1:{proxy.port}",
                    master_host="127.0.0.1",
                    master_port=str(proxy.port),
                )
                == 1
            )

            proxy.stall()
            started = time.monotonic()
            peak_lag = peak_bytes = 0.0
            stalled_for = 0.0
            while stalled_for < stall:  # the last scrape starts after the stall has lasted its full time, however slow each is
                stalled_for = time.monotonic() - started
                writer.set("payload", "x" * 4000)  # byte lag past 10,000 within three scrapes, however slow they are
                samples = call(app, "/metrics").samples()
                assert sample(samples, "redis_up", instance="replica") == 1  # the replica keeps answering
                peak_lag = max(peak_lag, sample(samples, "elasticache_replication_heartbeat_lag_seconds", instance="replica", source="elasticache"))
                byte_lags = [v for (name, _), v in samples.items() if name == "elasticache_replication_lag_bytes"]
                peak_bytes = max(peak_bytes, *byte_lags)
                time.sleep(0.1)
            proxy.resume()
            resumed = time.monotonic()
            assert peak_lag >= stall - 0.3, peak_lag
            assert peak_bytes > 10_000, peak_bytes

            wait_until(lambda: lag() < 1.0, timeout=5, what="lag back under 1 s")
            assert time.monotonic() - resumed < 2.0

            def byte_lag_zero() -> bool:
                samples = call(app, "/metrics").samples()
                return [v for (name, _), v in samples.items() if name == "elasticache_replication_lag_bytes"] == [0.0]

            wait_until(byte_lag_zero, timeout=5, what="byte lag back to 0")
    finally:
        app.close()


def test_missing_wrong_type_and_unparsable_heartbeats(fresh_redis):
    client = fresh_redis.client()
    app = make_app({"targets": [{"name": "node", "addr": fresh_redis.addr}]})
    try:
        errors_before = client.info("stats")["total_error_replies"]
        samples = call(app, "/metrics").samples()
        assert not any(name.startswith("elasticache_replication_heartbeat") for name, _ in samples)  # missing: no metric, not 0
        client.rpush(ELASTICACHE_KEY, "a list, not a time")
        samples = call(app, "/metrics").samples()
        assert sample(samples, "elasticache_exporter_heartbeat_errors_total", instance="node", source="elasticache", reason="wrong_type") == 1
        client.delete(ELASTICACHE_KEY)
        client.set(ELASTICACHE_KEY, "not a time")
        samples = call(app, "/metrics").samples()
        assert sample(samples, "elasticache_exporter_heartbeat_errors_total", instance="node", source="elasticache", reason="unparsable") == 1
        assert sample(samples, "redis_up", instance="node") == 1
        assert not any(name.startswith("elasticache_replication_heartbeat") for name, _ in samples)
        assert client.info("stats")["total_error_replies"] == errors_before  # MGET and TYPE never answer with an error
    finally:
        app.close()


def test_exporter_heartbeat_writer_writes_only_on_masters(replicated_redis):
    primary, replica = replicated_redis
    app = make_app(
        {
            "targets": [{"name": "primary", "addr": primary.addr}, {"name": "replica", "addr": replica.addr}],
            "heartbeat": {"write": True, "interval": "100ms", "ttl": "10s"},
        }
    )
    try:

        def exporter_lag():
            samples = call(app, "/metrics").samples()
            return samples.get(("elasticache_replication_heartbeat_lag_seconds", (("instance", "replica"), ("source", "exporter"))))

        wait_until(lambda: exporter_lag() is not None and exporter_lag() < 1.0, what="the exporter's heartbeat on the replica")
        samples = call(app, "/metrics").samples()
        assert sample(samples, "elasticache_exporter_heartbeat_writes_total", instance="primary") >= 1
        assert sample(samples, "elasticache_exporter_heartbeat_skipped_total", instance="replica") >= 1
        assert not any(name == "elasticache_exporter_heartbeat_write_errors_total" for name, _ in samples)
        assert 0 < primary.client().pttl("elasticache-exporter:heartbeat") <= 10_000
    finally:
        app.close()


def test_writer_stops_when_the_node_is_demoted(fresh_redis):
    other = start_redis()
    app = make_app({"targets": [{"name": "node", "addr": fresh_redis.addr}], "heartbeat": {"write": True, "interval": "100ms"}})
    try:

        def writes() -> float:
            samples = call(app, "/metrics").samples()
            return samples.get(("elasticache_exporter_heartbeat_writes_total", (("instance", "node"),)), 0.0)

        def skipped() -> float:
            key = ("elasticache_exporter_heartbeat_skipped_total", (("instance", "node"),))
            return call(app, "/metrics").samples().get(key, 0.0)

        wait_until(lambda: writes() >= 2, what="heartbeat writes")
        fresh_redis.client().execute_command("REPLICAOF", "127.0.0.1", str(other.port))
        wait_until(lambda: skipped() >= 1, what="the writer seeing a replica")
        settled, first = writes(), skipped()
        wait_until(lambda: skipped() >= first + 2, what="two more rounds of the writer")
        assert writes() == settled
    finally:
        app.close()
        fresh_redis.client().execute_command("REPLICAOF", "NO", "ONE")
        other.stop()


def test_writer_with_an_acl_user_allowed_only_its_key(fresh_redis, caplog):
    admin = fresh_redis.client()
    admin.execute_command(
        "ACL",
        "SETUSER",
        "hb",
        "on",
        ">hb-pw",
        "resetkeys",
        "~elasticache-exporter:heartbeat",
        "+set",
        "+role",
        "+info",
        "+mget",
        "+type",
        "+command|info",
    )
    admin.execute_command("ACL", "SETUSER", "nowrite", "on", ">nowrite-pw", "~*", "+role", "+info", "+mget", "+type", "+command|info")
    app = make_app(
        {
            "targets": [
                {"name": "allowed", "addr": fresh_redis.addr, "user": "hb", "password": "hb-pw"},
                {"name": "denied", "addr": fresh_redis.addr, "user": "nowrite", "password": "nowrite-pw"},
            ],
            "heartbeat": {"write": True, "interval": "100ms"},
        }
    )
    try:
        wait_until(lambda: admin.get("elasticache-exporter:heartbeat") is not None, what="a heartbeat written by the ACL user")
        samples = call(app, "/metrics").samples()
        assert sample(samples, "redis_up", instance="allowed") == 1
        assert sample(samples, "redis_up", instance="denied") == 1
        wait_until(
            lambda: (
                call(app, "/metrics")
                .samples()
                .get(("elasticache_exporter_heartbeat_write_errors_total", (("instance", "denied"), ("kind", "permission"))))
            ),
            what="a counted permission error",
        )
        time.sleep(0.3)
        lines = [r for r in caplog.records if "heartbeat writer" in r.getMessage() and "denied" in r.getMessage()]
        assert len(lines) == 1
        assert "nowrite-pw" not in lines[0].getMessage()
    finally:
        app.close()


@pytest.mark.unit
@settings(deadline=None)
@given(st.integers(1, 9999), st.integers(1, 12), st.integers(1, 31), st.integers(0, 23), st.integers(0, 59), st.integers(0, 60))
def test_utc_seconds_agrees_with_calendar_timegm(year: int, month: int, day: int, hour: int, minute: int, second: int) -> None:
    assert utc_seconds(year, month, day, hour, minute, second) == calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
