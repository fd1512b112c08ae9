"""`backtest`: what a rule set would have paged over a Prometheus' history, beside the rules run today."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from exporter.common.errors import UsageError


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prometheus", required=True, metavar="URL", help="the Prometheus (or Thanos, Mimir, AMP, CloudWatch) to read history from")
    parser.add_argument("--range", default="7d", metavar="DURATION", help="how far back from --end (default 7d)")
    parser.add_argument("--start", metavar="TIME", help="the range's start: RFC 3339 or Unix seconds (instead of --range)")
    parser.add_argument("--end", metavar="TIME", help="the range's end: RFC 3339 or Unix seconds (default now)")
    parser.add_argument("--rules", metavar="FILE", help="a rule file or PrometheusRule to test (default: the rules `render prometheus` makes)")
    parser.add_argument("--compare", metavar="FILE", help="the rules run today, reported beside --rules")
    parser.add_argument(
        "--alertmanager",
        metavar="FILE",
        help="Alertmanager configuration (route, inhibit_rules) for both rule sets "
        "(default: the rendered routing for ours; group_by alertname, no inhibition, for --compare)",
    )
    parser.add_argument("--interval", default="1m", metavar="DURATION", help="evaluation interval of a group that names none (default 1m)")
    parser.add_argument("--format", choices=("text", "json", "html"), default="text", help="text (default), json, or html with a plot of pages a day")
    parser.add_argument("--bearer-token-file", metavar="FILE")
    parser.add_argument("--basic-auth-user", metavar="USER")
    parser.add_argument("--basic-auth-password-file", metavar="FILE")
    parser.add_argument("--ca-file", metavar="FILE", help="CA bundle to verify the server")
    parser.add_argument(
        "--sigv4", choices=("aps", "monitoring"), help="sign with SigV4: aps (Amazon Managed Service for Prometheus) or monitoring (CloudWatch)"
    )
    parser.add_argument("--sigv4-region", metavar="REGION")
    parser.add_argument("--timeout", default="2m", metavar="DURATION", help="per request (default 2m)")
    parser.add_argument("--parallel", type=int, default=4, metavar="N", help="queries asked at once (default 4)")  # fmt: skip


def _time(text: str, flag: str) -> float:
    import datetime

    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError as err:
        raise UsageError(f"{flag} {text!r}: not RFC 3339 or Unix seconds") from err


def _duration(text: str, flag: str) -> float:
    from exporter.alerts.notify import seconds

    try:
        value = seconds(text)
    except ValueError as err:
        raise UsageError(f"{flag} {text!r}: not a duration such as 7d or 90m") from err
    if value <= 0:
        raise UsageError(f"{flag} {text!r}: must be longer than 0")
    return value


def _read(path: str, flag: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as err:
        raise UsageError(f"{flag} {path}: {err.strerror or err}") from err


def _default_rules() -> tuple[str, dict[str, Any]]:
    """The rules and the Alertmanager routing `render` makes with its defaults."""
    from exporter.alerts.alertmanager import routing
    from exporter.alerts.catalog import load_catalog
    from exporter.alerts.prometheus import render_prometheus
    from exporter.baselines.table import load_table

    alerts = load_catalog()
    return render_prometheus(alerts, load_table()), routing(alerts)


def run_backtest(args: argparse.Namespace, clock: Any = None) -> int:
    from exporter.alerts.backtest import BacktestError, Cache, backtest, load_rules, mark_missing, outcome, summary, warm_up
    from exporter.alerts.backtest_report import html_report, text_report
    from exporter.alerts.history import PrometheusHistory
    from exporter.alerts.notify import ConfigError

    now = (clock or time.time)()
    end = _time(args.end, "--end") if args.end else now
    start = _time(args.start, "--start") if args.start else end - _duration(args.range, "--range")
    if start >= end:
        raise UsageError(f"the range is empty: --start {start:.0f} is not before --end {end:.0f}")
    interval = _duration(args.interval, "--interval")
    given = _alertmanager(args.alertmanager) if args.alertmanager else None
    history = PrometheusHistory(_access(args))
    try:
        names = history.metric_names(start, end)
    except BacktestError as err:  # the server cannot be asked at all: one line, exit 1
        print(f"elasticache-exporter: backtest: {err}", file=sys.stderr)
        return 1
    held = names.__contains__ if names is not None else None
    default_text, default_routing = _default_rules()
    try:
        ours = load_rules(args.rules or "the rendered rules", _read(args.rules, "--rules") if args.rules else default_text, interval, held)
        theirs = load_rules(args.compare, _read(args.compare, "--compare"), interval, held) if args.compare else None
    except BacktestError as err:
        raise UsageError(str(err)) from err
    results = []
    cache = Cache()  # an expression both rule sets hold is asked once, over the same chunks
    warm = warm_up(ours, *((theirs,) if theirs else ()))
    for rules, routing in ((ours, given or default_routing), *(((theirs, given or {"route": {"group_by": ["alertname"]}}),) if theirs else ())):
        histories = backtest(rules, history.query_range, start, end, _progress(rules.path), cache, max(1, args.parallel), warm)
        if names is not None:
            mark_missing(histories, names.__contains__)
        try:
            results.append(summary(outcome(rules, histories, routing, start, end)))
        except ConfigError as err:
            raise UsageError(f"--alertmanager: {err}") from err
        if names is None:
            results[-1]["names_unknown"] = True
    if args.format == "json":
        print(json.dumps({"rule_sets": results, "requests": history.requests}, indent=2, sort_keys=True))
    elif args.format == "html":
        print(html_report(results))
    else:
        print(text_report(results))
    return 0


def _alertmanager(path: str) -> dict[str, Any]:
    import yaml

    try:
        document = yaml.safe_load(_read(path, "--alertmanager"))
    except yaml.YAMLError as err:
        raise UsageError(f"--alertmanager {path}: not YAML: {str(err).splitlines()[0]}") from err
    if not isinstance(document, dict) or not isinstance(document.get("route", {}), dict):
        raise UsageError(f"--alertmanager {path}: not an Alertmanager configuration (a mapping with route, receivers, inhibit_rules)")
    return document


def _access(args: argparse.Namespace) -> Any:
    from exporter.alerts.history import Access

    password = _read(args.basic_auth_password_file, "--basic-auth-password-file").strip() if args.basic_auth_password_file else None
    token = _read(args.bearer_token_file, "--bearer-token-file").strip() if args.bearer_token_file else None
    if bool(args.basic_auth_user) != bool(password):
        raise UsageError("--basic-auth-user and --basic-auth-password-file go together")
    return Access(
        args.prometheus,
        bearer_token=token,
        basic_auth=(args.basic_auth_user, password) if args.basic_auth_user and password else None,
        ca_file=args.ca_file,
        sigv4_service=args.sigv4,
        sigv4_region=args.sigv4_region,
        timeout=_duration(args.timeout, "--timeout"),
    )


def _progress(what: str) -> Any:
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        width = 30
        filled = width * done // max(1, total)
        end = "\n" if done == total else ""
        print(f"\r{what}: [{'#' * filled}{'.' * (width - filled)}] {done}/{total} alerts", end=end, file=sys.stderr, flush=True)

    return show
