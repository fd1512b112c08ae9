"""A multi-account, multi-region fleet in moto: the same CacheClusterId in two accounts and two regions, a Valkey
group, accounts reached by assuming a role each. Nothing lost, nothing duplicated, every series says where it is."""

from __future__ import annotations

import datetime
import json
import time

import boto3
import pytest
from helpers import call, make_app, parse_samples, sample
from moto import mock_aws
from servers import wait_until
from test_aws import aws_credentials  # noqa: F401 - the fixture

from exporter.aws.cloudwatch import DEFAULT_METRICS, window
from exporter.aws.discovery import build_serverless, instance_names
from exporter.aws.monitor import AwsCollector, AwsMonitor
from exporter.common.exposition import encode_text
from exporter.config import build_config

DEV, PROD = "111111111111", "222222222222"
EU, US = "eu-west-1", "us-east-1"
# (account, region, replication group, member cluster ids, node type, engine)
FLEET = [
    (DEV, EU, "sessions", ["sessions-001", "sessions-002"], "cache.r6g.large", "redis"),
    (DEV, US, "sessions", ["sessions-001"], "cache.m6g.large", "redis"),
    (DEV, US, "flags", ["flags-001"], "cache.r7g.large", "valkey"),
    (PROD, EU, "sessions", ["sessions-001", "sessions-002"], "cache.r6g.xlarge", "redis"),
]


def role(account: str) -> str:
    return f"arn:aws:iam::{account}:role/elasticache-exporter"


def session(account: str) -> boto3.session.Session:
    credentials = boto3.client("sts", region_name=EU).assume_role(RoleArn=role(account), RoleSessionName="seed")["Credentials"]
    return boto3.session.Session(aws_access_key_id=credentials["AccessKeyId"], aws_secret_access_key=credentials["SecretAccessKey"],
                                 aws_session_token=credentials["SessionToken"])  # fmt: skip


def cpu_value(account: str, region: str, cluster_id: str) -> float:
    """A value unique to each node, so a node's series read from another account's node shows."""
    return float(int(account[0]) * 10 + (1 if region == EU else 2)) + int(cluster_id[-1]) / 10


def seed_fleet() -> None:
    _, end = window(time.time(), 60, 120, 5)
    for account, region, group, members, node_type, engine in FLEET:
        aws = session(account)
        elasticache = aws.client("elasticache", region_name=region)
        elasticache.create_replication_group(ReplicationGroupId=group, ReplicationGroupDescription="fleet", Engine=engine,
                                             CacheNodeType=node_type, NumCacheClusters=1)  # fmt: skip
        cloudwatch = aws.client("cloudwatch", region_name=region)
        for cluster_id in members:
            elasticache.create_cache_cluster(CacheClusterId=cluster_id, ReplicationGroupId=group, CacheNodeType=node_type, Engine=engine,
                                             NumCacheNodes=1)  # fmt: skip
            dimensions = [{"Name": "CacheClusterId", "Value": cluster_id}, {"Name": "CacheNodeId", "Value": "0001"}]
            data = []
            for minutes_ago in range(1, 6):
                stamp = end - datetime.timedelta(minutes=minutes_ago)
                data.append({"MetricName": "CPUUtilization", "Timestamp": stamp, "Value": cpu_value(account, region, cluster_id),
                             "Dimensions": dimensions})  # fmt: skip
                data.append({"MetricName": "NetworkBytesOut", "Timestamp": stamp, "Value": 60 * 1_000_000.0, "Dimensions": dimensions})
            cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data)


def fleet_config(**extra) -> dict:
    accounts = [{"role_arn": role(DEV), "regions": [EU, US]}, {"role_arn": role(PROD), "regions": [EU]}]
    return {"redis": {"addr": ""}, "aws": {"accounts": accounts, **extra}}


def test_the_same_cluster_id_in_two_accounts_and_two_regions_loses_nothing(aws_credentials):  # noqa: F811
    with mock_aws():
        seed_fleet()
        monitor = AwsMonitor(build_config(fleet_config(), environ={}).aws)
        assert monitor.discover_once() == []
        monitor.poll_once()
        samples = parse_samples(encode_text(AwsCollector(monitor).collect()).decode())
    expected_nodes = {(account, region, cluster_id) for account, region, _, members, _, _ in FLEET for cluster_id in members}
    info = {(dict(labels)["account_id"], dict(labels)["region"], dict(labels)["dimension_CacheClusterId"]): dict(labels)
            for name, labels in samples if name == "elasticache_node_info"}  # fmt: skip
    assert set(info) == expected_nodes
    assert len([n for n, _ in samples if n == "elasticache_node_info"]) == len(expected_nodes)
    # instance: the CacheClusterId where unique in the fleet, qualified where another account or region has it too
    assert info[(DEV, EU, "sessions-001")]["instance"] == f"{DEV}/{EU}/sessions-001"
    assert info[(PROD, EU, "sessions-002")]["instance"] == f"{PROD}/{EU}/sessions-002"
    assert info[(DEV, US, "flags-001")]["instance"] == "flags-001"
    assert len({labels["instance"] for labels in info.values()}) == len(expected_nodes)
    assert info[(DEV, US, "flags-001")]["engine"] == "valkey"
    assert info[(PROD, EU, "sessions-001")]["node_type"] == "cache.r6g.xlarge"
    for account, region, cluster_id in expected_nodes:
        labels = {"account_id": account, "region": region, "dimension_CacheClusterId": cluster_id, "dimension_CacheNodeId": "0001"}
        assert sample(samples, "aws_elasticache_cpuutilization_average", **labels) == cpu_value(account, region, cluster_id)
    # one GetMetricData call per account-region with nodes (each well under 500 queries)
    queries_per_node = sum(len(spec.statistics) for spec in DEFAULT_METRICS)
    assert sample(samples, "elasticache_exporter_aws_api_calls_total", api="get_metric_data") == 3
    assert sample(samples, "elasticache_exporter_cloudwatch_metrics_requested_total") == len(expected_nodes) * queries_per_node
    assert sample(samples, "elasticache_exporter_aws_api_calls_total", api="assume_role") == 2  # once per account
    assert sample(samples, "elasticache_exporter_discovered_nodes", account_id=DEV, region=US) == 2


def test_discovery_is_served_by_default_and_every_discovered_node_gets_utilization(aws_credentials):  # noqa: F811
    with mock_aws():
        seed_fleet()
        app = make_app(fleet_config(discovery_interval="1h", cloudwatch={"interval": "1h"}))
        try:
            monitor = app.aws_monitor
            wait_until(lambda: monitor.polls >= 1, timeout=30, what="discovery and a CloudWatch poll")
            groups = json.loads(call(app, "/discovery").text)
            samples = call(app, "/metrics").samples()
            named = monitor.named_nodes()
        finally:
            app.close()
    assert len(named) == 6
    # every node with an endpoint (moto gives one to a group's first member only), without scrape_discovered
    assert sorted(group["labels"]["__meta_elasticache_node"] for group in groups) == sorted(name for name, node in named if node.address)
    assert len(groups) == 4
    by_node = {group["labels"]["__meta_elasticache_node"]: group for group in groups}
    dev_eu = by_node[f"{DEV}/{EU}/sessions-001"]["labels"]
    assert dev_eu["__meta_elasticache_account_id"] == DEV
    assert dev_eu["__meta_elasticache_region"] == EU
    assert dev_eu["__meta_elasticache_cluster"] == "sessions-001"
    assert dev_eu["__meta_elasticache_replication_group"] == "sessions"
    assert dev_eu["__meta_elasticache_node_type"] == "cache.r6g.large"
    assert by_node["flags-001"]["labels"]["__meta_elasticache_engine"] == "valkey"
    for group in groups:
        assert len(group["targets"]) == 1
        assert group["targets"][0].startswith(("redis://", "rediss://"))
    # the baseline series of every discovered node, from CloudWatch alone: 1 MB/s out against its node type's baseline
    ratios = {dict(labels)["instance"]: value for (name, labels), value in samples.items()
              if name == "elasticache_network_utilization_ratio" and dict(labels)["source"] == "cloudwatch"}  # fmt: skip
    assert set(ratios) == {name for name, _ in named}
    baselines = {dict(labels)["node_type"]: value for (name, labels), value in samples.items()
                 if name == "elasticache_baseline_network_bytes_per_second" and dict(labels)["level"] == "100"}  # fmt: skip
    node_type = dev_eu["__meta_elasticache_node_type"]
    assert ratios[f"{DEV}/{EU}/sessions-001"] == pytest.approx(1_000_000 / baselines[node_type])
    prod_type = by_node[f"{PROD}/{EU}/sessions-001"]["labels"]["__meta_elasticache_node_type"]
    assert ratios[f"{PROD}/{EU}/sessions-001"] == pytest.approx(1_000_000 / baselines[prod_type])
    assert baselines[node_type] != baselines[prod_type]


def test_instance_names_are_unique_and_stable_for_unique_ids():
    from exporter.aws.discovery import Node

    def node(account, region, cluster_id):
        return Node(region=region, cluster_id=cluster_id, node_id="0001", node_type="cache.t3.micro", engine="redis",
                    engine_version="7.1", account_id=account)  # fmt: skip

    nodes = [node(DEV, EU, "a"), node(PROD, EU, "a"), node(DEV, EU, "b"), node(DEV, US, "c")]
    names = instance_names(nodes)
    assert names == {(DEV, EU, "a", "0001"): f"{DEV}/{EU}/a", (PROD, EU, "a", "0001"): f"{PROD}/{EU}/a",
                     (DEV, EU, "b", "0001"): "b", (DEV, US, "c", "0001"): "c"}  # fmt: skip


def test_serverless_caches_are_read_with_their_limits():
    reply = [
        {"ServerlessCacheName": "carts", "Engine": "valkey", "FullEngineVersion": "8.0", "Status": "available",
         "ARN": f"arn:aws:elasticache:{EU}:{PROD}:serverlesscache:carts",
         "Endpoint": {"Address": "carts-abc.serverless.euw1.cache.amazonaws.com", "Port": 6379},
         "CacheUsageLimits": {"DataStorage": {"Maximum": 10, "Unit": "GB"}, "ECPUPerSecond": {"Maximum": 5000}}},
        {"ServerlessCacheName": "memo", "Engine": "memcached", "Status": "available"},
        {"ServerlessCacheName": "old", "Engine": "redis", "Status": "deleting"},
    ]  # fmt: skip
    (cache,) = build_serverless(EU, reply)
    assert (cache.name, cache.engine, cache.account_id) == ("carts", "valkey", PROD)
    assert cache.ecpu_per_second_max == 5000
    assert cache.data_storage_max_bytes == 10e9


def test_cost_is_given_per_account_and_region(aws_credentials, capsys, tmp_path):  # noqa: F811
    import yaml

    from exporter.cli.main import main

    config = tmp_path / "fleet.yml"
    config.write_text(yaml.safe_dump(fleet_config()))
    with mock_aws():
        seed_fleet()
        assert main(["cost", "--config.file", str(config)]) == 0
    out = capsys.readouterr().out
    per_node = sum(len(spec.statistics) for spec in DEFAULT_METRICS)
    rows = {tuple(line.split()[:3]) for line in out.splitlines()}
    assert (DEV, EU, "2") in rows
    assert (DEV, US, "2") in rows
    assert (PROD, EU, "2") in rows
    assert "nodes discovered: 6" in out
    assert f"{2 * per_node:>14,}" in out
