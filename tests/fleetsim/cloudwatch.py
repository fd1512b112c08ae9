"""The fleet's CloudWatch side, minute by minute: nodes created in moto publish their minutes two minutes late; the real
monitor polls them through its tiers on injected clocks and a real app serves /metrics. A restart builds both anew, a
reload builds a new app that takes the running monitor over (as SIGHUP does), a failed poll is refused as throttled and
the wall clock steps ahead. Runs inside moto (the caller's ``mock_aws``)."""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import Any

import boto3
from helpers import call

from exporter.aws.api import AwsApi, AwsCallError
from exporter.aws.monitor import AwsMonitor
from exporter.config import build_config
from exporter.service.server import ExporterApp

from .capture import exposition
from .compose import Series
from .plan import Plan, wave

REGION, NODE_TYPE = "eu-west-1", "cache.r6g.large"
BASELINE_OUT = 93_750_000.0  # cache.r6g.large's published baseline, bytes a second (the rendered recording rule's)
PUBLISHED_AFTER = 2  # minutes after its start that AWS publishes a minute
STEP_SECONDS = 180.0  # how far the wall clock steps ahead during a clock step


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class _RefusingApi(AwsApi):
    """The real API client; GetMetricData refused as throttled while ``failing`` is set."""

    failing = False

    def call(self, client: Any, api: str, *, deadline: float | None = None, **kwargs: Any) -> Any:
        if api == "get_metric_data" and self.failing:
            raise AwsCallError(api, "throttling", "Rate exceeded")
        return super().call(client, api, deadline=deadline, **kwargs)


def published_minute(the_plan: Plan, minute: int) -> dict[str, dict[str, float]]:
    """What AWS publishes for each polled node for one minute: traffic on the wave at a third of the baseline, at the
    baseline during a surge; the shaping counter rising each shaped minute; nothing during a gap."""
    out: dict[str, dict[str, float]] = {}
    shaped = {node: 0 for node in the_plan.polled}
    for incident in the_plan.incidents:
        if incident.kind in ("allowance shaping 10 min", "one shaped minute") and incident.start <= minute:
            shaped[incident.scope] += min(minute + 1, incident.end) - incident.start
    for node in the_plan.polled:
        active = {i.kind for i in the_plan.incidents if i.scope == node and i.start <= minute < i.end}
        if "CloudWatch gap 20 min" in active:
            continue
        level = 1.0 if "network over baseline 60 min" in active else 0.35 * wave(minute)
        into = 0.2 * wave(minute)
        out[node] = {
            "NetworkBytesOut": level * BASELINE_OUT * 60,
            "NetworkBytesIn": into * BASELINE_OUT * 60,
            # AWS's own view: the share of the instance's baseline (r6g.large's is the table's), its busiest second higher
            "NetworkBaselineUsageOutPercentage": 100.0 * level,
            "NetworkBaselineMaxUsageOutPercentage": 130.0 * level,
            "NetworkBaselineUsageInPercentage": 100.0 * into,
            "NetworkBaselineMaxUsageInPercentage": 130.0 * into,
            "NetworkBandwidthOutAllowanceExceeded": 40.0 * shaped[node],
            "EngineCPUUtilization": 30.0 * wave(minute),
            "CPUUtilization": 10.0 * wave(minute),
        }
    return out


class _Exporter:
    """The exporter process's AWS side: its app and monitor, across restarts and reloads."""

    def __init__(self, the_plan: Plan, end: float) -> None:
        self.plan, self.end = the_plan, end
        self.config = build_config({"aws": {"regions": [REGION]}, "redis": {"addr": ""}}, environ={})
        self.api = _RefusingApi()
        self.wall, self.monotonic = _Clock(end), _Clock(1000.0)
        self.app: Any = None

    def wall_of(self, minute: int) -> float:
        return self.end + 60.0 * (minute - self.plan.minutes)

    def start(self) -> None:
        monitor = AwsMonitor(
            self.config.aws, apis={self.config.aws.accounts[0]: self.api}, clock=self.wall, monotonic=self.monotonic, log_failures=False
        )
        self.app = ExporterApp(self.config, running=SimpleNamespace(aws_stats=None, aws_monitor=monitor))  # type: ignore[arg-type]
        monitor.discover_once()

    def reload(self) -> None:
        """SIGHUP with the same settings: a new app, which takes the running monitor over (ExporterApp._start_aws)."""
        running, self.app = self.app, ExporterApp(self.config, running=self.app)
        running.close()

    def stop(self) -> None:
        if self.app is not None:
            self.app.close()
        self.app = None

    def serve(self, minute: int, *, failing: bool, ahead: float) -> dict:
        self.wall.now = self.wall_of(minute) + 30.0 + ahead
        self.monotonic.now = 1000.0 + 60.0 * minute + 30.0
        monitor = self.app.aws_monitor
        if minute % max(1, round(self.config.aws.discovery_interval / 60)) == 0:  # as its discovery loop does
            monitor.discover_once()
        self.api.failing = failing
        tiers = monitor.due_tiers()
        if tiers:
            monitor.poll_once(tiers)
        samples, _ = exposition(call(self.app, "/metrics").text)
        return samples


def compose_cloudwatch(the_plan: Plan, down: set[int], end: float) -> Series:
    """``end``: the wall-clock time of the range's end; ``down``: the minutes the exporter is not running."""
    elasticache = boto3.client("elasticache", region_name=REGION)
    for node in the_plan.polled:
        elasticache.create_cache_cluster(CacheClusterId=node, CacheNodeType=NODE_TYPE, Engine="redis", NumCacheNodes=1)
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    exporter = _Exporter(the_plan, end)
    failed, stepped = the_plan.minutes_of("failed poll"), the_plan.minutes_of("clock step of 3 min")
    reloads = {i.start for i in the_plan.incidents if i.kind == "exporter reload"}
    series: Series = {}
    for minute in range(the_plan.minutes):
        if minute >= PUBLISHED_AFTER:
            published = minute - PUBLISHED_AFTER
            _publish(cloudwatch, exporter.wall_of(published), published_minute(the_plan, published))
        if minute % 60 == 0:
            _forget_older_than(exporter.wall_of(minute) - 4 * 3600)
        if minute in down:
            exporter.stop()  # the process is gone, and all it knew
            continue
        if exporter.app is None:
            exporter.start()
        elif minute in reloads:
            exporter.reload()
        samples = exporter.serve(minute, failing=minute in failed, ahead=STEP_SECONDS if minute in stepped else 0.0)
        for sample, value in samples.items():
            if not sample[0].startswith(("process_", "python_")):  # this test process's own, not an exporter's
                series.setdefault(sample, [None] * the_plan.minutes)[minute] = value
    return series


def _forget_older_than(stamp: float) -> None:
    """moto keeps every datapoint and scans them all for each query: those older than any poll asks are dropped."""
    from moto.cloudwatch.models import cloudwatch_backends
    from moto.core import DEFAULT_ACCOUNT_ID

    backend = cloudwatch_backends[DEFAULT_ACCOUNT_ID][REGION]
    backend.metric_data = [datum for datum in backend.metric_data if datum.timestamp.timestamp() >= stamp]


def _publish(cloudwatch: Any, stamp: float, minutes: dict[str, dict[str, float]]) -> None:
    timestamp = datetime.datetime.fromtimestamp(stamp, tz=datetime.timezone.utc)
    dimensions = [{"Name": "CacheClusterId", "Value": ""}, {"Name": "CacheNodeId", "Value": "0001"}]
    data = [
        {"MetricName": metric, "Timestamp": timestamp, "Value": value, "Dimensions": [{**dimensions[0], "Value": node}, dimensions[1]]}
        for node, values in minutes.items()
        for metric, value in values.items()
    ]
    for first in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data[first : first + 500])
