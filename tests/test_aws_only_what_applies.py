"""Only what applies: a metric some nodes publish is asked for those nodes alone: the CPU credits of the t family, data
tiering's of r6gd, a Global Datastore secondary's lag, and the durability metrics of an asynchronously durable group
(EffectiveDurability in DescribeReplicationGroups); what a poll asks is recorded at the API, against moto."""

from __future__ import annotations

import datetime
import math
import re
import time

import boto3
import pytest
from helpers import parse_samples, recording_api, sample
from moto import mock_aws
from moto_durability import durability_in_moto
from moto_global_datastores import add_global_datastore, global_datastores_in_moto

from exporter.aws.cloudwatch import DURABILITY_METRICS, durability_metrics, prometheus_name, tier_of
from exporter.aws.discovery import Node, build_nodes
from exporter.aws.monitor import AwsMonitor
from exporter.baselines.table import load_table
from exporter.common.exposition import encode_text
from exporter.config import build_config
from exporter.service.collectors.aws import AwsCollector

ACCOUNT = "123456789012"  # moto's account for the default credentials
REGION = "eu-west-1"
DURABLE = {"Engine": "valkey", "EngineVersion": "9.0", "CacheNodeType": "cache.r7g.large"}
# each node and the metric-statistics it is asked beside what every node is asked
EXTRA: dict[str, set[tuple[str, str]]] = {
    "plain-001": set(),
    "burst-001": {("CPUCreditBalance", "Minimum"), ("CPUCreditUsage", "Sum")},
    "tiered-001": {("BytesReadFromDisk", "Sum"), ("BytesWrittenToDisk", "Sum"), ("DatabaseCapacityUsageCountedForEvictPercentage", "Maximum")},
    "orders-euw1-001": {("GlobalDatastoreReplicationLag", "Maximum")},
    "ledger-0001-001": {("DurabilityLag", "Maximum"), ("DurabilityBufferExceededErrorCount", "Sum")},
    "ledger-0001-002": {("DurabilityLag", "Maximum"), ("DurabilityBufferExceededErrorCount", "Sum")},
    "journal-0001-001": set(),  # synchronous: AWS publishes both durability metrics as always 0
    "journal-0001-002": set(),
}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("described", "mode", "durable", "asked"),
    [("async", "async", True, True), ("SYNC", "sync", True, False), ("disabled", "disabled", False, False), (None, "", False, False)],
)
def test_discovery_reads_the_groups_effective_durability(described, mode, durable, asked):
    group = {"ReplicationGroupId": "ledger", "ClusterEnabled": True, "NodeGroups": []}
    if described is not None:
        group["EffectiveDurability"] = described
    cluster = {"CacheClusterId": "ledger-0001-001", "ReplicationGroupId": "ledger", "Engine": "valkey", "CacheNodeType": "cache.r7g.large"}
    lone = {"CacheClusterId": "lone-001", "Engine": "valkey", "CacheNodeType": "cache.r7g.large"}
    node, alone = build_nodes(REGION, [group], [cluster, lone])
    assert (node.durability, node.durable) == (mode, durable)
    assert durability_metrics(node) == (DURABILITY_METRICS if asked else ())
    assert (alone.durability, durability_metrics(alone)) == ("", ())


@pytest.mark.unit
def test_the_durability_metrics_are_asked_in_the_paging_tier():
    assert [(spec.name, spec.statistics) for spec in DURABILITY_METRICS] == [
        ("DurabilityLag", ("Maximum",)),
        ("DurabilityBufferExceededErrorCount", ("Sum",)),
    ]
    assert {tier_of(spec.name, statistic) for spec in DURABILITY_METRICS for statistic in spec.statistics} == {"paging"}


@pytest.mark.unit
def test_alarms_limited_to_some_node_types_are_made_for_those_nodes_only():
    """`alarms plan|apply` gives a t node its CPU credits alarm and an r6gd node its data tiering one, and no other node
    either (it would sit in INSUFFICIENT_DATA, which notifies)."""
    from exporter.alerts.alarms import desired_alarms
    from exporter.alerts.catalog import load_catalog

    limited = {"ElastiCacheBurstCreditsLow", "ElastiCacheDataTieringFull"}
    nodes = [
        Node(region=REGION, cluster_id=cluster_id, node_id="0001", node_type=node_type, engine="valkey", engine_version="8.0")
        for cluster_id, node_type in (("plain-001", "cache.r6g.large"), ("burst-001", "cache.t4g.small"), ("tiered-001", "cache.r6gd.xlarge"))
    ]
    desired, _ = desired_alarms(nodes, load_catalog(), load_table(), None)
    made = {tuple(alarm["AlarmName"].rsplit("-", 1)) for _, alarm in desired}  # <CacheClusterId>-<alert>
    assert {(node, alert) for node, alert in made if alert in limited} == {
        ("burst-001", "ElastiCacheBurstCreditsLow"),
        ("tiered-001", "ElastiCacheDataTieringFull"),
    }
    assert {alert for node, alert in made if node == "plain-001"} == {alert for node, alert in made if node == "burst-001"} - limited


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _seed() -> None:
    elasticache = boto3.client("elasticache", region_name=REGION)
    for cluster_id, node_type in (("plain-001", "cache.r6g.large"), ("burst-001", "cache.t4g.small"), ("tiered-001", "cache.r6gd.xlarge")):
        elasticache.create_cache_cluster(CacheClusterId=cluster_id, CacheNodeType=node_type, Engine="valkey", NumCacheNodes=1)
    # the secondary of a Global Datastore whose primary is in another region
    elasticache.create_replication_group(ReplicationGroupId="orders-euw1", ReplicationGroupDescription="d", Engine="redis", NumCacheClusters=1)
    elasticache.create_cache_cluster(
        CacheClusterId="orders-euw1-001", ReplicationGroupId="orders-euw1", CacheNodeType="cache.r6g.large", Engine="redis"
    )
    members = [("orders-use1", "us-east-1", "primary", "associated"), ("orders-euw1", REGION, "secondary", "associated")]
    add_global_datastore(ACCOUNT, "ldgnf-orders", members)
    # two durable groups (cluster mode, a replica per shard, Multi-AZ and TLS, as AWS requires): async and sync
    for group, mode in (("ledger", "async"), ("journal", "sync")):
        elasticache.create_replication_group(
            ReplicationGroupId=group,
            ReplicationGroupDescription="d",
            ClusterMode="enabled",
            NumNodeGroups=1,
            ReplicasPerNodeGroup=1,
            AutomaticFailoverEnabled=True,
            MultiAZEnabled=True,
            TransitEncryptionEnabled=True,
            Durability=mode,
            **DURABLE,
        )
        for member in ("0001-001", "0001-002"):
            elasticache.create_cache_cluster(CacheClusterId=f"{group}-{member}", ReplicationGroupId=group, **DURABLE)


def _put_durability(first: float, last: float, error_minute: float) -> None:
    """Every minute from ``first`` to ``last`` of the async group's primary: 6 s of durability lag, and writes rejected
    in one minute."""
    dimensions = [{"Name": "CacheClusterId", "Value": "ledger-0001-001"}, {"Name": "CacheNodeId", "Value": "0001"}]
    data = []
    for stamp in range(int(first), int(last) + 60, 60):
        when = datetime.datetime.fromtimestamp(stamp, tz=datetime.timezone.utc)
        data.append({"MetricName": "DurabilityLag", "Timestamp": when, "Value": 6000.0 + stamp % 7, "Dimensions": dimensions})
        rejected = 4.0 if stamp == error_minute else 0.0
        data.append({"MetricName": "DurabilityBufferExceededErrorCount", "Timestamp": when, "Value": rejected, "Dimensions": dimensions})
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    for start in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data[start : start + 500])


def _asked(queries: list[dict]) -> dict[str, set[tuple[str, str]]]:
    """Each node's asked (metric, statistic), from the requests."""
    asked: dict[str, set[tuple[str, str]]] = {}
    for query in queries:
        stat = query["MetricStat"]
        dims = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
        asked.setdefault(dims["CacheClusterId"], set()).add((stat["Metric"]["MetricName"], stat["Stat"]))
    return asked


def _queries(api) -> list[dict]:
    return [query for _, request in api.sent for query in request["MetricDataQueries"]]


def test_each_node_is_asked_exactly_the_extra_metrics_it_publishes_and_the_durability_ones_are_served(aws_credentials, capsys):
    from exporter.cli.aws import print_cost

    now = math.floor(time.time() / 60) * 60
    start = now - 3600 + 23.0  # the simulated clock: the first poll's newest complete minute is start - 203
    newest_first = math.floor((start - 120) / 60) * 60 - 60
    with mock_aws(), global_datastores_in_moto(), durability_in_moto():
        _seed()
        _put_durability(newest_first - 1800, now, error_minute=newest_first - 60)
        config = build_config({"aws": {"regions": [REGION], "events": False}, "redis": {"addr": ""}}, environ={})
        clock = _Clock(start)
        api = recording_api("get_metric_data")
        monitor = AwsMonitor(config.aws, apis={config.aws.accounts[0]: api}, clock=clock, monotonic=clock)
        assert monitor.discover_once() == []
        durability = {node.cluster_id: node.durability for node in monitor.nodes()}
        assert {cluster_id: mode for cluster_id, mode in durability.items() if mode} == {
            "ledger-0001-001": "async",
            "ledger-0001-002": "async",
            "journal-0001-001": "sync",
            "journal-0001-002": "sync",
        }
        monitor.poll_once()  # every tier
        asked = _asked(_queries(api))
        assert set(asked) == set(EXTRA)
        common = set.intersection(*asked.values())
        assert common == asked["plain-001"]
        assert {cluster_id: metrics - common for cluster_id, metrics in asked.items()} == EXTRA
        assert not common & set.union(*EXTRA.values())
        first = parse_samples(encode_text(AwsCollector(monitor, load_table()).collect()).decode())
        paging_asked = sum(
            1 for query in _queries(api) if tier_of(query["MetricStat"]["Metric"]["MetricName"], query["MetricStat"]["Stat"]) == "paging"
        )
        # the next paging poll, 5 minutes on: the minute of rejected writes was the first poll's, so it is not counted again
        clock.now += 300
        monitor.poll_once(("paging",))
        second = parse_samples(encode_text(AwsCollector(monitor, load_table()).collect()).decode())
        assert print_cost(config) == 0
    ledger = {"account_id": ACCOUNT, "region": REGION, "dimension_CacheClusterId": "ledger-0001-001", "dimension_CacheNodeId": "0001"}
    lag, rejected = prometheus_name("DurabilityLag", "Maximum"), prometheus_name("DurabilityBufferExceededErrorCount", "Sum")
    assert sample(first, lag, **ledger) == 6000.0 + newest_first % 7
    assert sample(first, rejected, **ledger) == 0.0  # the newest minute; the rejected writes were the minute before
    assert sample(first, "elasticache_cloudwatch_window_lowest", **ledger, metric=rejected) == 4.0
    assert sample(first, "elasticache_cloudwatch_window_minutes", **ledger, metric=rejected) == 1
    assert sample(first, "elasticache_cloudwatch_window_lowest", **ledger, metric=lag) >= 6000.0
    assert sample(first, "elasticache_cloudwatch_window_minutes", **ledger, metric=lag) == 5
    assert sample(second, "elasticache_cloudwatch_window_lowest", **ledger, metric=rejected) == 0.0
    assert sample(second, "elasticache_cloudwatch_datapoint_timestamp_seconds", **ledger, metric=lag) == newest_first + 300
    # no other node has a durability series
    durability_series = {dict(labels)["dimension_CacheClusterId"] for (name, labels) in first if name in (lag, rejected)}
    assert durability_series == {"ledger-0001-001"}  # the replica is asked too, but publishes nothing here
    # cost counts each node's extra pairs: its paging tier is what the poll asked in that tier
    printed = capsys.readouterr().out
    paging = re.search(r"^paging\s+([\d,]+)\s", printed, re.MULTILINE)
    assert paging is not None, printed
    assert int(paging.group(1).replace(",", "")) == paging_asked


def test_a_group_switched_to_sync_durability_serves_no_durability_series_after_the_next_discovery(aws_credentials):
    """A group's mode changes (the console, ModifyReplicationGroup): once discovery reads it as sync, the durability
    metrics are neither asked nor served from the last async poll, window series included."""
    from moto.elasticache.models import elasticache_backends

    now = math.floor(time.time() / 60) * 60
    start = now - 3600 + 23.0
    with mock_aws(), global_datastores_in_moto(), durability_in_moto():
        _seed()
        _put_durability(start - 1800, now, error_minute=start - 600)
        config = build_config({"aws": {"regions": [REGION], "events": False}, "redis": {"addr": ""}}, environ={})
        clock = _Clock(start)
        api = recording_api("get_metric_data")
        monitor = AwsMonitor(config.aws, apis={config.aws.accounts[0]: api}, clock=clock, monotonic=clock)
        monitor.discover_once()
        monitor.poll_once()
        lag = prometheus_name("DurabilityLag", "Maximum")

        def ledger_series() -> set[str]:
            samples = parse_samples(encode_text(AwsCollector(monitor, load_table()).collect()).decode())
            return {
                name if name == lag else dict(labels).get("metric", "")
                for name, labels in samples
                if dict(labels).get("dimension_CacheClusterId") == "ledger-0001-001" and lag in (name, dict(labels).get("metric"))
            }

        assert lag in ledger_series()
        elasticache_backends[ACCOUNT][REGION].replication_groups["ledger"].EffectiveDurability = "sync"
        monitor.discover_once()
        clock.now += 300
        api.sent.clear()
        monitor.poll_once(("paging",))
        assert not {metric for node, metrics in _asked(_queries(api)).items() if node.startswith("ledger") for metric, _ in metrics} & {
            spec.name for spec in DURABILITY_METRICS
        }
        assert ledger_series() == set()
