"""The catalog as Prometheus alerting rules: baseline alerts become joins on the node type's recording rules."""

from __future__ import annotations

from exporter.baselines.table import BaselineTable
from exporter.common.records import record

from .catalog import (
    DEFAULT_EXPORTER_JOB,
    DEFAULT_RUNBOOK_BASE,
    DEFAULT_SOURCE,
    EXPORTER_JOB,
    SIGNALS,
    SOURCE_LABEL,
    Alert,
    checked_exporter_job,
    checked_source,
    guarded,
    one_source,
)
from .inhibitions import JOINED_LABELS
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
    source: str = DEFAULT_SOURCE  # the value of SOURCE_LABEL


def expression(alert: Alert) -> str | None:
    """The alert's PromQL, guarded against stale data; None for a CloudWatch-only alert."""
    if alert.baseline is not None:
        signal, baseline = SIGNALS[alert.baseline.signal]
        expr = f"{signal} / on (node_type) group_left (suggested_node_type, baseline) {baseline} > {alert.baseline.level / 100:g}"
        if alert.baseline.signal == "engine_cpu":
            expr = f"{expr} and on (instance, source) {signal} > {ENGINE_CPU_FLOOR_PERCENT:g}"
    elif alert.arms:
        return " ".join(alert.expr.split()) if alert.expr else None  # each arm carries its own guard
    elif alert.expr:
        expr = alert.expr
    else:
        return None
    return guarded(one_source(" ".join(expr.split())), alert.guard)


# what an alert's series share with elasticache_node_info, by the guard its expression has
NODE_NAMES = ("instance", "replication_group", "shard")  # how every alert about a node names it
_NODE_JOIN = {"redis": "instance", "utilization": "instance", "cloudwatch": "account_id, region, dimension_CacheClusterId, dimension_CacheNodeId"}

# the shard each node is in, with where its name comes from (shard_source): as the exporter serves it, which for a node
# that is down is the shard it is configured or discovered in or last answered in (so an alert joined with it keeps its
# labels for as long as the outage lasts); else as it was served in the last 10 minutes, which bridges an exporter that
# restarted while the node was down and learns its shard from the node itself; one per node (after a failover its
# replication-id shard may have changed: one of them is kept)
SHARD_MEMBERSHIP = "elasticache:shard_membership"
SHARD_MEMBERSHIP_EXPR = (
    "max by (instance, replication_group, shard, shard_source) (elasticache_shard_member_info) or on (instance) topk by (instance) "
    "(1, max by (instance, replication_group, shard, shard_source) (last_over_time(elasticache_shard_member_info[10m])))"
)


@record(frozen=True)
class Recorded:
    """A series the rendered rules record, and when they do (docs/metrics.md lists them, with the alerts that read them)."""

    name: str
    labels: str
    meaning: str
    armed_by: str = ""  # how to have it recorded, where the shipped rules do not
    inert_without: tuple[str, ...] = ()  # the alerts that cannot fire until it is recorded


RECORDED = (
    Recorded("elasticache:baseline_network_bytes_per_second", "`node_type`, `baseline`, `suggested_node_type`",
             "the node type's bandwidth baseline (bytes/s) from the baseline table"),
    Recorded("elasticache:baseline_engine_cpu_percent", "`node_type`, `baseline`, `suggested_node_type`",
             "the node type's engine-CPU baseline (percent of a core) from the baseline table"),
    Recorded("elasticache:host_cpu_threshold_percent", "`node_type`", "the node type's host CPU threshold, where its vCPUs are known"),
    Recorded("elasticache:command_p99_seconds", "`instance`, `cmd`, `command_class`",
             "a command's p99 latency over 5 minutes, from `redis_commands_latencies_usec`"),
    Recorded("elasticache:baseline_command_p99_seconds", "`node_type`, `command_class`",
             "the p99 the node type showed under benchmark load (median of the table's figures of GET or SET)",
             "a baseline table with benchmark `latency:` for the node type (the shipped table has none): "
             "`elasticache-exporter benchmark --table-out` or `baseline derive --from <redis-benchmark or memtier output> --out`, "
             "then `render prometheus --baselines <that table>`",
             ("RedisCommandLatencyAboveBenchmark",)),
    Recorded("elasticache:hit_ratio_min", "none", "the hit ratio below which RedisCacheHitRateLow fires",
             "`render prometheus --hit-ratio 0.8 --min-miss-rate 100` (your ratio and misses per second)", ("RedisCacheHitRateLow",)),
    Recorded("elasticache:miss_rate_min", "none", "the misses per second above which a low hit ratio counts",
             "`render prometheus --hit-ratio 0.8 --min-miss-rate 100`", ("RedisCacheHitRateLow",)),
    Recorded(SHARD_MEMBERSHIP, "`instance`, `replication_group`, `shard`, `shard_source`",
             "the shard each node is in, as served (a down node's too), else as served in the last 10 minutes (an "
             "exporter that restarted meanwhile)"),
)  # fmt: skip


def _joined(expr: str, on: str, labels: tuple[str, ...], right: str) -> str:
    """``labels`` joined into the expression from ``right`` on ``on``; a series without a match keeps alerting, without them.
    A label joined that the series has already (a CloudWatch series' ``instance``: the exporter's) is taken off first, so
    that exporter replicas serving the same series make one alert, not two of the same labels."""
    left = f"max without (instance) ({expr})" if "instance" in labels else f"({expr})"
    return f"{left} * on ({on}) group_left ({', '.join(labels)}) {right} or on ({on}) ({expr})"


def with_joins(expr: str, guard: str, joins: tuple[str, ...], tags: tuple[str, ...]) -> str:
    """The expression with the labels its inhibitions match joined in (``join``: inhibitions.JOINS), and the node's
    ``tag_*`` labels (discovered nodes); a node that discovery does not know still alerts, without them."""
    if "shard" in joins:
        expr = _joined(expr, "instance", JOINED_LABELS["shard"], SHARD_MEMBERSHIP)
    on = _NODE_JOIN.get(guard, "instance" if "node" in joins else None)
    if on is None:
        return expr
    keys = on.split(", ")
    # an alert computed from CloudWatch alone names its node as the Redis side does: instance, group and shard
    named = NODE_NAMES if guard == "cloudwatch" else ()
    wanted = (*named, *(JOINED_LABELS["node"] if "node" in joins else ()), *tags)
    labels = tuple(label for label in dict.fromkeys(wanted) if label not in keys)
    if not labels:
        return expr
    # one per node whatever other labels its scrape adds (exporter replicas), and one of its names while two exporters
    # disagree for a discovery interval (a node renamed as a cluster of its id comes or goes): never many-to-many
    right = f"topk by ({on}) (1, max by ({on}, {', '.join(labels)}) (elasticache_node_info))"
    return _joined(expr, on, labels, right)


def rules(
    alerts: list[Alert],
    runbook_base: str = DEFAULT_RUNBOOK_BASE,
    tags: tuple[str, ...] = (),
    source: str = DEFAULT_SOURCE,
    exporter_job: str = DEFAULT_EXPORTER_JOB,
) -> list[Rule]:
    """``source``: the value of :data:`SOURCE_LABEL` on every alert; ``exporter_job``: the regex of the jobs that scrape
    the exporter itself (the alerts about the exporter read ``up`` and its own series of those jobs)."""
    source, exporter_job = checked_source(source), checked_exporter_job(exporter_job)
    result = []
    for alert in alerts:
        expr = expression(alert)
        if expr is not None:
            expr = with_joins(expr.replace(EXPORTER_JOB, exporter_job), alert.guard, alert.join, tags)
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
                    source,
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
    source: str = DEFAULT_SOURCE,
    exporter_job: str = DEFAULT_EXPORTER_JOB,
) -> str:
    """``tags``: ``tag_*`` labels (aws.export_tags) each node's alert carries, for Alertmanager routes; ``hit_rate``: the
    lowest hit ratio and the miss rate (per second) above which a lower one alerts (RedisCacheHitRateLow, opt-in);
    ``source`` and ``exporter_job``: as :func:`rules` takes them."""
    return render(
        "prometheus.rules.yml.j2",
        node_types=node_type_thresholds(table),
        latency=command_latency_baselines(table),
        command_classes={name: "|".join(commands) for name, (_, commands) in COMMAND_CLASSES.items()},
        hit_rate=hit_rate,
        shard_membership=SHARD_MEMBERSHIP,
        shard_membership_expr=SHARD_MEMBERSHIP_EXPR,
        rules=rules(alerts, runbook_base, tags, source, exporter_job),
        source_label=SOURCE_LABEL,
        basis=table.basis,
    )
