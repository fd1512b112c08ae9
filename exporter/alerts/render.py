"""Render the alert catalog with the baseline table into Prometheus rules and a CloudFormation template.

Python computes every number and expression; the jinja2 templates in ``templates/`` only lay
them out. The same catalog and table always give byte-identical files.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from exporter.aws.cloudwatch import FRESH_SECONDS
from exporter.baselines.table import BaselineError, BaselineTable
from exporter.common.errors import ExporterError
from exporter.common.schema import check_known_keys
from exporter.common.yamlfile import read_yaml

FORMAT = "elasticache-exporter-alerts"
SIGNALS = {
    "network_out": ("elasticache_network_bytes_per_second{direction=\"out\"}", "elasticache:baseline_network_bytes_per_second"),
    "network_in": ("elasticache_network_bytes_per_second{direction=\"in\"}", "elasticache:baseline_network_bytes_per_second"),
    "engine_cpu": ("elasticache_engine_cpu_utilization_percent", "elasticache:baseline_engine_cpu_percent"),
}
DEFAULT_ENGINE_CPU_PERCENT = 90.0  # where no benchmark measured the engine CPU: AWS's 90 % of a core
ENGINE_CPU_FLOOR_PERCENT = 65.0  # no engine-CPU warning below this: at 65 % of a core queueing stays under 2x service time
GUARDS = ("none", "redis", "utilization", "cloudwatch", "fresh")
CLOUDWATCH_SERIES = re.compile(r"\baws_elasticache_[a-z0-9_]+")
UTILIZATION_SERIES = re.compile(r"\belasticache_(network_bytes_per_second|network_utilization_ratio|engine_cpu_utilization_(percent|ratio))\b")
# a node's series have the first four, a serverless cache's the account, region and clusterId: the guard matches both
CLOUDWATCH_DIMENSIONS = "account_id, region, dimension_CacheClusterId, dimension_CacheNodeId, dimension_clusterId"
SERVED_WHILE_FRESH = re.compile(r"\belasticache_serverless_[a-z_]+_utilization_ratio\b")
BASELINE_NAMES = {"measured": "benchmarked", "published": "published"}
HOST_CPU_PERCENT = 90.0  # AWS: alarm CPUUtilization at 90 % divided by the vCPUs
SUGGESTION_FAMILIES = ("r7g", "r6g", "m7g", "m6g", "r5", "m5")  # current families, Graviton first
DEFAULT_RUNBOOK_BASE = "docs/runbooks.md"


class RenderError(ExporterError):
    exit_code = 2


@dataclass(frozen=True)
class Alert:
    name: str
    severity: str
    duration: str
    keep_firing_for: str | None
    summary: str
    description: str
    runbook: str
    expr: str | None
    baseline_signal: str | None
    baseline_level: int | None
    cloudwatch: dict[str, Any] | None
    guard: str = "none"


# --- the catalog -----------------------------------------------------------------------------


def default_catalog_path() -> Path:
    return Path(str(resources.files("exporter.rules") / "catalog.yml"))


def load_catalog(path: str | Path | None = None) -> list[Alert]:
    path = Path(path) if path else default_catalog_path()
    data = read_yaml(path, RenderError)
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("alerts"), list):
        raise RenderError(f"{path}: not an alert catalog (expected 'format: {FORMAT}' and a list 'alerts')")
    check_known_keys(data, ("format", "version", "alerts"), f"{path}:", RenderError)
    alerts, names = [], set()
    for index, item in enumerate(data["alerts"]):
        alert = _alert(item, f"{path}: alerts[{index}]")
        if alert.name in names:
            raise RenderError(f"{path}: alerts[{index}]: the name {alert.name} is used twice")
        names.add(alert.name)
        alerts.append(alert)
    return alerts


ALERT_KEYS = ("name", "severity", "for", "keep_firing_for", "summary", "description", "runbook", "guard", "baseline", "prometheus", "cloudwatch")
CLOUDWATCH_KEYS = ("metric", "statistic", "period", "evaluation_periods", "comparison", "threshold", "unit", "increase", "per_node_type")


def _alert(item: Any, where: str) -> Alert:
    if not isinstance(item, dict):
        raise RenderError(f"{where}: must be a mapping")
    check_known_keys(item, ALERT_KEYS, where, RenderError)
    for part, keys in (("baseline", ("signal", "level")), ("prometheus", ("expr",)), ("cloudwatch", CLOUDWATCH_KEYS)):
        if item.get(part) is not None:
            if not isinstance(item[part], dict):
                raise RenderError(f"{where}.{part}: must be a mapping")
            check_known_keys(item[part], keys, f"{where}.{part}", RenderError)
    for key in ("name", "severity", "for", "summary", "description", "runbook"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise RenderError(f"{where}: '{key}' must be a non-empty string")
    if item["severity"] not in ("critical", "warning", "info"):
        raise RenderError(f"{where}: severity must be critical, warning or info")
    baseline = item.get("baseline")
    expr = (item.get("prometheus") or {}).get("expr")
    if baseline is not None:
        if baseline.get("signal") not in SIGNALS or baseline.get("level") not in (80, 90, 100):
            raise RenderError(f"{where}: baseline needs a signal ({', '.join(SIGNALS)}) and a level (80, 90 or 100)")
    elif not expr and not item.get("cloudwatch"):
        raise RenderError(f"{where}: needs prometheus.expr, a baseline or cloudwatch")
    guard = item.get("guard")
    if guard is not None and guard != "none":
        raise RenderError(f"{where}.guard: only 'none' may be set (the guard is chosen from what the expression reads)")
    guard = guard or _guard_for(expr, baseline is not None)
    if item.get("keep_firing_for") and guard != "none":
        raise RenderError(
            f"{where}.keep_firing_for: would keep the alert firing from old values after its data stopped; widen the expression's window"
        )
    return Alert(
        name=item["name"],
        severity=item["severity"],
        duration=item["for"],
        keep_firing_for=item.get("keep_firing_for"),
        summary=item["summary"],
        description=" ".join(item["description"].split()),
        runbook=item["runbook"],
        expr=expr,
        baseline_signal=baseline["signal"] if baseline else None,
        baseline_level=baseline["level"] if baseline else None,
        cloudwatch=item.get("cloudwatch"),
        guard=guard,
    )


def _guard_for(expr: str | None, baseline: bool) -> str:
    if expr and SERVED_WHILE_FRESH.search(expr) and not (CLOUDWATCH_SERIES.search(expr) or "redis_" in expr):
        return "fresh"
    if baseline or (expr and UTILIZATION_SERIES.search(expr)):
        return "utilization"
    if expr and CLOUDWATCH_SERIES.search(expr):
        return "cloudwatch"
    return "redis"


def guarded(expr: str, guard: str) -> str:
    """The expression, silent when its data is stale: its target is down, or its CloudWatch datapoint is old. A "fresh"
    expression reads only series the exporter drops once their data is old, so it needs no guard."""
    if guard == "redis":
        return f"({expr}) and on (instance) (redis_up == 1)"
    if guard == "utilization":
        return f"({expr}) unless on (instance) (redis_up == 0)"
    if guard == "cloudwatch":
        metric = CLOUDWATCH_SERIES.search(expr)
        assert metric is not None
        fresh = f'time() - elasticache_cloudwatch_datapoint_timestamp_seconds{{metric="{metric.group(0)}"}} < {FRESH_SECONDS}'
        return f"({expr}) and on ({CLOUDWATCH_DIMENSIONS}) ({fresh})"
    return expr


# --- per-node-type figures --------------------------------------------------------------------


def engine_cpu_baseline(table: BaselineTable, node_type: str) -> tuple[float, str]:
    """The engine CPU the node type showed at its benchmarked bandwidth, or AWS's 90 % of a core; and which."""
    node = table.node_types[node_type]
    measured = node.measured.engine_cpu_utilization_p90 if node.measured else None
    return (measured, "benchmarked") if measured else (DEFAULT_ENGINE_CPU_PERCENT, "aws-guidance")


def engine_cpu_threshold(baseline_percent: float, level: int) -> float:
    return round(max(baseline_percent * level / 100, ENGINE_CPU_FLOOR_PERCENT), 2)


def host_cpu_threshold(table: BaselineTable, node_type: str) -> float | None:
    vcpus = table.node_types[node_type].vcpus
    return round(HOST_CPU_PERCENT / vcpus, 2) if vcpus else None


def suggested_node_type(table: BaselineTable, node_type: str) -> str:
    """The smallest current node type (Graviton first) whose baseline carries this type's full baseline at 80 %."""
    own = table.node_types[node_type]
    own_levels = own.levels(table.basis)
    if not own_levels:
        return "a larger node type"
    needed = own_levels[100] / 0.8
    own_class = node_type.split(".")[1][0] if "." in node_type else ""
    own_class = "m" if own_class == "t" else own_class  # burstable types grow into general purpose ones
    candidates = []
    for name, node in table.node_types.items():
        parts = name.split(".")
        if len(parts) != 3 or parts[1] not in SUGGESTION_FAMILIES:
            continue
        levels = node.levels(table.basis)
        if not levels or levels[100] < needed:
            continue
        graviton = parts[1].endswith("g")
        candidates.append((parts[1][0] != own_class, levels[100], not graviton, SUGGESTION_FAMILIES.index(parts[1]), name))
    return min(candidates)[-1] if candidates else "more shards (no larger node type in the table)"


def node_type_rows(table: BaselineTable) -> list[dict[str, Any]]:
    rows = []
    for node_type in sorted(table.node_types):
        node = table.node_types[node_type]
        levels = node.levels(table.basis)
        if not levels:
            continue
        full = node.full_bandwidth(table.basis)
        engine_cpu, engine_source = engine_cpu_baseline(table, node_type)
        rows.append(
            {
                "node_type": node_type,
                "key": node_type,
                "bytes_per_second": levels[100],
                "levels": levels,
                "baseline": BASELINE_NAMES[full[1]] if full else "",
                "engine_cpu": engine_cpu,
                "engine_baseline": engine_source,
                "host_cpu": host_cpu_threshold(table, node_type),
                "suggested": suggested_node_type(table, node_type),
            }
        )
    if not rows:
        raise BaselineError(f"{table.source}: no node type has a bandwidth figure")
    return rows


# --- Prometheus ----------------------------------------------------------------------------------


def prometheus_context(alerts: list[Alert], table: BaselineTable, runbook_base: str) -> dict[str, Any]:
    rules = []
    for alert in alerts:
        if alert.baseline_signal:
            signal, baseline = SIGNALS[alert.baseline_signal]
            expr = f"{signal} / on (node_type) group_left (suggested_node_type, baseline) {baseline} > {alert.baseline_level / 100:g}"
            if alert.baseline_signal == "engine_cpu":
                expr = f"{expr} and on (instance, source) {signal} > {ENGINE_CPU_FLOOR_PERCENT:g}"
        elif alert.expr:
            expr = alert.expr
        else:
            continue
        rules.append(
            {
                "alert": alert.name,
                "expr": guarded(" ".join(expr.split()), alert.guard),
                "for": alert.duration,
                "keep_firing_for": alert.keep_firing_for,
                "severity": alert.severity,
                "summary": alert.summary,
                "description": alert.description,
                "runbook_url": f"{runbook_base}#{alert.runbook}",
            }
        )
    return {"node_types": node_type_rows(table), "rules": rules, "basis": table.basis}


# --- CloudFormation --------------------------------------------------------------------------------


def alarm_threshold_key(alert: Alert) -> str | None:
    """The Mappings attribute (second-level key) of a baseline alarm, or None for a fixed threshold."""
    if alert.baseline_signal in ("network_out", "network_in"):
        return f"NetworkBytesPerMinute{alert.baseline_level}"
    if alert.baseline_signal == "engine_cpu":
        return f"EngineCpuPercent{alert.baseline_level}"
    if alert.cloudwatch and alert.cloudwatch.get("per_node_type") == "host_cpu":
        return "HostCpuPercent"
    return None


NO_BASELINE = "none"  # the CacheNodeType of nodes whose type has no baseline: fixed-threshold alarms only
MAX_RESOURCES = 500  # CloudFormation's limit per stack
BASELINE_KEYS = {"network_out": "NetworkBaseline", "network_in": "NetworkBaseline", "engine_cpu": "EngineCpuBaseline"}


def mapping_rows(table: BaselineTable) -> list[dict[str, Any]]:
    """Per node type, every threshold the alarms read, converted to the alarm's statistic and period (60 s)."""
    rows = []
    for row in node_type_rows(table):
        if row["host_cpu"] is None:
            continue  # no vCPU count: the host CPU alarm could not be set
        values: dict[str, Any] = {}
        for level in (80, 90):
            values[f"NetworkBytesPerMinute{level}"] = row["levels"][level] * 60  # Sum over 60 s = bytes per minute
        values["NetworkBaseline"] = row["baseline"]
        values["EngineCpuPercent90"] = engine_cpu_threshold(row["engine_cpu"], 90)
        values["EngineCpuBaseline"] = row["engine_baseline"]
        values["HostCpuPercent"] = row["host_cpu"]
        rows.append({"key": row["key"], "values": values})
    return rows


def threshold_text(alert: Alert) -> str | None:
    """What a baseline alarm's threshold is, in a CloudFormation !Sub string (${Baseline}, ${CacheNodeType})."""
    if alert.baseline_signal in ("network_out", "network_in"):
        return f"Threshold: {alert.baseline_level} % of the ${{Baseline}} baseline bandwidth of ${{CacheNodeType}}."
    if alert.baseline_signal == "engine_cpu":
        return (
            f"Threshold: {alert.baseline_level} % of the ${{Baseline}} engine CPU of ${{CacheNodeType}} at its baseline bandwidth, "
            f"and at least {ENGINE_CPU_FLOOR_PERCENT:g} % of a core."
        )
    if alert.cloudwatch and alert.cloudwatch.get("per_node_type") == "host_cpu":
        return "Threshold: 90 % divided by the vCPUs of ${CacheNodeType}."
    return None


def cloudformation_alarms(alerts: list[Alert], runbook_base: str) -> list[dict[str, Any]]:
    alarms = []
    for alert in alerts:
        cw = alert.cloudwatch
        if not cw:
            continue
        key = alarm_threshold_key(alert)
        if key is None and cw.get("threshold") is None:
            raise RenderError(f"catalog: alert {alert.name}: cloudwatch needs a threshold or a baseline")
        text = threshold_text(alert)
        description = f"[{alert.severity}] {alert.summary}" + (f" {text}" if text else "") + f" Runbook: {runbook_base}#{alert.runbook}"
        alarms.append(
            {
                "name": alert.name,
                "logical": alert.name.removeprefix("ElastiCache").removeprefix("Redis"),
                "metric": cw["metric"],
                "statistic": cw["statistic"],
                "period": int(cw.get("period", 60)),
                "evaluation_periods": int(cw.get("evaluation_periods", 5)),
                "comparison": cw.get("comparison", "GreaterThanThreshold"),
                "threshold_key": key,
                "threshold": None if key else cw.get("threshold"),
                "increase": bool(cw.get("increase", False)),
                "unit": cw.get("unit"),
                "description": json.dumps(description),
                "baseline_key": BASELINE_KEYS.get(alert.baseline_signal or ""),
                "sub": "${" in description,
            }
        )
    return alarms


def cloudformation_context(
    alerts: list[Alert], table: BaselineTable, runbook_base: str, fleet: dict[str, Any] | None = None
) -> dict[str, Any]:
    alarms = cloudformation_alarms(alerts, runbook_base)
    rows = mapping_rows(table)
    check_mapping(rows, [a["threshold_key"] for a in alarms if a["threshold_key"]])
    if fleet is not None:
        rows = [row for row in rows if row["key"] == fleet["node_type"]]
        if fleet["node_type"] == NO_BASELINE:
            alarms = [alarm for alarm in alarms if not alarm["threshold_key"]]
    return {
        "node_types": [row["key"] for row in rows],
        "mapping": rows,
        "alarms": alarms,
        "fleet": fleet,
        "no_baseline": NO_BASELINE,
        "max_nodes": (MAX_RESOURCES - 1) // max(1, len(alarms)),
    }


def check_mapping(rows: list[dict[str, Any]], keys: list[str]) -> None:
    """What cfn-lint does not check: every node type has every key the alarms read, and every value is a number."""
    for row in rows:
        for key in keys:
            value = row["values"].get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise RenderError(f"mapping: node type {row['key']} has no numeric {key}")


# --- output ------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("exporter.templates", ""),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # noqa: S701 - YAML output, values are quoted by the |yaml_string filter
    )


def yaml_string(value: Any) -> str:
    """A YAML double-quoted scalar (JSON's escaping is valid YAML)."""
    return json.dumps(str(value), ensure_ascii=False)


def render_prometheus(alerts: list[Alert], table: BaselineTable, runbook_base: str = DEFAULT_RUNBOOK_BASE) -> str:
    environment = _environment()
    environment.filters["q"] = yaml_string
    return environment.get_template("prometheus.rules.yml.j2").render(**prometheus_context(alerts, table, runbook_base))


def render_cloudformation(
    alerts: list[Alert], table: BaselineTable, runbook_base: str = DEFAULT_RUNBOOK_BASE, fleet: dict[str, Any] | None = None
) -> str:
    environment = _environment()
    environment.filters["q"] = yaml_string
    return environment.get_template("cloudformation.yaml.j2").render(**cloudformation_context(alerts, table, runbook_base, fleet))


# --- a fleet: one stack per node type and chunk, each under the resource limit ----------------------


@dataclass(frozen=True)
class FleetNode:
    cluster_id: str
    node_type: str


def load_fleet(path: str | Path) -> list[FleetNode]:
    """``nodes: [{cluster_id: orders-0001-001, node_type: cache.r6g.large}, ...]`` (node_type may be empty)."""
    data = read_yaml(Path(path), RenderError)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise RenderError(f"{path}: not a fleet (expected a list 'nodes' of cluster_id and node_type)")
    check_known_keys(data, ("nodes",), f"{path}:", RenderError)
    nodes, seen = [], set()
    for index, item in enumerate(data["nodes"]):
        where = f"{path}: nodes[{index}]"
        if not isinstance(item, dict):
            raise RenderError(f"{where}: must be a mapping with cluster_id and node_type")
        check_known_keys(item, ("cluster_id", "node_type"), where, RenderError)
        cluster_id, node_type = item.get("cluster_id"), item.get("node_type") or ""
        if not isinstance(cluster_id, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,49}", cluster_id):
            raise RenderError(f"{where}.cluster_id: not a CacheClusterId (letters, digits and hyphens, at most 50): {cluster_id!r}")
        if not isinstance(node_type, str):
            raise RenderError(f"{where}.node_type: must be a string such as cache.r6g.large")
        if cluster_id in seen:
            raise RenderError(f"{where}.cluster_id: {cluster_id} is listed twice")
        seen.add(cluster_id)
        nodes.append(FleetNode(cluster_id, node_type))
    return nodes


def fleet_stacks(nodes: list[FleetNode], alerts: list[Alert], table: BaselineTable) -> tuple[list[dict[str, Any]], list[str]]:
    """The stacks of a fleet: per node type (``none`` for types without a baseline), chunks of nodes small enough
    that a stack holds at most MAX_RESOURCES resources; and one line per node type whose baseline alarms are skipped."""
    known = {row["key"] for row in mapping_rows(table)}
    per_node_all = sum(1 for alert in alerts if alert.cloudwatch)
    per_node_fixed = sum(1 for alert in alerts if alert.cloudwatch and alarm_threshold_key(alert) is None)
    groups: dict[str, list[str]] = {}
    skipped: dict[str, list[str]] = {}
    for node in sorted(nodes, key=lambda n: (n.node_type, n.cluster_id)):
        node_type = node.node_type if node.node_type in known else NO_BASELINE
        if node_type == NO_BASELINE:
            skipped.setdefault(node.node_type or "(unknown)", []).append(node.cluster_id)
        groups.setdefault(node_type, []).append(node.cluster_id)
    stacks = []
    for node_type, ids in sorted(groups.items()):
        per_node = per_node_fixed if node_type == NO_BASELINE else per_node_all
        most = max(1, (MAX_RESOURCES - 1) // max(1, per_node))  # one resource is the SNS topic
        chunks = -(-len(ids) // most)
        size = -(-len(ids) // chunks)  # stacks of even size
        for start in range(0, len(ids), size):
            stacks.append({"node_type": node_type, "ids": ids[start : start + size], "alarms_per_node": per_node})
    notes = [
        f"node type {node_type} has no baseline: {len(ids)} node(s) get the fixed-threshold alarms only ({', '.join(ids[:5])}"
        + (", ..." if len(ids) > 5 else "")
        + ")"
        for node_type, ids in sorted(skipped.items())
    ]
    return stacks, notes
