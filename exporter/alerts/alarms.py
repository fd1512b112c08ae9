"""``alarms plan|apply``: the CloudFormation template's alarms, created directly with PutMetricAlarm.

The desired alarms are computed from the same catalog and baseline table as the template, for
every discovered node; ``plan`` compares them with what CloudWatch has and prints the difference,
``apply`` puts only what differs, so running it twice changes nothing the second time.

Alarms this tool creates are its own: their description ends with MARKER and they carry the tag
MANAGED_TAG. Only such alarms of nodes that discovery no longer finds are deleted, and only by
``apply --prune``; alarms made by hand or by other tools are never touched.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from exporter.aws.api import AwsApi
from exporter.aws.cloudwatch import metric_of
from exporter.aws.discovery import Node
from exporter.aws.otel_metrics import emits_otel
from exporter.baselines.table import BaselineTable
from exporter.common.records import record

from .catalog import NETWORK_ALARMS, Alert
from .promql_alarms import covered_by_fleet, fleet_alarms
from .thresholds import BASELINE_KEYS, alarm_threshold_key, alarm_thresholds, threshold_sentence

MARKER = "(managed by elasticache-exporter)"
MANAGED_TAG = {"Key": "elasticache-exporter:managed", "Value": "true"}
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
    "EvaluationCriteria",
    "EvaluationInterval",
)


@record(frozen=True)
class Change:
    action: str  # create | update | unchanged | delete
    name: str
    region: str
    desired: dict[str, Any]
    differences: tuple[str, ...] = ()


def node_alarms(alerts: list[Alert], node_type: str, has_baseline: bool, network_alarms: str | None = NETWORK_ALARMS[0]) -> list[Alert]:
    """The catalog alerts a node of ``node_type`` gets as CloudWatch alarms: those with a CloudWatch twin; of the network
    alarms, the ``network_alarms`` family only (None: both, as a template whose parameter chooses holds them); a baseline
    alarm only where the node type has a baseline; an alarm on a metric only some node types publish (``node_types``)
    only for those, as it would otherwise stay INSUFFICIENT_DATA. ``alarms plan``, the CloudFormation fleet and ``cost``
    all count from here."""
    chosen = []
    for alert in alerts:
        cw = alert.cloudwatch
        if cw is None or (network_alarms is not None and alert.network_alarms not in (None, network_alarms)):
            continue
        if not has_baseline and alarm_threshold_key(alert) is not None:
            continue
        if cw.node_types is not None and not node_type.startswith(cw.node_types):
            continue
        chosen.append(alert)
    return chosen


ALARM_STYLES = ("per-node", "fleet")


def desired_alarms(
    nodes: list[Node],
    alerts: list[Alert],
    table: BaselineTable,
    topic_arn: str | None,
    network_alarms: str = NETWORK_ALARMS[0],
    style: str = ALARM_STYLES[0],
    emits: Callable[[Node], bool] = emits_otel,
) -> tuple[list[tuple[str, dict]], list[str]]:
    """(region, PutMetricAlarm arguments) per node and alarm (:func:`node_alarms`); and, per node type without a
    baseline, which nodes get the fixed-threshold alarms only. ``style`` fleet: a node that emits the OpenTelemetry
    metrics has each alarm with an OpenTelemetry counterpart in a PromQL alarm of its region (per node type where the
    threshold is the type's) instead of its own; its other alarms, and the one that tells its data stopped, stay its own.
    ``emits``: whether a node emits them (by default, by its engine; :func:`detect_emitters` asks CloudWatch)."""
    thresholds = {row.node_type: row.alarm_values() for row in alarm_thresholds(table)}
    result: list[tuple[str, dict]] = []
    skipped: dict[str, list[str]] = {}
    # (region, alert name) -> node-type suffix -> (threshold, node ids), for the fleet alarms
    fleets: dict[tuple[str, str], dict[str, tuple[float, list[str]]]] = {}
    by_name = {alert.name: alert for alert in alerts}
    for node in sorted(nodes, key=lambda n: (n.region, n.cluster_id, n.node_id)):
        values = thresholds.get(node.node_type)
        if values is None:
            skipped.setdefault(node.node_type or "(unknown)", []).append(node.cluster_id)
        for alert in node_alarms(alerts, node.node_type, values is not None, network_alarms):
            cw = alert.cloudwatch
            assert cw is not None
            if style == "fleet" and emits(node) and covered_by_fleet(alert):
                key = alarm_threshold_key(alert)
                threshold = float(values[key] if key and values else cw.threshold)  # type: ignore[arg-type]
                suffix = node.node_type.removeprefix("cache.") if key else ""
                group = fleets.setdefault((node.region, alert.name), {}).setdefault(suffix, (threshold, []))
                group[1].append(node.cluster_id)
                continue
            result.append((node.region, _alarm(node, alert, values or {}, topic_arn)))
    actions = [topic_arn] if topic_arn else []
    for (region, name), groups in sorted(fleets.items()):
        alert = by_name[name]
        text = f"[{alert.severity}] {alert.summary} One contributor a node: its id names it. {MARKER}"
        result += [(region, alarm) for alarm in fleet_alarms(alert, groups, text, actions, [MANAGED_TAG])]
    notes = [
        f"node type {node_type} has no baseline: baseline alarms skipped for {', '.join(ids)} (fixed-threshold alarms kept)"
        for node_type, ids in sorted(skipped.items())
    ]
    return result, notes


def _alarm(node: Node, alert: Alert, values: dict[str, Any], topic_arn: str | None) -> dict[str, Any]:
    cw = alert.cloudwatch
    assert cw is not None
    key = alarm_threshold_key(alert)
    baseline = values.get(BASELINE_KEYS.get(alert.baseline.signal, "") if alert.baseline else "", "")
    sentence = threshold_sentence(alert, str(baseline), node.node_type)
    alarm: dict[str, Any] = {
        "AlarmName": f"{node.cluster_id}-{alert.name}",
        "AlarmDescription": f"[{alert.severity}] {alert.summary}{' ' + sentence if sentence else ''} {MARKER}",
        "EvaluationPeriods": cw.evaluation_periods,
        "DatapointsToAlarm": cw.datapoints_to_alarm or cw.evaluation_periods,
        "Threshold": float(values[key] if key else cw.threshold),  # type: ignore[arg-type]
        "ComparisonOperator": cw.comparison,
        "TreatMissingData": "missing",
        "AlarmActions": [topic_arn] if topic_arn else [],
        "OKActions": [topic_arn] if topic_arn else [],
        # one alarm a node tells its data stopped (a node replaced or gone leaves every alarm of it without data)
        "InsufficientDataActions": [topic_arn] if topic_arn and cw.insufficient_data else [],
        "Tags": [MANAGED_TAG],
    }
    metric = metric_of(node, cw.metric)
    if cw.increase:
        alarm["Metrics"] = [
            {"Id": "m1", "ReturnData": False, "MetricStat": {"Metric": metric, "Period": cw.period, "Stat": cw.statistic}},
            {"Id": "e1", "Expression": "DIFF(m1)", "Label": f"{cw.metric} increase", "ReturnData": True},
        ]
    else:
        alarm.update(metric)
        alarm["Statistic"] = cw.statistic
        alarm["Period"] = cw.period
    return alarm


def _normal(alarm: dict[str, Any]) -> dict[str, str]:
    """Comparable JSON of the fields this tool sets (CloudWatch returns more, and floats for numbers)."""
    result = {}
    for field in COMPARED:
        value: Any = alarm.get(field)
        if value in (None, []):
            continue
        if field == "Dimensions":
            value = sorted(value, key=lambda d: d["Name"])
        if field == "Threshold":
            value = float(value)
        if field == "Metrics":
            value = [{k: v for k, v in query.items() if k in ("Id", "Expression", "MetricStat", "ReturnData", "Label")} for query in value]
        result[field] = json.dumps(value, sort_keys=True, default=str)
    return result


def _existing_managed(api: AwsApi, client: Any) -> dict[str, dict]:
    """Every metric alarm of the region whose description carries our marker, by name."""
    alarms = api.paginate(client, "describe_alarms", "MetricAlarms", AlarmTypes=["MetricAlarm"], MaxRecords=100)
    return {alarm["AlarmName"]: alarm for alarm in alarms if (alarm.get("AlarmDescription") or "").endswith(MARKER)}


def _tagged_as_ours(api: AwsApi, client: Any, alarm: dict) -> bool:
    reply = api.call(client, "list_tags_for_resource", ResourceARN=alarm["AlarmArn"])
    return any(tag.get("Key") == MANAGED_TAG["Key"] and tag.get("Value") == MANAGED_TAG["Value"] for tag in reply.get("Tags", []))


def plan(api: AwsApi, desired: list[tuple[str, dict]], regions: tuple[str, ...] = ()) -> list[Change]:
    """Create, update, unchanged for every desired alarm; delete for our own alarms nobody wants any more."""
    by_region: dict[str, list[dict]] = {region: [] for region in regions}
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
        wanted = set(names)
        for name, alarm in sorted(_existing_managed(api, client).items()):
            if name not in wanted and _tagged_as_ours(api, client, alarm):
                changes.append(Change("delete", name, region, {}))
    return changes


def apply(api: AwsApi, changes: list[Change], prune: bool = False) -> int:
    """Put what differs; with ``prune``, delete our own alarms nobody wants. Returns how many changed."""
    applied = 0
    deletions: dict[str, list[str]] = {}
    for change in changes:
        if change.action == "delete":
            deletions.setdefault(change.region, []).append(change.name)
        elif change.action != "unchanged":
            api.call(api.client("cloudwatch", change.region), "put_metric_alarm", **change.desired)
            applied += 1
    if prune:
        for region, names in sorted(deletions.items()):
            for start in range(0, len(names), 100):
                api.call(api.client("cloudwatch", region), "delete_alarms", AlarmNames=names[start : start + 100])
                applied += len(names[start : start + 100])
    return applied


def describe(changes: list[Change], skipped: list[str], prune: bool = False) -> str:
    lines = []
    for change in changes:
        if change.action == "create":
            threshold = change.desired.get("Threshold")
            lines.append(f"+ create {change.region} {change.name} ({'PromQL' if threshold is None else f'threshold {threshold:g}'})")
        elif change.action == "update":
            lines.append(f"~ update {change.region} {change.name}: {', '.join(change.differences)}")
        elif change.action == "delete":
            lines.append(f"- delete {change.region} {change.name} (its node or alert is gone{'' if prune else '; apply --prune deletes it'})")
    lines += [f"! {note}" for note in skipped]
    counts = {action: sum(1 for c in changes if c.action == action) for action in ("create", "update", "unchanged", "delete")}
    lines.append(f"{counts['create']} to create, {counts['update']} to update, {counts['delete']} to delete, {counts['unchanged']} unchanged")
    return "\n".join(lines) + "\n"


def detect_emitters(api: AwsApi, nodes: list[Node], endpoint: str | None = None) -> tuple[Callable[[Node], bool], list[str]]:
    """Which Valkey nodes have ElastiCache's OpenTelemetry metrics, asked of CloudWatch's PromQL API per region (at
    ``endpoint``, by default CloudWatch's own); and a line for each region that could not be asked or has Valkey nodes
    without them: those nodes keep their own alarms."""
    from exporter.aws.promql_api import PromQLApi, PromQLError, otel_nodes

    promql = PromQLApi(api.credentials, lambda region: endpoint or api.client("cloudwatch", region).meta.endpoint_url)
    by_region: dict[str, list[str]] = {}
    for node in nodes:
        if emits_otel(node):
            by_region.setdefault(node.region, []).append(node.cluster_id)
    found: set[tuple[str, str]] = set()
    notes = []
    for region, ids in sorted(by_region.items()):
        try:
            seen = otel_nodes(promql, region, ids)
        except PromQLError as err:
            kept = f"its {len(ids)} Valkey node(s) keep their own alarms"
            notes.append(f"fleet alarms: {region}: CloudWatch's PromQL API refused ({err.kind}: {err}); {kept}")
            continue
        missing = sorted(set(ids) - seen)
        if missing:
            listed = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
            notes.append(f"fleet alarms: {region}: {len(missing)} Valkey node(s) without OpenTelemetry metrics ({listed}) keep their own alarms")
        found |= {(region, cluster_id) for cluster_id in seen}
    return (lambda node: (node.region, node.cluster_id) in found), notes
