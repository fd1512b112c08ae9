"""Exporter shards over one fleet in moto: every series the AWS side serves (nodes, CloudWatch, and the fleet-wide
families: Global Datastores, engine support, events, service updates, maintenance windows, pending modifications,
serverless caches) comes from exactly one of two shards, so an alert on it fires once, not once per shard."""

from __future__ import annotations

import datetime
from collections import Counter

import boto3
from helpers import parse_samples
from moto import mock_aws
from moto_fleet_events import add_event, add_service_update, add_update_action, fleet_events_in_moto
from moto_global_datastores import add_global_datastore, global_datastores_in_moto
from moto_serverless import serverless_in_moto

from exporter.aws.monitor import AwsMonitor
from exporter.common.exposition import encode_text
from exporter.common.sharding import Shard
from exporter.config import build_config
from exporter.service.collectors.aws import AwsCollector

ACCOUNT = "123456789012"
US, EU = "us-east-1", "eu-west-1"
UTC = datetime.timezone.utc
# (replication group, region, engine, engine version): versions the support table knows and one it lacks
GROUPS = [(f"group-{i:02d}", US if i % 2 else EU, "redis", ("5.0.6", "6.2", "7.1", "1.2.6")[i % 4]) for i in range(16)]
SERVERLESS = [(f"serverless-{i}", US) for i in range(6)]


def seed() -> None:
    now = datetime.datetime.now(UTC)
    for group, region, engine, version in GROUPS:
        elasticache = boto3.client("elasticache", region_name=region)
        elasticache.create_replication_group(
            ReplicationGroupId=group,
            ReplicationGroupDescription="fleet",
            Engine=engine,
            EngineVersion=version,
            CacheNodeType="cache.r6g.large",
            NumCacheClusters=1,
            PreferredMaintenanceWindow="sun:23:00-mon:01:30",
        )
        for suffix in ("001", "002"):
            elasticache.create_cache_cluster(
                CacheClusterId=f"{group}-{suffix}",
                ReplicationGroupId=group,
                CacheNodeType="cache.r6g.large",
                Engine=engine,
                EngineVersion=version,
                NumCacheNodes=1,
                PreferredMaintenanceWindow="sun:23:00-mon:01:30",
            )
        add_event(ACCOUNT, region, "replication-group", group, "Test Failover API called for node group 0001", now - datetime.timedelta(minutes=5))
        add_event(ACCOUNT, region, "cache-cluster", f"{group}-001", "Recovering cache nodes 0001", now - datetime.timedelta(minutes=4))
        add_update_action(ACCOUNT, region, ReplicationGroupId=group, ServiceUpdateName="elasticache-20261101-001", UpdateActionStatus="not-applied")
    for region in (US, EU):
        add_event(ACCOUNT, region, "parameter-group", "default.redis7", "Parameter group changed", now - datetime.timedelta(minutes=3))
        add_service_update(
            ACCOUNT,
            region,
            ServiceUpdateName="elasticache-20261101-001",
            ServiceUpdateSeverity="critical",
            ServiceUpdateStatus="available",
            ServiceUpdateType="security-update",
            ServiceUpdateRecommendedApplyByDate=datetime.datetime(2026, 12, 1, tzinfo=UTC),
            AutoUpdateAfterRecommendedApplyByDate=True,
        )
    for index in range(4):
        members = [(f"group-{2 * index:02d}", EU, "primary", "associated"), (f"group-{2 * index + 1:02d}", US, "secondary", "associated")]
        add_global_datastore(ACCOUNT, f"ldgnf-{index}", members)
    for name, region in SERVERLESS:
        boto3.client("elasticache", region_name=region).create_serverless_cache(
            ServerlessCacheName=name,
            Engine="valkey",
            CacheUsageLimits={"DataStorage": {"Maximum": 10, "Unit": "GB"}, "ECPUPerSecond": {"Maximum": 5000}},
        )


def served_by(shard: Shard | None) -> Counter:
    """The series (name and labels) the AWS side serves on this shard's /metrics, the exporter's own left out (each
    process has its own)."""
    raw = {"redis": {"addr": ""}, "aws": {"accounts": [{"regions": [US, EU]}]}}
    monitor = AwsMonitor(build_config(raw, environ={}).aws, owns=shard.owns if shard else None)
    assert monitor.discover_once() == []
    assert monitor.poll_events() == []
    monitor.poll_once()
    samples = parse_samples(encode_text(AwsCollector(monitor).collect()).decode())
    return Counter(key for key in samples if not key[0].startswith("elasticache_exporter_"))


FLEET_WIDE = (
    "elasticache_global_datastore_info",
    "elasticache_global_datastore_members",
    "elasticache_global_datastore_member_info",
    "elasticache_global_datastore_member_associated",
    "elasticache_engine_support_end_timestamp_seconds",
    "elasticache_engine_support_upgrade_info",
    "elasticache_engine_support_unknown_clusters",
    "elasticache_events_total",
    "elasticache_event_last_timestamp_seconds",
    "elasticache_service_update_info",
    "elasticache_service_update_apply_by_timestamp_seconds",
    "elasticache_maintenance_window_next_start_timestamp_seconds",
    "elasticache_serverless_cache_info",
    "elasticache_serverless_ecpu_per_second_limit",
)


def test_two_exporter_shards_serve_each_fleet_wide_series_exactly_once(aws_credentials):
    with mock_aws(), global_datastores_in_moto(), fleet_events_in_moto(), serverless_in_moto():
        seed()
        whole = served_by(None)
        shards = [served_by(Shard(index, 2)) for index in range(2)]
    assert set(whole.values()) == {1}
    present = {name for name, _ in whole}
    assert set(FLEET_WIDE) <= present, set(FLEET_WIDE) - present  # the fleet above has a series of every fleet-wide family
    union = shards[0] + shards[1]
    assert sorted(key for key, count in union.items() if count > 1) == []  # nothing served by both shards
    assert union == whole  # nothing lost either
    for name in FLEET_WIDE:  # and the fleet-wide series are split, not all on one shard
        assert all(any(key[0] == name for key in shard) for shard in shards) or sum(1 for key in whole if key[0] == name) == 1, name
    # a group's series are on the shard that owns the group's name, as a node's are on the shard that owns its name
    for index, shard in enumerate(shards):
        for name, labels in shard:
            where = dict(labels)
            if name in FLEET_WIDE and name.startswith("elasticache_global_datastore"):
                assert Shard(index, 2).owns(where["global_replication_group"]), (name, where)
            elif name in FLEET_WIDE and where.get("replication_group"):
                assert Shard(index, 2).owns(where["replication_group"]), (name, where)
