"""Command line: ``elasticache-exporter serve | demo | cost | baseline derive | benchmark | render | alarms | capacity``;
also ``python -m exporter``. The parser and the dispatch; each group of commands has a module of its own."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any

from exporter import __version__
from exporter.common.errors import ExporterError
from exporter.config import flag_to_env

log = logging.getLogger("exporter")


def rfc3339(created: float) -> str:
    """A log record's time as RFC 3339 with its zone and milliseconds (UTC: ``2026-12-02T13:17:48.175Z``), as Go's
    exporters log it."""
    import datetime

    return datetime.datetime.fromtimestamp(created, tz=datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        import json  # only with --log.format json: a text-logging exporter does without the module

        entry = {"time": rfc3339(record.created), "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
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

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """argparse's, except that words it does not know are reported without the values given with them: argparse
        would echo ``--redis.password s3cret`` whole to the terminal and the logs."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = " ".join(word for word in (self.prog, getattr(parsed, "command", None)) if word)
            self.exit(2, f"{command}: error: {unrecognized(extras, _option_strings(self))}\n")
        return parsed


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """The flags of ``parser`` and of the commands under it (those whose module added its arguments)."""
    flags: set[str] = set()
    for action in parser._actions:
        flags.update(option for option in action.option_strings if option.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags |= _option_strings(sub)
    return flags - {"--help", "--version"}


def unrecognized(words: Sequence[str], known: set[str]) -> str:
    """What argparse did not take, named without a value: each unknown flag with the nearest known one, and how many
    other words there were (the word after an unknown flag is taken for its value, and none is shown: any may be a
    secret)."""
    import difflib  # only on an error

    flags: list[str] = []
    others = 0
    value_expected = False
    for word in words:
        if word.startswith("-") and len(word) > 1:
            flags.append(word.split("=", 1)[0])
            value_expected = "=" not in word
        elif value_expected:
            value_expected = False
        else:
            others += 1
    parts = []
    for flag in dict.fromkeys(flags):
        near = difflib.get_close_matches(flag, sorted(known), n=1, cutoff=0.6)
        variable = _environment_only(flag)
        if variable:
            instead = f"{near[0]} or " if near else ""
            parts.append(f"unknown flag {flag} (a secret is no flag, as the process list shows it: use {instead}{variable})")
        else:
            parts.append(f"unknown flag {flag} ({f'did you mean {near[0]}?' if near else 'see --help'})")
    if others:
        parts.append(f"{others} unexpected argument{'s' if others > 1 else ''} (not shown: it may be a secret)")
    return "; ".join(parts)


def _environment_only(flag: str) -> str | None:
    """The environment variable of a setting that has no flag on purpose (a password), if ``flag`` names one."""
    from exporter.config.declared import serve_flags

    return next((f.env for f in serve_flags() if f.env_only and f"--{f.name}" == flag), None)


# each command, the module that adds its arguments and runs it, and its help
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("serve", "serve metrics over HTTP"),
    "demo": ("serve", "serve metrics of a local Redis (--redis.addr, default :6379), starting a throwaway redis-server with a "
                      "node type and a little traffic if none answers"),
    "cost": ("serve", "discover the ElastiCache nodes and print what polling CloudWatch for them would cost, fetching no metric"),
    "baseline": ("baseline", "baseline tables: derive one from benchmark results"),
    "render": ("render", "render the alert catalog and baselines to Prometheus rules, a PrometheusRule or a CloudFormation template"),
    "alarms": ("aws", "create or update the CloudWatch alarms of the catalog directly (PutMetricAlarm) for the discovered nodes"),
    "capacity": ("aws", "which nodes approach their baseline, how fast, and what to change, from CloudWatch history"),
    "benchmark": ("baseline", "load a node per data size, measure its bandwidth and CPU, write the seed's CSV and a baseline entry"),
    "cluster": ("cluster", "a cluster's shards: what would bring their skew under a limit, from the slots' measured load"),
    "backtest": ("backtest", "what the rules would have paged over a Prometheus' history (pages, warnings, per alert, node and day), "
                             "beside the rules run today (--compare)"),
    "healthcheck": ("healthcheck", "ask /-/healthy of the exporter serving beside it, with its listen address and web config "
                                   "(the image's HEALTHCHECK): exit 0 when healthy, else 1"),
    "check-config": ("check", "validate a configuration file (with the environment, as serve reads it) without starting: exit 0 "
                              "when it is fine, 2 with every problem"),
}  # fmt: skip


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; each command's module adds that command's arguments. With ``only``, the other commands are names
    and help alone, so that `serve` loads none of the other commands' modules."""
    parser = _Parser(
        prog="elasticache-exporter",
        allow_abbrev=False,
        description="Prometheus exporter for Redis, Valkey and AWS ElastiCache.",
    )
    parser.add_argument("--version", action="version", version=f"elasticache-exporter {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_, description=help_, allow_abbrev=False)
        if only is None or only == name:
            import_module(f"exporter.cli.{module}").add_arguments(name, sub)
    return parser


def _command_of(argv: Sequence[str]) -> str:
    """The command ``argv`` names (its first word that is not an option); serve where it names none."""
    return next((word for word in argv if not word.startswith("-")), "serve")


def main(argv: Sequence[str] | None = None, *, clock: Callable[[], float] | None = None) -> int:
    words = list(argv if argv is not None else sys.argv[1:])
    parser = build_parser(_command_of(words))
    args = parser.parse_args(words)
    if args.command is None:
        args = parser.parse_args([*words, "serve"])
    parts = (args.command, getattr(args, "action", None), getattr(args, "baseline_command", None), getattr(args, "cluster_command", None))
    command = " ".join(str(part) for part in parts if part)
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

        if args.command == "baseline":
            return baseline.run_baseline_derive(args, os.environ, clock)
        return baseline.run_benchmark_command(args, os.environ)
    if args.command == "cluster":
        from .cluster import run_cluster

        return run_cluster(args, os.environ)
    if args.command == "backtest":
        from .backtest import run_backtest

        return run_backtest(args, clock)
    if args.command == "check-config":
        from .check import run_check_config

        return run_check_config(args, os.environ)
    if args.command == "healthcheck":
        from .healthcheck import run_healthcheck

        return run_healthcheck(args, os.environ)
    if args.command in ("capacity", "alarms"):
        from . import aws

        return aws.run_capacity(args, os.environ, clock) if args.command == "capacity" else aws.run_alarms(args, os.environ)
    from .config_flags import load_config

    config = load_config(args, os.environ)
    setup_logging(config.log_level, config.log_format)
    if args.command == "cost":
        from . import aws

        return aws.print_cost(config, aws.AlarmChoice(args.alarms, args.network_alarms, args.baselines, args.catalog, args.promql_endpoint))
    from . import serve

    if args.command == "demo":
        from .demo import run_demo

        return run_demo(config, serve.run_server)
    return serve.run_server(config, reload=lambda: load_config(args, os.environ))
