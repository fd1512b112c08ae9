"""The alert commands: ``render prometheus|prometheus-operator|cloudformation|alertmanager`` from the catalog and the baseline table."""

from __future__ import annotations

import argparse
import sys
from typing import Any

RENDERED_FILES = {
    "prometheus": "elasticache-exporter.rules.yml",
    "prometheus-operator": "elasticache-exporter.prometheusrule.yaml",
    "cloudformation": "elasticache-alarms.yaml",
    "alertmanager": "elasticache-exporter.alertmanager.yml",
}
ALERTMANAGER_CONFIG_FILE = "elasticache-exporter.alertmanagerconfig.yaml"  # beside the PrometheusRule


def run_render(args: argparse.Namespace) -> int:
    from pathlib import Path

    from exporter.alerts.catalog import load_catalog
    from exporter.baselines.table import load_table
    from exporter.common.files import write_atomically

    table = load_table(args.baselines, args.basis)
    alerts = load_catalog(args.catalog)
    if args.fleet:
        return _render_fleet(args, alerts, table)
    files = _rendered(args, alerts, table)
    _say_skipped_types(args.what, table)
    if args.out:
        directory = Path(args.out)
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            write_atomically(directory / name, text)
    else:
        sys.stdout.write("---\n".join(files.values()))
    return 0


def _hit_rate(args: argparse.Namespace) -> tuple[float, float] | None:
    from exporter.common.errors import UsageError

    if (args.hit_ratio is None) != (args.min_miss_rate is None):
        raise UsageError("--hit-ratio and --min-miss-rate go together (RedisCacheHitRateLow needs both)")
    if args.hit_ratio is None:
        return None
    if args.what not in ("prometheus", "prometheus-operator"):
        raise UsageError("--hit-ratio: only the Prometheus rules have RedisCacheHitRateLow")
    if not 0 < args.hit_ratio < 1 or args.min_miss_rate < 0:
        raise UsageError(f"--hit-ratio: a ratio between 0 and 1, and --min-miss-rate not negative, got {args.hit_ratio} and {args.min_miss_rate}")
    return (args.hit_ratio, args.min_miss_rate)


def _rendered(args: argparse.Namespace, alerts: list[Any], table: Any) -> dict[str, str]:
    """The files ``what`` names, by file name (``prometheus-operator``: the PrometheusRule and the AlertmanagerConfig)."""
    from exporter.alerts.alertmanager import render_alertmanager, render_alertmanager_config
    from exporter.alerts.cloudformation import render_cloudformation
    from exporter.alerts.prometheus import as_prometheus_rule, render_prometheus
    from exporter.common.errors import UsageError

    tags = tag_labels([key.strip() for key in args.tags.split(",") if key.strip()])
    if tags and args.what == "cloudformation":
        raise UsageError("--tags: only the Prometheus rules and Alertmanager's routes take tags (a CloudWatch alarm has no labels)")
    hit_rate = _hit_rate(args)
    if args.what == "cloudformation":
        return {RENDERED_FILES["cloudformation"]: render_cloudformation(alerts, table, runbook_base(args))}
    if args.what == "alertmanager":
        return {RENDERED_FILES["alertmanager"]: render_alertmanager(alerts, tags, args.alert_source)}
    rules = render_prometheus(alerts, table, runbook_base(args), tags, hit_rate, args.alert_source, args.exporter_job)
    if args.what == "prometheus":
        return {RENDERED_FILES["prometheus"]: rules}
    return {
        RENDERED_FILES["prometheus-operator"]: as_prometheus_rule(rules),
        ALERTMANAGER_CONFIG_FILE: render_alertmanager_config(alerts, tags, source=args.alert_source),
    }


def runbook_base(args: argparse.Namespace) -> str:
    """--runbook-base-url, or the repository's relative path with a warning: no alert receiver can open that."""
    from exporter.alerts.catalog import DEFAULT_RUNBOOK_BASE

    if args.runbook_base_url:
        return str(args.runbook_base_url).rstrip("#")
    print(
        f"render: warning: runbook links are the relative {DEFAULT_RUNBOOK_BASE}#..., which no alert receiver can open; "
        "give --runbook-base-url https://<where your copy of docs/runbooks.md is served>",
        file=sys.stderr,
    )
    return DEFAULT_RUNBOOK_BASE


def tag_labels(keys: list[str]) -> tuple[str, ...]:
    """``tag_<key>`` of each key, named as discovery serves them; a key that makes no label name is a usage error."""
    from exporter.aws.fleet_events import tag_label
    from exporter.common.errors import UsageError

    labels = []
    for key in keys:
        label = tag_label(key)
        if label is None:
            raise UsageError(f"--tags: tag {key!r} makes no valid label name")
        labels.append(label)
    return tuple(dict.fromkeys(labels))


def _say_skipped_types(what: str, table: object) -> None:
    """Name the table's node types that only the fixed-threshold alerts cover, and why."""
    from exporter.alerts.thresholds import alarm_thresholds, node_type_thresholds

    prometheus = what != "cloudformation"
    covered = {row.node_type for row in (node_type_thresholds(table) if prometheus else alarm_thresholds(table))}  # type: ignore[arg-type]
    missing = sorted(set(table.node_types) - covered)  # type: ignore[attr-defined]
    if missing:
        why = "no bandwidth figure" if prometheus else "no bandwidth figure or vCPU count"
        print(f"render: fixed-threshold alerts only for {len(missing)} node type(s) with {why}: {', '.join(missing)}", file=sys.stderr)


def _render_fleet(args: argparse.Namespace, alerts: list, table: object) -> int:
    """One template per node type and chunk of at most CloudFormation's 500 resources, into --out."""
    from pathlib import Path

    from exporter.alerts.cloudformation import fleet_stacks, load_fleet, render_cloudformation, render_fleet_alarms
    from exporter.common.errors import UsageError
    from exporter.common.files import write_atomically

    if args.what != "cloudformation" or not args.out:
        raise UsageError("--fleet renders CloudFormation stacks and needs --out DIR")
    fleet = load_fleet(args.fleet)
    by_fleet = args.alarms == "fleet"
    stacks, notes = fleet_stacks(fleet, alerts, table, by_fleet)  # type: ignore[arg-type]
    base = runbook_base(args)
    directory = Path(args.out)
    directory.mkdir(parents=True, exist_ok=True)
    for stack in stacks:
        name = f"elasticache-alarms-{stack.index:03d}-{stack.node_type.removeprefix('cache.').replace('.', '-')}.yaml"
        write_atomically(directory / name, render_cloudformation(alerts, table, base, stack))  # type: ignore[arg-type]
    for note in notes:
        print(f"render: {note}", file=sys.stderr)
    nodes = sum(len(stack.ids) for stack in stacks)
    resources = sum(len(stack.ids) * stack.alarms_per_node for stack in stacks)
    created = sum(len(stack.ids) * stack.created_per_node for stack in stacks)
    if by_fleet and any(node.engine == "valkey" for node in fleet):
        text, promql = render_fleet_alarms(fleet, alerts, table, base)  # type: ignore[arg-type]
        write_atomically(directory / "elasticache-alarms-fleet.yaml", text)
        created += promql
        print(f"render: elasticache-alarms-fleet.yaml: {promql} PromQL alarm(s) for the Valkey nodes at NetworkAlarms' default", file=sys.stderr)
    print(
        f"render: {len(stacks)} stack(s) for {nodes} node(s), {created} alarm(s) created at NetworkAlarms' default "
        f"({resources} alarm resources in the per-node stacks, both network families), in {directory}",
        file=sys.stderr,
    )
    return 0


def add_arguments(command: str, render: argparse.ArgumentParser) -> None:
    from exporter.alerts.catalog import DEFAULT_EXPORTER_JOB, DEFAULT_SOURCE, SOURCE_LABEL

    render.add_argument("what", choices=("prometheus", "prometheus-operator", "cloudformation", "alertmanager"))
    render.add_argument("--hit-ratio", type=float, help="prometheus: arm RedisCacheHitRateLow below this hit ratio, e.g. 0.8 (off by default)")
    render.add_argument("--min-miss-rate", type=float, help="prometheus: ... while misses per second are above this, e.g. 100")
    render.add_argument("--baselines", metavar="FILE", help="baseline table (default: the shipped one)")
    render.add_argument("--basis", choices=("lower", "measured", "published"), help="which figure thresholds use (default: the table's)")
    render.add_argument("--catalog", metavar="FILE", help="alert catalog (default: the shipped rules/catalog.yml)")
    render.add_argument("--out", metavar="DIR", help="write the file into this directory instead of standard output")
    render.add_argument(
        "--fleet",
        metavar="FILE",
        help="cloudformation: a YAML list of nodes (cluster_id, node_type); writes one stack per node type and 500 resources",
    )
    render.add_argument(
        "--alarms",
        choices=("per-node", "fleet"),
        default="per-node",
        help="cloudformation --fleet: fleet adds a stack of PromQL alarms for the fleet's Valkey nodes (engine: valkey in the "
        "fleet file) and leaves those alarms out of their per-node stacks, as `alarms plan --alarms fleet` does",
    )
    render.add_argument(
        "--runbook-base-url",
        metavar="URL",
        help="where docs/runbooks.md is served, e.g. https://github.com/<you>/elasticache-exporter/blob/main/docs/runbooks.md: "
        "each alert's runbook_url is URL#<section> (without it, the relative docs/runbooks.md, with a warning)",
    )
    render.add_argument(
        "--alert-source",
        metavar="VALUE",
        default=DEFAULT_SOURCE,
        help=f"prometheus, prometheus-operator, alertmanager: the value of the {SOURCE_LABEL} label every alert carries and "
        f"the Alertmanager route and inhibit rules match (default {DEFAULT_SOURCE}; docs/alerts.md)",
    )
    render.add_argument(
        "--exporter-job",
        metavar="REGEX",
        default=DEFAULT_EXPORTER_JOB,
        help=f"prometheus: the job(s) that scrape the exporter itself, for the alerts about it (default {DEFAULT_EXPORTER_JOB})",
    )
    render.add_argument(
        "--tags",
        metavar="KEYS",
        default="",
        help="prometheus: tag keys (as in aws.export_tags, comma-separated) joined into every node's alert from "
        "elasticache_node_info, for Alertmanager routes; alertmanager: the same keys group the notifications",
    )
