"""The catalog as a CloudFormation template of CloudWatch alarms, one set per node, with thresholds looked up in a
node-type Mapping; and a fleet split into stacks under CloudFormation's resource limit."""

from __future__ import annotations

import json
import re
from pathlib import Path

from exporter.aws.cloudwatch import NAMESPACE, NODE_DIMENSIONS
from exporter.baselines.table import BaselineTable
from exporter.common.records import record, replace
from exporter.common.schema import check_known_keys
from exporter.common.yamlfile import read_yaml

from .catalog import DEFAULT_RUNBOOK_BASE, NETWORK_ALARMS, Alert, RenderError
from .promql_alarms import ALERT_TAG, covered_by_fleet
from .templating import render
from .thresholds import BASELINE_KEYS, NodeTypeThresholds, alarm_threshold_key, alarm_thresholds, threshold_sentence

NO_BASELINE = "none"  # the CacheNodeType of nodes whose type has no baseline: fixed-threshold alarms only
MAX_RESOURCES = 500  # CloudFormation's limit per stack
SHARED_RESOURCES = 2  # the SNS topic and its KMS key, besides the alarms
CLUSTER_ID = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,49}")


@record(frozen=True)
class TemplateAlarm:
    name: str
    logical: str  # the resource name, before the node's id
    metric: str
    statistic: str
    period: int
    evaluation_periods: int
    datapoints_to_alarm: int
    comparison: str
    threshold_key: str | None  # the Mappings attribute of a per-node-type threshold
    threshold: float | None  # a fixed threshold, as the catalog writes it
    increase: bool
    unit: str | None
    description: str  # a YAML string
    baseline_key: str | None  # the Mappings attribute naming the baseline's source
    sub: bool  # the description has ${...} for !Sub
    node_types: str | None = None  # a node-type prefix: the alarm exists only for nodes of those types
    network: str | None = None  # its network alarm family (Alert.network_alarms): the NetworkAlarms parameter chooses one
    condition: str | None = None  # the template's condition for those types (set where the template is rendered)
    insufficient_data: bool = False  # the node's one alarm that notifies INSUFFICIENT_DATA
    fleet_covered: bool = False  # a fleet alarm takes its place for a Valkey node (promql_alarms.covered_by_fleet)


@record(frozen=True)
class Stack:
    """One stack of a fleet: nodes of one node type (NO_BASELINE for types without a baseline)."""

    node_type: str
    ids: tuple[str, ...]
    alarms_per_node: int  # resources: both network families, the NetworkAlarms parameter choosing one
    index: int = 1
    count: int = 1
    created_per_node: int = 0  # alarms made for a node with the NetworkAlarms parameter at its default
    limited: tuple[str, ...] = ()  # a stack of types without a baseline: the node_types prefixes its nodes' types match
    covered: bool = False  # Valkey nodes whose fleet alarms (render_fleet_alarms) take the place of some of their own


def template_alarms(alerts: list[Alert], runbook_base: str) -> list[TemplateAlarm]:
    alarms = []
    for alert in alerts:
        cw = alert.cloudwatch
        if cw is None:
            continue
        key = alarm_threshold_key(alert)
        text = threshold_sentence(alert, "${Baseline}", "${CacheNodeType}")
        description = f"[{alert.severity}] {alert.summary}" + (f" {text}" if text else "") + f" Runbook: {runbook_base}#{alert.runbook}"
        alarms.append(
            TemplateAlarm(
                name=alert.name,
                logical=alert.name.removeprefix("ElastiCache").removeprefix("Redis"),
                metric=cw.metric,
                statistic=cw.statistic,
                period=cw.period,
                evaluation_periods=cw.evaluation_periods,
                datapoints_to_alarm=cw.datapoints_to_alarm or cw.evaluation_periods,
                comparison=cw.comparison,
                threshold_key=key,
                threshold=None if key else cw.threshold,
                increase=cw.increase,
                unit=cw.unit,
                description=json.dumps(description),
                baseline_key=BASELINE_KEYS.get(alert.baseline.signal) if alert.baseline else None,
                sub="${" in description,
                node_types=cw.node_types,
                network=alert.network_alarms,
                insufficient_data=cw.insufficient_data,
                fleet_covered=covered_by_fleet(alert),
            )
        )
    return alarms


def check_mapping(rows: list[NodeTypeThresholds], keys: list[str]) -> None:
    """What cfn-lint does not check: every node type has every key the alarms read, and every value is a number."""
    for row in rows:
        values = row.alarm_values()
        for key in keys:
            value = values.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise RenderError(f"mapping: node type {row.node_type} has no numeric {key}")


def render_cloudformation(alerts: list[Alert], table: BaselineTable, runbook_base: str = DEFAULT_RUNBOOK_BASE, fleet: Stack | None = None) -> str:
    alarms = template_alarms(alerts, runbook_base)
    rows = alarm_thresholds(table)
    check_mapping(rows, [alarm.threshold_key for alarm in alarms if alarm.threshold_key])
    conditions: dict[str, str] = {}
    if fleet is not None:
        rows = [row for row in rows if row.node_type == fleet.node_type]
        if fleet.node_type == NO_BASELINE:
            alarms = [alarm for alarm in alarms if not alarm.threshold_key and (alarm.node_types is None or alarm.node_types in fleet.limited)]
        else:
            alarms = [alarm for alarm in alarms if alarm.node_types is None or fleet.node_type.startswith(alarm.node_types)]
        if fleet.covered:
            alarms = [alarm for alarm in alarms if not alarm.fleet_covered]
    else:
        alarms, conditions = _node_type_conditions(alarms, [row.node_type for row in rows])
    return render(
        "cloudformation.yaml.j2",
        mapping=rows,
        alarms=alarms,
        node_type_conditions=conditions,
        fleet=fleet,
        no_baseline=NO_BASELINE,
        network_families=[family for family in NETWORK_ALARMS if any(alarm.network == family for alarm in alarms)],
        max_nodes=(MAX_RESOURCES - SHARED_RESOURCES) // max(1, len(alarms)),
        namespace=NAMESPACE,
        dimensions=NODE_DIMENSIONS,
    )


def _node_type_conditions(alarms: list[TemplateAlarm], node_types: list[str]) -> tuple[list[TemplateAlarm], dict[str, str]]:
    """A condition per node-type prefix that some alarm is limited to (true where CacheNodeType is one of the template's
    node types with that prefix), each alarm given its own; an alarm no allowed node type can have is left out."""
    conditions: dict[str, str] = {}
    kept = []
    for alarm in alarms:
        if alarm.node_types is None:
            kept.append(alarm)
            continue
        if alarm.threshold_key or alarm.network:
            raise RenderError(f"catalog: alert {alarm.name}: node_types cannot go with a baseline threshold or a network family")
        types = [node_type for node_type in node_types if node_type.startswith(alarm.node_types)]
        if not types:
            continue
        name = "NodeTypeIs" + "".join(part.capitalize() for part in re.split(r"[^a-z0-9]+", alarm.node_types) if part)
        conditions[name] = _any_of([f"!Equals [!Ref CacheNodeType, {json.dumps(node_type)}]" for node_type in types])
        kept.append(replace(alarm, condition=name))
    return kept, conditions


def _any_of(tests: list[str]) -> str:
    """Fn::Or takes 2 to 10 conditions: one test stands alone, more are grouped ten at a time."""
    if len(tests) == 1:
        return tests[0]
    if len(tests) <= 10:
        return "!Or [" + ", ".join(tests) + "]"
    return _any_of([_any_of(tests[i : i + 10]) for i in range(0, len(tests), 10)])


# --- a fleet: one stack per node type and chunk, each under the resource limit ----------------------


@record(frozen=True)
class FleetNode:
    cluster_id: str
    node_type: str
    engine: str = ""  # valkey: it emits the OpenTelemetry metrics fleet alarms read


def load_fleet(path: str | Path) -> list[FleetNode]:
    """``nodes: [{cluster_id: orders-0001-001, node_type: cache.r6g.large, engine: valkey}, ...]`` (node_type may be
    empty; engine is optional: valkey, redis)."""
    data = read_yaml(Path(path), RenderError)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise RenderError(f"{path}: not a fleet (expected a list 'nodes' of cluster_id and node_type)")
    check_known_keys(data, ("nodes",), f"{path}:", RenderError)
    nodes, seen = [], set()
    for index, item in enumerate(data["nodes"]):
        where = f"{path}: nodes[{index}]"
        if not isinstance(item, dict):
            raise RenderError(f"{where}: must be a mapping with cluster_id and node_type")
        check_known_keys(item, ("cluster_id", "node_type", "engine"), where, RenderError)
        cluster_id, node_type, engine = item.get("cluster_id"), item.get("node_type") or "", item.get("engine") or ""
        if engine not in ("", "valkey", "redis"):
            raise RenderError(f"{where}.engine: must be valkey or redis, got {engine!r}")
        if not isinstance(cluster_id, str) or not CLUSTER_ID.fullmatch(cluster_id):
            raise RenderError(f"{where}.cluster_id: not a CacheClusterId (letters, digits and hyphens, at most 50): {cluster_id!r}")
        if not isinstance(node_type, str):
            raise RenderError(f"{where}.node_type: must be a string such as cache.r6g.large")
        if cluster_id in seen:
            raise RenderError(f"{where}.cluster_id: {cluster_id} is listed twice")
        seen.add(cluster_id)
        nodes.append(FleetNode(cluster_id, node_type, engine))
    return nodes


def fleet_stacks(nodes: list[FleetNode], alerts: list[Alert], table: BaselineTable, fleet_alarms: bool = False) -> tuple[list[Stack], list[str]]:
    """The stacks of a fleet: per node type (``none`` for types without a baseline), chunks of nodes small enough
    that a stack holds at most MAX_RESOURCES resources; and one line per node type whose baseline alarms are skipped.
    ``fleet_alarms``: a Valkey node's stack leaves out what the fleet alarms (:func:`render_fleet_alarms`) hold."""
    from .alarms import node_alarms

    known = {row.node_type for row in alarm_thresholds(table)}
    limited_to = sorted({alert.cloudwatch.node_types for alert in alerts if alert.cloudwatch and alert.cloudwatch.node_types})
    # nodes without a baseline share a stack with those whose types match the same node-type-limited alarms
    groups: dict[tuple[str, tuple[str, ...], bool], list[FleetNode]] = {}
    skipped: dict[str, list[str]] = {}
    for node in sorted(nodes, key=lambda n: (n.node_type, n.cluster_id)):
        node_type = node.node_type if node.node_type in known else NO_BASELINE
        limited = tuple(prefix for prefix in limited_to if node.node_type.startswith(prefix)) if node_type == NO_BASELINE else ()
        if node_type == NO_BASELINE:
            skipped.setdefault(node.node_type or "(unknown)", []).append(node.cluster_id)
        groups.setdefault((node_type, limited, fleet_alarms and node.engine == "valkey"), []).append(node)
    chunks: list[tuple[str, list[str], int, int, tuple[str, ...], bool]] = []
    for (node_type, limited, covered), members in sorted(groups.items()):
        example = members[0].node_type  # every member gets the same alarms (the same type, or the same limited ones)

        def own(network: str | None, example: str = example, node_type: str = node_type, covered: bool = covered) -> int:
            chosen = node_alarms(alerts, example, node_type != NO_BASELINE, network)
            return sum(1 for alert in chosen if not (covered and covered_by_fleet(alert)))

        resources, created = own(None), own(NETWORK_ALARMS[0])
        ids = [member.cluster_id for member in members]
        most = max(1, (MAX_RESOURCES - SHARED_RESOURCES) // max(1, resources))
        size = -(-len(ids) // -(-len(ids) // most))  # stacks of even size
        chunks += [(node_type, ids[start : start + size], resources, created, limited, covered) for start in range(0, len(ids), size)]
    stacks = [
        Stack(node_type, tuple(ids), resources, index, len(chunks), created, limited, covered)
        for index, (node_type, ids, resources, created, limited, covered) in enumerate(chunks, 1)
    ]
    notes = [
        f"node type {node_type} has no baseline: {len(ids)} node(s) get the fixed-threshold alarms only ({', '.join(ids[:5])}"
        + (", ..." if len(ids) > 5 else "")
        + ")"
        for node_type, ids in sorted(skipped.items())
    ]
    return stacks, notes


@record(frozen=True)
class FleetAlarm:
    """A PromQL alarm of the fleet stack: one alert for many Valkey nodes."""

    logical: str
    name: str
    description: str
    query: str
    pending: int
    recovery: int
    interval: int
    network: str | None  # its network alarm family: the NetworkAlarms parameter chooses it


def render_fleet_alarms(
    nodes: list[FleetNode], alerts: list[Alert], table: BaselineTable, runbook_base: str = DEFAULT_RUNBOOK_BASE
) -> tuple[str, int]:
    """The stack of a fleet's PromQL alarms over its Valkey nodes (both network families, the NetworkAlarms parameter
    choosing one, as in the per-node stacks), and how many it creates at the parameter's default."""
    from exporter.aws.discovery import Node

    from .alarms import desired_alarms

    valkey = [Node(region="", cluster_id=n.cluster_id, node_id="0001", node_type=n.node_type, engine=n.engine, engine_version="") for n in nodes]
    by_name = {alert.name: alert for alert in alerts}
    found: dict[str, FleetAlarm] = {}
    for family in NETWORK_ALARMS:
        desired, _ = desired_alarms(valkey, alerts, table, None, family, "fleet")
        for _, request in desired:
            if "EvaluationCriteria" not in request or request["AlarmName"] in found:
                continue
            alert = by_name[next(tag["Value"] for tag in request["Tags"] if tag["Key"] == ALERT_TAG)]
            criteria = request["EvaluationCriteria"]["PromQLCriteria"]
            found[request["AlarmName"]] = FleetAlarm(
                logical="Fleet" + re.sub(r"[^A-Za-z0-9]", "", request["AlarmName"].removeprefix("elasticache-exporter-")),
                name=request["AlarmName"],
                description=f"[{alert.severity}] {alert.summary} One contributor a node: its id names it. Runbook: {runbook_base}#{alert.runbook}",
                query=criteria["Query"],
                pending=criteria["PendingPeriod"],
                recovery=criteria["RecoveryPeriod"],
                interval=request["EvaluationInterval"],
                network=alert.network_alarms,
            )
    alarms = [found[name] for name in sorted(found)]
    if len(alarms) + SHARED_RESOURCES > MAX_RESOURCES:
        raise RenderError(f"fleet alarms: {len(alarms)} alarms pass CloudFormation's {MAX_RESOURCES} resources of a stack")
    created = sum(1 for alarm in alarms if alarm.network in (None, NETWORK_ALARMS[0]))
    return render("cloudformation-fleet-alarms.yaml.j2", alarms=alarms), created
