"""AWS's own view of each node against moto: the metric groups polled (and counted by cost), the baseline AWS implies from
a node's traffic and its share of the baseline, and how the baseline table agrees with it per node type."""

from __future__ import annotations

import datetime
import time

import boto3
import pytest
from helpers import parse_samples, sample
from moto import mock_aws

from exporter.aws.cloudwatch import DEFAULT_METRICS, METRIC_GROUPS, build_queries, polled_metrics, window
from exporter.aws.minutes import BurstWindow
from exporter.aws.monitor import AwsMonitor
from exporter.baselines.table import load_table
from exporter.common.exposition import encode_text
from exporter.common.implied_bandwidth import implied_baseline
from exporter.config import build_config
from exporter.service.collectors.aws import AwsCollector

REGION = "eu-west-1"
# node type → the baseline (bytes/s, out) the seeded minutes imply: none of them the table's figure
IMPLIED = {"cache.r6g.large": 125_000_000.0, "cache.m5.large": 62_500_000.0, "cache.t3.medium": 40_000_000.0}


def _group(elasticache, group: str, node_type: str, members: int) -> list[str]:
    elasticache.create_replication_group(
        ReplicationGroupId=group, ReplicationGroupDescription="test", Engine="redis", CacheNodeType=node_type, NumCacheClusters=1
    )
    ids = []
    for member in range(1, members + 1):
        cluster_id = f"{group}-00{member}"
        elasticache.create_cache_cluster(
            CacheClusterId=cluster_id, ReplicationGroupId=group, CacheNodeType=node_type, Engine="redis", NumCacheNodes=1
        )
        ids.append(cluster_id)
    return ids


def _put_minutes(
    cloudwatch, cluster_id: str, baseline: float, shares: list[float], peak: float | None = None, peaks: list[float] | None = None
) -> None:
    """A minute per share (percent of ``baseline``, newest first): NetworkBytesOut is that share of the baseline over 60 s;
    the busiest second's share ``peak`` every minute, or ``peaks`` minute by minute."""
    _, end = window(time.time(), 60, 120, 5)
    dimensions = [{"Name": "CacheClusterId", "Value": cluster_id}, {"Name": "CacheNodeId", "Value": "0001"}]
    data = []
    for minutes_ago, share in enumerate(shares, start=1):
        stamp = end - datetime.timedelta(minutes=minutes_ago)
        data.append({"MetricName": "NetworkBytesOut", "Timestamp": stamp, "Value": baseline * share / 100 * 60, "Dimensions": dimensions})
        data.append({"MetricName": "NetworkBaselineUsageOutPercentage", "Timestamp": stamp, "Value": share, "Dimensions": dimensions})
        busiest = peaks[minutes_ago - 1] if peaks is not None else peak
        if busiest is not None:
            data.append({"MetricName": "NetworkBaselineMaxUsageOutPercentage", "Timestamp": stamp, "Value": busiest, "Dimensions": dimensions})
    for start in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data[start : start + 500])


@pytest.fixture
def fleet(aws_credentials):
    """Two nodes of each of three node types with an hour of minutes (shares 5 to 64 %), and one idle node under 1 %."""
    with mock_aws():
        elasticache = boto3.client("elasticache", region_name=REGION)
        cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        nodes: dict[str, str] = {}
        for index, (node_type, baseline) in enumerate(IMPLIED.items()):
            for cluster_id in _group(elasticache, f"g{index}", node_type, 2):
                nodes[cluster_id] = node_type
                shares = [5.0 + (minute * 7 + index) % 60 for minute in range(60)]
                _put_minutes(cloudwatch, cluster_id, baseline, shares, peak=130.0)
        (idle,) = _group(elasticache, "idle", "cache.m6g.large", 1)  # the only node of its type
        _put_minutes(cloudwatch, idle, 93_750_000.0, [0.4] * 60)
        yield nodes, idle


def _monitor(**cloudwatch: object) -> AwsMonitor:
    config = build_config({"aws": {"regions": [REGION], "cloudwatch": {"lookback": "60m", **cloudwatch}}, "redis": {"addr": ""}}, environ={})
    monitor = AwsMonitor(config.aws)
    monitor.discover_once()
    monitor.poll_once()
    return monitor


def test_the_implied_baseline_and_the_agreement_with_the_table(fleet):
    nodes, idle = fleet
    monitor = _monitor()
    table = load_table()
    samples = parse_samples(encode_text(AwsCollector(monitor, table).collect()).decode())
    for cluster_id, node_type in nodes.items():
        labels = {"instance": cluster_id, "direction": "out", "node_type": node_type}
        assert sample(samples, "elasticache_network_aws_baseline_bytes_per_second", **labels) == pytest.approx(IMPLIED[node_type])
        assert sample(samples, "elasticache_network_aws_baseline_peak_usage_ratio", **labels) == pytest.approx(1.3)
        newest_share = 5.0 + list(IMPLIED).index(node_type) % 60  # the minute just before the window's end
        assert sample(samples, "elasticache_network_aws_baseline_usage_ratio", **labels) == pytest.approx(newest_share / 100)
    for node_type, implied in IMPLIED.items():
        full = table.get(node_type).levels(table.basis)[100]
        agreement = sample(samples, "elasticache_baseline_agreement_ratio", node_type=node_type, direction="out")
        assert agreement == pytest.approx(full / implied)
    # under 1 % of its baseline, the division is noise: no implied baseline, while its share is still served
    assert not [key for key in samples if key[0] == "elasticache_network_aws_baseline_bytes_per_second" and ("instance", idle) in key[1]]
    assert sample(samples, "elasticache_network_aws_baseline_usage_ratio", instance=idle, direction="out", node_type="cache.m6g.large") == (
        pytest.approx(0.004)
    )
    # a direction no node published: no series, no error
    assert not [key for key in samples if key[0].startswith("elasticache_network_aws_baseline") and ("direction", "in") in key[1]]


def test_the_groups_are_polled_beside_the_metric_set_and_one_can_be_left_out(fleet):
    nodes, _ = fleet
    per_node = sum(len(spec.statistics) for spec in polled_metrics(DEFAULT_METRICS))
    assert per_node == sum(len(spec.statistics) for spec in DEFAULT_METRICS) + sum(
        len(spec.statistics) for specs in METRIC_GROUPS.values() for spec in specs
    )
    monitor = _monitor()
    assert monitor.last_queries == (len(nodes) + 1) * per_node + 2 * 2  # and the CPU credits of the two t3 nodes
    names = {spec.name for spec in monitor.node_metrics}
    assert {"NetworkBaselineUsageOutPercentage", "TrafficManagementActive", "RejectedConnections", "PubSubShardChannels"} <= names
    left_out = _monitor(exclude_groups=["pubsub", "host_peaks"])
    assert left_out.last_queries == monitor.last_queries - (len(nodes) + 1) * 8  # 2 pub/sub and 6 host-peak statistics
    assert "PubSubChannels" not in {spec.name for spec in left_out.node_metrics}
    queries = build_queries(monitor.nodes()[:1], monitor.node_metrics)
    assert {(q.metric, q.statistic) for q in queries} >= {
        ("NetworkBaselineUsageInPercentage", "Average"),
        ("NetworkBaselineUsageInPercentage", "Maximum"),
        ("NetworkBaselineMaxUsageOutPercentage", "Maximum"),
        ("NetworkMaxPacketsIn", "Maximum"),
        ("MajorPageFaults", "Sum"),
        ("ProcessedCommands", "Sum"),
    }


@pytest.mark.unit
def test_implied_baseline_is_the_median_of_the_minutes_at_one_percent_or_more():
    traffic = {60.0: 10.0, 120.0: 20.0, 180.0: 0.1, 240.0: 15.0}  # bytes/s
    share = {60.0: 10.0, 120.0: 10.0, 180.0: 0.5, 240.0: 30.0, 300.0: 50.0}  # 180: under 1 %; 300: no traffic minute
    # bytes/s of 10, 20 and 15 at 10, 10 and 30 %: implied 100, 200 and 50
    assert implied_baseline(traffic, share) == 100.0
    assert implied_baseline(traffic, {180.0: 0.5}) is None
    assert implied_baseline({}, share) is None


@pytest.mark.unit
@pytest.mark.parametrize(
    ("groups", "problem"),
    [(["pubsub", "nope"], "unknown metric group 'nope'"), ({"a": 1}, "must be a list of metric groups")],
)
def test_an_unknown_group_is_named(groups, problem):
    from exporter.common.errors import ConfigError

    with pytest.raises(ConfigError, match=problem):
        build_config({"aws": {"regions": [REGION], "cloudwatch": {"exclude_groups": groups}}, "redis": {"addr": ""}}, environ={})


@pytest.mark.unit
def test_every_group_metric_is_documented_with_its_series():
    from pathlib import Path

    from exporter.aws.cloudwatch import prometheus_name

    document = (Path(__file__).resolve().parent.parent / "docs" / "metrics.md").read_text()
    for group, specs in METRIC_GROUPS.items():
        for spec in specs:
            series = ", ".join(f"`{prometheus_name(spec.name, statistic)}`" for statistic in spec.statistics)
            assert f"| `{group}` | {spec.name} | {', '.join(spec.statistics)} | {series} |" in document


def test_derive_from_cloudwatch_reproduces_the_fleets_baselines(fleet, tmp_path, capsys):
    import yaml

    from exporter.alerts.catalog import load_catalog
    from exporter.alerts.prometheus import render_prometheus
    from exporter.cli.main import main

    out = tmp_path / "fleet-baselines.yml"
    assert main(["baseline", "derive", "--from-cloudwatch", "--days", "1", "--aws.region", REGION, "--out", str(out)]) == 0
    notes = capsys.readouterr().err
    # the node type whose only node stays under 1 % of its baseline gets no row, and a note says why
    assert "cache.m6g.large: no row: none of its 1 node(s) had a period at 1 % of its baseline or more in 1 days" in notes
    document = yaml.safe_load(out.read_text())
    assert sorted(document["node_types"]) == sorted(IMPLIED)
    table = load_table(out)
    for node_type, implied in IMPLIED.items():
        measured = document["node_types"][node_type]["measured"]
        assert measured["source"] == "cloudwatch"
        assert (measured["nodes"], measured["periods"], measured["period"]) == (2, 120, 60)
        assert measured["bytes_per_second"]["100"] == pytest.approx(implied, abs=1)
        assert measured["bytes_per_second"]["80"] == pytest.approx(implied * 0.8, abs=1)
        assert measured["date"] == datetime.datetime.now(tz=datetime.timezone.utc).strftime("%Y-%m-%d")
        node = table.get(node_type)
        assert node.published is not None  # the published figure is kept beside it, and outranked
        assert node.full_bandwidth(table.basis) == (pytest.approx(implied, abs=1), "cloudwatch")
    # the shipped figure of cache.r6g.large is lower (0.75 Gbit/s), yet the fleet's measure is what thresholds use
    assert table.get("cache.r6g.large").published.baseline_bytes_per_second < IMPLIED["cache.r6g.large"]
    rules = render_prometheus(load_catalog(), table)
    assert 'baseline: "cloudwatch"' in rules or "baseline: cloudwatch" in rules


@pytest.mark.unit
def test_derive_from_cloudwatch_needs_its_own_flags_only():
    from exporter.cli.main import main

    assert main(["baseline", "derive", "--from-cloudwatch", "--node-type", "cache.r6g.large", "--aws.region", REGION]) == 2
    assert main(["baseline", "derive", "--from-cloudwatch", "--days", "500", "--aws.region", REGION]) == 2


def test_the_status_page_shows_aws_share_and_busiest_second_beside_the_tables(fleet):
    from exporter.redis.addresses import parse_address
    from exporter.redis.node import RedisNode
    from exporter.redis.settings import Credentials
    from exporter.service.collectors.aws_baseline import aws_shares
    from exporter.service.status import render_status_page
    from exporter.service.targets import Target

    nodes, _ = fleet
    monitor = _monitor()
    cluster_id = next(iter(nodes))
    shares = aws_shares(monitor, cluster_id, 0.0)
    assert shares["out"] == (pytest.approx(0.05), pytest.approx(1.3))
    assert "in" not in shares  # nothing published for that direction
    target = Target(cluster_id, RedisNode(parse_address("redis://127.0.0.1:1").endpoint, Credentials()), nodes[cluster_id])
    config = build_config({"redis": {"addr": ""}}, environ={})
    page = render_status_page(config, [target], 0.0, load_table, None, [], lambda name: aws_shares(monitor, name, 0.0))
    assert "AWS&#39;s share of the baseline" in page or "AWS's share of the baseline" in page
    assert "out 5 % (busiest second 130 %)" in page


def test_the_status_page_lists_a_fleet_known_only_through_aws_discovery(fleet):
    """No configured target and aws.scrape_discovered off: every node discovery found is a row, with AWS's share of its
    baseline, not "No targets are configured"."""
    from exporter.service.collectors.aws_baseline import aws_shares
    from exporter.service.status import render_status_page

    nodes, _ = fleet
    monitor = _monitor()
    config = build_config({"redis": {"addr": ""}}, environ={})
    page = render_status_page(config, [], 0.0, load_table, None, [], lambda name: aws_shares(monitor, name, 0.0), None, monitor.named_nodes())
    assert "No targets are configured" not in page
    for cluster_id in nodes:
        assert f"<td>{cluster_id}</td>" in page
    assert "out 5 % (busiest second 130 %)" in page
    assert page.count("not scraped (aws.scrape_discovered off)") == len(monitor.named_nodes()) >= len(nodes)


@pytest.mark.unit
def test_burst_minutes_count_each_cloudwatch_minute_once_by_its_timestamp():
    from exporter.aws.minutes import BurstMinutes, burst_window

    calm = {60.0 * minute: 50.0 for minute in range(20)}
    averages = {60.0 * minute: 70.0 for minute in range(20)}
    one_burst = {**calm, 600.0: 130.0}
    # one minute over the baseline, polled again and again (a poll every minute asks for the last 5): counted once
    kept = BurstMinutes()
    for poll in range(5):
        window = kept.merge({600.0: 130.0, 540.0 + 60 * poll: 50.0}, {600.0: 70.0})
    assert window is not None
    assert window.burst_minutes == 1
    # five distinct minutes over it: five, whether a poll brings one minute at a time or all of them at once
    bursts = {**calm, **{60.0 * minute: 130.0 for minute in (5, 6, 8, 10, 11)}}
    one_by_one = BurstMinutes()
    for stamp in sorted(bursts):
        window = one_by_one.merge({stamp: bursts[stamp]}, {stamp: averages[stamp]})
        if stamp == 660.0:
            assert window is not None
            assert (window.minutes, window.burst_minutes, window.max_usage_percent) == (10, 5, 70.0)
    all_at_once = burst_window({s: v for s, v in bursts.items() if s <= 660.0}, averages)
    assert all_at_once is not None
    assert (all_at_once.minutes, all_at_once.burst_minutes, all_at_once.newest) == (10, 5, 660.0)
    # the window is the 10 minutes up to the newest (19): the bursts of minutes 5, 6 and 8 fall out; a gap counts no minute
    later = burst_window(bursts, averages)
    assert later is not None
    assert (later.minutes, later.burst_minutes) == (10, 2)
    sparse = burst_window({0.0: 130.0, 300.0: 130.0, 540.0: 20.0}, {540.0: 95.0, 0.0: 99.0, -60.0: 100.0})
    assert sparse == BurstWindow(3, 2, 99.0, 540.0)
    assert burst_window({}, averages) is None
    assert burst_window(one_burst, {}) == BurstWindow(10, 1, None, 1140.0)


def test_the_monitor_serves_each_minutes_burst_once_however_often_it_polls(aws_credentials):
    """A node whose busiest second went over its baseline in one minute, another in five: polled five times over the same
    minutes, the first still counts one burst minute of the last 10 and the second five."""
    with mock_aws():
        elasticache = boto3.client("elasticache", region_name=REGION)
        cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        (one,) = _group(elasticache, "one", "cache.r6g.large", 1)
        (five,) = _group(elasticache, "five", "cache.r6g.large", 1)
        _put_minutes(cloudwatch, one, 125_000_000.0, [70.0] * 10, peaks=[50.0, 50.0, 130.0] + [50.0] * 7)
        _put_minutes(cloudwatch, five, 125_000_000.0, [70.0] * 10, peaks=[130.0, 50.0, 130.0, 130.0, 50.0, 130.0, 130.0, 50.0, 50.0, 50.0])
        config = build_config({"aws": {"regions": [REGION], "cloudwatch": {"lookback": "15m"}}, "redis": {"addr": ""}}, environ={})
        monitor = AwsMonitor(config.aws)
        monitor.discover_once()
        for _ in range(5):
            monitor.poll_once()
        samples = parse_samples(encode_text(AwsCollector(monitor, load_table()).collect()).decode())
    for cluster_id, bursts in ((one, 1), (five, 5)):
        labels = {"instance": cluster_id, "direction": "out", "node_type": "cache.r6g.large"}
        assert sample(samples, "elasticache_network_aws_baseline_burst_minutes", **labels) == bursts
        assert sample(samples, "elasticache_network_aws_baseline_window_minutes", **labels) == 10
        assert sample(samples, "elasticache_network_aws_baseline_window_max_usage_ratio", **labels) == pytest.approx(0.7)
