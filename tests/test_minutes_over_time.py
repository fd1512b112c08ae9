"""CloudWatch minutes kept over time: a poll that brings no newer minute (another tier's, a failed one, one AWS had
nothing new for) leaves every window as it was; the poll schedule runs on the monotonic clock whatever the wall clock
does; a minute AWS publishes late is still asked; a poll that asked nothing is no success."""

from __future__ import annotations

import datetime
import math
import random
import time

import boto3
import pytest
from helpers import call, parse_samples, sample
from moto import mock_aws

from exporter.aws.api import AwsApi, AwsCallError
from exporter.aws.cloudwatch import prometheus_name
from exporter.aws.minutes import BurstMinutes, RisingMinutes, WindowMinutes
from exporter.aws.monitor import AwsMonitor
from exporter.baselines.table import load_table
from exporter.common.exposition import encode_text
from exporter.config import build_config
from exporter.service.collectors.aws import AwsCollector

REGION = "eu-west-1"
NODE = {"account_id": "123456789012", "region": REGION, "dimension_CacheClusterId": "node", "dimension_CacheNodeId": "0001"}


@pytest.mark.unit
def test_a_merge_without_a_newer_minute_leaves_every_window_as_it_was():
    """Random minutes merged in random polls: after any merge whose minutes are none, or all at or before the newest held
    (a minute asked again, revised or not), each keeper serves exactly what it served before."""
    rng = random.Random(65)
    for _ in range(200):
        window, counter, network = WindowMinutes(5, 5), RisingMinutes(5), BurstMinutes(5)
        newest = -1  # no minute held yet
        for _poll in range(12):
            if newest >= 0 and rng.random() < 0.4:  # nothing newer: nothing, or minutes already held with other values
                again = {60.0 * m: rng.choice([0.0, 50.0, 150.0]) for m in range(max(0, newest - 6), newest + 1)} if rng.random() < 0.5 else {}
                before = (window.made, counter.made, network.made)
                assert window.merge(again) == before[0]
                assert counter.merge(again) == before[1]
                assert network.merge(again, again) == before[2][0]
                assert network.sustained() == before[2][1]
                continue
            brought = rng.randint(1, 10)
            values = {60.0 * m: rng.choice([0.0, 50.0, 150.0]) for m in range(newest + 1, newest + 1 + brought)}
            newest += brought
            assert window.merge(values) is not None
            assert counter.merge(values) is not None
            assert network.merge(values, values) is not None


@pytest.mark.unit
def test_the_rising_count_is_what_a_2_of_5_alarm_sees_at_the_minutes_a_poll_brought():
    """Shaped at minutes 4 and 8, polled every 5 minutes (1..5, then 6..10): no window of the first poll holds both, the
    window ending at 8 does, as a CloudWatch alarm evaluating each minute sees it; the windows ending at 11 and 12 still
    hold the minute 8, and none ending at 16..20 holds either."""
    counter = RisingMinutes(5)
    shaped = {60.0 * m: (3.0 if m in (4, 8) else 0.0) for m in range(0, 21)}
    counts = [counter.merge({m: v for m, v in shaped.items() if end - 300 < m <= end}) for end in (300, 600, 900, 1200)]
    assert [count.rising for count in counts if count is not None] == [1, 2, 1, 0]


@pytest.mark.unit
def test_a_minute_rises_over_the_minute_held_before_it_as_diff_counts_it():
    """A minute AWS did not publish between two: the later rises over the earlier, as CloudWatch's DIFF across the gap;
    the oldest minute held rises over nothing."""
    from exporter.aws.minutes import rising

    gap, full, alone = rising({0.0: 0.0, 120.0: 3.0}), rising({0.0: 0.0, 60.0: 0.0, 120.0: 3.0}), rising({0.0: 5.0})
    assert (gap.minutes, gap.rising) == (2, 1)  # type: ignore[union-attr]
    assert (full.minutes, full.rising) == (3, 1)  # type: ignore[union-attr]
    assert (alone.minutes, alone.rising) == (1, 0)  # type: ignore[union-attr]
    # polled a minute at a time, the keeper keeps the minute held before its windows, however far back: the same counts
    minutes = {0.0: 0.0, **{60.0 * m: (3.0 if m == 6 else 0.0) for m in range(2, 12)}}  # minute 1 never published
    kept = RisingMinutes(1)
    for stamp in sorted(minutes):
        counted = kept.merge({stamp: minutes[stamp]})
        assert counted == rising({m: v for m, v in minutes.items() if m <= stamp}), stamp


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class _FlakyApi(AwsApi):
    """The real API client; GetMetricData refused as throttled while ``failing`` is set, each call counted."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False
        self.metric_calls = 0

    def call(self, client, api, *, deadline=None, **kwargs):
        if api == "get_metric_data":
            self.metric_calls += 1
            if self.failing:
                raise AwsCallError(api, "throttling", "Rate exceeded")
        return super().call(client, api, deadline=deadline, **kwargs)


def _put(minutes: dict[float, dict[str, float]]) -> None:
    dimensions = [{"Name": "CacheClusterId", "Value": "node"}, {"Name": "CacheNodeId", "Value": "0001"}]
    data = [
        {"MetricName": name, "Timestamp": datetime.datetime.fromtimestamp(stamp, tz=datetime.timezone.utc), "Value": value, "Dimensions": dimensions}
        for stamp, values in minutes.items()
        for name, value in values.items()
    ]
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    for first in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data[first : first + 500])


def _served(monitor: AwsMonitor) -> dict:
    return parse_samples(encode_text(AwsCollector(monitor, load_table()).collect()).decode())


def _monitor(start: float, api: AwsApi | None = None) -> tuple[AwsMonitor, _Clock, _Clock]:
    boto3.client("elasticache", region_name=REGION).create_cache_cluster(
        CacheClusterId="node", CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1
    )
    config = build_config({"aws": {"regions": [REGION]}, "redis": {"addr": ""}}, environ={})
    wall, monotonic = _Clock(start), _Clock(1000.0)
    apis = {config.aws.accounts[0]: api} if api is not None else None
    monitor = AwsMonitor(config.aws, apis=apis, clock=wall, monotonic=monotonic, log_failures=False)
    monitor.discover_once()
    return monitor, wall, monotonic


def test_a_poll_of_the_paging_tier_alone_never_moves_an_alerting_window(aws_credentials):
    """Evictions of 5000 every minute for half an hour, then none, polled as the poller does (the paging tier every 5
    minutes, the alerting tier every 15): the served window of 15 moves only at a poll of its own tier, so the alert on
    it fires once and resolves once, never resolves between two alerting polls to fire again."""
    first = math.floor(time.time() / 60) * 60 - 3 * 3600
    with mock_aws():
        _put({first + 60.0 * m: {"Evictions": 5000.0 if m < 30 else 0.0, "SwapUsage": 1000.0} for m in range(120)})
        monitor, wall, monotonic = _monitor(first + 20 * 60 + 150)  # the newest complete minute: 19
        evictions = {**NODE, "metric": prometheus_name("Evictions", "Sum")}
        served, polls = [], []
        for _ in range(18):
            tiers = monitor.due_tiers()
            monitor.poll_once(tiers)
            polls.append(tiers)
            lowest = _served(monitor).get(("elasticache_cloudwatch_window_lowest", tuple(sorted(evictions.items()))))
            served.append(lowest)
            wall.now += 300
            monotonic.now += 300
    alerting = [index for index, tiers in enumerate(polls) if "alerting" in tiers]
    assert alerting == [0, 3, 6, 9, 12, 15], polls
    for index in range(1, len(served)):
        if index not in alerting:
            assert served[index] == served[index - 1], (index, served)
    # the first alerting poll holds minutes 15..19, the next 15..34 (a full window ending at 29: every minute 5000), the
    # next 30..49 (every window holds a minute of 0): one episode, from the poll that saw it to the one that saw it end
    firing = [lowest is not None and lowest > 1000 for lowest in served]
    assert firing == [False] * 3 + [True] * 3 + [False] * 12, served


def test_a_failed_poll_leaves_every_window_and_the_last_success_as_they_were(aws_credentials):
    """SwapUsage at 200 MB throughout; one poll refused as throttled: the window, its datapoint's time and the last
    success stay as the poll before left them, and the next poll brings the minutes the failed one did not."""
    first = math.floor(time.time() / 60) * 60 - 3 * 3600
    swap = {**NODE, "metric": prometheus_name("SwapUsage", "Maximum")}
    key = ("elasticache_cloudwatch_window_lowest", tuple(sorted(swap.items())))
    stamp = ("elasticache_cloudwatch_datapoint_timestamp_seconds", tuple(sorted(swap.items())))
    with mock_aws():
        _put({first + 60.0 * m: {"SwapUsage": 2e8 + m} for m in range(60)})
        api = _FlakyApi()
        monitor, wall, monotonic = _monitor(first + 20 * 60 + 150, api)
        monitor.poll_once(monitor.due_tiers())
        before, success = _served(monitor), monitor.last_poll
        assert before[key] == 2e8 + 15  # the window of minutes 15..19
        wall.now += 300
        monotonic.now += 300
        api.failing = True
        monitor.poll_once(monitor.due_tiers())
        after = _served(monitor)
        assert (after[key], after[stamp], monitor.last_poll) == (before[key], before[stamp], success)
        wall.now += 300
        monotonic.now += 300
        api.failing = False
        monitor.poll_once(monitor.due_tiers())
        again = _served(monitor)
    assert again[stamp] == first + 60.0 * 29  # minutes 20..29: the failed poll's and this one's
    assert again[key] == 2e8 + 25
    assert monitor.last_poll == wall.now


def test_the_schedule_runs_on_the_monotonic_clock_and_a_poll_that_asks_nothing_is_no_success(aws_credentials):
    """The wall clock steps back an hour: the paging tier is still asked every 5 minutes (the windows ask what the wall
    clock says, and an hour old minutes change no window); a wake-up with no tier due asks nothing and is no success."""
    first = math.floor(time.time() / 60) * 60 - 3 * 3600
    with mock_aws():
        _put({first + 60.0 * m: {"SwapUsage": 1000.0 + m} for m in range(120)})
        api = _FlakyApi()
        monitor, wall, monotonic = _monitor(first + 90 * 60 + 150, api)
        monitor.poll_once(monitor.due_tiers())
        success, calls = monitor.last_poll, api.metric_calls
        swap = {**NODE, "metric": prometheus_name("SwapUsage", "Maximum")}
        held = _served(monitor)[("elasticache_cloudwatch_window_lowest", tuple(sorted(swap.items())))]
        monotonic.now += 60  # a wake-up a minute on: nothing due
        assert monitor.due_tiers() == ()
        monitor.poll_once(())
        assert (monitor.last_poll, api.metric_calls) == (success, calls)
        wall.now -= 3600  # the wall clock steps back an hour
        monotonic.now += 240
        assert monitor.due_tiers() == ("paging",)
        monitor.poll_once(monitor.due_tiers())
        assert api.metric_calls == calls + 1
        # the minutes it brought are older than those held: the window is as it was
        assert _served(monitor)[("elasticache_cloudwatch_window_lowest", tuple(sorted(swap.items())))] == held


def test_a_minute_aws_publishes_late_is_asked_again_and_kept(aws_credentials):
    """The exporter's clock runs 3 minutes ahead of AWS's: a poll asks minutes AWS has not published yet; once they are
    published, the next poll asks them again (the last 5 minutes of each poll are asked again) and each is kept."""
    first = math.floor(time.time() / 60) * 60 - 3 * 3600
    swap = {**NODE, "metric": prometheus_name("SwapUsage", "Maximum")}
    with mock_aws():
        _put({first + 60.0 * m: {"SwapUsage": 2000.0 - m} for m in range(0, 17)})  # published: up to minute 16
        monitor, wall, monotonic = _monitor(first + 20 * 60 + 150)  # asks minutes 15..19
        monitor.poll_once(monitor.due_tiers())
        assert sample(_served(monitor), "elasticache_cloudwatch_datapoint_timestamp_seconds", **swap) == first + 16 * 60
        _put({first + 60.0 * m: {"SwapUsage": 2000.0 - m} for m in range(17, 30)})  # 17..19 late, 20.. on time
        wall.now += 300
        monotonic.now += 300
        monitor.poll_once(monitor.due_tiers())  # asks 15..24
        served = _served(monitor)
    assert sample(served, "elasticache_cloudwatch_datapoint_timestamp_seconds", **swap) == first + 24 * 60
    # the highest lowest of the windows of 5 ending at 17..24 is that of 15..19, full only with the late minutes held
    assert sample(served, "elasticache_cloudwatch_window_lowest", **swap) == 2000.0 - 19


def test_a_reload_keeps_what_the_process_learned_and_its_counters_never_fall(aws_credentials, monkeypatch):
    """SIGHUP's reload, as serve runs it: with the same AWS settings the running monitor is handed over whole (no poll
    asked again at once, the same windows, the same counters); with other AWS settings the old poller is stopped before
    the new one starts, and the API counters go on from where they were."""
    from servers import wait_until

    from exporter.cli.serve import _reloader
    from exporter.service.collectors.exporter import ConfigReloads
    from exporter.service.server import ExporterApp, make_http_server

    handed: list[tuple[ExporterApp, list[str]]] = []  # each app's discovered nodes, as discovery hands them over
    on_discovery = ExporterApp._on_discovery
    monkeypatch.setattr(ExporterApp, "_on_discovery", lambda app, named: handed.append((app, [n for n, _ in named])) or on_discovery(app, named))
    first = math.floor(time.time() / 60) * 60 - 20 * 60
    raw = {"redis": {"addr": ""}, "aws": {"regions": [REGION]}}
    changed = {**raw, "aws": {**raw["aws"], "cloudwatch": {"interval": "10m"}}}
    swap = {**NODE, "metric": prometheus_name("SwapUsage", "Maximum")}
    with mock_aws():
        boto3.client("elasticache", region_name=REGION).create_cache_cluster(
            CacheClusterId="node", CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1
        )
        _put({first + 60.0 * m: {"SwapUsage": 2e8} for m in range(20)})
        server = make_http_server(ExporterApp(build_config(raw, environ={})), "127.0.0.1:0")  # not serving: only its app
        try:
            monitor = server.app.aws_monitor
            wait_until(lambda: monitor.polls >= 1, timeout=30, what="the first poll")
            before = parse_samples(call(server.app, "/metrics").text)
            asked = sample(before, "elasticache_exporter_cloudwatch_metrics_requested_total")
            assert asked > 0
            _reloader(server, lambda: build_config(raw, environ={}), ConfigReloads(time.time()))()
            assert server.app.aws_monitor is monitor
            assert monitor.polls == 1
            after = parse_samples(call(server.app, "/metrics").text)
            for family in ("elasticache_cloudwatch_window_lowest", "elasticache_cloudwatch_datapoint_timestamp_seconds"):
                assert sample(after, family, **swap) == sample(before, family, **swap)
            assert sample(after, "elasticache_exporter_cloudwatch_metrics_requested_total") == asked
            assert (server.app, ["node"]) in handed  # the new app's targets have the node at once, not at the next discovery
            _reloader(server, lambda: build_config(changed, environ={}), ConfigReloads(time.time()))()
            assert server.app.aws_monitor is not monitor
            assert not any(thread.is_alive() for thread in monitor._threads)  # stopped before the new one started
            wait_until(lambda: server.app.aws_monitor.polls >= 1, timeout=30, what="the new monitor's first poll")
            again = parse_samples(call(server.app, "/metrics").text)
            assert sample(again, "elasticache_exporter_cloudwatch_metrics_requested_total") >= 2 * asked
        finally:
            server.server_close()
            server.app.close()


def test_a_shard_that_owns_no_node_polls_healthily_and_a_wake_up_with_nothing_due_is_no_success(aws_credentials):
    """A sharded exporter left with no node (a reshard moved them all): each poll of a due tier has nothing to ask and is
    a success, so ElastiCacheCloudWatchPollFailing stays quiet; a wake-up with no tier due moves nothing."""
    first = math.floor(time.time() / 60) * 60 - 3 * 3600
    with mock_aws():
        monitor, wall, monotonic = _monitor(first + 20 * 60 + 150)
        monitor.poll_once(monitor.due_tiers())
        assert monitor.last_poll == 0.0  # the node's series brought nothing: no data is no success
        monitor.attach(None, lambda _name: False, None)  # this shard now owns no node
        for _ in range(3):
            wall.now += 300
            monotonic.now += 300
            monitor.poll_once(monitor.due_tiers())
            assert (monitor.last_queries, monitor.last_poll) == (0, wall.now)
        wall.now += 60
        monotonic.now += 60
        monitor.poll_once(monitor.due_tiers())  # nothing due
        assert monitor.last_poll == wall.now - 60
