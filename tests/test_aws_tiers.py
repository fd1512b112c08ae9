"""CloudWatch asked by tier: each poll asks every minute since the last, each minute is kept once by its timestamp, the
paging metrics every 5 minutes, and the bill `cost` predicts is what a running monitor counts (moto behind it)."""

from __future__ import annotations

import datetime
import itertools
import math
import re

import boto3
import pytest
from helpers import call, make_app, parse_samples, sample
from moto import mock_aws

from exporter.alerts.catalog import load_catalog
from exporter.alerts.prometheus import expression
from exporter.aws.api import AwsApi
from exporter.aws.cloudwatch import (
    DEFAULT_METRICS,
    DEFAULT_TIER_INTERVALS,
    MAX_WINDOW_SECONDS,
    TIERS,
    fresh_seconds,
    pairs_by_tier,
    polled_metrics,
    prometheus_name,
    tier_of,
    usd_per_month,
    window,
)
from exporter.aws.monitor import AwsMonitor
from exporter.aws.pricing import SECONDS_PER_MONTH
from exporter.baselines.table import load_table
from exporter.common.exposition import encode_text
from exporter.config import build_config
from exporter.service.collectors.aws import AwsCollector

REGION = "eu-west-1"
# a fleet of 120 nodes of mixed types: burstable ones with their CPU credits, data tiering with its SSD metrics
MIXED = {"cache.r6g.large": 40, "cache.t3.medium": 30, "cache.m6g.large": 30, "cache.r6gd.xlarge": 20}
START = 1_800_000_000.0  # the simulated clock's start: a minute boundary


@pytest.mark.unit
@pytest.mark.parametrize("interval", [60, 300, 420, 900, 3600])
def test_each_poll_asks_every_minute_since_the_last_ones_newest(interval):
    """Polls every ``interval`` seconds at odd moments: the windows' minutes join without a gap, and the newest of each
    is complete (at least the delay old)."""
    asked: set[float] = set()
    since = None
    first = None
    now = START + 17.3
    for _ in range(30):
        start, end = window(now, 60, 120, 5, since=since)
        assert now - end.timestamp() >= 120
        minutes = set(range(int(start.timestamp()), int(end.timestamp()), 60))
        first = min(minutes) if first is None else first
        asked |= {float(m) for m in minutes}
        since = end.timestamp() - 60
        now += interval + (7.9 if interval > 60 else 0)
    assert asked == {float(m) for m in range(int(first), int(since) + 60, 60)}  # every minute, from the first to the newest


@pytest.mark.unit
def test_a_window_after_a_long_stall_is_bounded_so_a_poll_never_pages():
    start, end = window(START + 86400, 60, 120, 5, since=START)
    assert end.timestamp() - start.timestamp() == MAX_WINDOW_SECONDS
    assert 500 * MAX_WINDOW_SECONDS / 60 <= 100_800  # GetMetricData's datapoints per reply: no NextToken


@pytest.mark.unit
def test_a_poll_after_a_failed_one_looks_at_every_minute_it_brings():
    """A 5-minute poller whose poll fails brings 10 minutes the next time (the window starts at the last newest minute):
    each of them ends a window, so a minute shaped, a 5-minute run of lag or 15 minutes over the baseline among the older
    five is not lost; the same when the poller's clock drifts and one poll brings 6."""
    from exporter.aws.minutes import BurstMinutes, RisingMinutes, WindowMinutes

    first = {60.0 * m: 0.0 for m in range(5)}
    rising, lag = RisingMinutes(5), WindowMinutes(5, 5)
    rising.merge(first)
    lag.merge(first)
    # the poll at minute 9 failed; the one at 14 asks from minute 4: shaped at 6, lag 60 s in 5..9, calm after
    assert rising.merge({60.0 * m: (4.0 if m == 6 else 0.0) for m in range(4, 15)}).rising == 1
    window = lag.merge({60.0 * m: (60.0 if 5 <= m <= 9 else 1.0) for m in range(4, 15)})
    assert window is not None
    assert window.lowest == 60.0
    drifted = RisingMinutes(5)
    drifted.merge(first)
    assert drifted.merge({60.0 * m: (4.0 if m == 5 else 0.0) for m in range(4, 11)}).rising == 1
    network = BurstMinutes(5)
    network.merge({60.0 * m: 50.0 for m in range(5)}, {60.0 * m: 50.0 for m in range(5)})
    over = {60.0 * m: (150.0 if 4 <= m <= 18 else 10.0) for m in range(4, 25)}  # 15 minutes over, then calm
    bursts = network.merge({m: (150.0 if 60 * 10 <= m <= 60 * 14 else 50.0) for m in over}, over)
    held = network.sustained()
    assert held is not None
    assert (held.minutes, held.min_usage_percent) == (15, 150.0)
    assert bursts is not None
    assert bursts.burst_minutes == 5  # five bursts in 10..14, a window that ended 10 minutes ago


@pytest.mark.unit
def test_rising_minutes_count_each_minute_once_by_its_timestamp():
    from exporter.aws.minutes import Rising, RisingMinutes, rising

    count = {60.0 * m: (4.0 if m == 6 else 0.0) for m in range(10)}  # a count of the minute: one minute shaped
    cumulative = {60.0 * m: (12.0 if m >= 6 else 9.0) for m in range(10)}  # a counter that grew once
    assert rising(count) == rising(cumulative) == Rising(5, 1, 540.0)
    assert rising({60.0 * m: 7.0 for m in range(10)}) == Rising(5, 0, 540.0)
    kept = RisingMinutes()
    for poll in range(10):  # a poll every minute asking the last 5: each minute is merged five times, counted once
        now = kept.merge({stamp: value for stamp, value in count.items() if 60.0 * (poll - 4) <= stamp <= 60.0 * poll})
    assert now == Rising(5, 1, 540.0)
    assert len(kept.values) == 6  # the window and the minute before it


@pytest.mark.unit
def test_the_default_tiers_and_their_bill_per_node():
    pairs = pairs_by_tier(polled_metrics(DEFAULT_METRICS))
    assert pairs == {"paging": 17, "alerting": 9, "trends": 22}
    per_node = sum(usd_per_month(pairs[tier], DEFAULT_TIER_INTERVALS[tier]) for tier in TIERS)
    assert per_node == pytest.approx(17 * 0.0864 + 9 * 0.0288 + 22 * 0.0072)
    assert per_node <= 2.00
    # every paging alert's CloudWatch inputs are in the paging tier
    for metric, statistic in (
        ("NetworkBaselineMaxUsageOutPercentage", "Maximum"),
        ("NetworkBandwidthOutAllowanceExceeded", "Maximum"),
        ("EngineCPUUtilization", "Average"),
        ("SwapUsage", "Maximum"),
        ("ReplicationLag", "Maximum"),
        ("TrafficManagementActive", "Maximum"),
    ):
        assert tier_of(metric, statistic) == "paging"


@pytest.mark.unit
@pytest.mark.parametrize("tier", TIERS)
def test_freshness_accepts_a_healthy_pollers_newest_minute_and_rejects_a_stalled_one(tier):
    interval = DEFAULT_TIER_INTERVALS[tier]
    limit = fresh_seconds(interval)
    # just before its next poll, a healthy poller's newest minute started delay + up to two periods + the interval ago,
    # with a poll of half a minute, after one poll that failed (or brought no newer minute: AWS published it late)
    healthy = 120 + 2 * 60 + interval - 1 + 30 + interval
    stalled = 120 + 2 * 60 + 3 * interval  # two polls missed
    assert healthy < limit < stalled


@pytest.mark.unit
def test_every_cloudwatch_guard_reads_the_age_its_exporter_serves():
    """No guard carries a number: each compares its series' datapoint age with the exporter's served limit for it."""
    checked = 0
    for alert in load_catalog():
        rendered = expression(alert) or ""
        assert not re.search(r"datapoint_timestamp_seconds\{[^}]*\} < \d", rendered), alert.name
        for stamped, limited in re.findall(
            r'datapoint_timestamp_seconds\{metric="(aws_elasticache_[a-z0-9_]+)"\} < on \(metric\) group_left \(\) '
            r'max by \(metric\) \(elasticache_cloudwatch_fresh_seconds\{metric="(aws_elasticache_[a-z0-9_]+)"\}\)',
            rendered,
        ):
            assert stamped == limited
            checked += 1
    assert checked >= 20
    assert fresh_seconds(DEFAULT_TIER_INTERVALS["paging"]) == 900
    assert fresh_seconds(DEFAULT_TIER_INTERVALS["alerting"]) == 2100


class _RecordingApi(AwsApi):
    """The real API client, recording each GetMetricData request: when (the monitor's clock), which queries, which window."""

    def __init__(self, clock) -> None:
        super().__init__()
        self.clock = clock
        self.requests: list[tuple[float, list[dict], datetime.datetime, datetime.datetime]] = []

    def call(self, client, api, *, deadline=None, **kwargs):
        if api == "get_metric_data":
            self.requests.append((self.clock(), kwargs["MetricDataQueries"], kwargs["StartTime"], kwargs["EndTime"]))
        return super().call(client, api, deadline=deadline, **kwargs)


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _seed_fleet() -> int:
    elasticache = boto3.client("elasticache", region_name=REGION)
    count = 0
    for node_type, nodes in MIXED.items():
        for index in range(nodes):
            elasticache.create_cache_cluster(
                CacheClusterId=f"{node_type.split('.')[1]}-{index:03d}", CacheNodeType=node_type, Engine="redis", NumCacheNodes=1
            )
            count += 1
    return count


def test_cost_and_a_live_runs_counted_requests_agree_under_two_dollars_a_node(aws_credentials, capsys):
    from exporter.cli.aws import print_cost

    with mock_aws():
        nodes = _seed_fleet()
        config = build_config({"aws": {"regions": [REGION]}, "redis": {"addr": ""}}, environ={})
        assert print_cost(config) == 0
        printed = capsys.readouterr().out
        total = re.search(r"^total\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)$", printed, re.MULTILINE)
        assert total is not None, printed
        usd_per_node, usd_month = float(total.group(2)), float(total.group(3))
        assert usd_per_node <= 2.00
        for tier in TIERS:
            assert re.search(rf"^{tier}\s+[\d,]+\s+{DEFAULT_TIER_INTERVALS[tier]:.0f}s\s", printed, re.MULTILINE), printed
        # an hour of the poller's own schedule, on a simulated clock: what it asks, counted as AWS bills it
        clock = _Clock(START)
        api = _RecordingApi(clock)
        monitor = AwsMonitor(config.aws, apis={config.aws.accounts[0]: api}, clock=clock, monotonic=clock)
        monitor.discover_once()
        while clock.now < START + 3600:
            monitor.poll_once(monitor.due_tiers())
            clock.now += config.aws.poll_interval
        _, _, requested = api.stats.snapshot()
        served = parse_samples(encode_text(AwsCollector(monitor, load_table()).collect()).decode())
    assert requested == sum(len(queries) for _, queries, _, _ in api.requests)
    assert requested * SECONDS_PER_MONTH / 3600 / 1000 * 0.01 == pytest.approx(usd_month, abs=0.01)
    assert sample(served, "elasticache_exporter_cloudwatch_usd_per_month_estimate") == pytest.approx(usd_month, abs=0.01)
    assert usd_month / nodes == pytest.approx(usd_per_node, abs=0.0001)
    # every paging metric of every node asked at least every 5 minutes, each over every minute since its last ask
    asked: dict[tuple, list[tuple[float, float, float]]] = {}
    for when, queries, start, end in api.requests:
        for query in queries:
            stat = query["MetricStat"]
            dims = tuple((d["Name"], d["Value"]) for d in stat["Metric"]["Dimensions"])
            key = (dims, stat["Metric"]["MetricName"], stat["Stat"])
            asked.setdefault(key, []).append((when, start.timestamp(), end.timestamp()))
    paging = [key for key in asked if tier_of(key[1], key[2]) == "paging"]
    assert len(paging) == nodes * 17
    for key in paging:
        times = asked[key]
        assert len(times) == 12
        assert all(later[0] - earlier[0] <= 300 for earlier, later in itertools.pairwise(times))
        assert all(later[1] <= earlier[2] - 60 for earlier, later in itertools.pairwise(times)), key  # no minute missed
    assert {len(asked[key]) for key in asked if tier_of(key[1], key[2]) == "alerting"} == {4}
    assert {len(asked[key]) for key in asked if tier_of(key[1], key[2]) == "trends"} == {1}


def _put(cloudwatch, cluster_id: str, minutes: dict[float, tuple[float, float]]) -> None:
    """Per minute (its start): the busiest second's and the average's share of the baseline, out, in percent."""
    dimensions = [{"Name": "CacheClusterId", "Value": cluster_id}, {"Name": "CacheNodeId", "Value": "0001"}]
    data = []
    for stamp, (peak, average) in minutes.items():
        when = datetime.datetime.fromtimestamp(stamp, tz=datetime.timezone.utc)
        data.append({"MetricName": "NetworkBaselineMaxUsageOutPercentage", "Timestamp": when, "Value": peak, "Dimensions": dimensions})
        data.append({"MetricName": "NetworkBaselineUsageOutPercentage", "Timestamp": when, "Value": average, "Dimensions": dimensions})
        data.append({"MetricName": "SwapUsage", "Timestamp": when, "Value": stamp, "Dimensions": dimensions})
        shaped = 5.0 if (stamp // 60) % 11 == 0 else 0.0  # a per-minute count, above 0 one minute in 11
        data.append({"MetricName": "NetworkBandwidthOutAllowanceExceeded", "Timestamp": when, "Value": shaped, "Dimensions": dimensions})
    for first in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data[first : first + 500])


@pytest.mark.parametrize("interval", ["1m", "5m"])
def test_each_minute_is_served_and_counted_once_whether_polled_every_1_or_5_minutes(aws_credentials, interval):
    """Two hours of minutes, a burst in one minute of every seven: after each poll, the gauge is the newest complete
    minute, the microburst series counts exactly the bursts of the 10 minutes up to it and the sustained share is the
    lowest average of the 15."""
    import time

    now = math.floor(time.time() / 60) * 60
    first = now - 3 * 3600
    minutes = {float(stamp): (130.0 if (stamp // 60) % 7 == 0 else 40.0, 50.0 + (stamp // 60) % 10) for stamp in range(first, now, 60)}
    with mock_aws():
        elasticache = boto3.client("elasticache", region_name=REGION)
        elasticache.create_cache_cluster(CacheClusterId="node", CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1)
        _put(boto3.client("cloudwatch", region_name=REGION), "node", minutes)
        # the first poll asks the 10 minutes the microburst series counts over (5 by default: its first window is short)
        cloudwatch = {"interval": interval, "lookback": "10m"}
        config = build_config({"aws": {"regions": [REGION], "cloudwatch": cloudwatch}, "redis": {"addr": ""}}, environ={})
        clock = _Clock(first + 3600 + 23.0)
        monitor = AwsMonitor(config.aws, clock=clock, monotonic=clock)
        monitor.discover_once()
        polls = 0
        first_asked = 0.0
        while clock.now < now:
            monitor.poll_once(monitor.due_tiers())
            polls += 1
            newest = math.floor((clock.now - 120) / 60) * 60 - 60.0  # the newest complete minute
            first_asked = newest - 540 if polls == 1 else first_asked  # the first poll asks 10 minutes back
            _check_poll(monitor, minutes, newest, first_asked, int(config.aws.poll_interval // 60))
            clock.now += config.aws.poll_interval
    assert polls == (120 if interval == "1m" else 24)


def _check_poll(monitor: AwsMonitor, minutes: dict[float, tuple[float, float]], newest: float, first_asked: float, brought: int) -> None:
    """What is served after a poll whose newest complete minute is ``newest``, from every minute held since ``first_asked``."""
    samples = parse_samples(encode_text(AwsCollector(monitor, load_table()).collect()).decode())
    labels = {"account_id": "123456789012", "region": REGION, "dimension_CacheClusterId": "node", "dimension_CacheNodeId": "0001"}
    assert sample(samples, prometheus_name("SwapUsage", "Maximum"), **labels) == newest
    stamp_labels = {**labels, "metric": prometheus_name("SwapUsage", "Maximum")}
    assert sample(samples, "elasticache_cloudwatch_datapoint_timestamp_seconds", **stamp_labels) == newest
    burst = monitor.burst_window("node", "out")
    assert burst is not None
    # of the windows of 10 ending at each minute this poll brought, the one with the most burst minutes, then the calmest
    ends = [newest - 60 * step for step in range(brought)]
    tens = [[stamp for stamp in minutes if end - 600 < stamp <= end and stamp >= first_asked] for end in ends]  # as held
    best = max(tens, key=lambda ten: (sum(minutes[m][0] > 100 for m in ten), -max(minutes[m][1] for m in ten)))
    assert burst.newest == newest
    assert burst.minutes == len(best)
    assert burst.burst_minutes == sum(minutes[stamp][0] > 100 for stamp in best)
    assert burst.max_usage_percent == max(minutes[stamp][1] for stamp in best)
    # of the windows of 15 ending at each minute this poll brought, the full ones (every minute held)
    full = [[m for m in minutes if end - 900 < m <= end] for end in ends if end - 840 >= first_asked]
    held = monitor.sustained_window("node", "out")
    assert held is not None
    if full:
        assert (held.newest, held.minutes) == (newest, 15)
        assert held.min_usage_percent == max(min(minutes[m][1] for m in window) for window in full)
    else:
        assert held.minutes == len([m for m in minutes if max(newest - 900, first_asked - 60) < m <= newest])
    # the allowance rules' count: of the windows of 5 ending at each minute this poll brought, the most minutes above the
    # minute before, each once
    allowance = prometheus_name("NetworkBandwidthOutAllowanceExceeded", "Maximum")
    fives = [[stamp for stamp in minutes if end - 300 < stamp <= end and stamp - 60 >= first_asked] for end in ends]
    expected = max(sum(1 for stamp in five if (stamp // 60) % 11 == 0) for five in fives)
    assert sample(samples, "elasticache_cloudwatch_rising_minutes", **{**labels, "metric": allowance}) == expected
    # the paging gauges' window (SwapUsage: the last 5 minutes; its value is the minute's own timestamp)
    swap = {**labels, "metric": prometheus_name("SwapUsage", "Maximum")}
    held_five = [stamp for stamp in minutes if newest - 300 < stamp <= newest and stamp >= first_asked]
    assert sample(samples, "elasticache_cloudwatch_window_minutes", **swap) == len(held_five)
    full_ends = [end for end in ends if end - 240 >= first_asked]  # windows of 5 with every minute held
    assert sample(samples, "elasticache_cloudwatch_window_lowest", **swap) == max(end - 240 for end in full_ends)
    assert sample(samples, "elasticache_cloudwatch_window_highest", **swap) == min(full_ends)


def _asked_by_node(requests) -> dict[str, set[str]]:
    """CacheClusterId → the metric names asked for it, in the requests given."""
    asked: dict[str, set[str]] = {}
    for _, queries, _, _ in requests:
        for query in queries:
            metric = query["MetricStat"]["Metric"]
            cluster = next(d["Value"] for d in metric["Dimensions"] if d["Name"] == "CacheClusterId")
            asked.setdefault(cluster, set()).add(metric["MetricName"])
    return asked


def test_a_node_on_info_gets_no_cloudwatch_copy_of_it_and_gets_it_back_at_the_next_poll_when_info_stops(aws_credentials):
    """INFO first: of a node whose INFO the exporter reads, CloudWatch is asked only what AWS alone sees; the poll after
    its INFO stops asks every INFO-equivalent metric, whatever its tier, then the tiers go on as usual."""
    from exporter.aws.cloudwatch import INFO_EQUIVALENT

    answering = {"on-info"}
    with mock_aws():
        elasticache = boto3.client("elasticache", region_name=REGION)
        for name in ("on-info", "cloudwatch-only"):
            elasticache.create_cache_cluster(CacheClusterId=name, CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1)
        config = build_config({"aws": {"regions": [REGION]}, "redis": {"addr": ""}}, environ={})
        clock = _Clock(START)
        api = _RecordingApi(clock)
        monitor = AwsMonitor(
            config.aws, apis={config.aws.accounts[0]: api}, clock=clock, monotonic=clock, info_answers=lambda name, _node, _s: name in answering
        )
        monitor.discover_once()
        every = {spec.name for spec in monitor.node_metrics}
        polls, due = [], []
        for step in range(3):
            if step == 1:
                answering.clear()  # its INFO stops answering before the second poll
            seen = len(api.requests)
            due.append(monitor.due_tiers())
            monitor.poll_once(due[-1])
            polls.append(_asked_by_node(api.requests[seen:]))
            clock.now += config.aws.poll_interval
    first, after_stop, later = polls
    assert first["cloudwatch-only"] == every
    assert first["on-info"] == every - INFO_EQUIVALENT
    assert due[1:] == [("paging",), ("paging",)]
    # the second poll is a paging one: the node that left INFO gets every INFO-equivalent metric back at once
    assert INFO_EQUIVALENT & every <= after_stop["on-info"]
    assert not after_stop["cloudwatch-only"] & INFO_EQUIVALENT  # none is in the paging tier
    assert "ReplicationLag" in first["on-info"]  # seconds behind: INFO says it in bytes only
    assert later["on-info"] == later["cloudwatch-only"]  # then both by tier


def test_a_scraped_node_serves_info_not_cloudwatchs_copy_until_it_stops_answering(aws_credentials, monkeypatch):
    """The exporter's own targets decide: a configured target named as the discovered node (moto gives it no endpoint)
    answers its scrapes, so the node's CurrConnections from CloudWatch is neither asked nor served; stopped, the first
    poll after its last answer has aged past the INFO freshness (shortened here) brings it back."""
    import time

    import exporter.aws.monitor

    monkeypatch.setattr(exporter.aws.monitor, "INFO_FRESH_SECONDS", 3.0)

    from servers import start_redis, wait_until

    redis_server = start_redis()
    app = None
    try:
        with mock_aws():
            elasticache = boto3.client("elasticache", region_name=REGION)
            elasticache.create_cache_cluster(CacheClusterId="orders-001", CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1)
            now = math.floor(time.time() / 60) * 60
            dimensions = [{"Name": "CacheClusterId", "Value": "orders-001"}, {"Name": "CacheNodeId", "Value": "0001"}]
            data = [
                {
                    "MetricName": "CurrConnections",
                    "Timestamp": datetime.datetime.fromtimestamp(now - 60 * m, tz=datetime.timezone.utc),
                    "Value": 42.0,
                    "Dimensions": dimensions,
                }
                for m in range(3, 8)
            ]
            boto3.client("cloudwatch", region_name=REGION).put_metric_data(Namespace="AWS/ElastiCache", MetricData=data)
            raw = {
                "targets": [{"name": "orders-001", "addr": redis_server.addr}],
                "aws": {"regions": [REGION], "events": False, "cloudwatch": {"interval": "1h"}},
            }
            app = make_app(raw)
            monitor = app.aws_monitor
            wait_until(lambda: monitor.polls >= 1, timeout=30, what="the first poll")  # before any scrape: not on INFO
            served = "aws_elasticache_curr_connections_maximum"

            def connections_served() -> bool:
                return any(name == served for name, _ in call(app, "/metrics").samples())

            assert monitor.latest("orders-001", "CurrConnections", "Maximum") is not None
            assert connections_served()  # this /metrics scraped the target too: it answered
            monitor.poll_once(("paging",))
            assert monitor.nodes_on_info == 1
            assert monitor.latest("orders-001", "CurrConnections", "Maximum") is None
            assert not connections_served()
            redis_server.stop()
            assert sample(call(app, "/metrics").samples(), "redis_up", instance="orders-001") == 0
            monitor.poll_once(("paging",))
            assert monitor.nodes_on_info == 1  # one failed scrape: its last answer is still fresh

            def off_info() -> bool:
                monitor.poll_once(("paging",))  # a paging poll: CurrConnections is an alerting one, asked all the same
                return monitor.nodes_on_info == 0

            wait_until(off_info, timeout=15, interval=0.5, what="the node off INFO")
            assert monitor.latest("orders-001", "CurrConnections", "Maximum") is not None
            assert connections_served()
    finally:
        if app is not None:
            app.close()
        redis_server.stop()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("wake_up", "interval", "asked"), [(300, 900, 900), (300, 400, 300), (300, 500, 600), (300, 3600, 3600), (60, 900, 900), (600, 900, 600)]
)
def test_cost_bills_a_tier_as_often_as_the_poller_really_asks_it(wake_up, interval, asked):
    """A tier is due half a wake-up early, so it is asked every whole number of wake-ups nearest its interval: the
    schedule the monitor keeps over a day is the interval the bill and the freshness use."""
    from exporter.aws.budget import effective_interval

    config = build_config(
        {
            "aws": {"regions": [REGION], "events": False, "cloudwatch": {"interval": f"{wake_up}s", "alerting_interval": f"{interval}s"}},
            "redis": {"addr": ""},
        },
        environ={},
    )
    clock = _Clock(START)
    monitor = AwsMonitor(config.aws, clock=clock, monotonic=clock)
    times = []
    while clock.now < START + 86400:
        due = monitor.due_tiers()
        if "alerting" in due:
            times.append(clock.now)
        monitor.poll_once(due)  # no node discovered: nothing is asked, the schedule is kept
        clock.now += wake_up
    assert {later - earlier for earlier, later in itertools.pairwise(times)} == {asked}
    assert effective_interval(interval, wake_up) == monitor.tier_interval("alerting") == asked
    assert monitor.fresh_seconds("alerting") == fresh_seconds(asked)


@pytest.mark.unit
def test_a_budget_lengthens_trends_then_alerting_and_never_paging():
    from exporter.aws.budget import plan

    pairs = {"paging": 2040, "alerting": 1130, "trends": 2710}  # the 120 mixed nodes at the defaults
    configured = dict(DEFAULT_TIER_INTERVALS)
    assert plan(pairs, configured, 300).usd_per_month == pytest.approx(228.31, abs=0.01)
    assert plan(pairs, configured, 300, budget=250).intervals == configured  # within it: as configured
    assert plan(pairs, configured, 300, budget=220).intervals == {"paging": 300, "alerting": 900, "trends": 7200}
    made = plan(pairs, configured, 300, budget=216)  # a wake-up short of a poll's 3-hour window
    assert made.intervals == {"paging": 300, "alerting": 900, "trends": 10500}
    assert (made.kept, made.lengthened, round(made.usd_per_month, 2)) == (True, True, 215.49)
    impossible = plan(pairs, configured, 300, budget=100)  # the tiers alerts read are never lengthened: their guards
    assert impossible.intervals == {"paging": 300, "alerting": 900, "trends": 10500}
    assert not impossible.kept
    assert plan(pairs, {**configured, "trends": 21600}, 300, budget=200).intervals["trends"] == 21600  # never shortened
    assert plan(pairs, configured, 420, budget=100).intervals["trends"] == 10080  # whole wake-ups within a poll's window


def test_a_budget_below_the_defaults_is_kept_by_a_live_run_and_served_as_cost_prints_it(aws_credentials, capsys, caplog):
    """120 mixed nodes and a budget of USD 216 a month (the defaults cost 228.31): `cost` and the running monitor both
    lengthen trends to 175 minutes (a wake-up short of a poll's 3-hour window); in three hours of the poller's own
    schedule each tier is asked as often as that plan says, counted as AWS bills it, the estimate served is `cost`'s,
    and every paging pair is still asked every 5 minutes."""
    import logging

    from exporter.cli.aws import print_cost

    with mock_aws():
        _seed_fleet()
        config = build_config({"aws": {"regions": [REGION], "cloudwatch": {"budget_usd_per_month": 216}}, "redis": {"addr": ""}}, environ={})
        assert print_cost(config) == 0
        printed = capsys.readouterr().out
        total = re.search(r"^total\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)$", printed, re.MULTILINE)
        assert total is not None, printed
        assert re.search(r"^alerting\s+[\d,]+\s+900s\s", printed, re.MULTILINE), printed
        assert re.search(r"^trends\s+[\d,]+\s+10500s\s", printed, re.MULTILINE), printed
        clock = _Clock(START)
        api = _RecordingApi(clock)
        monitor = AwsMonitor(config.aws, apis={config.aws.accounts[0]: api}, clock=clock, monotonic=clock)
        with caplog.at_level(logging.WARNING, logger="exporter.aws.monitor"):
            monitor.discover_once()
            while clock.now < START + 3 * 3600:
                monitor.poll_once(monitor.due_tiers())
                clock.now += config.aws.poll_interval
        samples = parse_samples(encode_text(AwsCollector(monitor, load_table()).collect()).decode())
        _, _, requested = api.stats.snapshot()
    pairs = {tier: int(re.search(rf"^{tier}\s+([\d,]+)\s", printed, re.MULTILINE).group(1).replace(",", "")) for tier in TIERS}
    intervals = {"paging": 300, "alerting": 900, "trends": 10500}
    assert requested == sum(pairs[tier] * math.ceil(3 * 3600 / intervals[tier]) for tier in TIERS)  # each as planned
    estimate = sample(samples, "elasticache_exporter_cloudwatch_usd_per_month_estimate")
    assert estimate == pytest.approx(float(total.group(3)), abs=0.01)
    assert estimate == pytest.approx(sum(usd_per_month(pairs[tier], intervals[tier]) for tier in TIERS))
    assert estimate <= 216
    assert sample(samples, "elasticache_exporter_cloudwatch_budget_usd_per_month") == 216
    assert sample(samples, "elasticache_exporter_cloudwatch_tier_interval_seconds", tier="trends") == 10500
    budget_warnings = [record.getMessage() for record in caplog.records if "budget" in record.getMessage()]
    assert len(budget_warnings) == 1, budget_warnings  # once, with the figures
    assert "USD 215.49 a month" in budget_warnings[0]
    asked: dict[tuple, list[float]] = {}
    for when, queries, _, _ in api.requests:
        for query in queries:
            stat = query["MetricStat"]
            dims = tuple((d["Name"], d["Value"]) for d in stat["Metric"]["Dimensions"])
            asked.setdefault((dims, stat["Metric"]["MetricName"], stat["Stat"]), []).append(when)
    paging = [times for key, times in asked.items() if tier_of(key[1], key[2]) == "paging"]
    assert paging
    assert all(len(times) == 36 and all(b - a == 300 for a, b in itertools.pairwise(times)) for times in paging)


def test_a_node_is_on_info_only_through_the_target_that_is_that_node():
    """answered_lately: the target discovered from the node, or one at its endpoint, answers for it; a target that only
    shares its name (a group's primary endpoint, another node after a failover) does not."""
    from servers import start_redis

    from exporter.aws.discovery import Node

    redis_server = start_redis()
    app = make_app({"targets": [{"name": "orders-001", "addr": redis_server.addr}]})
    try:

        def node(cluster_id: str, address: str, port: int = redis_server.port) -> Node:
            return Node(REGION, cluster_id, "0001", "cache.r6g.large", "redis", "7.1", address=address, port=port, account_id="123456789012")

        assert sample(call(app, "/metrics").samples(), "redis_up", instance="orders-001") == 1
        targets = app.targets
        assert targets.answered_lately("orders-001", node("orders-001", "127.0.0.1"), 180)  # at its endpoint
        assert targets.answered_lately("orders-001", node("orders-001", ""), 180)  # no endpoint known: by name
        assert not targets.answered_lately("orders-001", node("orders-001", "10.0.0.9"), 180)  # the name, another node
        assert not targets.answered_lately("orders-001", node("orders-001", "127.0.0.1"), 0)  # not lately
        discovered = node("orders-002", "127.0.0.1", redis_server.port)
        targets.set_discovered([("orders-002", discovered)])
        assert not targets.answered_lately("orders-002", discovered, 180)  # not scraped yet
        assert call(app, "/scrape", "target=orders-002").code == 200  # as Prometheus asks for it from /discovery
        assert targets.answered_lately("orders-002", discovered, 180)
        assert not targets.answered_lately("orders-002", node("orders-003", "127.0.0.1", redis_server.port + 1), 180)  # another node
    finally:
        app.close()
        redis_server.stop()


class _FlakyApi(_RecordingApi):
    """The recording client, whose GetMetricData is throttled while ``failing``."""

    failing = False

    def call(self, client, api, *, deadline=None, **kwargs):
        from exporter.aws.api import AwsCallError

        if api == "get_metric_data" and self.failing:
            raise AwsCallError(api, "throttling", "Rate exceeded")
        return super().call(client, api, deadline=deadline, **kwargs)


def _budget_kept_on_info_only(clock: _Clock) -> float:
    """A budget the discovered fleet keeps on INFO at the configured intervals, and off INFO only with trends every 3 hours."""
    from exporter.aws.budget import plan

    config = build_config({"aws": {"regions": [REGION]}, "redis": {"addr": ""}}, environ={})
    probe = AwsMonitor(config.aws, clock=clock, monotonic=clock, info_answers=lambda *_: True)
    probe.discover_once()
    configured = {tier: config.aws.tier_interval(tier) for tier in TIERS}
    trends_longest = plan(probe.fleet_pairs()[0], configured, config.aws.poll_interval, budget=0.01).usd_per_month  # off INFO
    budget = round(trends_longest + 0.01, 2)
    probe.poll_once()
    assert probe.budget_plan.usd_per_month < budget  # on INFO, the configured intervals keep it
    return budget


def test_info_lost_by_the_fleet_warns_of_the_budget_then_and_a_failed_catch_up_is_asked_again(aws_credentials, caplog):
    """Ten nodes on INFO fit a budget the same nodes off INFO do not: no warning while they answer (nor at start-up,
    before a poll has seen their INFO), one when their INFO stops and the plan lengthens trends, a line when they answer
    again. A throttled poll right after their INFO stopped does not lose the catch-up: the next poll asks them again."""
    import logging

    from exporter.aws.cloudwatch import INFO_EQUIVALENT

    answering = True
    with mock_aws():
        elasticache = boto3.client("elasticache", region_name=REGION)
        for index in range(10):
            elasticache.create_cache_cluster(CacheClusterId=f"n{index}", CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1)
        clock = _Clock(START)
        budget = _budget_kept_on_info_only(clock)
        config = build_config({"aws": {"regions": [REGION], "cloudwatch": {"budget_usd_per_month": budget}}, "redis": {"addr": ""}}, environ={})
        api = _FlakyApi(clock)
        monitor = AwsMonitor(config.aws, apis={config.aws.accounts[0]: api}, clock=clock, monotonic=clock, info_answers=lambda *_: answering)
        log = []
        with caplog.at_level(logging.INFO, logger="exporter.aws.monitor"):

            def poll() -> dict[str, set[str]]:
                caplog.clear()
                seen = len(api.requests)
                monitor.poll_once(monitor.due_tiers())
                log.append([record.getMessage() for record in caplog.records if "budget" in record.getMessage()])
                clock.now += config.aws.poll_interval
                return _asked_by_node(api.requests[seen:])

            monitor.discover_once()
            assert monitor.budget_plan.intervals["trends"] > 3600  # before a poll: every node counted off INFO
            assert not [record for record in caplog.records if "budget" in record.getMessage()]  # and nothing said of it
            poll()
            assert monitor.budget_plan.intervals["trends"] == 3600
            answering = False
            api.failing = True
            poll()  # the catch-up poll is throttled
            api.failing = False
            caught_up = poll()
            assert all(INFO_EQUIVALENT & {spec.name for spec in monitor.node_metrics} <= names for names in caught_up.values())
            assert len(caught_up) == 10
            assert monitor.budget_plan.intervals["trends"] > 3600
            answering = True
            poll()
    assert log[0] == []  # start-up and the first poll: within the budget on INFO, nothing said
    assert len(log[1]) == 1
    assert "kept by asking the trends tier less often" in log[1][0]
    assert log[2] == []  # said once
    assert len(log[3]) == 1
    assert "kept at the configured intervals again" in log[3][0]


def test_no_budget_warning_at_start_up_before_the_first_scrapes_have_read_info(aws_credentials, caplog):
    """The exporter starts, discovers and polls before Prometheus has scraped a node: every node is off INFO for that first
    poll, over a budget the fleet keeps on INFO. Nothing is said of the budget then, nor once the scrapes begin."""
    import logging

    answering = False
    with mock_aws():
        elasticache = boto3.client("elasticache", region_name=REGION)
        for index in range(10):
            elasticache.create_cache_cluster(CacheClusterId=f"n{index}", CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1)
        clock = _Clock(START)
        budget = _budget_kept_on_info_only(clock)
        config = build_config({"aws": {"regions": [REGION], "cloudwatch": {"budget_usd_per_month": budget}}, "redis": {"addr": ""}}, environ={})
        monitor = AwsMonitor(config.aws, clock=clock, monotonic=clock, info_answers=lambda *_: answering)
        with caplog.at_level(logging.INFO, logger="exporter.aws.monitor"):
            monitor.discover_once()
            monitor.poll_once(monitor.due_tiers())
            assert monitor.budget_plan.intervals["trends"] > 3600  # off INFO: over the budget at the configured intervals
            answering = True  # the scrapes begin
            for _ in range(3):
                clock.now += config.aws.poll_interval
                monitor.poll_once(monitor.due_tiers())
    assert monitor.budget_plan.intervals["trends"] == 3600
    assert not [record.getMessage() for record in caplog.records if "budget" in record.getMessage()]


def test_the_background_poll_rests_between_batches_leaving_scrapes_most_of_the_interpreter(aws_credentials):
    """A poll's work is pure Python: the poller rests three times as long as each batch's work took (POLL_CPU_SHARE),
    within its deadline; asked directly (a command, a test), it does not rest."""
    import threading
    import time

    from exporter.aws.monitor import POLL_CPU_SHARE

    class RecordedStop(threading.Event):
        """The rests asked for, and the poll thread's CPU time as each began and ended."""

        def __init__(self) -> None:
            super().__init__()
            self.rests: list[float] = []
            self.cpu_at: list[tuple[float, float]] = []

        def wait(self, timeout=None):
            self.rests.append(timeout)
            began = time.thread_time()
            try:
                return super().wait(timeout)
            finally:
                self.cpu_at.append((began, time.thread_time()))

    with mock_aws():
        elasticache = boto3.client("elasticache", region_name=REGION)
        for index in range(50):  # 2,400 pairs: 5 batches
            elasticache.create_cache_cluster(CacheClusterId=f"n{index:02d}", CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1)
        config = build_config({"aws": {"regions": [REGION], "events": False}, "redis": {"addr": ""}}, environ={})
        monitor = AwsMonitor(config.aws)
        monitor._stop = RecordedStop()
        monitor.discover_once()
        monitor.poll_once()
        assert monitor._stop.rests == []  # asked directly: no rest
        monitor.poll_once(rest=True)
    assert POLL_CPU_SHARE == 0.25
    stop = monitor._stop
    assert len(stop.rests) == 4  # before each batch but the first
    # each rest after the first is three times the work of the batch between it and the rest before (the first rest's
    # batch began before any rest, and the work after the last, keeping the poll's minutes, is not rested for)
    work = [began - ended for (_, ended), (began, _) in itertools.pairwise(stop.cpu_at)]
    assert sum(stop.rests[1:]) >= 2.5 * sum(work), (stop.rests, work)
    assert all(rest >= 2.5 * batch for rest, batch in zip(stop.rests[1:], work, strict=True)), (stop.rests, work)
    assert monitor.last_queries == 2400


@pytest.mark.unit
def test_each_windowed_alert_declares_the_window_the_exporter_holds():
    """The catalog's `window` of an alert on a window series is the length the exporter holds it at
    (minutes.WINDOW_SERIES), a window of one minute being any minute: the two declarations cannot drift apart."""
    from exporter.alerts.catalog import duration_seconds
    from exporter.aws.minutes import WINDOW_SERIES

    lengths = {prometheus_name(metric, statistic): length for (metric, statistic), length in WINDOW_SERIES.items()}
    checked = 0
    for alert in load_catalog():
        for metric in re.findall(r'elasticache_cloudwatch_window_(?:lowest|highest)\{metric="([a-z0-9_]+)"\}', alert.expr or ""):
            declared = duration_seconds(alert.window) // 60 if alert.window else 1
            assert declared == lengths[metric], (alert.name, alert.window, lengths[metric])
            checked += 1
    assert checked >= 15
