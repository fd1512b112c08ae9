"""Beyond one region and one engine version: two Global Datastores over three regions in moto (extended with
DescribeGlobalReplicationGroups, tests/moto_global_datastores.py), one secondary lagging and one not associated; the
engine end-of-support table against clusters of three versions; serverless latency as percentile statistics (moto
extended with them, tests/moto_percentiles.py)."""

from __future__ import annotations

import datetime
import json
import time

import boto3
import pytest
from helpers import parse_samples, sample
from moto import mock_aws
from moto_global_datastores import add_global_datastore, global_datastores_in_moto
from moto_percentiles import percentiles_in_moto
from moto_serverless import serverless_in_moto
from servers import wait_until

from exporter.aws.cloudwatch import window
from exporter.aws.discovery import Node
from exporter.aws.engine_support import (
    EngineSupportError,
    cluster_support,
    load_support_table,
    major_of,
    parse_support_table,
    row_for,
)
from exporter.aws.global_datastores import parse_global_datastores
from exporter.aws.monitor import AwsMonitor
from exporter.common.exposition import encode_text
from exporter.config import build_config
from exporter.service.collectors.aws import AwsCollector

ACCOUNT = "123456789012"
US, EU, AP = "us-east-1", "eu-west-1", "ap-southeast-1"
REGIONS = [US, EU, AP]
# (global datastore, [(replication group, region, role, status)])
GLOBAL = [
    (
        "ldgnf-orders",
        [
            ("orders-use1", US, "primary", "associated"),
            ("orders-euw1", EU, "secondary", "associated"),
            ("orders-apse1", AP, "secondary", "associated"),
        ],
    ),
    ("ldgnf-carts", [("carts-euw1", EU, "primary", "associated"), ("carts-use1", US, "secondary", "associating")]),
]
LAG = {"orders-euw1-001": 2.0, "orders-apse1-001": 42.0, "carts-use1-001": 1.0}  # seconds behind the primary region


def region_of(group: str) -> str:
    return next(region for _, members in GLOBAL for name, region, _, _ in members if name == group)


def seed_global() -> None:
    _, end = window(time.time(), 60, 120, 5)
    for _, members in GLOBAL:
        for group, region, _, _ in members:
            elasticache = boto3.client("elasticache", region_name=region)
            elasticache.create_replication_group(
                ReplicationGroupId=group, ReplicationGroupDescription="global", Engine="redis", CacheNodeType="cache.r6g.large", NumCacheClusters=1
            )
            for suffix in ("001", "002"):
                elasticache.create_cache_cluster(
                    CacheClusterId=f"{group}-{suffix}", ReplicationGroupId=group, CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1
                )
    for global_id, members in GLOBAL:
        add_global_datastore(ACCOUNT, global_id, members)
    for cluster_id, lag in LAG.items():
        dimensions = [{"Name": "CacheClusterId", "Value": cluster_id}, {"Name": "CacheNodeId", "Value": "0001"}]
        data = [
            {"MetricName": "GlobalDatastoreReplicationLag", "Timestamp": end - datetime.timedelta(minutes=m), "Value": lag, "Dimensions": dimensions}
            for m in range(1, 6)
        ]
        boto3.client("cloudwatch", region_name=region_of(cluster_id.rsplit("-", 1)[0])).put_metric_data(Namespace="AWS/ElastiCache", MetricData=data)


def monitor_of(**cloudwatch) -> AwsMonitor:
    raw = {"redis": {"addr": ""}, "aws": {"accounts": [{"regions": REGIONS}], "events": False, "cloudwatch": cloudwatch}}
    return AwsMonitor(build_config(raw, environ={}).aws)


def served(monitor: AwsMonitor, **collector) -> dict:
    return parse_samples(encode_text(AwsCollector(monitor, **collector).collect()).decode())


def test_global_datastores_over_three_regions_are_served_once_with_their_secondaries_lag(aws_credentials):
    with mock_aws(), global_datastores_in_moto():
        boto3.client("sts", region_name=US)  # moto's account is the default one
        seed_global()
        monitor = monitor_of()
        assert monitor.discover_once() == []
        monitor.poll_once()
        samples = served(monitor)
    account = monitor.nodes()[0].account_id
    assert account == ACCOUNT
    # each datastore once, though three regions list it; every member in its own region, with its role
    members = {
        (dict(labels)["global_replication_group"], dict(labels)["replication_group"], dict(labels)["region"], dict(labels)["role"])
        for name, labels in samples
        if name == "elasticache_global_datastore_member_info"
    }
    assert members == {(global_id, group, region, role) for global_id, listed in GLOBAL for group, region, role, _ in listed}
    where = {"account_id": ACCOUNT}
    assert sample(samples, "elasticache_global_datastore_members", **where, global_replication_group="ldgnf-orders", role="secondary") == 2
    assert sample(samples, "elasticache_global_datastore_members", **where, global_replication_group="ldgnf-carts", role="primary") == 1
    carts_secondary = {**where, "global_replication_group": "ldgnf-carts", "replication_group": "carts-use1", "region": US, "role": "secondary"}
    assert sample(samples, "elasticache_global_datastore_member_associated", **carts_secondary) == 0
    orders_primary = {**where, "global_replication_group": "ldgnf-orders", "replication_group": "orders-use1", "region": US, "role": "primary"}
    assert sample(samples, "elasticache_global_datastore_member_associated", **orders_primary) == 1
    # the lag is polled for the secondaries' primaries only (and for a node whose role the API leaves out, as moto's
    # second cluster of a group): one query each, beside the metric set of every node
    per_node = sum(len(spec.statistics) for spec in monitor.node_metrics)
    secondaries = {group for _, listed in GLOBAL for group, _, role, _ in listed if role == "secondary"}
    polled = [n.cluster_id for n in monitor.nodes() if n.replication_group in secondaries and n.role in ("primary", "")]
    assert set(LAG) <= set(polled)
    assert not [n for n in monitor.nodes() if n.cluster_id in polled and n.role == "replica"]
    assert monitor.last_queries == len(monitor.nodes()) * per_node + len(polled)
    lagged = {
        dict(labels)["dimension_CacheClusterId"]: value
        for (name, labels), value in samples.items()
        if name == "aws_elasticache_global_datastore_replication_lag_maximum"
    }
    assert lagged == LAG


def test_cost_counts_the_lag_queries_of_the_secondaries(aws_credentials, capsys, tmp_path):
    import yaml

    from exporter.cli.main import main

    config = tmp_path / "fleet.yml"
    config.write_text(yaml.safe_dump({"redis": {"addr": ""}, "aws": {"accounts": [{"regions": REGIONS}], "events": False}}))
    with mock_aws(), global_datastores_in_moto():
        seed_global()
        assert main(["cost", "--config.file", str(config)]) == 0
        monitor = monitor_of()
        monitor.discover_once()
        polled = [n for n in monitor.nodes() if monitor.extra_metrics(n)]
    out = capsys.readouterr().out
    assert "Global Datastore secondary clusters: 3" in out
    per_node = sum(len(spec.statistics) for spec in monitor.node_metrics)
    total = next(line.split() for line in out.splitlines() if line.startswith("total "))
    assert total[1] == f"{len(monitor.nodes()) * per_node + len(polled):,}"
    assert {n.replication_group for n in polled} == {"orders-euw1", "orders-apse1", "carts-use1"}


def test_an_endpoint_without_global_datastores_lists_none_and_discovery_goes_on(aws_credentials):
    with mock_aws():  # moto alone answers DescribeGlobalReplicationGroups as not implemented
        seed_clusters = boto3.client("elasticache", region_name=US)
        seed_clusters.create_replication_group(ReplicationGroupId="solo", ReplicationGroupDescription="d", Engine="redis", NumCacheClusters=1)
        seed_clusters.create_cache_cluster(CacheClusterId="solo-001", ReplicationGroupId="solo", CacheNodeType="cache.r6g.large", Engine="redis")
        monitor = monitor_of()
        assert monitor.discover_once() == []
    assert monitor.global_datastores() == []
    assert [node.cluster_id for node in monitor.nodes()] == ["solo-001"]


@pytest.mark.unit
def test_a_listing_without_members_or_ids_is_read_as_far_as_it_goes():
    parsed = parse_global_datastores(
        [
            {"GlobalReplicationGroupId": "ldgnf-a", "Status": "primary-only", "Engine": "valkey", "EngineVersion": "8.0"},
            {"Status": "available"},
            {
                "GlobalReplicationGroupId": "ldgnf-b",
                "Members": [
                    {"ReplicationGroupId": "b-2", "ReplicationGroupRegion": AP, "Role": "SECONDARY", "Status": "associated"},
                    {"ReplicationGroupId": "b-1", "ReplicationGroupRegion": US, "Role": "PRIMARY", "Status": "associated"},
                    {"ReplicationGroupRegion": EU, "Role": "SECONDARY"},
                ],
            },
        ],
        ACCOUNT,
    )
    assert [d.global_id for d in parsed] == ["ldgnf-a", "ldgnf-b"]
    assert parsed[0].members == ()
    assert parsed[0].status == "primary-only"
    assert [(m.replication_group, m.role) for m in parsed[1].members] == [("b-1", "primary"), ("b-2", "secondary")]


# --- engine end of support -------------------------------------------------------------------------------------------

DAY = 86400.0


def node(group: str, engine: str, version: str, region: str = US) -> Node:
    return Node(region, f"{group}-001", "0001", "cache.r6g.large", engine, version, replication_group=group, account_id=ACCOUNT)


def relative_table(now: float) -> list:
    """A table whose dates sit around ``now``: Redis 5 on Extended Support, Redis 6 within 90 days of its end."""

    def day(offset: float) -> str:
        return datetime.datetime.fromtimestamp(now + offset * DAY, datetime.timezone.utc).date().isoformat()

    rows = [
        {"engine": "redis", "major": "5", "standard_end": day(-300), "extended_end": day(800), "upgrade_to": "valkey 8", "source": "s", "read": "r"},
        {"engine": "redis", "major": "6", "standard_end": day(60), "extended_end": day(1155), "upgrade_to": "valkey 8", "source": "s", "read": "r"},
        {"engine": "valkey", "major": "8", "standard_end": None, "extended_end": None, "upgrade_to": "", "source": "s", "read": "r"},
    ]
    return parse_support_table({"format": "elasticache-exporter-engine-support", "version": 1, "engines": rows}, "test")


@pytest.mark.unit
def test_three_clusters_against_the_table_one_extended_one_ending_one_current():
    now = time.time()
    table = relative_table(now)
    clusters = cluster_support([node("old", "redis", "5.0.6"), node("mid", "redis", "6.2.6"), node("new", "valkey", "8.1.0")], table)
    assert {c.replication_group: c.phase(now) for c in clusters} == {"old": "extended", "mid": "ending", "new": "current"}
    assert {c.replication_group: c.phase(now + 200 * DAY) for c in clusters} == {"old": "extended", "mid": "extended", "new": "current"}
    assert {c.replication_group: c.phase(now + 900 * DAY) for c in clusters}["old"] == "ended"


@pytest.mark.unit
def test_the_shipped_table_names_its_source_and_read_date_and_the_published_dates():
    table = load_support_table()
    assert all(row.source.startswith("https://") and row.read for row in table)
    utc = datetime.timezone.utc
    redis5, redis6 = row_for(table, "redis", "5.0.6"), row_for(table, "redis", "6.2.6")
    assert redis5 is not None
    assert redis6 is not None
    # the end of the day AWS names: billing starts the first day of the next month
    assert redis5.standard_end == datetime.datetime(2026, 2, 1, tzinfo=utc).timestamp()
    assert redis5.extended_end == datetime.datetime(2029, 2, 1, tzinfo=utc).timestamp()
    assert redis6.standard_end == datetime.datetime(2027, 2, 1, tzinfo=utc).timestamp()
    assert row_for(table, "valkey", "8.1.0") is not None
    assert row_for(table, "valkey", "8.1.0").standard_end is None
    assert row_for(table, "valkey", "99.0") is None
    assert row_for(table, "memcached", "1.6.22") is None
    assert major_of("7.2.4") == "7"
    assert major_of("latest") == ""


@pytest.mark.unit
@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"engine": "redis", "major": "6", "standard_end": "31 Jan 2027", "source": "s", "read": "r"}, "standard_end: '31 Jan 2027' is no date"),
        ({"engine": "redis", "major": "6", "standard_end": "2027-01-31", "extended_end": "2026-01-31", "source": "s", "read": "r"}, "must end after"),
        ({"engine": "redis", "major": "6", "extended_end": "2027-01-31", "source": "s", "read": "r"}, "without an end of standard support"),
        ({"engine": "redis", "major": "6", "read": "r"}, "engines[0].source: missing"),
        ({"engine": "redis", "major": "6", "source": "s", "read": "r", "eol": "x"}, "eol"),
    ],
)
def test_a_bad_table_row_is_named_in_one_line(row, message):
    with pytest.raises(EngineSupportError) as caught:
        parse_support_table({"format": "elasticache-exporter-engine-support", "version": 1, "engines": [row]}, "table.yml")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


VERSIONS = [("old", "redis", "5.0.6"), ("mid", "redis", "6.2.6"), ("new", "valkey", "8.1.0"), ("odd", "redis", "8.0.0")]


def seed_versions() -> None:
    elasticache = boto3.client("elasticache", region_name=US)
    for group, engine, version in VERSIONS:
        elasticache.create_replication_group(
            ReplicationGroupId=group, ReplicationGroupDescription="d", Engine=engine, EngineVersion=version, NumCacheClusters=1
        )
        for suffix in ("001", "002"):
            elasticache.create_cache_cluster(
                CacheClusterId=f"{group}-{suffix}", ReplicationGroupId=group, CacheNodeType="cache.r6g.large", Engine=engine, EngineVersion=version
            )


def test_engine_support_is_served_per_cluster_and_an_unknown_version_is_counted(aws_credentials):
    now = time.time()
    with mock_aws():
        seed_versions()
        monitor = monitor_of()
        assert monitor.discover_once() == []
        samples = served(monitor, support_table=relative_table(now))
    ends = {
        (dict(labels)["replication_group"], dict(labels)["phase"]): value
        for (name, labels), value in samples.items()
        if name == "elasticache_engine_support_end_timestamp_seconds"
    }
    # one series per cluster and phase with a date (not per node); none for a version without an announced end
    assert set(ends) == {("old", "standard"), ("old", "extended"), ("mid", "standard"), ("mid", "extended")}
    assert ends[("old", "standard")] < now < ends[("mid", "standard")] < now + 90 * DAY
    where = {"account_id": ACCOUNT, "region": US, "replication_group": "mid", "engine": "redis", "engine_version": "6.2.6"}
    assert sample(samples, "elasticache_engine_support_upgrade_info", **where, upgrade_to="valkey 8") == 1
    assert sample(samples, "elasticache_engine_support_unknown_clusters", account_id=ACCOUNT, region=US, engine="redis", engine_version="8.0.0") == 1
    assert not [labels for name, labels in samples if name.startswith("elasticache_engine_support") and dict(labels).get("engine") == "valkey"]


DECEMBER = datetime.datetime(2026, 12, 15, 12, tzinfo=datetime.timezone.utc).timestamp()  # Redis OSS 6 ends in 48 days


def test_capacity_and_the_status_page_list_the_clusters_affected(aws_credentials, capsys, tmp_path):
    import yaml
    from helpers import call, make_app

    from exporter.cli.main import main

    raw = {"redis": {"addr": ""}, "aws": {"accounts": [{"regions": [US]}], "events": False}}
    config = tmp_path / "fleet.yml"
    config.write_text(yaml.safe_dump(raw))
    with mock_aws():
        seed_versions()
        base = ["capacity", "--config.file", str(config), "--days", "1", "--period", "60s"]
        assert main(base, clock=lambda: DECEMBER) == 0
        text = capsys.readouterr().out
        assert main([*base, "--format", "json"], clock=lambda: DECEMBER) == 0
        reports = json.loads(capsys.readouterr().out)
        assert main([*base, "--format", "html"], clock=lambda: DECEMBER) == 0
        html = capsys.readouterr().out
        app = make_app({**raw, "aws": {**raw["aws"], "discovery_interval": "1h", "cloudwatch": {"interval": "1h"}}})
        try:
            wait_until(lambda: app.aws_monitor.last_discovery > 0, timeout=30, what="discovery")
            page = call(app, "/").text
        finally:
            app.close()
    # the text report: the most pressing first, with the version to move to; the current version is not listed
    section = text[text.index("engine support") :].splitlines()[3:]
    assert [line.split()[0] for line in section] == ["old", "mid", "odd"]
    assert section[0].split()[5:8] == ["extended", "2026-01-31", "2029-01-31"]
    assert section[1].split()[5:8] == ["ending", "2027-01-31", "2030-01-31"]
    assert section[2].split()[5] == "unknown"
    # each node's JSON report names its cluster's support, or null
    by_node = {report["node"]: report["engine_support"] for report in reports}
    assert by_node["old-002"]["phase"] == "extended"
    assert by_node["mid-001"]["upgrade_to"].startswith("valkey 8")
    assert by_node["new-001"] is None
    assert 'id="engine-support-table"' in html
    assert html.index(">old<") < html.index(">mid<")
    # the status page, at the wall clock's date: every cluster past or near its end, none that is current
    assert 'id="engine-support"' in page
    assert ">old<" in page
    assert ">new<" not in page


# --- serverless latency -----------------------------------------------------------------------------------------------


def test_serverless_latency_is_requested_as_percentiles_and_served(aws_credentials):
    _, end = window(time.time(), 60, 120, 5)
    with mock_aws(), serverless_in_moto(), percentiles_in_moto():
        boto3.client("elasticache", region_name=US).create_serverless_cache(ServerlessCacheName="carts", Engine="valkey")
        dimensions = [{"Name": "clusterId", "Value": "carts"}]
        data = []
        for minutes_ago in range(1, 4):
            stamp = end - datetime.timedelta(minutes=minutes_ago)
            # 100 reads of 1..100 µs and writes ten times slower each minute: p50 and p99 by nearest rank
            reads, writes = [float(v) for v in range(1, 101)], [10.0 * v for v in range(1, 101)]
            data.append({"MetricName": "SuccessfulReadRequestLatency", "Timestamp": stamp, "Values": reads, "Dimensions": dimensions})
            data.append({"MetricName": "SuccessfulWriteRequestLatency", "Timestamp": stamp, "Values": writes, "Dimensions": dimensions})
            data.append({"MetricName": "TotalCmdsCount", "Timestamp": stamp, "Value": 6000.0, "Dimensions": dimensions})
            data.append({"MetricName": "CacheHitRate", "Timestamp": stamp, "Value": 87.5, "Dimensions": dimensions})
        boto3.client("cloudwatch", region_name=US).put_metric_data(Namespace="AWS/ElastiCache", MetricData=data)
        raw = {"redis": {"addr": ""}, "aws": {"accounts": [{"regions": [US]}], "events": False}}
        monitor = AwsMonitor(build_config(raw, environ={}).aws)
        monitor.discover_once()
        monitor.poll_once()
        samples = served(monitor)
    cache = {"account_id": ACCOUNT, "region": US, "dimension_clusterId": "carts"}
    assert sample(samples, "aws_elasticache_successful_read_request_latency_p50", **cache) == 50.0
    assert sample(samples, "aws_elasticache_successful_read_request_latency_p99", **cache) == 99.0
    assert sample(samples, "aws_elasticache_successful_write_request_latency_p99", **cache) == 990.0
    assert sample(samples, "aws_elasticache_total_cmds_count_sum", **cache) == 6000.0
    assert sample(samples, "aws_elasticache_cache_hit_rate_average", **cache) == 87.5
