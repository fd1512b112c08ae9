"""Command line: ``elasticache-exporter serve | demo``; also ``python -m exporter``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from . import __version__
from .baseline_derive import INPUT_FORMATS, OUTPUT_FORMATS
from .config import Config, build_config, env_values, flag_to_env, load_yaml, overlay, parse_duration
from .errors import ExporterError

log = logging.getLogger("exporter")

# Flags of `serve`, each also read from ELASTICACHE_EXPORTER_<FLAG> (dots and dashes as underscores).
SERVE_FLAGS: dict[str, str] = {
    "web.listen-address": "address to listen on, host:port or :port (default :9769)",
    "web.telemetry-path": "path of the metrics of the configured targets (default /metrics)",
    "web.config-file": "TLS and basic auth for the exporter's own endpoints (Prometheus exporter-toolkit web-config format)",
    "redis.addr": "the single Redis target, redis://host:port or rediss://host:port; '' for none "
    "(default redis://localhost:6379 unless the config file lists targets)",
    "redis.user": "ACL user name for --redis.addr",
    "redis.node-type": "node type of --redis.addr, e.g. cache.r6g.large, to compare it with its baseline",
    "redis.password-file": "file holding the password for --redis.addr",
    "redis.tls-ca-file": "CA bundle to verify the server of --redis.addr",
    "redis.tls-cert-file": "client certificate for --redis.addr",
    "redis.tls-key-file": "client key for --redis.addr",
    "redis.tls-server-name": "server name to verify instead of the host of --redis.addr",
    "redis.tls-insecure-skip-verify": "do not verify the server certificate (explicit opt-in)",
    "scrape.timeout": "timeout of one target's scrape, e.g. 5s (Prometheus' own scrape timeout also applies)",
    "heartbeat.write": "write the exporter's own heartbeat key on targets that are primaries (opt-in)",
    "heartbeat.key": "name of the exporter's heartbeat key (default elasticache-exporter:heartbeat)",
    "heartbeat.interval": "how often the heartbeat is written, e.g. 1s",
    "baselines.file": "baseline table (default: the shipped one)",
    "baselines.basis": "which figure thresholds use where both exist: lower (default), measured or published",
    "aws.region": "AWS regions to discover ElastiCache nodes in and poll CloudWatch for, comma-separated (default: none, AWS off)",
    "log.level": "debug, info, warn or error (default info)",
    "log.format": "text or json (default text)",
}
# Read from the environment only: a password given as a flag would show in the process list.
ENV_ONLY = ("redis.password",)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record), "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel({"warn": logging.WARNING}.get(level, getattr(logging, level.upper(), logging.INFO)))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elasticache-exporter",
        allow_abbrev=False,
        description="Prometheus exporter for Redis, Valkey and AWS ElastiCache.",
    )
    parser.add_argument("--version", action="version", version=f"elasticache-exporter {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_ in (
        ("serve", "serve metrics over HTTP"),
        ("demo", "serve metrics of a local Redis on :6379, starting a throwaway redis-server if none answers"),
        ("cost", "discover the ElastiCache nodes and print what polling CloudWatch for them would cost, fetching no metric"),
    ):
        sub = commands.add_parser(name, help=help_, description=help_, allow_abbrev=False)
        sub.add_argument("--config.file", dest="config.file", metavar="FILE", help="YAML configuration file")
        for flag, flag_help in SERVE_FLAGS.items():
            env = flag_to_env(flag)
            if flag.endswith(("skip-verify", "heartbeat.write")):
                sub.add_argument(f"--{flag}", dest=flag, action="store_const", const="true", default=None, help=f"{flag_help} [{env}]")
            else:
                sub.add_argument(f"--{flag}", dest=flag, metavar="VALUE", default=None, help=f"{flag_help} [{env}]")
    baseline = commands.add_parser("baseline", help="baseline tables: derive one from benchmark results", allow_abbrev=False)
    baseline_commands = baseline.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    derive = baseline_commands.add_parser(
        "derive",
        help="derive per-node-type baselines from benchmark results",
        description="Read benchmark results and print the baselines: p90 bandwidth per node type at 100/90/80 %%.",
        allow_abbrev=False,
    )
    derive.add_argument("--from", dest="source", required=True, metavar="FILE", help="benchmark results")
    derive.add_argument("--input-format", choices=INPUT_FORMATS, help="format of --from (default: detected)")
    derive.add_argument("--format", dest="output_format", choices=OUTPUT_FORMATS, default="table", help="output (default table)")
    derive.add_argument("--out", metavar="FILE", help="write here (atomically) instead of standard output")
    derive.add_argument("--node-type", help="node type of redis-benchmark or memtier results, e.g. cache.r6g.large")
    derive.add_argument("--data-size", type=int, help="value size in bytes of redis-benchmark or memtier results")
    render = commands.add_parser(
        "render",
        help="render the alert catalog and baselines to Prometheus rules or a CloudFormation template",
        allow_abbrev=False,
    )
    render.add_argument("what", choices=("prometheus", "cloudformation"))
    render.add_argument("--baselines", metavar="FILE", help="baseline table (default: the shipped one)")
    render.add_argument("--basis", choices=("lower", "measured", "published"), help="which figure thresholds use (default: the table's)")
    render.add_argument("--catalog", metavar="FILE", help="alert catalog (default: the shipped rules/catalog.yml)")
    render.add_argument("--out", metavar="DIR", help="write the file into this directory instead of standard output")
    render.add_argument("--runbook-base-url", default="docs/runbooks.md", help="runbook_url prefix (default docs/runbooks.md)")
    alarms = commands.add_parser(
        "alarms",
        help="create or update the CloudWatch alarms of the catalog directly (PutMetricAlarm) for the discovered nodes",
        allow_abbrev=False,
    )
    alarms.add_argument("action", choices=("plan", "apply"), help="plan: show the difference; apply: make it so")
    alarms.add_argument("--config.file", dest="config.file", metavar="FILE", help="YAML configuration file (its aws: section)")
    alarms.add_argument("--aws.region", dest="aws.region", help="regions, comma-separated (instead of the config file)")
    alarms.add_argument("--baselines", metavar="FILE", help="baseline table (default: the shipped one)")
    alarms.add_argument("--catalog", metavar="FILE", help="alert catalog (default: the shipped one)")
    alarms.add_argument("--sns-topic-arn", help="topic for alarm, OK and insufficient-data notifications")
    capacity = commands.add_parser(
        "capacity",
        help="which nodes approach their baseline, how fast, and what to change, from CloudWatch history",
        allow_abbrev=False,
    )
    capacity.add_argument("--config.file", dest="config.file", metavar="FILE", help="YAML configuration file (its aws: section)")
    capacity.add_argument("--aws.region", dest="aws.region", help="regions, comma-separated (instead of the config file)")
    capacity.add_argument("--node", action="append", default=[], help="only these CacheClusterIds (repeatable)")
    capacity.add_argument("--days", type=int, default=14, help="history window in days, at most 15 (default 14)")
    capacity.add_argument("--period", default="60s", help="datapoint period, a multiple of 60s (default 60s: per-minute, as the baselines)")
    capacity.add_argument("--format", dest="output_format", choices=("table", "json", "html"), default="table")
    capacity.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    capacity.add_argument("--baselines", metavar="FILE", help="baseline table (default: the shipped one)")
    bench = commands.add_parser(
        "benchmark",
        help="load a node per data size, measure its bandwidth and CPU, write the seed's CSV and a baseline entry",
        allow_abbrev=False,
    )
    bench.add_argument("--target", required=True, help="the node, redis://host:port or rediss://… (password from "
                       "ELASTICACHE_EXPORTER_REDIS_PASSWORD)")  # fmt: skip
    bench.add_argument("--node-type", required=True, help="its node type, e.g. cache.r6g.large")
    bench.add_argument("--data-sizes", default="1000,10000,100000", help="value sizes in bytes (default 1000,10000,100000)")
    bench.add_argument("--duration", default="60s", help="load per data size (default 60s)")
    bench.add_argument("--clients", type=int, default=50, help="parallel connections (default 50)")
    bench.add_argument("--pipeline", type=int, default=1, help="requests per round trip (default 1)")
    bench.add_argument("--tool", choices=("redis-benchmark", "memtier_benchmark"), default="redis-benchmark")
    bench.add_argument("--out", default="benchmark.csv", help="results in the seed's CSV schema (default benchmark.csv)")
    bench.add_argument("--table-out", help="also write a baseline table derived from the results")
    return parser


def run_benchmark_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from pathlib import Path

    from .addresses import AddressError, parse_address
    from .baseline_derive import derive, render_table, with_published, write_atomically
    from .baselines import BaselineError, load_table
    from .benchmark import BenchmarkPlan, rows_to_csv, run_benchmark, to_row
    from .config import parse_duration

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


def _aws_config(values: dict[str, Any], environ: Mapping[str, str]) -> Config:
    config_file = values.get("config.file")
    raw: dict[str, Any] = load_yaml(config_file) if config_file else {}
    if values.get("aws.region"):
        raw = overlay(raw, {"aws.region": values["aws.region"]})
    config = build_config(raw, source_file=config_file, environ=environ)
    if not config.aws.enabled:
        raise ExporterError("no AWS regions configured: give --aws.region or aws.regions in --config.file")
    return config


def emit(text: str, out: str | None) -> None:
    """To standard output, or atomically to ``out``."""
    if out:
        from pathlib import Path

        from .baseline_derive import write_atomically

        write_atomically(Path(out), text)
    else:
        sys.stdout.write(text)


def run_capacity(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    import json
    import time

    from .aws_monitor import AwsMonitor
    from .baselines import load_table
    from .capacity import build_reports, fetch_history, render_html, render_text
    from .progress import Progress

    if not 1 <= args.days <= 15:
        raise ExporterError("--days: one-minute CloudWatch data is kept 15 days; give 1 to 15")
    period = parse_duration(args.period)
    if period is None or period < 60 or period % 60:
        raise ExporterError(f"--period: must be a multiple of 60s, got {args.period!r}")
    config = _aws_config(vars(args), environ)
    table = load_table(args.baselines)
    monitor = AwsMonitor(config.aws)
    monitor.discover_once()
    now = time.time()
    reports = []
    for account, discovered in monitor.nodes_by_account().items():
        nodes = [node for node in discovered if not args.node or node.cluster_id in args.node]
        if not nodes:
            continue
        progress = Progress(len(nodes) * 5)
        history, _calls = fetch_history(monitor.apis[account], nodes, args.days, now, progress.counter("CloudWatch history"), int(period))
        progress.finish()
        reports += build_reports(nodes, history, table, args.days, now)
    reports.sort(key=lambda r: (r.urgency, r.node.cluster_id))
    if args.output_format == "json":
        text = json.dumps([report.as_dict() for report in reports], indent=2, sort_keys=True) + "\n"
    elif args.output_format == "html":
        text = render_html(reports, args.days, now)
    else:
        text = render_text(reports)
    emit(text, args.out)
    return 0


def run_alarms(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from .alarms import apply, describe, desired_alarms, plan
    from .aws_monitor import AwsMonitor
    from .baselines import load_table
    from .render import load_catalog

    config = _aws_config(vars(args), environ)
    monitor = AwsMonitor(config.aws)
    monitor.discover_once()
    alerts, table = load_catalog(args.catalog), load_table(args.baselines)
    applied = 0
    for account, nodes in monitor.nodes_by_account().items():
        api = monitor.apis[account]
        desired, skipped = desired_alarms(nodes, alerts, table, args.sns_topic_arn)
        changes = plan(api, desired)
        sys.stdout.write(describe(changes, skipped))
        if args.action == "apply":
            applied += apply(api, changes)
    if args.action == "apply":
        print(f"applied {applied} alarm(s)")
    return 0


def run_render(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .baseline_derive import write_atomically
    from .baselines import load_table
    from .render import load_catalog, render_cloudformation, render_prometheus

    table = load_table(args.baselines, args.basis)
    alerts = load_catalog(args.catalog)
    renderer = render_prometheus if args.what == "prometheus" else render_cloudformation
    text = renderer(alerts, table, args.runbook_base_url)
    if args.out:
        directory = Path(args.out)
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(directory / RENDERED_FILES[args.what], text)
    else:
        sys.stdout.write(text)
    return 0


def run_baseline_derive(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .baseline_derive import derive, read_rows, render, with_published
    from .baselines import load_table

    rows = read_rows(Path(args.source), args.input_format, args.node_type, args.data_size)
    table = with_published(derive(rows), load_table())
    emit(render(table, args.output_format), args.out)
    return 0


def load_config(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """Flags over environment over file over defaults."""
    values = vars(args)
    config_file = values.get("config.file") or environ.get(flag_to_env("config.file"))
    raw: dict[str, Any] = load_yaml(config_file) if config_file else {}
    raw = overlay(raw, env_values([*SERVE_FLAGS, *ENV_ONLY], environ))
    raw = overlay(raw, {flag: values[flag] for flag in SERVE_FLAGS if values.get(flag) is not None})
    return build_config(raw, source_file=config_file, environ=environ)


def limit_malloc_arenas() -> None:
    """glibc gives each busy thread a malloc arena of its own; concurrent scrapes then keep several partly used
    arenas resident. Two arenas are plenty for this process (the GIL serialises Python anyway)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt(-8, 2)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass  # not glibc


def run_server(config: Config) -> int:
    from .server import ExporterApp, make_http_server
    from .webconfig import load_web_config

    limit_malloc_arenas()
    web_config = load_web_config(config.web_config_file) if config.web_config_file else None
    app = ExporterApp(config)
    try:
        server = make_http_server(app, config.listen_address, web_config)
    except OSError as err:
        app.close()
        raise ExporterError(f"cannot listen on {config.listen_address}: {err.strerror or err}") from err
    stop = threading.Event()

    def _stop(signum: int, _frame: Any) -> None:
        if not stop.is_set():
            stop.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    host, port = server.server_address[:2]
    log.info(
        "elasticache-exporter %s listening on %s:%s; %d configured target(s): %s",
        __version__,
        host,
        port,
        len(config.targets),
        ", ".join(f"{t.name} ({t.display})" for t in config.targets) or "none",
    )
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        app.close()
    log.info("stopped")
    return 0


def print_cost(config: Config) -> int:
    from .aws_monitor import AwsMonitor
    from .cloudwatch import estimate_cost

    if not config.aws.enabled:
        raise ExporterError("no AWS regions configured: set aws.regions in the config file or --aws.region")
    monitor = AwsMonitor(config.aws)
    monitor.discover_once()
    nodes = monitor.nodes()
    per_node = sum(len(spec.statistics) for spec in config.aws.metrics)
    print(f"nodes discovered: {len(nodes)} in {', '.join(sorted({n.region for n in nodes})) or 'no region'}")
    print(f"metrics: {len(config.aws.metrics)}, queries per node: {per_node} (metric x statistic)")
    print(f"{'interval':>10} {'queries/cycle':>14} {'calls/cycle':>12} {'metrics/month':>15} {'USD/month':>10}")
    intervals = sorted({config.aws.poll_interval, 60.0, 300.0})
    for interval in intervals:
        cost = estimate_cost(len(nodes), config.aws.metrics, interval)
        marker = "  (configured)" if interval == config.aws.poll_interval else ""
        print(
            f"{interval:>9.0f}s {cost.queries_per_cycle:>14,} {cost.calls_per_cycle:>12,} "
            f"{cost.metrics_per_month:>15,.0f} {cost.usd_per_month:>10.2f}{marker}"
        )
    print("GetMetricData is billed per metric requested: USD 0.01 per 1,000. Discovery calls are free.")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "serve"])
    try:
        if args.command == "baseline":
            return run_baseline_derive(args)
        if args.command == "capacity":
            return run_capacity(args, os.environ)
        if args.command == "alarms":
            return run_alarms(args, os.environ)
        if args.command == "render":
            return run_render(args)
        if args.command == "benchmark":
            return run_benchmark_command(args, os.environ)
        config = load_config(args, os.environ)
        setup_logging(config.log_level, config.log_format)
        if args.command == "cost":
            return print_cost(config)
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(config, run_server)
        return run_server(config)
    except ExporterError as err:
        print(f"elasticache-exporter: {err}", file=sys.stderr)
        return err.exit_code
