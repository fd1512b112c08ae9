"""Discovery and CloudWatch polling against moto, and the pure parts on their own."""

from __future__ import annotations

import datetime
import json
import logging
import math
import os
import subprocess
import sys
import time
import urllib.parse

import boto3
import pytest
from botocore.exceptions import ClientError
from helpers import call, make_app, parse_samples, sample
from moto import mock_aws
from servers import start_exporter, wait_until

from exporter.aws.api import ApiStats, AwsApi, AwsCallError, Backoff
from exporter.aws.cloudwatch import DEFAULT_METRICS, MetricSpec, batches, build_queries, estimate_cost, polled_metrics, prometheus_name, window
from exporter.aws.discovery import Node, build_nodes
from exporter.aws.monitor import AwsMonitor
from exporter.common.exposition import encode_text
from exporter.config import build_config
from exporter.service.collectors.aws import AwsCollector

ACCOUNT = "123456789012"  # moto's account for the default credentials
REGION = "eu-west-1"


@pytest.mark.unit
def test_names_follow_yace():
    assert prometheus_name("CPUUtilization", "Average") == "aws_elasticache_cpuutilization_average"
    assert prometheus_name("EngineCPUUtilization", "Maximum") == "aws_elasticache_engine_cpuutilization_maximum"
    assert prometheus_name("NetworkBytesOut", "Sum") == "aws_elasticache_network_bytes_out_sum"
    assert prometheus_name("NetworkBandwidthInAllowanceExceeded", "Maximum") == "aws_elasticache_network_bandwidth_in_allowance_exceeded_maximum"
    assert prometheus_name("ReplicationLag", "p99.9") == "aws_elasticache_replication_lag_p99_9"


def node(i: int, region: str = REGION) -> Node:
    return Node(region=region, cluster_id=f"rg-{i:04d}-001", node_id="0001", node_type="cache.r6g.large", engine="redis", engine_version="7.1")


@pytest.mark.unit
@pytest.mark.parametrize(("queries", "calls"), [(1, 1), (500, 1), (501, 2), (1920, 4), (2000, 4), (2001, 5)])
def test_batches_are_the_minimum_number_of_calls(queries, calls):
    items = build_queries([node(i) for i in range(queries)], [MetricSpec("CPUUtilization", ("Average",))])
    parts = batches(items)
    assert len(parts) == calls == math.ceil(queries / 500)
    assert all(len(part) <= 500 for part in parts)
    assert len({q.id for q in items}) == queries


@pytest.mark.unit
def test_window_ends_on_a_period_boundary_at_least_the_delay_ago():
    now = 1_700_000_123.4
    start, end = window(now, 60, 120, 5)
    assert end.timestamp() % 60 == 0
    assert now - end.timestamp() >= 120
    assert end.timestamp() - start.timestamp() == 300


@pytest.mark.unit
def test_cost_estimate():
    cost = estimate_cost(120, [MetricSpec(f"M{i}", ("Average",)) for i in range(16)], 60)
    assert cost.queries_per_cycle == 1920
    assert cost.calls_per_cycle == 4
    assert cost.usd_per_month == pytest.approx(1920 * 43200 / 1000 * 0.01)


@pytest.mark.unit
def test_build_nodes_cluster_mode_enabled():
    groups = [
        {
            "ReplicationGroupId": "orders",
            "ClusterEnabled": True,
            "TransitEncryptionEnabled": True,
            "NodeGroups": [
                {
                    "NodeGroupId": "0001",
                    "NodeGroupMembers": [
                        {"CacheClusterId": "orders-0001-001", "CacheNodeId": "0001", "CurrentRole": "primary"},
                        {"CacheClusterId": "orders-0001-002", "CacheNodeId": "0001", "CurrentRole": "replica"},
                    ],
                },
                {"NodeGroupId": "0002", "NodeGroupMembers": [{"CacheClusterId": "orders-0002-001", "CacheNodeId": "0001"}]},
            ],
        }
    ]
    clusters = [
        {
            "CacheClusterId": f"orders-000{shard}-00{n}",
            "CacheNodeType": "cache.r7g.large",
            "Engine": "valkey",
            "EngineVersion": "8.0.1",
            "ReplicationGroupId": "orders",
            "TransitEncryptionEnabled": True,
            "PreferredAvailabilityZone": "eu-west-1b",
            "CacheNodes": [{"CacheNodeId": "0001", "Endpoint": {"Address": f"orders-000{shard}-00{n}.abc.cache.amazonaws.com", "Port": 6379}}],
            "ARN": f"arn:aws:elasticache:eu-west-1:123456789012:cluster:orders-000{shard}-00{n}",
        }
        for shard, n in ((1, 1), (1, 2), (2, 1))
    ] + [{"CacheClusterId": "memcached-1", "Engine": "memcached", "CacheNodeType": "cache.t3.micro"}]
    nodes = build_nodes(REGION, groups, clusters)
    assert [n.cluster_id for n in nodes] == ["orders-0001-001", "orders-0001-002", "orders-0002-001"]
    first = nodes[0]
    assert (first.shard, first.role, first.node_type, first.engine, first.tls, first.cluster_mode) == (
        "0001",
        "primary",
        "cache.r7g.large",
        "valkey",
        True,
        True,
    )
    assert first.address == "orders-0001-001.abc.cache.amazonaws.com"
    assert nodes[2].shard == "0002"


class _FlakyClient:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.calls = 0

    def describe_cache_clusters(self, **_):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return {"CacheClusters": []}


def _client_error(code: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.unit
def test_throttling_and_5xx_are_retried_with_jittered_backoff():
    sleeps: list[float] = []
    api = AwsApi(backoff=Backoff(base=0.5, cap=8, attempts=4), stats=ApiStats(), sleep=sleeps.append)
    client = _FlakyClient([_client_error("Throttling", 400), _client_error("InternalFailure", 500)])
    assert api.call(client, "describe_cache_clusters") == {"CacheClusters": []}
    assert client.calls == 3
    assert len(sleeps) == 2
    assert 0 <= sleeps[0] <= 0.5
    assert 0 <= sleeps[1] <= 1.0
    calls, errors, _ = api.stats.snapshot()
    assert calls == {"describe_cache_clusters": 3}
    assert errors == {("describe_cache_clusters", "throttling"): 1, ("describe_cache_clusters", "server"): 1}


@pytest.mark.unit
def test_retries_stop_after_the_attempts_and_never_for_client_errors():
    sleeps: list[float] = []
    api = AwsApi(backoff=Backoff(attempts=3), sleep=sleeps.append)
    client = _FlakyClient([_client_error("Throttling", 400)] * 10)
    with pytest.raises(AwsCallError) as caught:
        api.call(client, "describe_cache_clusters")
    assert caught.value.kind == "throttling"
    assert client.calls == 3
    client = _FlakyClient([_client_error("AccessDenied", 403)])
    with pytest.raises(AwsCallError) as caught:
        api.call(client, "describe_cache_clusters")
    assert caught.value.kind == "access_denied"
    assert client.calls == 1


@pytest.mark.unit
def test_retries_respect_the_cycle_deadline():
    api = AwsApi(backoff=Backoff(base=10, cap=10, attempts=10), sleep=lambda _: None)
    client = _FlakyClient([_client_error("Throttling", 400)] * 10)
    with pytest.raises(AwsCallError):
        api.call(client, "describe_cache_clusters", deadline=time.monotonic() + 0.001)
    assert client.calls <= 2


@pytest.mark.unit
def test_a_replys_epoch_timestamps_decode_to_the_same_instants_in_utc(aws_credentials):
    """The clients decode an epoch timestamp to a UTC datetime of that instant (dateutil's local zone cost 60 % of a
    GetMetricData reply's decoding); a text timestamp as botocore always did."""
    client = AwsApi().client("cloudwatch", REGION)
    parser = client._endpoint._response_parser_factory.create_parser("json")
    shape = client.meta.service_model.operation_model("GetMetricData").output_shape
    body = {"MetricDataResults": [{"Id": "q0", "Timestamps": [1_800_000_060, 1_800_000_000.5], "Values": [1.0, 2.0]}]}
    reply = parser.parse({"body": json.dumps(body).encode(), "headers": {}, "status_code": 200}, shape)
    stamps = reply["MetricDataResults"][0]["Timestamps"]
    assert [stamp.timestamp() for stamp in stamps] == [1_800_000_060, 1_800_000_000.5]
    assert {stamp.tzinfo for stamp in stamps} == {datetime.timezone.utc}
    text = client._endpoint._response_parser_factory.create_parser("query")._timestamp_parser("2027-01-15T08:01:00Z")
    assert text.timestamp() == 1_800_000_060


def seed_moto(region: str = REGION, groups: int = 2, replicas: int = 2) -> list[str]:
    """Replication groups with member cache clusters (moto does not create the members itself)."""
    elasticache = boto3.client("elasticache", region_name=region)
    ids = []
    for g in range(groups):
        group = f"rg{g}"
        elasticache.create_replication_group(
            ReplicationGroupId=group,
            ReplicationGroupDescription="test",
            Engine="redis",
            CacheNodeType="cache.r6g.large",
            NumCacheClusters=1,
        )
        for r in range(1, replicas + 1):
            cluster_id = f"{group}-00{r}"
            elasticache.create_cache_cluster(
                CacheClusterId=cluster_id,
                ReplicationGroupId=group,
                CacheNodeType="cache.r6g.large",
                Engine="redis",
                NumCacheNodes=1,
                PreferredAvailabilityZone=f"{region}a",
                Tags=[{"Key": "team", "Value": "payments" if g == 0 else "search"}],
            )
            ids.append(cluster_id)
    return ids


def put_metrics(cluster_ids: list[str], region: str = REGION) -> dict[tuple[str, str], float]:
    """One datapoint a minute for the last 10 minutes; returns the newest complete value per (cluster, metric)."""
    cloudwatch = boto3.client("cloudwatch", region_name=region)
    now = time.time()
    _, end = window(now, 60, 120, 5)
    expected = {}
    for index, cluster_id in enumerate(cluster_ids):
        for metric_index, metric in enumerate(("CPUUtilization", "NetworkBytesOut")):
            data = []
            for minutes_ago in range(1, 11):
                stamp = end - datetime.timedelta(minutes=minutes_ago)
                value = 1000.0 * index + 10 * metric_index + minutes_ago
                data.append(
                    {
                        "MetricName": metric,
                        "Timestamp": stamp,
                        "Value": value,
                        "Unit": "Percent" if metric_index == 0 else "Bytes",
                        "Dimensions": [{"Name": "CacheClusterId", "Value": cluster_id}, {"Name": "CacheNodeId", "Value": "0001"}],
                    }
                )
            cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data)
            expected[(cluster_id, metric)] = 1000.0 * index + 10 * metric_index + 1
    return expected


def collect(monitor: AwsMonitor) -> dict:
    return parse_samples(encode_text(AwsCollector(monitor).collect()).decode())


def test_discovery_and_cloudwatch_values_equal_what_was_put(aws_credentials):
    with mock_aws():
        cluster_ids = seed_moto()
        expected = put_metrics(cluster_ids)
        config = build_config({"aws": {"regions": [REGION]}, "redis": {"addr": ""}}, environ={})
        monitor = AwsMonitor(config.aws)
        monitor.discover_once()
        assert sorted(n.cluster_id for n in monitor.nodes()) == sorted(cluster_ids)
        monitor.poll_once()
        samples = collect(monitor)
    for (cluster_id, metric), value in expected.items():
        statistic = "Average" if metric == "CPUUtilization" else "Sum"
        labels = {"account_id": ACCOUNT, "dimension_CacheClusterId": cluster_id, "dimension_CacheNodeId": "0001", "region": REGION}
        assert sample(samples, prometheus_name(metric, statistic), **labels) == value
        stamp = sample(samples, "elasticache_cloudwatch_datapoint_timestamp_seconds", metric=prometheus_name(metric, statistic), **labels)
        assert time.time() - 250 <= stamp <= time.time() - 180  # the newest complete minute before the 2-minute delay
    queries = len(cluster_ids) * sum(len(spec.statistics) for spec in polled_metrics(DEFAULT_METRICS))
    assert sample(samples, "elasticache_exporter_aws_api_calls_total", api="get_metric_data") == math.ceil(queries / 500)
    assert sample(samples, "elasticache_exporter_cloudwatch_metrics_requested_total") == queries
    info = sample(
        samples,
        "elasticache_node_info",
        instance="rg0-001",
        node="rg0-001",
        replication_group="rg0",
        shard="0001",
        role="primary",
        node_type="cache.r6g.large",
        engine="redis",
        engine_version="",
        az=f"{REGION}a",
        region=REGION,
        account_id=ACCOUNT,
        dimension_CacheClusterId="rg0-001",
        dimension_CacheNodeId="0001",
    )
    assert info == 1


def test_an_exporter_of_a_fleet_alone_serves_no_localhost(aws_credentials):
    """A config with only an aws section serves the discovered fleet on /metrics and no target nobody configured."""
    with mock_aws():
        seed_moto(groups=1, replicas=1)
        app = make_app({"aws": {"regions": [REGION], "cloudwatch": {"enabled": False}}})
        try:
            wait_until(app.targets.discovered_nodes, what="the node discovered")
            samples = call(app, "/metrics").samples()
        finally:
            app.close()
    assert any(name == "elasticache_node_info" for name, _ in samples)
    assert [labels for name, labels in samples if name == "redis_up"] == []
    assert not any(dict(labels).get("instance", "").startswith("localhost") for _, labels in samples)


def test_a_shard_polls_and_describes_only_its_own_nodes(aws_credentials):
    from exporter.common.sharding import Shard

    with mock_aws():
        cluster_ids = seed_moto()
        put_metrics(cluster_ids)
        config = build_config({"aws": {"regions": [REGION]}, "redis": {"addr": ""}}, environ={})
        owned = {}
        for index in range(2):
            shard = Shard(index, 2)
            monitor = AwsMonitor(config.aws, owns=shard.owns)
            monitor.discover_once()
            assert sorted(n.cluster_id for n in monitor.nodes()) == sorted(cluster_ids)  # every shard discovers every node
            monitor.poll_once()
            samples = collect(monitor)
            owned[index] = {dict(labels)["dimension_CacheClusterId"] for (name, labels) in samples if name == "elasticache_node_info"}
            polled = {dict(labels)["dimension_CacheClusterId"] for (name, labels) in samples if name.startswith("aws_elasticache_")}
            assert polled == owned[index]
            assert owned[index] == {c for c in cluster_ids if shard.owns(c)}
            per_node = sum(len(spec.statistics) for spec in polled_metrics(DEFAULT_METRICS))
            assert sample(samples, "elasticache_exporter_cloudwatch_metrics_requested_total") == len(owned[index]) * per_node
    assert owned[0] | owned[1] == set(cluster_ids)
    assert not owned[0] & owned[1]


def test_tag_filters(aws_credentials):
    with mock_aws():
        seed_moto()
        config = build_config({"aws": {"regions": [REGION], "tag_filters": {"team": ["payments"]}}, "redis": {"addr": ""}}, environ={})
        monitor = AwsMonitor(config.aws)
        monitor.discover_once()
        assert sorted(n.cluster_id for n in monitor.nodes()) == ["rg0-001", "rg0-002"]


class _FailingCloudWatch:
    def __init__(self, client) -> None:
        self._client = client
        self.fail = False

    def __getattr__(self, name):
        attribute = getattr(self._client, name)
        if name == "get_metric_data" and self.fail:

            def failing(**_):
                raise ClientError({"Error": {"Code": "InternalFailure"}, "ResponseMetadata": {"HTTPStatusCode": 503}}, "GetMetricData")

            return failing
        return attribute


class _ApiWithFlakyCloudWatch(AwsApi):
    def __init__(self) -> None:
        super().__init__(backoff=Backoff(base=0.001, cap=0.002, attempts=3))
        self.cloudwatch: _FailingCloudWatch | None = None

    def client(self, service: str, region: str):
        client = super().client(service, region)
        if service != "cloudwatch":
            return client
        if self.cloudwatch is None:
            self.cloudwatch = _FailingCloudWatch(client)
        return self.cloudwatch


def test_failed_polls_keep_serving_the_last_good_values(aws_credentials):
    with mock_aws():
        cluster_ids = seed_moto(groups=1, replicas=1)
        expected = put_metrics(cluster_ids)
        config = build_config({"aws": {"regions": [REGION]}, "redis": {"addr": ""}}, environ={})
        api = _ApiWithFlakyCloudWatch()
        monitor = AwsMonitor(config.aws, apis={config.aws.accounts[0]: api})
        monitor.discover_once()
        monitor.poll_once()
        good_poll = monitor.last_poll
        api.cloudwatch.fail = True
        monitor.poll_once()
        samples = collect(monitor)
    labels = {"account_id": ACCOUNT, "dimension_CacheClusterId": cluster_ids[0], "dimension_CacheNodeId": "0001", "region": REGION}
    assert sample(samples, "aws_elasticache_cpuutilization_average", **labels) == expected[(cluster_ids[0], "CPUUtilization")]
    assert sample(samples, "elasticache_exporter_cloudwatch_last_success_timestamp_seconds") == good_poll
    assert sample(samples, "elasticache_exporter_aws_api_errors_total", api="get_metric_data", kind="server") == 3


def test_no_credentials_idles_with_one_log_line(monkeypatch, tmp_path, caplog, plain_redis):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    app = make_app({"aws": {"regions": [REGION, "us-east-1"], "discovery_interval": "1s"}, "redis": {"addr": plain_redis.addr}})
    try:
        caplog.set_level(logging.WARNING)
        wait_until(lambda: any("no AWS credentials" in r.getMessage() for r in caplog.records), what="the credentials log line")
        samples = call(app, "/metrics").samples()
        assert sample(samples, "redis_up", instance=f"127.0.0.1:{plain_redis.port}") == 1
        assert sample(samples, "elasticache_exporter_discovery_last_success_timestamp_seconds") == 0

        def failed_calls() -> float:
            found = call(app, "/metrics").samples()
            return sum(value for (name, _), value in found.items() if name == "elasticache_exporter_aws_api_errors_total")

        failed = failed_calls()
        wait_until(lambda: failed_calls() >= failed + 2, what="two more discoveries failing")  # every second: logged once
        assert sum("no AWS credentials" in r.getMessage() for r in caplog.records) == 1
    finally:
        app.close()


def _discovered_primary(port: int) -> Node:
    """orders-0001-001, a discovered primary at 127.0.0.1:``port``."""
    return Node(
        region=REGION,
        cluster_id="orders-0001-001",
        node_id="0001",
        node_type="cache.r6g.large",
        engine="redis",
        engine_version="7.1",
        replication_group="orders",
        shard="0001",
        role="primary",
        address="127.0.0.1",
        port=port,
    )


def test_discovered_nodes_become_targets(plain_redis):
    app = make_app({"redis": {"addr": ""}})
    try:
        discovered = _discovered_primary(plain_redis.port)
        app.targets.set_discovered([("orders-0001-001", discovered)])
        # served by /scrape for Prometheus' http_sd; on /metrics only with aws.scrape_discovered
        assert not any(dict(labels).get("instance") == "orders-0001-001" for _, labels in call(app, "/metrics").samples())
        assert sample(call(app, "/scrape", "target=orders-0001-001").samples(), "redis_up") == 1
        assert call(app, "/scrape", f"target=127.0.0.1:{plain_redis.port}").code == 200
        import json

        groups = json.loads(call(app, "/discovery").text)
        assert groups[0]["targets"] == [f"redis://127.0.0.1:{plain_redis.port}"]
        assert groups[0]["labels"]["__meta_elasticache_node"] == "orders-0001-001"
        assert call(app, "/scrape", "target=" + groups[0]["targets"][0]).code == 200
        assert groups[0]["labels"]["__meta_elasticache_node_type"] == "cache.r6g.large"
        app.targets.set_discovered([])
        assert call(app, "/scrape", "target=orders-0001-001").code == 400
    finally:
        app.close()


def test_a_reload_that_drops_a_discovered_node_leaves_no_connection_to_it(aws_credentials, fresh_redis, monkeypatch):
    """Discovered nodes are served by /scrape only (aws.scrape_discovered off), yet their connections are the app's to
    close: after a reload whose discovery no longer finds the node, the server holds no connection of the exporter."""
    from exporter.common.records import replace
    from exporter.redis.node import CLIENT_NAME
    from exporter.service.server import ExporterApp

    on_discovery = ExporterApp._on_discovery

    def at_the_test_server(app, named):  # moto's endpoints are names of its own: the node is the test's redis-server
        on_discovery(app, [(name, replace(node, address="127.0.0.1", port=fresh_redis.port, tls=False)) for name, node in named])

    monkeypatch.setattr(ExporterApp, "_on_discovery", at_the_test_server)

    def exporter_connections() -> list[dict]:
        return [c for c in fresh_redis.client().client_list() if c.get("name") == CLIENT_NAME]

    raw = {"redis": {"addr": ""}, "aws": {"regions": [REGION], "cloudwatch": {"enabled": False}}}
    with mock_aws():
        (node_name,) = seed_moto(groups=1, replicas=1)
        old = make_app(raw)
        try:
            wait_until(old.targets.discovered_nodes, what="the node discovered")
            assert sample(call(old, "/scrape", f"target={node_name}").samples(), "redis_up") == 1
            assert len(exporter_connections()) == 1
            boto3.client("elasticache", region_name=REGION).delete_cache_cluster(CacheClusterId=node_name)
            new = make_app(raw)  # the reload: a new app, then the old one closed
            try:
                wait_until(lambda: new.aws_monitor is not None and new.aws_monitor.last_discovery > 0, what="the reload's discovery")
                assert new.targets.discovered_nodes() == []
            finally:
                old.close()
                new.close()
            wait_until(lambda: exporter_connections() == [], what="the dropped node's connection closed")
        finally:
            old.close()


@pytest.fixture
def loopback_allowed(plain_redis):
    """An exporter whose /scrape may reach loopback servers, and the text that names ``plain_redis``."""
    app = make_app({"redis": {"addr": ""}, "scrape": {"allow": [{"hosts": ["127.0.0.1"]}]}})
    yield app, f"redis://127.0.0.1:{plain_redis.port}"
    app.close()


@pytest.mark.unit
def test_an_allowed_address_is_resolved_from_its_text_until_discovery_changes(loopback_allowed, plain_redis, monkeypatch):
    from exporter.service import targets as targets_module

    app, text = loopback_allowed
    ad_hoc = app.targets.resolve(text)
    parsed = []
    parse_address = targets_module.parse_address
    monkeypatch.setattr(targets_module, "parse_address", lambda *args, **kwargs: parsed.append(args) or parse_address(*args, **kwargs))
    assert app.targets.resolve(text) is ad_hoc  # Prometheus' next scrape: the same text, not parsed again
    assert parsed == []
    app.targets.set_discovered([("orders-0001-001", _discovered_primary(plain_redis.port))])
    assert app.targets.resolve(text).name == "orders-0001-001"  # the discovered node now answers for that address
    app.targets.set_discovered([])
    assert app.targets.resolve(text) is ad_hoc


@pytest.mark.unit
def test_a_discovery_while_a_target_resolves_is_not_hidden_by_its_text(loopback_allowed, plain_redis, monkeypatch):
    from exporter.service import targets as targets_module

    app, _ = loopback_allowed
    text = f"127.0.0.1:{plain_redis.port}"  # a spelling that is no target's name: parsed, then remembered
    parse_address = targets_module.parse_address

    def discovered_meanwhile(*args, **kwargs):
        app.targets.set_discovered([("orders-0001-001", _discovered_primary(plain_redis.port))])  # after this request looked
        return parse_address(*args, **kwargs)

    monkeypatch.setattr(targets_module, "parse_address", discovered_meanwhile)
    assert app.targets.resolve(text).name == "orders-0001-001"  # found by its address, though it came after the lookup
    monkeypatch.setattr(targets_module, "parse_address", parse_address)
    app.targets.set_discovered([])
    ad_hoc = app.targets.resolve(text)
    assert ad_hoc.name != "orders-0001-001"
    app.targets.set_discovered([("orders-0001-001", _discovered_primary(plain_redis.port))])
    assert app.targets.resolve(text).name == "orders-0001-001"  # the remembered text does not hide the discovered node


def test_exporter_process_with_moto_server(moto_server, tmp_path, aws_credentials, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    cluster_ids = seed_moto(groups=1, replicas=2)
    put_metrics(cluster_ids)
    config = tmp_path / "config.yml"
    config.write_text(f"redis:\n  addr: ''\naws:\n  regions: [{REGION}]\n  discovery_interval: 2s\n  cloudwatch:\n    interval: 1s\n")
    env = {k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL")}
    exporter = start_exporter("--config.file", str(config), env=env)
    try:

        def has_values():
            samples = parse_samples(exporter.get("/metrics")[1])
            return any(name == "aws_elasticache_cpuutilization_average" for name, _ in samples) and samples

        samples = wait_until(has_values, timeout=20, what="CloudWatch values")
        assert sample(samples, "elasticache_exporter_discovered_nodes", account_id=ACCOUNT, region=REGION) == len(cluster_ids)
        result = subprocess.run(
            [sys.executable, "-m", "exporter", "cost", "--config.file", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, **env},
        )
        assert result.returncode == 0, result.stderr
        assert f"nodes discovered: {len(cluster_ids)}" in result.stdout
        queries = len(cluster_ids) * sum(len(spec.statistics) for spec in polled_metrics(DEFAULT_METRICS))
        total = next(line.split() for line in result.stdout.splitlines() if line.startswith("total "))
        assert total[1] == f"{queries:,}"
        assert "paging" in result.stdout
    finally:
        exporter.stop()


def test_every_discovered_address_scrapes_through_the_exporter_process(moto_server, tmp_path, aws_credentials, monkeypatch):
    """Prometheus' http_sd job as docs/aws.md has it: each address the process' /discovery lists, fed back into
    /scrape?target=, answers redis_up 1 (moto's endpoints moved onto two real servers, a primary and its replica)."""
    from moto.elasticache.models import elasticache_backends
    from servers import start_redis

    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    primary, replica = start_redis(), start_redis()
    exporter = None
    try:
        replica.client().replicaof("127.0.0.1", primary.port)
        elasticache = boto3.client("elasticache", region_name=REGION)
        elasticache.create_replication_group(
            ReplicationGroupId="orders", ReplicationGroupDescription="test", Engine="redis", CacheNodeType="cache.r6g.large", NumCacheClusters=1
        )
        (node_group,) = elasticache_backends[ACCOUNT][REGION].replication_groups["orders"].node_groups  # the server's state
        node_group["node_group_members"] = [
            {
                "cache_cluster_id": f"orders-00{i + 1}",
                "cache_node_id": "0001",
                "current_role": role,
                "read_endpoint": {"address": "127.0.0.1", "port": server.port},
            }
            for i, (role, server) in enumerate([("primary", primary), ("replica", replica)])
        ]
        for cluster_id in ("orders-001", "orders-002"):
            elasticache.create_cache_cluster(CacheClusterId=cluster_id, ReplicationGroupId="orders", CacheNodeType="cache.r6g.large", Engine="redis")
        config = tmp_path / "config.yml"
        config.write_text(f"redis:\n  addr: ''\naws:\n  regions: [{REGION}]\n  discovery_interval: 2s\n  cloudwatch:\n    enabled: false\n")
        env = {k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL")}
        exporter = start_exporter("--config.file", str(config), env=env)

        def listed() -> list[dict]:
            code, body = exporter.get("/discovery")
            assert code == 200, body
            return json.loads(body)

        groups = wait_until(lambda: len(listed()) == 2 and listed(), timeout=30, what="both nodes listed")
        assert sorted(group["targets"][0] for group in groups) == sorted(f"redis://127.0.0.1:{s.port}" for s in (primary, replica))
        for group in groups:
            code, body = exporter.get("/scrape?target=" + urllib.parse.quote(group["targets"][0], safe=""))
            assert code == 200, body
            samples = parse_samples(body)
            assert sample(samples, "redis_up") == 1
            role = "master" if group["labels"]["__meta_elasticache_role"] == "primary" else "slave"
            assert dict(next(labels for name, labels in samples if name == "redis_instance_info"))["role"] == role
    finally:
        if exporter is not None:
            exporter.stop()
        primary.stop()
        replica.stop()


def test_assume_role_per_account(aws_credentials):
    with mock_aws():
        seed_moto(groups=1, replicas=1)
        config = build_config(
            {
                "redis": {"addr": ""},
                "aws": {"accounts": [{"role_arn": "arn:aws:iam::123456789012:role/elasticache-exporter", "regions": [REGION]}]},
            },
            environ={},
        )
        monitor = AwsMonitor(config.aws)
        monitor.discover_once()
        assert [n.cluster_id for n in monitor.nodes()] == ["rg0-001"]
        calls, _, _ = next(iter(monitor.apis.values())).stats.snapshot()
        assert calls["assume_role"] == 1


@pytest.mark.unit
@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"aws": {"regions": ["mars-1"]}}, "aws.regions[0]"),
        ({"aws": {"regions": [REGION], "role_arn": "admin"}}, "aws.role_arn"),
        ({"aws": {"regions": [REGION], "cloudwatch": {"period": "90s"}}}, "aws.cloudwatch.period"),
        ({"aws": {"regions": [REGION], "cloudwatch": {"period": "300s"}}}, "aws.cloudwatch.period"),
        ({"aws": {"regions": [REGION], "cloudwatch": {"delay": "30s"}}}, "aws.cloudwatch.delay"),
        (
            {"aws": {"regions": [REGION], "cloudwatch": {"metrics": [{"name": "CPUUtilization", "statistics": ["Median"]}]}}},
            "aws.cloudwatch.metrics[0].statistics",
        ),
        (
            {"aws": {"regions": [REGION], "cloudwatch": {"serverless_metrics": [{"name": "ThrottledCmds", "statistic": "Sum"}]}}},
            "aws.cloudwatch.serverless_metrics[0].statistic",
        ),
        ({"aws": {"regions": [REGION], "cloudwatch": {"serverless_metrics": "ThrottledCmds"}}}, "aws.cloudwatch.serverless_metrics"),
        ({"aws": {"accounts": [{"role_arn": "arn:aws:iam::123456789012:role/x"}]}}, "aws.accounts[0].regions"),
    ],
)
def test_invalid_aws_config_names_the_key(raw, key):
    from exporter.common.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        build_config(raw, environ={})
    assert caught.value.key == key


def _alarms_of(alerts, node_type: str) -> int:
    """The alarms a node of ``node_type`` gets: network ones by percentage (the default), those limited to some node types
    only where it is one of them."""
    return sum(
        1
        for alert in alerts
        if alert.cloudwatch
        and alert.network_alarms != "bytes"
        and (alert.cloudwatch.node_types is None or node_type.startswith(alert.cloudwatch.node_types))
    )


def test_alarms_apply_creates_the_planned_alarms_and_a_second_apply_changes_nothing(aws_credentials):
    from exporter.alerts.alarms import apply, describe, desired_alarms, plan
    from exporter.alerts.catalog import load_catalog
    from exporter.baselines.table import load_table

    with mock_aws():
        cluster_ids = seed_moto(groups=1, replicas=2)
        config = build_config({"aws": {"regions": [REGION]}, "redis": {"addr": ""}}, environ={})
        monitor = AwsMonitor(config.aws)
        monitor.discover_once()
        alerts, table = load_catalog(), load_table()
        api = next(iter(monitor.apis.values()))
        desired, skipped = desired_alarms(monitor.nodes(), alerts, table, "arn:aws:sns:eu-west-1:123456789012:alarms")
        assert skipped == []
        first = plan(api, desired)
        per_node = _alarms_of(alerts, "cache.r6g.large")
        assert not {alarm["AlarmName"].rsplit("-", 1)[-1] for _, alarm in desired} & {"ElastiCacheBurstCreditsLow", "ElastiCacheDataTieringFull"}
        assert [c.action for c in first] == ["create"] * (per_node * len(cluster_ids))
        names = {alarm["AlarmName"] for _, alarm in desired}
        by_bytes = {alarm["AlarmName"] for _, alarm in desired_alarms(monitor.nodes(), alerts, table, None, "bytes")[0]}
        nodes_and_directions = [(node, word) for node in cluster_ids for word in ("Out", "In")]
        assert names - by_bytes == {
            f"{n}-ElastiCacheNetwork{w}{level}AWSBaseline" for n, w in nodes_and_directions for level in ("Near", "At", "Over")
        }
        assert by_bytes - names == {f"{n}-ElastiCacheNetwork{w}{level}Baseline" for n, w in nodes_and_directions for level in ("Near", "At")}
        assert apply(api, first) == len(first)
        cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        existing = {a["AlarmName"]: a for a in cloudwatch.describe_alarms(MaxRecords=100)["MetricAlarms"]}
        assert sorted(existing) == sorted(c.name for c in first)
        network = existing[f"{cluster_ids[0]}-ElastiCacheNetworkOutNearAWSBaseline"]
        assert (network["MetricName"], network["Statistic"], network["Threshold"]) == ("NetworkBaselineUsageOutPercentage", "Average", 80)
        by_bytes = {alarm["AlarmName"]: alarm for _, alarm in desired_alarms(monitor.nodes(), alerts, table, None, "bytes")[0]}
        network = by_bytes[f"{cluster_ids[0]}-ElastiCacheNetworkOutNearBaseline"]
        assert network["Threshold"] == 75_000_000 * 60  # cache.r6g.large: 80 % of 0.75 Gbit/s, as bytes per minute
        assert network["Statistic"] == "Sum"
        second = plan(api, desired)
        assert {c.action for c in second} == {"unchanged"}
        assert apply(api, second) == 0
        assert "0 to create, 0 to update" in describe(second, [])
        changed = [(region, {**alarm, "Threshold": alarm["Threshold"] + 1}) for region, alarm in desired[:per_node]]
        assert [c.action for c in plan(api, changed)] == ["update"] * per_node + ["delete"] * per_node * (len(cluster_ids) - 1)


def test_alarm_lifecycle_follows_the_fleet_and_prunes_only_its_own_alarms(aws_credentials):
    """A fleet loses a node and gains one of a type without a baseline: plan shows create and delete; apply deletes
    only with prune, only alarms it made (marker and tag), and a second apply changes nothing."""
    from exporter.alerts.alarms import MARKER, apply, describe, desired_alarms, plan
    from exporter.alerts.catalog import load_catalog
    from exporter.alerts.thresholds import alarm_threshold_key
    from exporter.baselines.table import load_table

    with mock_aws():
        cluster_ids = seed_moto(groups=1, replicas=3)
        config = build_config({"aws": {"regions": [REGION]}, "redis": {"addr": ""}}, environ={})
        monitor = AwsMonitor(config.aws)
        monitor.discover_once()
        alerts, table = load_catalog(), load_table()
        per_node = _alarms_of(alerts, "cache.r6g.large")
        fixed = sum(1 for alert in alerts if alert.cloudwatch and alarm_threshold_key(alert) is None and not alert.cloudwatch.node_types)
        api = next(iter(monitor.apis.values()))
        desired, _ = desired_alarms(monitor.nodes(), alerts, table, None)
        apply(api, plan(api, desired, (REGION,)))
        cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        # alarms of others: one by hand, one that copies our marker but lacks our tag
        metric = {
            "Namespace": "AWS/ElastiCache",
            "MetricName": "Evictions",
            "Statistic": "Sum",
            "Period": 60,
            "EvaluationPeriods": 1,
            "Threshold": 1.0,
            "ComparisonOperator": "GreaterThanThreshold",
        }
        cloudwatch.put_metric_alarm(AlarmName=f"{cluster_ids[0]}-HandMade", AlarmDescription="by hand", **metric)
        cloudwatch.put_metric_alarm(AlarmName="copycat-RedisDown", AlarmDescription=f"copied {MARKER}", **metric)

        elasticache = boto3.client("elasticache", region_name=REGION)
        elasticache.delete_cache_cluster(CacheClusterId=cluster_ids[-1])
        elasticache.create_cache_cluster(
            CacheClusterId="newtype-001", CacheNodeType="cache.z9.huge", Engine="redis", NumCacheNodes=1, PreferredAvailabilityZone=f"{REGION}a"
        )
        monitor.discover_once()
        desired, skipped = desired_alarms(monitor.nodes(), alerts, table, None)
        assert skipped == ["node type cache.z9.huge has no baseline: baseline alarms skipped for newtype-001 (fixed-threshold alarms kept)"]
        changes = plan(api, desired, (REGION,))
        by_action = {action: sorted(c.name for c in changes if c.action == action) for action in ("create", "delete", "unchanged")}
        assert len(by_action["create"]) == fixed
        assert all(name.startswith("newtype-001-") for name in by_action["create"])
        assert len(by_action["delete"]) == per_node
        assert all(name.startswith(f"{cluster_ids[-1]}-") for name in by_action["delete"])
        assert len(by_action["unchanged"]) == per_node * (len(cluster_ids) - 1)
        text = describe(changes, skipped)
        assert f"- delete {REGION} {cluster_ids[-1]}-RedisDown" not in text  # RedisDown has no CloudWatch alarm
        assert f"- delete {REGION} {cluster_ids[-1]}-ElastiCacheEvictions (its node or alert is gone; apply --prune deletes it)" in text
        assert f"{fixed} to create, 0 to update, {per_node} to delete" in text

        assert apply(api, changes) == fixed  # without prune nothing is deleted
        names = {a["AlarmName"] for a in cloudwatch.describe_alarms(MaxRecords=100)["MetricAlarms"]}
        assert set(by_action["delete"]) <= names
        changes = plan(api, desired, (REGION,))
        assert apply(api, changes, prune=True) == per_node
        names = {a["AlarmName"] for a in cloudwatch.describe_alarms(MaxRecords=100)["MetricAlarms"]}
        assert not set(by_action["delete"]) & names
        assert {f"{cluster_ids[0]}-HandMade", "copycat-RedisDown"} <= names  # never touched
        again = plan(api, desired, (REGION,))
        assert {c.action for c in again} == {"unchanged"}
        assert apply(api, again, prune=True) == 0
