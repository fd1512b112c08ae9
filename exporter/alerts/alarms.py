"""``alarms plan|apply``: the CloudFormation template's alarms, created directly with PutMetricAlarm.

The desired alarms are computed from the same catalog and baseline table as the template, for
every discovered node; ``plan`` compares them with what CloudWatch has and prints the difference,
``apply`` puts only what differs, so running it twice changes nothing the second time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from exporter.aws.api import AwsApi
from exporter.aws.discovery import Node
from exporter.baselines.table import BaselineTable

from .render import Alert, alarm_threshold_key, mapping_rows

COMPARED = (
    "AlarmDescription",
    "Namespace",
    "MetricName",
    "Statistic",
    "Period",
    "Dimensions",
    "Metrics",
    "EvaluationPeriods",
    "DatapointsToAlarm",
    "Threshold",
    "ComparisonOperator",
    "TreatMissingData",
    "AlarmActions",
    "OKActions",
    "InsufficientDataActions",
)


@dataclass(frozen=True)
class Change:
    action: str  # create | update | unchanged
    name: str
    region: str
    desired: dict[str, Any]
    differences: tuple[str, ...] = ()


def desired_alarms(nodes: list[Node], alerts: list[Alert], table: BaselineTable, topic_arn: str | None) -> tuple[list[tuple[str, dict]], list[str]]:
    """(region, PutMetricAlarm arguments) per node and alarm; and the nodes skipped, with the reason."""
    thresholds = {row["key"]: row["values"] for row in mapping_rows(table)}
    result, skipped = [], []
    for node in sorted(nodes, key=lambda n: (n.region, n.cluster_id, n.node_id)):
        values = thresholds.get(node.node_type)
        if values is None:
            skipped.append(f"{node.cluster_id}: node type {node.node_type or '(unknown)'} has no baseline")
            continue
        for alert in alerts:
            if alert.cloudwatch:
                result.append((node.region, _alarm(node, alert, values, topic_arn)))
    return result, skipped


def _alarm(node: Node, alert: Alert, values: dict[str, float], topic_arn: str | None) -> dict[str, Any]:
    cw = alert.cloudwatch or {}
    key = alarm_threshold_key(alert)
    dimensions = [{"Name": "CacheClusterId", "Value": node.cluster_id}, {"Name": "CacheNodeId", "Value": node.node_id}]
    period = int(cw.get("period", 60))
    evaluation = int(cw.get("evaluation_periods", 5))
    alarm: dict[str, Any] = {
        "AlarmName": f"{node.cluster_id}-{alert.name}",
        "AlarmDescription": f"[{alert.severity}] {alert.summary}",
        "EvaluationPeriods": evaluation,
        "DatapointsToAlarm": evaluation,
        "Threshold": float(values[key] if key else cw["threshold"]),
        "ComparisonOperator": cw.get("comparison", "GreaterThanThreshold"),
        "TreatMissingData": "missing",
        "AlarmActions": [topic_arn] if topic_arn else [],
        "OKActions": [topic_arn] if topic_arn else [],
        "InsufficientDataActions": [topic_arn] if topic_arn else [],
    }
    metric = {"Namespace": "AWS/ElastiCache", "MetricName": cw["metric"], "Dimensions": dimensions}
    if cw.get("increase"):
        alarm["Metrics"] = [
            {"Id": "m1", "ReturnData": False, "MetricStat": {"Metric": metric, "Period": period, "Stat": cw["statistic"]}},
            {"Id": "e1", "Expression": "DIFF(m1)", "Label": f"{cw['metric']} increase", "ReturnData": True},
        ]
    else:
        alarm.update(metric)
        alarm["Statistic"] = cw["statistic"]
        alarm["Period"] = period
    return alarm


def _normal(alarm: dict[str, Any]) -> dict[str, str]:
    """Comparable JSON of the fields this tool sets (CloudWatch returns more, and floats for numbers)."""
    result = {}
    for field in COMPARED:
        value = alarm.get(field)
        if value in (None, []):
            continue
        if field == "Dimensions":
            value = sorted(value, key=lambda d: d["Name"])
        if field == "Threshold":
            value = float(value)
        if field == "Metrics":
            value = [
                {k: v for k, v in query.items() if k in ("Id", "Expression", "MetricStat", "ReturnData", "Label")}
                for query in value
            ]
        result[field] = json.dumps(value, sort_keys=True, default=str)
    return result


def plan(api: AwsApi, desired: list[tuple[str, dict]]) -> list[Change]:
    by_region: dict[str, list[dict]] = {}
    for region, alarm in desired:
        by_region.setdefault(region, []).append(alarm)
    changes = []
    for region, alarms in sorted(by_region.items()):
        client = api.client("cloudwatch", region)
        existing: dict[str, dict] = {}
        names = [alarm["AlarmName"] for alarm in alarms]
        for start in range(0, len(names), 100):
            reply = api.call(client, "describe_alarms", AlarmNames=names[start : start + 100], MaxRecords=100)
            for found in reply.get("MetricAlarms", []):
                existing[found["AlarmName"]] = found
        for alarm in alarms:
            current = existing.get(alarm["AlarmName"])
            if current is None:
                changes.append(Change("create", alarm["AlarmName"], region, alarm))
                continue
            want, have = _normal(alarm), _normal(current)
            differences = tuple(sorted(field for field in set(want) | set(have) if want.get(field) != have.get(field)))
            changes.append(Change("update" if differences else "unchanged", alarm["AlarmName"], region, alarm, differences))
    return changes


def apply(api: AwsApi, changes: list[Change]) -> int:
    applied = 0
    for change in changes:
        if change.action == "unchanged":
            continue
        api.call(api.client("cloudwatch", change.region), "put_metric_alarm", **change.desired)
        applied += 1
    return applied


def describe(changes: list[Change], skipped: list[str]) -> str:
    lines = []
    for change in changes:
        if change.action == "create":
            lines.append(f"+ create {change.region} {change.name} (threshold {change.desired['Threshold']:g})")
        elif change.action == "update":
            lines.append(f"~ update {change.region} {change.name}: {', '.join(change.differences)}")
    lines += [f"! skipped {reason}" for reason in skipped]
    counts = {action: sum(1 for c in changes if c.action == action) for action in ("create", "update", "unchanged")}
    lines.append(f"{counts['create']} to create, {counts['update']} to update, {counts['unchanged']} unchanged")
    return "\n".join(lines) + "\n"
