"""Render the alert catalog with the baseline table into Prometheus rules and a CloudFormation template.

Python computes every number and expression; the jinja2 templates in ``templates/`` only lay
them out. The same catalog and table always give byte-identical files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

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


ALERT_KEYS = ("name", "severity", "for", "keep_firing_for", "summary", "description", "runbook", "baseline", "prometheus", "cloudwatch")
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
    )


# --- per-node-type figures --------------------------------------------------------------------


def engine_cpu_baseline(table: BaselineTable, node_type: str) -> float:
    node = table.node_types[node_type]
    measured = node.measured.engine_cpu_utilization_p90 if node.measured else None
    return measured if measured else DEFAULT_ENGINE_CPU_PERCENT


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
        rows.append(
            {
                "node_type": node_type,
                "key": node_type,
                "bytes_per_second": levels[100],
                "levels": levels,
                "source": full[1] if full else "",
                "engine_cpu": engine_cpu_baseline(table, node_type),
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
            expr = f"{signal} / on (node_type) group_left (suggested_node_type) {baseline} > {alert.baseline_level / 100:g}"
        elif alert.expr:
            expr = alert.expr
        else:
            continue
        rules.append(
            {
                "alert": alert.name,
                "expr": expr,
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


def mapping_rows(table: BaselineTable) -> list[dict[str, Any]]:
    """Per node type, every threshold the alarms read, converted to the alarm's statistic and period (60 s)."""
    rows = []
    for row in node_type_rows(table):
        if row["host_cpu"] is None:
            continue  # no vCPU count: the host CPU alarm could not be set
        values = {}
        for level in (80, 90):
            values[f"NetworkBytesPerMinute{level}"] = row["levels"][level] * 60  # Sum over 60 s = bytes per minute
            values[f"EngineCpuPercent{level}"] = round(row["engine_cpu"] * level / 100, 2)
        values["HostCpuPercent"] = row["host_cpu"]
        rows.append({"key": row["key"], "values": values})
    return rows


def cloudformation_context(alerts: list[Alert], table: BaselineTable, runbook_base: str) -> dict[str, Any]:
    alarms = []
    for alert in alerts:
        cw = alert.cloudwatch
        if not cw:
            continue
        key = alarm_threshold_key(alert)
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
                "description": json.dumps(f"[{alert.severity}] {alert.summary} Runbook: {runbook_base}#{alert.runbook}"),
            }
        )
        if key is None and cw.get("threshold") is None:
            raise RenderError(f"catalog: alert {alert.name}: cloudwatch needs a threshold or a baseline")
    rows = mapping_rows(table)
    check_mapping(rows, [a["threshold_key"] for a in alarms if a["threshold_key"]])
    return {"node_types": [row["key"] for row in rows], "mapping": rows, "alarms": alarms}


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


def render_cloudformation(alerts: list[Alert], table: BaselineTable, runbook_base: str = DEFAULT_RUNBOOK_BASE) -> str:
    environment = _environment()
    environment.filters["q"] = yaml_string
    return environment.get_template("cloudformation.yaml.j2").render(**cloudformation_context(alerts, table, runbook_base))
