"""Command line: ``elasticache-exporter serve | demo | cost | baseline derive | benchmark | render | alarms | capacity``;
also ``python -m exporter``. The parser and the dispatch; each group of commands has a module of its own."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from exporter import __version__
from exporter.baselines.settings import INPUT_FORMATS, OUTPUT_FORMATS
from exporter.common.errors import ConfigError, ExporterError
from exporter.config import Config, build_config, env_values, flag_to_env, load_yaml, overlay
from exporter.redis.addresses import AddressError, parse_address

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
    "scrape.concurrency": "scrape workers: targets scraped at once (default 16)",
    "scrape.max-reply-size": "largest reply read from a node, e.g. 4MiB; a larger one fails the scrape before it is read (default 4MiB)",
    "scrape.shard": "INDEX/COUNT, e.g. 1/3: of the configured and discovered targets, serve on /metrics only those of "
    "this shard (Prometheus' hashmod of the target name); run COUNT exporters with indexes 0 to COUNT-1",
    "scrape.timeout": "timeout of one target's scrape, e.g. 5s (Prometheus' own scrape timeout also applies)",
    "heartbeat.write": "write the exporter's own heartbeat key on targets that are primaries (opt-in)",
    "heartbeat.key": "name of the exporter's heartbeat key (default elasticache-exporter:heartbeat)",
    "heartbeat.interval": "how often the heartbeat is written, e.g. 1s",
    "baselines.file": "baseline table (default: the shipped one)",
    "baselines.basis": "which figure thresholds use where both exist: lower (default), measured or published",
    "aws.region": "AWS regions to discover ElastiCache nodes in and poll CloudWatch for, comma-separated (default: none, AWS off)",
    "check-keys": "keys to watch (size, value, memory), as redis_exporter takes them: comma-separated, each "
    "optionally db<N>= first, URL-escaped; a glob pattern is found by SCAN, e.g. db0=queue:*",
    "check-single-keys": "exact keys to watch, no SCAN (same syntax)",
    "count-keys": "patterns whose matching keys are counted by SCAN, e.g. db0=sessions:*",
    "check-streams": "stream patterns to watch (length, groups, consumers, pending, lag), found by SCAN",
    "check-single-streams": "exact streams to watch",
    "check-keys-batch-size": "SCAN COUNT for the patterns above (default 1000)",
    "export-client-list": "serve each connection of CLIENT LIST as redis_exporter does (redis_connected_client_*), read in the "
    "background every clients.interval",
    "export-client-port": "with --export-client-list, the client's port as a label (a new series for every connection)",
    "log.level": "debug, info, warn or error (default info)",
    "log.format": "text or json (default text)",
}
# Read from the environment only: a password given as a flag would show in the process list.
ENV_ONLY = ("redis.password",)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        import json  # only with --log.format json: a text-logging exporter does without the module

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
    if root.level < logging.INFO:  # botocore's DEBUG lines hold signatures, session tokens and secrets' values
        logging.getLogger("botocore").setLevel(logging.INFO)


def _add_aws_source(parser: argparse.ArgumentParser) -> None:
    """Where the AWS commands find their accounts and regions, and the baselines they compare with."""
    parser.add_argument("--config.file", dest="config.file", metavar="FILE", help="YAML configuration file (its aws: section)")
    parser.add_argument("--aws.region", dest="aws.region", help="regions, comma-separated (instead of the config file)")
    parser.add_argument("--baselines", metavar="FILE", help="baseline table (default: the shipped one)")


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with the width found without shutil: argparse builds a formatter for every
    add_argument, and shutil would load bz2 and lzma into every exporter process."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None) -> None:
        if width is None:
            try:
                columns = int(os.environ.get("COLUMNS", "")) or os.get_terminal_size(sys.stdout.fileno()).columns
            except (ValueError, OSError):
                columns = 80
            width = max(columns - 2, 40)
        super().__init__(prog, indent_increment, max_help_position, width)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="elasticache-exporter",
        allow_abbrev=False,
        description="Prometheus exporter for Redis, Valkey and AWS ElastiCache.",
    )
    parser.add_argument("--version", action="version", version=f"elasticache-exporter {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_ in (
        ("serve", "serve metrics over HTTP"),
        (
            "demo",
            "serve metrics of a local Redis (--redis.addr, default :6379), starting a throwaway redis-server with a node "
            "type and a little traffic if none answers",
        ),
        ("cost", "discover the ElastiCache nodes and print what polling CloudWatch for them would cost, fetching no metric"),
    ):
        sub = commands.add_parser(name, help=help_, description=help_, allow_abbrev=False)
        sub.add_argument("--config.file", dest="config.file", metavar="FILE", help="YAML configuration file")
        for flag, flag_help in SERVE_FLAGS.items():
            env = flag_to_env(flag)
            if flag.endswith(("skip-verify", "heartbeat.write")) or flag in CLIENT_LIST_FLAGS:
                sub.add_argument(f"--{flag}", dest=flag, action="store_const", const="true", default=None, help=f"{flag_help} [{env}]")
            else:
                sub.add_argument(f"--{flag}", dest=flag, metavar="VALUE", default=None, help=f"{flag_help} [{env}]")
    baseline = commands.add_parser("baseline", help="baseline tables: derive one from benchmark results", allow_abbrev=False)
    baseline_commands = baseline.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    derive = baseline_commands.add_parser(
        "derive",
        help="derive per-node-type baselines from benchmark results",
        description="Read benchmark results and print the baselines: p90 bandwidth per node type at 100/90/80 %.",
        allow_abbrev=False,
    )
    derive.add_argument("--from", dest="sources", required=True, action="append", metavar="FILE",
                        help="benchmark results; repeat it for more passes, data sizes or node types (passes are averaged)")  # fmt: skip
    derive.add_argument("--input-format", choices=INPUT_FORMATS, help="format of --from (default: detected)")
    derive.add_argument("--format", dest="output_format", choices=OUTPUT_FORMATS, default="table",
                        help="table (a baseline table, default) or mapping (the seed's JSON); for CloudWatch alarms write a table "
                             "and run: render cloudformation --baselines TABLE")  # fmt: skip
    derive.add_argument("--out", metavar="FILE", help="write here (atomically) instead of standard output")
    derive.add_argument("--node-type", help="node type of redis-benchmark or memtier results, e.g. cache.r6g.large")
    derive.add_argument("--data-size", help="value size in bytes of redis-benchmark or memtier results, or memtier's range "
                        "(--data-size-range), e.g. 1024-4096: its mean")  # fmt: skip
    derive.add_argument("--shards", type=int, default=1, help="the results are of a cluster endpoint with this many shards "
                        "(masters): the load tool's rate is the cluster's, each node carried its share (default 1)")  # fmt: skip
    render = commands.add_parser(
        "render",
        help="render the alert catalog and baselines to Prometheus rules, a PrometheusRule or a CloudFormation template",
        allow_abbrev=False,
    )
    render.add_argument("what", choices=("prometheus", "prometheus-operator", "cloudformation"))
    render.add_argument("--baselines", metavar="FILE", help="baseline table (default: the shipped one)")
    render.add_argument("--basis", choices=("lower", "measured", "published"), help="which figure thresholds use (default: the table's)")
    render.add_argument("--catalog", metavar="FILE", help="alert catalog (default: the shipped rules/catalog.yml)")
    render.add_argument("--out", metavar="DIR", help="write the file into this directory instead of standard output")
    render.add_argument(
        "--fleet",
        metavar="FILE",
        help="cloudformation: a YAML list of nodes (cluster_id, node_type); writes one stack per node type and 500 resources",
    )
    render.add_argument("--runbook-base-url", default="docs/runbooks.md", help="runbook_url prefix (default docs/runbooks.md)")
    render.add_argument("--tags", metavar="KEYS", default="",
                        help="prometheus: tag keys (as in aws.export_tags, comma-separated) joined into every node's alert from "
                             "elasticache_node_info, for Alertmanager routes")  # fmt: skip
    alarms = commands.add_parser(
        "alarms",
        help="create or update the CloudWatch alarms of the catalog directly (PutMetricAlarm) for the discovered nodes",
        allow_abbrev=False,
    )
    alarms.add_argument("action", choices=("plan", "apply"), help="plan: show the difference; apply: make it so")
    _add_aws_source(alarms)
    alarms.add_argument("--catalog", metavar="FILE", help="alert catalog (default: the shipped one)")
    alarms.add_argument("--sns-topic-arn", help="topic for alarm, OK and insufficient-data notifications")
    alarms.add_argument("--prune", action="store_true", help="apply: also delete this tool's own alarms of nodes (or alerts) that are gone")
    capacity = commands.add_parser(
        "capacity",
        help="which nodes approach their baseline, how fast, and what to change, from CloudWatch history",
        allow_abbrev=False,
    )
    _add_aws_source(capacity)
    capacity.add_argument("--node", action="append", default=[], help="only these nodes, by instance name or CacheClusterId (repeatable)")
    capacity.add_argument(
        "--days",
        type=int,
        default=14,
        help="history window in days, up to CloudWatch's retention: 15 per-minute, 63 five-minute, 455 hourly (default 14)",
    )
    capacity.add_argument(
        "--period", default="auto", help="datapoint period, a multiple of 60s; auto: the finest CloudWatch keeps for --days (60s up to 15 days)"
    )
    capacity.add_argument("--format", dest="output_format", choices=("table", "json", "html"), default="table")
    capacity.add_argument("--out", metavar="FILE", help="write here instead of standard output")
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
    bench.add_argument("--cluster", action="store_true", help="the target is a node of a cluster: spread the load over its shards "
                       "(redis-benchmark --cluster, memtier --cluster-mode); the target node's share is what is sampled")  # fmt: skip
    bench.add_argument("--ratio", metavar="SET:GET", help="memtier_benchmark: a mixed workload, e.g. 1:4 (default GETs only)")
    bench.add_argument("--data-size-range", metavar="MIN-MAX", help="memtier_benchmark: values of every size between, e.g. "
                       "1024-4096, instead of --data-sizes (recorded as one data size, the mean)")  # fmt: skip
    bench.add_argument("--out", default="benchmark.csv", help="results in the seed's CSV schema (default benchmark.csv)")
    bench.add_argument("--table-out", help="also write a baseline table derived from the results")
    return parser


def load_config(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """Flags over environment over file over defaults; an error in a key the file sets names the file."""
    values = vars(args)
    config_file = values.get("config.file") or environ.get(flag_to_env("config.file"))
    file_raw: dict[str, Any] = load_yaml(config_file) if config_file else {}
    from_env = {**_upstream_env(environ), **env_values([*SERVE_FLAGS, *ENV_ONLY], environ)}
    from_flags = {flag: values[flag] for flag in SERVE_FLAGS if values.get(flag) is not None}
    from_env, from_flags = _key_flags_in_section(from_env), _key_flags_in_section(from_flags)
    _refuse_password_in_address(from_flags.get("redis.addr"), "the flag --redis.addr")
    _refuse_password_in_address(from_env.get("redis.addr"), f"the environment variable {flag_to_env('redis.addr')}")
    raw = overlay(overlay(file_raw, from_env), from_flags)
    try:
        return build_config(raw, source_file=config_file, environ=environ)
    except ConfigError as err:
        overridden = {flag.replace("-", "_") for flag in (*from_env, *from_flags)}
        if config_file and err.source is None and key_is_set(file_raw, err.key) and err.key not in overridden:
            raise ConfigError(err.key, err.problem, source=config_file) from None
        raise


KEY_FLAGS = ("check-keys", "check-single-keys", "count-keys", "check-streams", "check-single-streams", "check-keys-batch-size")
CLIENT_LIST_FLAGS = {"export-client-list": "clients.per_connection", "export-client-port": "clients.include_port"}


def _upstream_env(environ: Mapping[str, str]) -> dict[str, str]:
    """redis_exporter's environment variables of the key and client-list flags (REDIS_EXPORTER_CHECK_KEYS, ...), so that its
    users' deployments carry over; this exporter's own names win."""
    names = {flag: "REDIS_EXPORTER_" + flag.replace("-", "_").upper() for flag in (*KEY_FLAGS, *CLIENT_LIST_FLAGS)}
    return {flag: environ[name] for flag, name in names.items() if name in environ}


def _key_flags_in_section(values: dict[str, Any]) -> dict[str, Any]:
    """``check-keys`` → ``keys.check-keys``, ``export-client-list`` → ``clients.per_connection``: redis_exporter's flag
    names, this exporter's sections."""
    return {f"keys.{flag}" if flag in KEY_FLAGS else CLIENT_LIST_FLAGS.get(flag, flag): value for flag, value in values.items()}


def _refuse_password_in_address(value: Any, where: str) -> None:
    """A flag is visible to every local user in the process list, and environments leak into crash reports."""
    if not isinstance(value, str) or not value:
        return
    try:
        has_password = parse_address(value).password is not None
    except AddressError:
        return  # build_config names what is wrong with it
    if has_password:
        raise ConfigError(
            "redis.addr",
            f"a password inside the address given by {where} is refused: put it in a file given by --redis.password-file, "
            f"in {flag_to_env('redis.password')}, or in the config file's password_file / password_env",
        )


def key_is_set(raw: Mapping[str, Any], key: str) -> bool:
    """Whether the dotted key path (``targets[0].addr``) exists in ``raw``."""
    node: Any = raw
    for part in key.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("[") and part.endswith("]") and part[1:-1].isascii() and part[1:-1].isdigit():
            index = int(part[1:-1])
            if not isinstance(node, list) or index >= len(node):
                return False
            node = node[index]
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return False
    return True


def main(argv: Sequence[str] | None = None, *, clock: Callable[[], float] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "serve"])
    command = " ".join(str(part) for part in (args.command, getattr(args, "action", None), getattr(args, "baseline_command", None)) if part)
    prefix = "elasticache-exporter: " if args.command in ("serve", "demo") else f"elasticache-exporter: {command}: "
    try:
        return run_command(args, clock)
    except ExporterError as err:
        print(f"{prefix}{err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # noqa: BLE001 - the exit-code contract: one line, never a traceback
        from exporter.aws.api import AwsCallError
        from exporter.cli.aws import aws_failure

        if isinstance(err, AwsCallError):
            print(f"{prefix}{aws_failure(err)}", file=sys.stderr)
            return 1
        print(f"{prefix}internal error ({type(err).__name__}): {str(err)[:300]}", file=sys.stderr)
        if "debug" in (getattr(args, "log.level", None) or os.environ.get(flag_to_env("log.level"), "")):
            import traceback

            traceback.print_exc()
        return 1


def run_command(args: argparse.Namespace, clock: Callable[[], float] | None = None) -> int:
    """``clock``: what "now" is for the reports (the wall clock unless a test injects one)."""
    # each command loads only its own part: `serve` never loads the AWS side or the template engine
    if args.command == "render":
        from .render import run_render

        return run_render(args)
    if args.command in ("baseline", "benchmark"):
        from . import baseline

        return baseline.run_baseline_derive(args) if args.command == "baseline" else baseline.run_benchmark_command(args, os.environ)
    if args.command in ("capacity", "alarms"):
        from . import aws

        return aws.run_capacity(args, os.environ, clock) if args.command == "capacity" else aws.run_alarms(args, os.environ)
    config = load_config(args, os.environ)
    setup_logging(config.log_level, config.log_format)
    if args.command == "cost":
        from . import aws

        return aws.print_cost(config)
    from . import serve

    if args.command == "demo":
        from .demo import run_demo

        return run_demo(config, serve.run_server)
    return serve.run_server(config, reload=lambda: load_config(args, os.environ))
