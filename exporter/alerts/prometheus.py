"""The catalog as Prometheus alerting rules: baseline alerts become joins on the node type's recording rules."""

from __future__ import annotations

from exporter.baselines.table import BaselineTable
from exporter.common.records import record

from .catalog import DEFAULT_RUNBOOK_BASE, SIGNALS, Alert, guarded
from .templating import render
from .thresholds import COMMAND_CLASSES, ENGINE_CPU_FLOOR_PERCENT, command_latency_baselines, node_type_thresholds


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


# what an alert's series share with elasticache_node_info, by the guard its expression has
_NODE_JOIN = {"redis": "instance", "utilization": "instance", "cloudwatch": "account_id, region, dimension_CacheClusterId, dimension_CacheNodeId"}


def with_tags(expr: str, guard: str, tags: tuple[str, ...]) -> str:
    """The expression with the node's ``tag_*`` labels joined in from elasticache_node_info (discovered nodes); a node
    without it (a configured target outside discovery) still alerts, untagged."""
    on = _NODE_JOIN.get(guard)
    if not tags or on is None:
        return expr
    return f"({expr}) * on ({on}) group_left ({', '.join(tags)}) elasticache_node_info or on ({on}) ({expr})"


def rules(alerts: list[Alert], runbook_base: str = DEFAULT_RUNBOOK_BASE, tags: tuple[str, ...] = ()) -> list[Rule]:
    result = []
    for alert in alerts:
        expr = expression(alert)
        if expr is not None:
            expr = with_tags(expr, alert.guard, tags)
            result.append(
                Rule(
                    alert.name,
                    expr,
                    alert.duration,
                    alert.keep_firing_for,
                    alert.severity,
                    alert.summary,
                    alert.description,
                    f"{runbook_base}#{alert.runbook}",
                )
            )
    return result


def as_prometheus_rule(rules_text: str, name: str = "elasticache-exporter") -> str:
    """The rule file as a Prometheus Operator ``PrometheusRule``: its groups, as they are, under ``spec``."""
    lines = rules_text.splitlines()
    body = [line for line in lines if not line.startswith("#")]
    head = [
        "# The Prometheus rules of elasticache-exporter as a Prometheus Operator PrometheusRule, rendered by",
        "# `elasticache-exporter render prometheus-operator`. Do not edit: change the catalog or the table.",
        "apiVersion: monitoring.coreos.com/v1",
        "kind: PrometheusRule",
        "metadata:",
        f"  name: {name}",
        "  labels:",
        "    app.kubernetes.io/name: elasticache-exporter",
        "spec:",
    ]
    return "\n".join([*head, *(f"  {line}" if line else "" for line in body)]) + "\n"


def render_prometheus(
    alerts: list[Alert],
    table: BaselineTable,
    runbook_base: str = DEFAULT_RUNBOOK_BASE,
    tags: tuple[str, ...] = (),
    hit_rate: tuple[float, float] | None = None,
) -> str:
    """``tags``: ``tag_*`` labels (aws.export_tags) each node's alert carries, for Alertmanager routes; ``hit_rate``: the
    lowest hit ratio and the miss rate (per second) above which a lower one alerts (RedisCacheHitRateLow, opt-in)."""
    return render(
        "prometheus.rules.yml.j2",
        node_types=node_type_thresholds(table),
        latency=command_latency_baselines(table),
        command_classes={name: "|".join(commands) for name, (_, commands) in COMMAND_CLASSES.items()},
        hit_rate=hit_rate,
        rules=rules(alerts, runbook_base, tags),
        basis=table.basis,
    )
