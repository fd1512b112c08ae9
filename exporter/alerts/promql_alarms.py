"""Fleet alarms: the catalog's CloudWatch alarms as CloudWatch PromQL alarms over the OpenTelemetry metrics ElastiCache
emits for node-based Valkey replication groups (vended every 60 s at no emission cost), one alarm for many nodes.

A PromQL alarm runs an instant query every ``EvaluationInterval``; each series the query returns is a contributor,
tracked on its own: in ALARM once returned for ``PendingPeriod``, back to OK once absent for ``RecoveryPeriod``
(Prometheus' ``for`` and ``keep_firing_for``). Each query here returns one series per breaching node, labelled with the
node's id, so the alarm's contributors (``DescribeAlarmContributors``, the contributor state-change events and
notifications) name the node. A query names its nodes (the discovered ones, by id), so an alarm covers exactly what
``alarms plan`` was asked for, and a per-node-type threshold is one alarm per node type. Pure: rendering only.

Each CloudWatch metric an alarm reads has its OpenTelemetry counterpart in ``exporter.aws.otel_metrics.OTEL_VALUES``;
the alarms on a metric the vended set lacks stay per node."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from exporter.aws.otel_metrics import OTEL_VALUES, with_nodes

from .catalog import Alert

EVALUATION_INTERVAL = 60  # seconds: the vended metrics' own resolution
MAX_QUERY_CHARS = 10_000  # AlarmPromQLCriteria.Query
MAX_NODES = 100  # an alarm tracks at most 100 contributors in ALARM (and 500 series a query): no node goes unreported
# a node OK at once when its condition stops holding, as its own alarm is when fewer than M of N breach (a sample that
# comes late does not end it: a counter's irate spans one missing sample, a gauge's last sample holds for minutes)
RECOVERY_SECONDS = 0
COMPARISONS = {
    "GreaterThanThreshold": ">",
    "GreaterThanOrEqualToThreshold": ">=",
    "LessThanThreshold": "<",
    "LessThanOrEqualToThreshold": "<=",
}


def fleet_alertable(alert: Alert) -> bool:
    """Whether the alert's CloudWatch alarm has an OpenTelemetry counterpart (an increase alarm reads a counter that rises)."""
    cw = alert.cloudwatch
    return cw is not None and cw.metric in OTEL_VALUES and cw.comparison in COMPARISONS


def covered_by_fleet(alert: Alert) -> bool:
    """Whether a fleet alarm takes the alert's place for a node that emits the OpenTelemetry metrics: one with an
    OpenTelemetry counterpart, but not the alarm that tells a node's data stopped (a fleet alarm has no
    INSUFFICIENT_DATA: a node whose series stop is only a contributor that recovers)."""
    cw = alert.cloudwatch
    return cw is not None and fleet_alertable(alert) and not cw.insufficient_data


ALERT_TAG = "elasticache-exporter:alert"  # a fleet alarm's tag naming its catalog alert


def query(alert: Alert, threshold: float, ids: Iterable[str]) -> tuple[str, int]:
    """The alarm's PromQL and its pending period: a node breaching on every one of N datapoints is returned once it has
    breached for the N minutes (pending N-1 minutes past the first); M of N is counted in the query itself."""
    cw = alert.cloudwatch
    assert cw is not None
    # an increase alarm (DIFF of a cumulative count) and a Sum per minute both read a counter's increase in a minute
    condition = f"{with_nodes(OTEL_VALUES[cw.metric], ids)} {COMPARISONS[cw.comparison]} {threshold:.15g}"
    minutes = cw.period // 60
    needed = cw.datapoints_to_alarm or cw.evaluation_periods
    if needed < cw.evaluation_periods:
        # Prometheus 3's ranges are left-open: [5m:1m] holds the 5 steps of the last 5 minutes, as the M of N alarm
        span = cw.evaluation_periods * minutes
        return f"count_over_time(({condition})[{span}m:{minutes}m]) >= {needed}", 0
    return condition, (cw.evaluation_periods - 1) * cw.period


def _chunks(ids: list[str], alert: Alert, threshold: float) -> list[list[str]]:
    """The nodes in as few alarms as the query's length and the contributors an alarm reports allow."""
    chunks: list[list[str]] = []
    for node_id in sorted(ids):
        if chunks and len(chunks[-1]) < MAX_NODES and len(query(alert, threshold, [*chunks[-1], node_id])[0]) <= MAX_QUERY_CHARS:
            chunks[-1].append(node_id)
        else:
            chunks.append([node_id])
    return chunks


def fleet_alarms(
    alert: Alert, groups: dict[str, tuple[float, list[str]]], describe: str, actions: list[str], tags: list[dict[str, str]]
) -> list[dict[str, Any]]:
    """PutMetricAlarm arguments of one alert in one region (names unique within it): per node type where the threshold is the type's (``groups``:
    name suffix -> (threshold, node ids)), each split where the query would pass its length limit."""
    alarms = []
    for suffix, (threshold, ids) in sorted(groups.items()):
        chunks = _chunks(ids, alert, threshold)
        for number, chunk in enumerate(chunks, 1):
            text, pending = query(alert, threshold, chunk)
            # numbered from the first, so a group that grows into a second alarm keeps its first one's name
            name = "elasticache-exporter-" + alert.name + (f"-{suffix}" if suffix else "") + f"-{number}"
            alarms.append(
                {
                    "AlarmName": name,
                    "AlarmDescription": describe,
                    "EvaluationCriteria": {"PromQLCriteria": {"Query": text, "PendingPeriod": pending, "RecoveryPeriod": RECOVERY_SECONDS}},
                    "EvaluationInterval": EVALUATION_INTERVAL,
                    "AlarmActions": actions,
                    "OKActions": actions,
                    "Tags": [*tags, {"Key": ALERT_TAG, "Value": alert.name}],
                }
            )
    return alarms
