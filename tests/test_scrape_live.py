"""The exporter against real redis-server processes, in process (the app's handle(), no HTTP socket)."""

from __future__ import annotations

import time

import pytest
from helpers import call, exact_samples, make_app, sample


@pytest.fixture
def app_for():
    apps = []

    def build(raw):
        app = make_app(raw)
        apps.append(app)
        return app

    yield build
    for app in apps:
        app.close()


def test_values_match_the_info_of_the_same_moment(plain_redis, app_for):
    app = app_for({"redis": {"addr": plain_redis.addr}})
    client = plain_redis.client()
    client.set("k1", "v"), client.set("k2", "v", ex=1000)
    before = client.info("all")
    samples = call(app, "/metrics").samples()
    after = client.info("all")
    target = f"127.0.0.1:{plain_redis.port}"
    assert sample(samples, "redis_up", instance=target) == 1
    assert sample(samples, "redis_db_keys", instance=target, db="db0") == before["db0"]["keys"] == after["db0"]["keys"]
    assert sample(samples, "redis_db_keys_expiring", instance=target, db="db0") == before["db0"]["expires"]
    assert sample(samples, "redis_max_clients", instance=target) == before["maxclients"]
    assert sample(samples, "redis_config_maxclients", instance=target) == before["maxclients"]
    assert sample(samples, "redis_memory_max_bytes", instance=target) == before["maxmemory"]
    for counter, field in (
        ("redis_keyspace_hits_total", "keyspace_hits"),
        ("redis_commands_processed_total", "total_commands_processed"),
        ("redis_connections_received_total", "total_connections_received"),
    ):
        assert before[field] <= sample(samples, counter, instance=target) <= after[field]
    assert before["uptime_in_seconds"] <= sample(samples, "redis_uptime_in_seconds", instance=target) <= after["uptime_in_seconds"]
    calls_before = before["cmdstat_set"]["calls"]
    assert sample(samples, "redis_commands_total", instance=target, cmd="set") == calls_before
    info = sample(samples, "redis_instance_info", instance=target, **_instance_labels(before))
    assert info == 1


def _instance_labels(info: dict) -> dict[str, str]:
    return {
        "redis_version": str(info["redis_version"]),
        "redis_build_id": str(info["redis_build_id"]),
        "redis_mode": info["redis_mode"],
        "os": info["os"],
        "maxmemory_policy": info["maxmemory_policy"],
        "tcp_port": str(info["tcp_port"]),
        "role": info["role"],
        "run_id": info["run_id"],
        "process_id": str(info["process_id"]),
        "master_replid": info["master_replid"],
    }  # and no valkey_version, valkey_release_stage or server_name: Redis' INFO has none of them


def test_every_numeric_info_field_is_exported(plain_redis, app_for):
    from exporter.redis.info import IDENTIFIER_FIELDS
    from exporter.redis.info_fields import KNOWN_FIELDS, MASTER_LABELLED_FIELDS
    from exporter.redis.info_metrics import metric_name_for_unknown

    app = app_for({"redis": {"addr": plain_redis.addr}})
    names = {name for name, _ in call(app, "/metrics").samples()}
    info = plain_redis.client().info("all")
    structured = ("db", "cmdstat_", "errorstat_", "latency_percentiles_usec_", "slave")
    checked = 0
    for field, raw in info.items():
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or field in IDENTIFIER_FIELDS or field.startswith(structured):
            continue
        spec = KNOWN_FIELDS.get(field) or MASTER_LABELLED_FIELDS.get(field)
        expected = spec.name if spec else metric_name_for_unknown(field)
        assert expected in names, f"INFO field {field} is not exported as {expected}"
        checked += 1
    assert checked > 120


def test_connection_is_reused_between_scrapes(plain_redis, app_for):
    app = app_for({"redis": {"addr": plain_redis.addr}})
    received = plain_redis.client().info("stats")["total_connections_received"]
    for _ in range(5):
        call(app, "/metrics")
    samples = call(app, "/metrics").samples()
    target = f"127.0.0.1:{plain_redis.port}"
    assert sample(samples, "elasticache_exporter_target_connects_total", instance=target) == 1
    # this test's own client connections: the one above and the one below
    assert plain_redis.client().info("stats")["total_connections_received"] == received + 2


def test_elasticache_like_node_gets_no_error_replies(elasticache_like_redis, app_for):
    app = app_for({"redis": {"addr": elasticache_like_redis.addr}})
    client = elasticache_like_redis.client()
    errors_before = client.info("stats")["total_error_replies"]
    for _ in range(10):
        samples = call(app, "/metrics").samples()
    target = f"127.0.0.1:{elasticache_like_redis.port}"
    assert sample(samples, "redis_up", instance=target) == 1
    assert client.info("stats")["total_error_replies"] == errors_before
    assert not any(name.startswith("redis_slowlog") for name, _ in samples)
    assert sample(samples, "redis_config_maxclients", instance=target) == 10000


def test_slowlog_and_latency_are_exported_where_allowed(plain_redis, app_for):
    app = app_for({"redis": {"addr": plain_redis.addr}})
    client = plain_redis.client()
    client.execute_command("CONFIG", "SET", "latency-monitor-threshold", "1")
    client.execute_command("DEBUG", "SLEEP", "0.01")
    errors_before = client.info("stats")["total_error_replies"]
    samples = call(app, "/metrics").samples()
    target = f"127.0.0.1:{plain_redis.port}"
    assert sample(samples, "redis_slowlog_length", instance=target) == client.slowlog_len()
    assert sample(samples, "redis_latency_spike_duration_seconds", instance=target, event_name="command") >= 0.01
    assert client.info("stats")["total_error_replies"] == errors_before


def test_acl_user_denied_commands_are_dropped_after_one_refusal(acl_redis, app_for):
    app = app_for({"redis": {"addr": acl_redis.addr, "user": "monitor", "password": "monitor-secret-pw"}})
    admin = acl_redis.client()
    samples = call(app, "/metrics").samples()
    target = f"127.0.0.1:{acl_redis.port}"
    assert sample(samples, "redis_up", instance=target) == 1
    denied = admin.info("stats")["total_error_replies"]
    for _ in range(5):
        samples = call(app, "/metrics").samples()
    assert sample(samples, "redis_up", instance=target) == 1
    assert admin.info("stats")["total_error_replies"] == denied


def test_wrong_password_is_an_auth_error(acl_redis, app_for):
    app = app_for({"redis": {"addr": acl_redis.addr, "password": "wrong-password"}})
    response = call(app, "/metrics")
    assert response.code == 200
    samples = response.samples()
    target = f"127.0.0.1:{acl_redis.port}"
    assert sample(samples, "redis_up", instance=target) == 0
    assert sample(samples, "elasticache_exporter_target_last_error", instance=target, kind="auth") == 1
    assert sample(samples, "elasticache_exporter_target_scrape_errors_total", instance=target, kind="auth") == 1
    assert "wrong-password" not in response.text


def test_no_password_on_protected_node_is_an_auth_error(acl_redis, app_for):
    app = app_for({"redis": {"addr": acl_redis.addr}})
    samples = call(app, "/metrics").samples()
    assert sample(samples, "elasticache_exporter_target_last_error", instance=f"127.0.0.1:{acl_redis.port}", kind="auth") == 1


def test_tls_with_ca_and_client_certificate(tls_redis, certificates, app_for):
    app = app_for(
        {
            "redis": {
                "addr": tls_redis.addr,
                "tls_ca_file": certificates["ca"],
                "tls_cert_file": certificates["cert"],
                "tls_key_file": certificates["key"],
            }
        }
    )
    samples = call(app, "/metrics").samples()
    assert sample(samples, "redis_up", instance=f"127.0.0.1:{tls_redis.port}") == 1


def test_tls_server_name_is_verified(tls_redis, certificates, app_for):
    good = app_for({"redis": {"addr": tls_redis.addr, "tls_ca_file": certificates["ca"], "tls_server_name": "redis.test"}})
    assert sample(call(good, "/metrics").samples(), "redis_up", instance=f"127.0.0.1:{tls_redis.port}") == 1
    bad = app_for({"redis": {"addr": tls_redis.addr, "tls_ca_file": certificates["ca"], "tls_server_name": "other.test"}})
    samples = call(bad, "/metrics").samples()
    assert sample(samples, "elasticache_exporter_target_last_error", instance=f"127.0.0.1:{tls_redis.port}", kind="tls") == 1


def test_tls_without_ca_fails_unless_verification_is_skipped(tls_redis, app_for):
    target = f"127.0.0.1:{tls_redis.port}"
    strict = app_for({"redis": {"addr": tls_redis.addr}})
    assert sample(call(strict, "/metrics").samples(), "elasticache_exporter_target_last_error", instance=target, kind="tls") == 1
    relaxed = app_for({"redis": {"addr": tls_redis.addr, "tls_insecure_skip_verify": True}})
    assert sample(call(relaxed, "/metrics").samples(), "redis_up", instance=target) == 1


def test_replica_and_primary_metrics(replicated_redis, app_for):
    primary, replica = replicated_redis
    app = app_for({"targets": [{"name": "primary", "addr": primary.addr}, {"name": "replica", "addr": replica.addr}]})
    samples = call(app, "/metrics").samples()
    assert sample(samples, "redis_instance_role", instance="primary", role="master") == 1
    assert sample(samples, "redis_instance_role", instance="replica", role="slave") == 1
    assert sample(samples, "redis_connected_slaves", instance="primary") == 1
    assert sample(samples, "redis_master_link_up", instance="replica", master_host="127.0.0.1", master_port=str(primary.port)) == 1
    offsets = [v for (name, labels), v in samples.items() if name == "redis_connected_slave_offset_bytes"]
    assert len(offsets) == 1


def test_down_hung_and_healthy_targets_in_one_scrape(plain_redis, fresh_redis, app_for):
    from servers import free_port

    closed_port = free_port()
    app = app_for(
        {
            "targets": [
                {"name": "healthy", "addr": plain_redis.addr},
                {"name": "hung", "addr": fresh_redis.addr, "timeout": "1s"},
                {"name": "down", "addr": f"redis://127.0.0.1:{closed_port}", "timeout": "1s"},
            ]
        }
    )
    assert sample(call(app, "/metrics").samples(), "redis_up", instance="hung") == 1
    fresh_redis.pause()
    try:
        started = time.monotonic()
        response = call(app, "/metrics")
        elapsed = time.monotonic() - started
    finally:
        fresh_redis.resume()
    samples = response.samples()
    assert response.code == 200
    assert elapsed < 1.8, elapsed
    assert sample(samples, "redis_up", instance="healthy") == 1
    assert sample(samples, "redis_up", instance="hung") == 0
    assert sample(samples, "redis_up", instance="down") == 0
    assert sample(samples, "elasticache_exporter_target_last_error", instance="hung", kind="timeout") == 1
    assert sample(samples, "elasticache_exporter_target_last_error", instance="down", kind="refused") == 1
    # recovered: the hung node answers again after a reconnect
    deadline = time.monotonic() + 10
    while sample(call(app, "/metrics").samples(), "redis_up", instance="hung") != 1:
        assert time.monotonic() < deadline, "hung target did not recover"
        time.sleep(0.1)


def test_a_hung_target_costs_a_fleets_metrics_its_share_not_the_scrape_timeout(plain_redis, fresh_redis, app_for):
    """With the defaults (a scrape of 5 s, a target's share 2 s), a node that accepts and never answers is served as
    timed out after its share, three scrapes in a row, and the healthy node is in each of those pages."""
    app = app_for({"targets": [{"name": "healthy", "addr": plain_redis.addr}, {"name": "hung", "addr": fresh_redis.addr}]})
    assert sample(call(app, "/metrics").samples(), "redis_up", instance="hung") == 1
    fresh_redis.pause()
    took = []
    try:
        for _ in range(3):
            started = time.monotonic()
            samples = call(app, "/metrics").samples()
            took.append(time.monotonic() - started)
            assert sample(samples, "redis_up", instance="healthy") == 1
            assert sample(samples, "redis_up", instance="hung") == 0
            assert sample(samples, "elasticache_exporter_target_last_error", instance="hung", kind="timeout") == 1
    finally:
        fresh_redis.resume()
    assert all(1.9 <= seconds < 3.5 for seconds in took), took


def test_a_lone_slow_target_gets_the_whole_scrape_timeout(fresh_redis, app_for):
    """One target on the page: a node that answers after 2.5 s, within scrape.timeout (10 s), is up; the share of a
    page of many is not its timeout."""
    import threading

    app = app_for({"targets": [{"name": "slow", "addr": fresh_redis.addr}], "scrape": {"timeout": "10s"}})
    assert sample(call(app, "/metrics").samples(), "redis_up", instance="slow") == 1
    fresh_redis.pause()
    waking = threading.Timer(2.5, fresh_redis.resume)
    waking.start()
    try:
        started = time.monotonic()
        samples = call(app, "/metrics").samples()
        took = time.monotonic() - started
    finally:
        waking.join()
    assert sample(samples, "redis_up", instance="slow") == 1
    assert took >= 2.4, took


def test_prometheus_scrape_timeout_header_bounds_the_scrape(fresh_redis, app_for):
    app = app_for({"redis": {"addr": fresh_redis.addr, "timeout": "10s"}})
    call(app, "/metrics")
    fresh_redis.pause()
    try:
        started = time.monotonic()
        samples = call(app, "/metrics", headers={"X-Prometheus-Scrape-Timeout-Seconds": "0.6"}).samples()
        elapsed = time.monotonic() - started
    finally:
        fresh_redis.resume()
    assert elapsed < 1.0, elapsed
    assert sample(samples, "redis_up", instance=f"127.0.0.1:{fresh_redis.port}") == 0


def test_gzip_and_openmetrics_negotiation(plain_redis, app_for):
    app = app_for({"redis": {"addr": plain_redis.addr}})
    response = call(app, "/metrics", headers={"Accept-Encoding": "gzip"})
    assert response.headers["Content-Encoding"] == "gzip"
    assert "redis_up" in response.text
    response = call(app, "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert response.headers["Content-Type"].startswith("application/openmetrics-text")
    assert response.text.rstrip().endswith("# EOF")


def test_a_nodes_series_carry_instance_on_metrics_and_not_on_scrape(plain_redis, app_for):
    """Many nodes on one /metrics: each node's series carry instance=<target>, the label redis_exporter users join
    on. /scrape leaves instance to Prometheus' relabelling, as redis_exporter does."""
    from helpers import parse_samples

    app = app_for(
        {
            "targets": [{"name": "a", "addr": plain_redis.addr}, {"name": "b", "addr": plain_redis.addr}],
            "scrape": {"allow": [{"hosts": ["127.0.0.1"]}]},
        }
    )
    on_metrics = parse_samples(call(app, "/metrics").text)
    assert not any("target" in dict(labels) for _, labels in on_metrics)  # no second identity to aggregate away
    redis_series = [dict(labels) for (name, labels) in on_metrics if name.startswith("redis_")]
    assert {labels["instance"] for labels in redis_series} == {"a", "b"}
    assert ("process_cpu_seconds_total", ()) in on_metrics  # the exporter's own series: Prometheus' instance
    on_scrape = parse_samples(call(app, "/scrape", "target=a").text)
    assert not any("instance" in dict(labels) or "target" in dict(labels) for _, labels in on_scrape)
    assert on_scrape[("redis_up", ())] == 1
    openmetrics = call(app, "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}).text
    assert 'redis_up{instance="a"} 1.0' in openmetrics
    scraped_openmetrics = call(app, "/scrape", "target=a", headers={"Accept": "application/openmetrics-text; version=1.0.0"}).text
    assert "redis_up 1.0" in scraped_openmetrics


def test_latency_histograms_as_redis_exporter_serves_them(fresh_redis, app_for):
    """LATENCY HISTOGRAM per command (Redis 7+): cumulative buckets, +Inf and _count the calls, _sum the µs of
    commandstats; asked for the most called commands only, and never an error reply."""
    client = fresh_redis.client()
    names = [f"k{i}" for i in range(5)]
    for name in names:
        client.set(name, "v")
    for _ in range(20):
        client.get("k0")
    for command in ("STRLEN", "EXISTS", "TYPE", "TTL", "PTTL", "ECHO", "DBSIZE", "TIME", "LASTSAVE", "PING"):
        for _ in range(2):
            client.execute_command(command, *(["k0"] if command in ("STRLEN", "EXISTS", "TYPE", "TTL", "PTTL", "ECHO") else []))
    app = app_for({"redis": {"addr": fresh_redis.addr}})
    errors_before = client.info("stats")["total_error_replies"]
    call(app, "/metrics")  # learns which commands are called most
    text = call(app, "/metrics").text
    assert client.info("stats")["total_error_replies"] == errors_before
    samples = exact_samples(text)
    target = f"127.0.0.1:{fresh_redis.port}"
    stats = client.info("commandstats")

    def series(suffix: str, **labels: str) -> float:
        return samples[(f"redis_commands_latencies_usec{suffix}", tuple(sorted({"instance": target, **labels}.items())))]

    calls = series("_count", cmd="get")
    assert calls == stats["cmdstat_get"]["calls"]
    assert series("_bucket", cmd="get", le="+Inf") == calls
    assert series("_sum", cmd="get") == stats["cmdstat_get"]["usec"]
    buckets = sorted(
        (float(dict(labels)["le"]), value)
        for (name, labels), value in samples.items()
        if name == "redis_commands_latencies_usec_bucket" and dict(labels)["cmd"] == "get"
    )
    assert [value for _, value in buckets] == sorted(value for _, value in buckets)  # cumulative
    assert all("." not in dict(labels)["le"] for (name, labels) in samples if name.endswith("latencies_usec_bucket"))  # le="8"
    assert "# TYPE redis_commands_latencies_usec histogram" in text
    commands = {dict(labels)["cmd"] for (name, labels) in samples if name == "redis_commands_latencies_usec_count"}
    assert "get" in commands
    assert "set" in commands


def test_latency_histograms_ask_for_the_most_called_commands_only(fresh_redis, app_for, monkeypatch):
    from exporter.redis import latency

    monkeypatch.setattr(latency, "MAX_HISTOGRAM_COMMANDS", 3)
    client = fresh_redis.client()
    for count, key in ((30, "a"), (20, "b"), (10, "c")):
        for _ in range(count):
            client.execute_command("INCR", key)  # incr: the most called
    for _ in range(15):
        client.get("a")
    client.set("z", "1")
    app = app_for({"redis": {"addr": fresh_redis.addr}})
    call(app, "/metrics")
    samples = exact_samples(call(app, "/metrics").text)
    commands = {dict(labels)["cmd"] for (name, labels) in samples if name == "redis_commands_latencies_usec_count"}
    assert len(commands) == 3
    assert {"incr", "get"} <= commands


def test_empty_databases_are_padded_as_redis_exporter_pads_them(fresh_redis, elasticache_like_redis, app_for):
    fresh_redis.client().set("only", "1")
    samples = call(app_for({"redis": {"addr": fresh_redis.addr}}), "/metrics").samples()
    target = f"127.0.0.1:{fresh_redis.port}"
    keys = {dict(labels)["db"]: value for (name, labels), value in samples.items() if name == "redis_db_keys"}
    assert keys == {"db0": 1.0, **{f"db{i}": 0.0 for i in range(1, 16)}}  # databases 16, as redis_exporter pads them
    assert sample(samples, "redis_db_keys_expiring", instance=target, db="db7") == 0
    elasticache_like_redis.client().set("only", "1")
    renamed = call(app_for({"redis": {"addr": elasticache_like_redis.addr}}), "/metrics").samples()
    renamed_keys = {dict(labels)["db"]: value for (name, labels), value in renamed.items() if name == "redis_db_keys"}
    assert renamed_keys == keys  # no CONFIG (ElastiCache): Redis' default of 16 databases, as redis_exporter assumes
