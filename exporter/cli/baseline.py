"""The baseline and alert commands: ``baseline derive``, ``benchmark`` and ``render``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping

from .output import emit


def run_baseline_derive(args: argparse.Namespace) -> int:
    from pathlib import Path

    from exporter.baselines.derive import derive, read_rows, render, with_published
    from exporter.baselines.table import load_table

    rows = read_rows(Path(args.source), args.input_format, args.node_type, args.data_size)
    table = with_published(derive(rows), load_table())
    emit(render(table, args.output_format), args.out)
    return 0


def run_benchmark_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from pathlib import Path

    from exporter.baselines.benchmark import BenchmarkPlan, rows_to_csv, run_benchmark, to_row
    from exporter.baselines.derive import derive, render_table, with_published, write_atomically
    from exporter.baselines.table import BaselineError, load_table
    from exporter.config import parse_duration
    from exporter.redis.addresses import AddressError, parse_address

    try:
        parsed = parse_address(args.target)
    except AddressError as err:
        raise BaselineError(f"--target: {err}") from err
    duration = parse_duration(args.duration)
    if duration is None:
        raise BaselineError(f"--duration: not a duration: {args.duration!r}")
    try:
        sizes = tuple(int(part) for part in args.data_sizes.split(","))
    except ValueError as err:
        raise BaselineError(f"--data-sizes: not a list of byte counts: {args.data_sizes!r}") from err
    if not sizes or min(sizes) < 1:
        raise BaselineError(f"--data-sizes: sizes must be positive: {args.data_sizes!r}")
    node_type = args.node_type if args.node_type.startswith("cache.") else "cache." + args.node_type
    plan = BenchmarkPlan(
        endpoint=parsed.endpoint,
        password=parsed.password or environ.get("ELASTICACHE_EXPORTER_REDIS_PASSWORD"),
        node_type=node_type,
        data_sizes=sizes,
        duration=duration,
        clients=args.clients,
        pipeline=args.pipeline,
        tool=args.tool,
    )
    results = run_benchmark(plan)
    rows = [row for row in (to_row(node_type, result) for result in results) if row is not None]
    if not rows:
        raise BaselineError("benchmark: nothing was measured")
    write_atomically(Path(args.out), rows_to_csv(rows))
    for row in rows:
        print(f"{node_type} data size {row.data_size:>7}: p90 {row.mbps_p90:10.1f} Mibit/s, engine CPU p90 {row.enginecpuutilization_90:5.1f} %")
    if any(result.interrupted for result in results):
        print("interrupted: the results above cover what was measured", file=sys.stderr)
    if args.table_out:
        write_atomically(Path(args.table_out), render_table(with_published(derive(rows), load_table())))
    return 0


RENDERED_FILES = {"prometheus": "elasticache-exporter.rules.yml", "cloudformation": "elasticache-alarms.yaml"}


def run_render(args: argparse.Namespace) -> int:
    from pathlib import Path

    from exporter.alerts.catalog import load_catalog
    from exporter.alerts.cloudformation import render_cloudformation
    from exporter.alerts.prometheus import render_prometheus
    from exporter.baselines.derive import write_atomically
    from exporter.baselines.table import load_table

    table = load_table(args.baselines, args.basis)
    alerts = load_catalog(args.catalog)
    if args.fleet:
        return _render_fleet(args, alerts, table)
    renderer = render_prometheus if args.what == "prometheus" else render_cloudformation
    text = renderer(alerts, table, args.runbook_base_url)
    _say_skipped_types(args.what, table)
    if args.out:
        directory = Path(args.out)
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(directory / RENDERED_FILES[args.what], text)
    else:
        sys.stdout.write(text)
    return 0


def _say_skipped_types(what: str, table: object) -> None:
    """Name the table's node types that only the fixed-threshold alerts cover, and why."""
    from exporter.alerts.thresholds import alarm_thresholds, node_type_thresholds

    covered = {row.node_type for row in (node_type_thresholds(table) if what == "prometheus" else alarm_thresholds(table))}  # type: ignore[arg-type]
    missing = sorted(set(table.node_types) - covered)  # type: ignore[attr-defined]
    if missing:
        why = "no bandwidth figure" if what == "prometheus" else "no bandwidth figure or vCPU count"
        print(f"render: fixed-threshold alerts only for {len(missing)} node type(s) with {why}: {', '.join(missing)}", file=sys.stderr)


def _render_fleet(args: argparse.Namespace, alerts: list, table: object) -> int:
    """One template per node type and chunk of at most CloudFormation's 500 resources, into --out."""
    from pathlib import Path

    from exporter.alerts.cloudformation import fleet_stacks, load_fleet, render_cloudformation
    from exporter.baselines.derive import write_atomically
    from exporter.common.errors import UsageError

    if args.what != "cloudformation" or not args.out:
        raise UsageError("--fleet renders CloudFormation stacks and needs --out DIR")
    stacks, notes = fleet_stacks(load_fleet(args.fleet), alerts, table)  # type: ignore[arg-type]
    directory = Path(args.out)
    directory.mkdir(parents=True, exist_ok=True)
    for stack in stacks:
        name = f"elasticache-alarms-{stack.index:03d}-{stack.node_type.removeprefix('cache.').replace('.', '-')}.yaml"
        write_atomically(directory / name, render_cloudformation(alerts, table, args.runbook_base_url, stack))  # type: ignore[arg-type]
    for note in notes:
        print(f"render: {note}", file=sys.stderr)
    nodes = sum(len(stack.ids) for stack in stacks)
    alarms = sum(len(stack.ids) * stack.alarms_per_node for stack in stacks)
    print(f"render: {len(stacks)} stack(s) for {nodes} node(s), {alarms} alarm(s), in {directory}", file=sys.stderr)
    return 0
