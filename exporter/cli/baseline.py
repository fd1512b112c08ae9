"""The baseline commands: ``baseline derive`` and ``benchmark``."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping

from .output import emit


def run_baseline_derive(args: argparse.Namespace, environ: Mapping[str, str], clock: Callable[[], float] | None = None) -> int:
    if args.from_cloudwatch:
        return _derive_from_cloudwatch(args, environ, clock)
    from pathlib import Path

    from exporter.baselines.derive import derive, read_rows, render, with_published
    from exporter.baselines.table import BaselineError, load_table
    from exporter.baselines.tools import parse_data_size, per_shard

    if args.shards < 1:
        raise BaselineError(f"--shards: must be at least 1, got {args.shards}")
    data_size = parse_data_size(args.data_size, "--data-size") if args.data_size is not None else None
    rows = [per_shard(row, args.shards) for source in args.sources for row in read_rows(Path(source), args.input_format, args.node_type, data_size)]
    table = with_published(derive(rows), load_table())
    for note in table.extra.get("notes", []):
        print(f"baseline derive: {note}", file=sys.stderr)
    emit(render(table, args.output_format), args.out)
    return 0


def _derive_from_cloudwatch(args: argparse.Namespace, environ: Mapping[str, str], clock: Callable[[], float] | None) -> int:
    """Discovery in every configured account and region, then each node's NetworkBytesOut and its share of the baseline
    over ``--days`` at the finest period CloudWatch keeps for them."""
    import time
    from datetime import datetime, timezone

    from exporter.aws.monitor import AwsMonitor
    from exporter.baselines.derive import render, with_published
    from exporter.baselines.from_cloudwatch import NodeSeries, derive_from_cloudwatch
    from exporter.baselines.table import load_table
    from exporter.capacity.history import fetch_history
    from exporter.common.errors import UsageError
    from exporter.common.progress import Progress

    from .aws import RETENTION_DAYS, _aws_config, discover

    if args.input_format or args.node_type or args.data_size or args.shards != 1:
        raise UsageError("--from-cloudwatch reads CloudWatch: --input-format, --node-type, --data-size and --shards are for --from")
    if not 1 <= args.days <= RETENTION_DAYS[-1][1]:
        raise UsageError(f"--days: CloudWatch keeps hourly data {RETENTION_DAYS[-1][1]} days; give 1 to {RETENTION_DAYS[-1][1]}")
    period = int(next(period for period, days in RETENTION_DAYS if args.days <= days))
    config = _aws_config(vars(args), environ)
    monitor = AwsMonitor(config.aws, log_failures=False)
    discover(monitor)
    now = (clock or time.time)()
    series: list[NodeSeries] = []
    for account, discovered in monitor.nodes_by_account().items():
        nodes = [node for node in discovered if node.node_type]
        progress = Progress(len(nodes) * len(IMPLIED_SIGNALS), command="baseline derive")
        history = fetch_history(monitor.apis[account], nodes, args.days, now, progress.counter("CloudWatch history"), period, IMPLIED_SIGNALS)
        progress.finish()
        for node in nodes:
            traffic = dict(history.get((node.key, "network_out"), []))
            share = dict(history.get((node.key, "network_out_share"), []))
            series.append(NodeSeries(node.node_type, "/".join(node.key), traffic, share))
    date = datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y-%m-%d")
    derived, notes = derive_from_cloudwatch(series, args.days, period, date)
    for note in notes:
        print(f"baseline derive: {note}", file=sys.stderr)
    if not derived.node_types:
        raise UsageError("no node type of the fleet had traffic enough to divide: no table written")
    emit(render(with_published(derived, load_table()), args.output_format), args.out)
    return 0


# the series --from-cloudwatch reads per node: (name, metric, statistic, a Sum over the period turned into a rate)
IMPLIED_SIGNALS = (
    ("network_out", "NetworkBytesOut", "Sum", True),
    ("network_out_share", "NetworkBaselineUsageOutPercentage", "Average", False),
)


def run_benchmark_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from pathlib import Path

    from exporter.baselines.benchmark import BenchmarkPlan, rows_to_csv, run_benchmark, to_row
    from exporter.baselines.derive import derive, render_table, with_published
    from exporter.baselines.table import BaselineError, load_table
    from exporter.common.files import write_atomically
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
    size_range = None
    if (args.ratio or args.data_size_range) and args.tool != "memtier_benchmark":
        raise BaselineError("--ratio and --data-size-range need --tool memtier_benchmark (redis-benchmark runs one command, one size)")
    if args.ratio and not re.fullmatch(r"\d+:\d+", args.ratio):
        raise BaselineError(f"--ratio: expected SET:GET such as 1:4, got {args.ratio!r}")
    if args.data_size_range:
        from exporter.baselines.tools import parse_data_size

        mean = parse_data_size(args.data_size_range, "--data-size-range")
        low, _, high = args.data_size_range.partition("-")
        size_range, sizes = (int(low), int(high or low)), (mean,)
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
        cluster=args.cluster,
        ratio=args.ratio,
        size_range=size_range,
    )
    results = run_benchmark(plan)
    rows = [row for row in (to_row(node_type, result) for result in results) if row is not None]
    if not rows:
        raise BaselineError("benchmark: nothing was measured")
    write_atomically(Path(args.out), rows_to_csv(rows))
    for row in rows:
        latency = "".join(f", GET {f.rps:,.0f}/s p50 {f.p50_ms} ms p99 {f.p99_ms} ms" for f in row.latency if f.command == "GET")
        print(
            f"{node_type} data size {row.data_size:>7}: p90 {row.mbps_p90:10.1f} Mibit/s, engine CPU p90 {row.enginecpuutilization_90:5.1f} %"
            + latency
        )
    if any(result.interrupted for result in results):
        print("interrupted: the results above cover what was measured", file=sys.stderr)
    if args.table_out:
        write_atomically(Path(args.table_out), render_table(with_published(derive(rows), load_table())))
    return 0


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    (_add_benchmark_arguments if command == "benchmark" else _add_derive_arguments)(parser)


def _add_derive_arguments(baseline: argparse.ArgumentParser) -> None:
    from exporter.baselines.settings import INPUT_FORMATS, OUTPUT_FORMATS

    baseline_commands = baseline.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    derive = baseline_commands.add_parser(
        "derive",
        help="derive per-node-type baselines from benchmark results",
        description="Read benchmark results and print the baselines: p90 bandwidth per node type at 100/90/80 %.",
        allow_abbrev=False,
    )
    source = derive.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--from",
        dest="sources",
        action="append",
        metavar="FILE",
        help="benchmark results; repeat it for more passes, data sizes or node types (passes are averaged)",
    )
    source.add_argument(
        "--from-cloudwatch",
        action="store_true",
        help="the baseline AWS itself counts for the fleet's nodes (NetworkBytesOut over NetworkBaselineUsageOutPercentage), "
        "per node type the fleet runs, from the accounts and regions of --config.file or --aws.region",
    )
    derive.add_argument("--days", type=int, default=14, help="--from-cloudwatch: days of history (default 14)")
    derive.add_argument("--config.file", dest="config.file", metavar="FILE", help="--from-cloudwatch: the config file (its aws: section)")
    derive.add_argument("--aws.region", dest="aws.region", help="--from-cloudwatch: regions, comma-separated (instead of the config file)")
    derive.add_argument("--input-format", choices=INPUT_FORMATS, help="format of --from (default: detected)")
    derive.add_argument(
        "--format",
        dest="output_format",
        choices=OUTPUT_FORMATS,
        default="table",
        help="table (a baseline table, default) or mapping (the seed's JSON); for CloudWatch alarms write a table "
        "and run: render cloudformation --baselines TABLE",
    )
    derive.add_argument("--out", metavar="FILE", help="write here (atomically) instead of standard output")
    derive.add_argument("--node-type", help="node type of redis-benchmark or memtier results, e.g. cache.r6g.large")
    derive.add_argument(
        "--data-size",
        help="value size in bytes of redis-benchmark or memtier results, or memtier's range (--data-size-range), e.g. 1024-4096: its mean",
    )
    derive.add_argument(
        "--shards",
        type=int,
        default=1,
        help="the results are of a cluster endpoint with this many shards "
        "(masters): the load tool's rate is the cluster's, each node carried its share (default 1)",
    )


def _add_benchmark_arguments(bench: argparse.ArgumentParser) -> None:
    bench.add_argument(
        "--target", required=True, help="the node, redis://host:port or rediss://… (password from ELASTICACHE_EXPORTER_REDIS_PASSWORD)"
    )
    bench.add_argument("--node-type", required=True, help="its node type, e.g. cache.r6g.large")
    bench.add_argument("--data-sizes", default="1000,10000,100000", help="value sizes in bytes (default 1000,10000,100000)")
    bench.add_argument("--duration", default="60s", help="load per data size (default 60s)")
    bench.add_argument("--clients", type=int, default=50, help="parallel connections (default 50)")
    bench.add_argument("--pipeline", type=int, default=1, help="requests per round trip (default 1)")
    bench.add_argument("--tool", choices=("redis-benchmark", "memtier_benchmark"), default="redis-benchmark")
    bench.add_argument(
        "--cluster",
        action="store_true",
        help="the target is a node of a cluster: spread the load over its shards "
        "(redis-benchmark --cluster, memtier --cluster-mode); the target node's share is what is sampled",
    )
    bench.add_argument("--ratio", metavar="SET:GET", help="memtier_benchmark: a mixed workload, e.g. 1:4 (default GETs only)")
    bench.add_argument(
        "--data-size-range",
        metavar="MIN-MAX",
        help="memtier_benchmark: values of every size between, e.g. 1024-4096, instead of --data-sizes (recorded as one data size, the mean)",
    )
    bench.add_argument("--out", default="benchmark.csv", help="results in the seed's CSV schema (default benchmark.csv)")
    bench.add_argument("--table-out", help="also write a baseline table derived from the results")
