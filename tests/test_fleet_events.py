"""What AWS does to the fleet: events categorized by their documented messages and counted once across overlapping,
paginated polls in two accounts; service updates until they complete; the next maintenance window across the week's
end; pending modifications; tags as labels. AWS is moto, extended with the calls it lacks (tests/moto_fleet_events.py)."""

from __future__ import annotations

import datetime
from pathlib import Path

import boto3
import pytest
from helpers import parse_samples
from moto_fleet_events import add_event, add_service_update, add_update_action, fleet_events_in_moto
from test_aws_fleet import DEV, EU, PROD, US, moto_fleet, role

from exporter.aws.discovery import build_nodes
from exporter.aws.fleet_events import EVENT_CATEGORIES, categorize, next_window_start, tag_label
from exporter.aws.monitor import AwsMonitor
from exporter.baselines.table import load_table
from exporter.common.exposition import encode_text
from exporter.config import build_config
from exporter.service.collectors.aws import AwsCollector
from exporter.service.status import render_status_page

MESSAGES = Path(__file__).parent / "data" / "elasticache_event_messages.tsv"
UTC = datetime.timezone.utc


def messages() -> list[tuple[str, str]]:
    rows = [line.rstrip("\n").split("\t", 1) for line in MESSAGES.read_text().splitlines() if line and not line.startswith("#")]
    return [(category, message) for category, message in rows]


@pytest.mark.unit
@pytest.mark.parametrize(("category", "message"), messages())
def test_documented_messages_fall_in_their_category(category, message):
    assert categorize(message) == category


@pytest.mark.unit
def test_the_table_covers_every_category():
    assert {category for category, _ in messages()} == set(EVENT_CATEGORIES)
    assert len(messages()) >= 30


def at(text: str) -> float:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("window", "now", "expected"),
    [
        ("sun:23:00-mon:01:30", "2026-11-24T10:00:00", "2026-11-29T23:00:00"),  # Tuesday: this week's Sunday
        ("sun:23:00-mon:01:30", "2026-11-29T23:30:00", "2026-12-06T23:00:00"),  # under way: next week's
        ("sun:23:00-mon:01:30", "2026-11-30T00:30:00", "2026-12-06T23:00:00"),  # Monday, still under way
        ("mon:01:00-mon:02:00", "2026-11-29T23:30:00", "2026-11-30T01:00:00"),  # Sunday night: the next week's Monday
        ("sat:04:30-sat:05:30", "2026-11-28T04:30:00", "2026-11-28T04:30:00"),  # starting now
        ("Wed:07:00-Wed:08:00", "2026-11-24T10:00:00", "2026-11-25T07:00:00"),
    ],
)
def test_the_next_maintenance_window_across_the_week_s_end(window, now, expected):
    assert next_window_start(window, at(now)) == at(expected)


@pytest.mark.unit
@pytest.mark.parametrize("window", ["", "sun:25:00-mon:01:00", "sunday:23:00-mon:01:00", "sun:23:00"])
def test_what_is_no_window_has_no_start(window):
    assert next_window_start(window, at("2026-11-24T10:00:00")) is None


@pytest.mark.unit
def test_tag_keys_become_labels_as_yace_names_them():
    assert tag_label("team") == "tag_team"
    assert tag_label("Cost Center") == "tag_Cost_Center"
    assert tag_label("aws:cloudformation:stack-name") == "tag_aws_cloudformation_stack_name"
    assert tag_label("share%") == "tag_share_percent"
    assert tag_label("2fa") is None  # not a label name even so: left out, as YACE does
    assert tag_label("team\u00e9") is None


@pytest.mark.unit
def test_pending_modifications_of_a_cluster_and_its_group():
    groups = [
        {
            "ReplicationGroupId": "orders",
            "PendingModifiedValues": {"AutomaticFailoverStatus": "enabled", "Resharding": {}},
            "NodeGroups": [
                {"NodeGroupId": "0001", "NodeGroupMembers": [{"CacheClusterId": "orders-001", "CacheNodeId": "0001", "CurrentRole": "primary"}]}
            ],
        }
    ]
    clusters = [
        {
            "CacheClusterId": "orders-001",
            "ReplicationGroupId": "orders",
            "Engine": "valkey",
            "CacheNodeType": "cache.r6g.large",
            "PreferredMaintenanceWindow": "sun:23:00-mon:01:30",
            "PendingModifiedValues": {"CacheNodeType": "cache.r6g.xlarge"},
            "CacheNodes": [{"CacheNodeId": "0001", "Endpoint": {"Address": "orders-001.x", "Port": 6379}}],
        }
    ]
    (node,) = build_nodes(EU, groups, clusters)
    assert node.maintenance_window == "sun:23:00-mon:01:30"
    assert node.pending_modifications == ("AutomaticFailoverStatus", "CacheNodeType")


def served(monitor: AwsMonitor) -> dict:
    return parse_samples(encode_text(AwsCollector(monitor).collect()).decode())


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def fleet_monitor(**aws) -> AwsMonitor:
    accounts = [{"role_arn": role(DEV), "regions": [EU, US]}, {"role_arn": role(PROD), "regions": [EU]}]
    return AwsMonitor(build_config({"redis": {"addr": ""}, "aws": {"accounts": accounts, **aws}}, environ={}).aws)


def test_events_are_counted_once_across_overlapping_paginated_polls_in_two_accounts(aws_credentials):
    now = datetime.datetime.now(UTC)
    with moto_fleet(), fleet_events_in_moto():
        add_event(DEV, EU, "replication-group", "sessions", "Test Failover API called for node group 0001", now - datetime.timedelta(minutes=30))
        add_event(
            DEV,
            EU,
            "cache-cluster",
            "sessions-001",
            "Failover from primary node sessions-001 to replica node sessions-002 completed",
            now - datetime.timedelta(minutes=29),
        )
        add_event(DEV, EU, "cache-cluster", "sessions-001", "Recovering cache nodes 0001", now - datetime.timedelta(minutes=28))
        add_event(DEV, EU, "cache-cluster", "sessions-001", "Finished recovery for cache nodes 0001", now - datetime.timedelta(minutes=20))
        add_event(DEV, EU, "cache-cluster", "sessions-002", "Cache node 0001 restarted", now - datetime.timedelta(hours=3))  # before the window
        add_event(PROD, EU, "cache-cluster", "sessions-001", "Recovering cache nodes 0001", now - datetime.timedelta(minutes=10))
        monitor = fleet_monitor()
        assert monitor.discover_once() == []
        assert monitor.poll_events() == []
        samples = served(monitor)
        # every event names its source's replication group: a group's own, or a cache cluster's as discovery knows it
        dev = {"account_id": DEV, "region": EU, "replication_group": "sessions"}
        assert value(samples, "elasticache_events_total", **dev, source_type="cache-cluster", source_id="sessions-001", category="failover") == 1
        assert value(samples, "elasticache_events_total", **dev, source_type="replication-group", source_id="sessions", category="failover") == 1
        assert value(samples, "elasticache_events_total", **dev, source_type="cache-cluster", source_id="sessions-001", category="node_replaced") == 2
        assert (
            value(
                samples,
                "elasticache_events_total",
                account_id=PROD,
                region=EU,
                replication_group="sessions",
                source_type="cache-cluster",
                source_id="sessions-001",
                category="node_replaced",
            )
            == 1
        )  # the same id in another account: its own series
        old = {"source_type": "cache-cluster", "source_id": "sessions-002", "category": "maintenance"}  # 3 hours ago: before the window
        assert value(samples, "elasticache_events_total", **dev, **old) is None
        last = value(
            samples,
            "elasticache_event_last_timestamp_seconds",
            **dev,
            source_type="cache-cluster",
            source_id="sessions-001",
            category="node_replaced",
        )
        assert last == pytest.approx((now - datetime.timedelta(minutes=20)).timestamp(), abs=1)
        # the next poll asks again for the last minutes before its window: what it saw is not counted twice, what is new is
        add_event(DEV, EU, "cache-cluster", "sessions-001", "Failover to replica node sessions-001 completed", datetime.datetime.now(UTC))
        assert monitor.poll_events() == []
        samples = served(monitor)
        assert value(samples, "elasticache_events_total", **dev, source_type="cache-cluster", source_id="sessions-001", category="failover") == 2
        assert value(samples, "elasticache_events_total", **dev, source_type="cache-cluster", source_id="sessions-001", category="node_replaced") == 2
        calls = sum(stats.snapshot()[0].get("describe_events", 0) for stats in monitor.api_stats())
        page = render_status_page(build_config({"redis": {"addr": ""}}, environ={}), [], 0.0, load_table, None, monitor.fleet.newest_events())
        assert page.index("Failover to replica node sessions-001 completed") < page.index("Recovering cache nodes 0001")  # newest first
        assert "Finished recovery" not in page  # only the newest of each source
        # the first poll: two pages of four events in one account-region, one page in each other; the second, a page each
        assert calls == (2 + 1 + 1) + (1 + 1 + 1)


def test_service_updates_are_served_until_they_complete(aws_credentials):
    apply_by = datetime.datetime(2026, 12, 1, tzinfo=UTC)
    with moto_fleet(), fleet_events_in_moto():
        add_service_update(
            DEV,
            EU,
            ServiceUpdateName="elasticache-20261101-001",
            ServiceUpdateSeverity="critical",
            ServiceUpdateStatus="available",
            ServiceUpdateType="security-update",
            ServiceUpdateRecommendedApplyByDate=apply_by,
            AutoUpdateAfterRecommendedApplyByDate=True,
        )
        add_service_update(
            DEV,
            EU,
            ServiceUpdateName="elasticache-20251101-001",
            ServiceUpdateSeverity="low",
            ServiceUpdateStatus="expired",
            ServiceUpdateType="security-update",
        )
        action = add_update_action(
            DEV, EU, ReplicationGroupId="sessions", ServiceUpdateName="elasticache-20261101-001", UpdateActionStatus="not-applied"
        )
        add_update_action(DEV, EU, ReplicationGroupId="flags", ServiceUpdateName="elasticache-20261101-001", UpdateActionStatus="complete")
        add_update_action(DEV, EU, ReplicationGroupId="sessions", ServiceUpdateName="elasticache-20251101-001", UpdateActionStatus="not-applied")
        monitor = fleet_monitor()
        assert monitor.discover_once() == []
        samples = served(monitor)
        update = {"account_id": DEV, "region": EU, "replication_group": "sessions", "service_update": "elasticache-20261101-001"}
        assert (
            value(samples, "elasticache_service_update_info", **update, severity="critical", update_type="security-update", status="not-applied") == 1
        )
        assert value(samples, "elasticache_service_update_apply_by_timestamp_seconds", **update) == apply_by.timestamp()
        assert value(samples, "elasticache_service_update_auto_update_start_timestamp_seconds", **update) == apply_by.timestamp()
        assert [key for key in samples if key[0] == "elasticache_service_update_info"] == [
            (
                "elasticache_service_update_info",
                tuple(sorted({**update, "severity": "critical", "update_type": "security-update", "status": "not-applied"}.items())),
            )
        ]
        action["UpdateActionStatus"] = "complete"
        assert monitor.discover_once() == []
        assert not [key for key in served(monitor) if key[0].startswith("elasticache_service_update")]


def test_maintenance_windows_and_tags_of_discovered_groups(aws_credentials):
    with moto_fleet(), fleet_events_in_moto():
        dev = boto3.client("sts", region_name=EU).assume_role(RoleArn=role(DEV), RoleSessionName="seed")["Credentials"]
        elasticache = boto3.client(
            "elasticache",
            region_name=EU,
            aws_access_key_id=dev["AccessKeyId"],
            aws_secret_access_key=dev["SecretAccessKey"],
            aws_session_token=dev["SessionToken"],
        )
        elasticache.create_cache_cluster(
            CacheClusterId="carts-001",
            CacheNodeType="cache.t4g.small",
            Engine="valkey",
            NumCacheNodes=1,
            PreferredMaintenanceWindow="sun:23:00-mon:01:30",
            Tags=[{"Key": "team", "Value": "payments"}, {"Key": "env", "Value": "prod"}, {"Key": "unrelated", "Value": "x"}],
        )
        elasticache.create_serverless_cache(ServerlessCacheName="basket", Engine="valkey", Tags=[{"Key": "team", "Value": "checkout"}])
        monitor = fleet_monitor(export_tags=["team", "env", "missing"])
        assert monitor.discover_once() == []
        samples = served(monitor)
        # a cluster outside any replication group stands for one of its own
        start = value(
            samples, "elasticache_maintenance_window_next_start_timestamp_seconds", account_id=DEV, region=EU, replication_group="carts-001"
        )
        assert start == next_window_start("sun:23:00-mon:01:30", start - 1)
        info = [dict(labels) for name, labels in samples if name == "elasticache_node_info" and dict(labels)["node"] == "carts-001"]
        assert len(info) == 1
        assert (info[0]["tag_team"], info[0]["tag_env"], info[0]["tag_missing"]) == ("payments", "prod", "")
        assert "tag_unrelated" not in info[0]
        caches = {dict(labels)["cache"]: dict(labels) for name, labels in samples if name == "elasticache_serverless_cache_info"}
        assert (caches["basket"]["tag_team"], caches["basket"]["tag_env"]) == ("checkout", "")


def test_data_tiering_and_burstable_nodes_get_their_own_metrics(aws_credentials):
    from exporter.aws.cloudwatch import window

    with moto_fleet(), fleet_events_in_moto():
        dev = boto3.client("sts", region_name=EU).assume_role(RoleArn=role(DEV), RoleSessionName="seed")["Credentials"]
        keys = {"aws_access_key_id": dev["AccessKeyId"], "aws_secret_access_key": dev["SecretAccessKey"], "aws_session_token": dev["SessionToken"]}
        elasticache = boto3.client("elasticache", region_name=EU, **keys)
        cloudwatch = boto3.client("cloudwatch", region_name=EU, **keys)
        _, end = window(datetime.datetime.now(UTC).timestamp(), 60, 120, 5)
        for cluster_id, node_type, metric, number in (
            ("archive-001", "cache.r6gd.xlarge", "DatabaseCapacityUsageCountedForEvictPercentage", 93.0),
            ("carts-001", "cache.t4g.small", "CPUCreditBalance", 4.0),
        ):
            elasticache.create_cache_cluster(CacheClusterId=cluster_id, CacheNodeType=node_type, Engine="valkey", NumCacheNodes=1)
            dimensions = [{"Name": "CacheClusterId", "Value": cluster_id}, {"Name": "CacheNodeId", "Value": "0001"}]
            data = [
                {"MetricName": metric, "Timestamp": end - datetime.timedelta(minutes=minutes), "Value": number, "Dimensions": dimensions}
                for minutes in range(1, 4)
            ]
            cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data)
        plain, extra = fleet_monitor(cloudwatch={"node_type_metrics": False}), fleet_monitor()
        for monitor in (plain, extra):
            assert monitor.discover_once() == []
            monitor.poll_once()
        # five more queries: three of the r6gd node's, two of the t4g node's
        assert extra.last_queries == plain.last_queries + 5
        samples = served(extra)
        node = {"account_id": DEV, "region": EU, "dimension_CacheNodeId": "0001"}
        assert (
            value(
                samples,
                "aws_elasticache_database_capacity_usage_counted_for_evict_percentage_maximum",
                **node,
                dimension_CacheClusterId="archive-001",
            )
            == 93.0
        )
        assert value(samples, "aws_elasticache_cpucredit_balance_minimum", **node, dimension_CacheClusterId="carts-001") == 4.0
        assert not [key for key in samples if key[0] == "aws_elasticache_cpucredit_balance_minimum" and "sessions-001" in str(key)]
