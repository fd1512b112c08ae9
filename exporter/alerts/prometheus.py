"""The catalog as Prometheus alerting rules: baseline alerts become joins on the node type's recording rules."""

from __future__ import annotations

from exporter.baselines.table import BaselineTable
from exporter.common.records import record

from .catalog import DEFAULT_RUNBOOK_BASE, SIGNALS, Alert, guarded
from .templating import render
from .thresholds import ENGINE_CPU_FLOOR_PERCENT, node_type_thresholds


@record(frozen=True)
class Rule:
    alert: str
    expr: str
    duration: str
    keep_firing_for: str | None
    severity: str
    summary: str
    description: str
    runbook_url: str


def expression(alert: Alert) -> str | None:
    """The alert's PromQL, guarded against stale data; None for a CloudWatch-only alert."""
    if alert.baseline is not None:
        signal, baseline = SIGNALS[alert.baseline.signal]
        expr = f"{signal} / on (node_type) group_left (suggested_node_type, baseline) {baseline} > {alert.baseline.level / 100:g}"
        if alert.baseline.signal == "engine_cpu":
            expr = f"{expr} and on (instance, source) {signal} > {ENGINE_CPU_FLOOR_PERCENT:g}"
    elif alert.expr:
        expr = alert.expr
    else:
        return None
    return guarded(" ".join(expr.split()), alert.guard)


def rules(alerts: list[Alert], runbook_base: str = DEFAULT_RUNBOOK_BASE) -> list[Rule]:
    result = []
    for alert in alerts:
        expr = expression(alert)
        if expr is not None:
            result.append(Rule(alert.name, expr, alert.duration, alert.keep_firing_for, alert.severity, alert.summary, alert.description,
                               f"{runbook_base}#{alert.runbook}"))  # fmt: skip
    return result


def render_prometheus(alerts: list[Alert], table: BaselineTable, runbook_base: str = DEFAULT_RUNBOOK_BASE) -> str:
    return render("prometheus.rules.yml.j2", node_types=node_type_thresholds(table), rules=rules(alerts, runbook_base), basis=table.basis)
