"""The AWS commands: ``cost``, ``capacity`` and ``alarms``."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

from exporter.common.errors import ExporterError, RuntimeFailure, UsageError
from exporter.common.records import record
from exporter.config import Config, build_config, load_yaml, overlay, parse_duration

from .output import emit


def _aws_config(values: dict[str, Any], environ: Mapping[str, str]) -> Config:
    config_file = values.get("config.file")
    raw: dict[str, Any] = load_yaml(config_file) if config_file else {}
    if values.get("aws.region"):
        raw = overlay(raw, {"aws.region": values["aws.region"]})
    config = build_config(raw, source_file=config_file, environ=environ)
    if not config.aws.enabled:
        raise ExporterError("no AWS regions configured: give --aws.region or aws.regions in --config.file")
    return config


def aws_failure(err: Any) -> str:
    """One line for an AWS call that failed past its retries (an AwsCallError)."""
    if err.kind == "credentials":
        return "no AWS credentials found (environment, profile, instance role or web identity)"
    if err.kind == "throttling":
        return f"AWS kept throttling {err.api} past the retries with backoff; try again later or poll less"
    if err.kind in ("connection", "timeout"):
        return f"cannot reach AWS for {err.api} ({err.kind}): {err}"
    if err.kind == "access_denied":
        return f"AWS refused {err.api} (access denied): the IAM policy in docs/aws.md lists what each command needs"
    return f"AWS call failed: {err}"


def discover(monitor: Any) -> None:
    """Discovery for a command, which must not go on with part of the fleet: the first failure ends it (exit 1)."""
    failures = monitor.discover_once()
    if failures:
        place, err = failures[0]
        raise RuntimeFailure(f"discovery in {place}: {aws_failure(err)}")


def check_names(wanted: list[str], known: set[str], flag: str) -> None:
    """An unknown name ends the command with exit 2 and the nearest known ones."""
    import difflib

    for name in wanted:
        if name not in known:
            near = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.5)
            hint = f"; nearest: {', '.join(near)}" if near else (f"; known: {', '.join(sorted(known)[:5])}" if known else "; none was discovered")
            raise UsageError(f"{flag} {name}: no such cache cluster among the {len(known)} discovered{hint}")


def _add_pairs(into: dict[str, int], pairs: Mapping[str, int]) -> None:
    for tier, count in pairs.items():
        into[tier] += count


def _print_tiers(intervals: Mapping[str, float], pairs: Mapping[str, int], watched: int) -> None:
    """Per tier: its metric-statistics, how often they are asked, USD a node and month and in all; the total."""
    from exporter.aws.cloudwatch import TIERS, usd_per_month

    print("Each metric-statistic is asked once a poll of its tier, for every minute since the last (billed once per request).")
    print(f"{'tier':<10} {'pairs':>8} {'interval':>9} {'USD/node/month':>15} {'USD/month':>10}")
    usd_total = 0.0
    for tier in TIERS:
        interval = intervals[tier]
        usd = usd_per_month(pairs[tier], interval)
        usd_total += usd
        print(f"{tier:<10} {pairs[tier]:>8,} {interval:>8.0f}s {usd / watched:>15.4f} {usd:>10.2f}")
    print(f"{'total':<10} {sum(pairs.values()):>8,} {'':>9} {usd_total / watched:>15.4f} {usd_total:>10.2f}")
    every_minute = usd_per_month(sum(pairs.values()), 60.0)
    print(f"(every pair every minute would cost USD {every_minute:,.2f} a month, {every_minute / watched:.2f} a node)")


def _print_info_first(config: Config, monitor: Any, caches: int, watched: int) -> None:
    """The bill when the exporter reads every node's INFO: CloudWatch's copy of it (INFO_EQUIVALENT) is not asked, and the
    budget is planned for the pairs left, as the running monitor plans it."""
    from exporter.aws.budget import plan
    from exporter.aws.cloudwatch import TIERS, pairs_by_tier, split_info_equivalent

    left, samples = dict.fromkeys(TIERS, 0), dict.fromkeys(TIERS, 0)
    for _node, pairs, node_samples in monitor.node_bills(lambda node: True):
        _add_pairs(left, pairs)
        _add_pairs(samples, node_samples)
    _add_pairs(left, {tier: count * caches for tier, count in pairs_by_tier(monitor.serverless_metrics).items()})
    saved = sum(pairs_by_tier(split_info_equivalent(monitor.node_metrics)[1]).values())
    aws = config.aws
    made = plan(left, {tier: aws.tier_interval(tier) for tier in TIERS}, aws.poll_interval, aws.budget_usd_per_month, samples)
    every = ", ".join(f"{tier} every {made.intervals[tier]:.0f}s" for tier in TIERS)
    print(
        f"INFO first: a node whose INFO the exporter reads is not asked its {saved} INFO-equivalent pairs; "
        f"with every node's INFO read, USD {made.usd_per_month / watched:.4f} a node, {made.usd_per_month:.2f} a month "
        f"({every}; the table above: none read)"
    )


def _print_sources(config: Config, intervals: Mapping[str, float], bills: list[Any], caches_usd: float, watched: int) -> None:
    """Each source's share of the polling: GetMetricData, and CloudWatch's PromQL API for the Valkey nodes that have
    ElastiCache's OpenTelemetry metrics (its price assumed, and said so); what such a node costs a month."""
    from exporter.aws.budget import promql_samples_per_month, promql_usd_per_month
    from exporter.aws.cloudwatch import TIERS, usd_per_month
    from exporter.aws.pricing import PROMQL_SAMPLES_SOURCE

    def usd(pairs: Mapping[str, int], samples: Mapping[str, int]) -> tuple[float, float]:
        return (
            sum(usd_per_month(pairs[tier], intervals[tier]) for tier in TIERS),
            sum(promql_usd_per_month(samples[tier], intervals[tier]) for tier in TIERS),
        )

    on_api = [(pairs, samples) for _node, pairs, samples in bills if any(samples.values())]
    if config.aws.promql == "off" or not on_api:
        why = "aws.cloudwatch.promql: off" if config.aws.promql == "off" else "no node has ElastiCache's OpenTelemetry metrics"
        print(f"Sources: GetMetricData alone ({why}).")
        return
    scanned = sum(promql_samples_per_month(samples[tier], intervals[tier]) for _node, _pairs, samples in bills for tier in TIERS)
    api_usd = sum(usd(pairs, samples)[1] for _node, pairs, samples in bills)
    gmd_usd = sum(usd(pairs, samples)[0] for _node, pairs, samples in bills) + caches_usd
    on_path = sum(sum(usd(pairs, samples)) for pairs, samples in on_api)
    print(f"Sources: CloudWatch's PromQL API serves {len(on_api)} Valkey node(s) what ElastiCache's OpenTelemetry metrics stand for.")
    print(f"{'source':<16} {'USD/node/month':>15} {'USD/month':>10}")
    print(f"{'GetMetricData':<16} {gmd_usd / watched:>15.4f} {gmd_usd:>10.2f}")
    print(f"{'PromQL API':<16} {api_usd / watched:>15.4f} {api_usd:>10.2f}   {scanned / 1e6:,.1f} million samples scanned a month")
    print(f"{'polling':<16} {(gmd_usd + api_usd) / watched:>15.4f} {gmd_usd + api_usd:>10.2f}")
    print(f"  PromQL API: {PROMQL_SAMPLES_SOURCE}")
    print(f"  A node on the OpenTelemetry path: USD {on_path / len(on_api):.4f} a month (GetMetricData for what the vended set lacks).")


def _print_places(
    places: Mapping[tuple[str, str], Mapping[str, int]], counts: Mapping[tuple[str, str], list[int]], intervals: Mapping[str, float]
) -> None:
    from exporter.aws.cloudwatch import TIERS, usd_per_month

    print(f"{'account':<14} {'region':<16} {'nodes':>6} {'serverless':>10} {'pairs':>8} {'calls/poll':>10} {'USD/month':>10}")
    for (account_id, region), pairs in sorted(places.items()):
        count, serverless = counts[(account_id, region)]
        usd = sum(usd_per_month(pairs[tier], intervals[tier]) for tier in TIERS)
        queries = sum(pairs.values())
        calls = math.ceil(queries / 500)
        print(f"{account_id or '-':<14} {region:<16} {count:>6} {serverless:>10} {queries:>8,} {calls:>10,} {usd:>10.2f}")
    print("Calls are made per account and region: ceil(pairs / 500) each, at most, when a poll asks every tier.")


@record(frozen=True)
class AlarmChoice:
    """Which CloudWatch alarms ``cost`` prices beside the polling, as ``alarms plan`` would make them."""

    alarms: str = "per-node"  # per-node | fleet | none
    network_alarms: str = "percentage"
    baselines: str | None = None
    catalog: str | None = None
    promql_endpoint: str | None = None  # fleet: where CloudWatch's PromQL API is asked which nodes have the metrics


def _print_alarms(choice: AlarmChoice, monitor: Any, nodes: list[Any], polling_usd: float, watched: int) -> None:
    """The alarms ``alarms plan`` would make for ``nodes``, by kind, with what they cost a node (serverless caches get
    none), and the bill with the polling, over every node and cache polled (``watched``), as the polling table counts."""
    from exporter.alerts.alarms import desired_alarms, detect_emitters
    from exporter.alerts.catalog import load_catalog
    from exporter.aws.otel_metrics import emits_otel
    from exporter.aws.pricing import FREE_ALARM_METRICS, alarm_lines
    from exporter.baselines.table import load_table

    if choice.alarms == "none":
        print(f"Alarms: none priced (--alarms none). Polling alone: USD {polling_usd / watched:.4f} a node, {polling_usd:.2f} a month.")
        return
    alerts = load_catalog(choice.catalog)
    emits: Callable[[Any], bool] = emits_otel
    if choice.alarms == "fleet":
        emitting: set[Any] = set()
        for account, found in monitor.nodes_by_account().items():
            detected, notes = detect_emitters(monitor.apis[account], found, choice.promql_endpoint)
            emitting |= {node.key for node in found if detected(node)}
            for note in notes:
                print(note)
        emits = lambda node: node.key in emitting  # noqa: E731
    desired, _ = desired_alarms(nodes, alerts, load_table(choice.baselines), None, choice.network_alarms, choice.alarms, emits)
    lines = alarm_lines([arguments for _, arguments in desired])
    made = "one set a node" if choice.alarms == "per-node" else "fleet alarms where the nodes emit OpenTelemetry metrics"
    print(f"Alarms, {made}, as `alarms plan --alarms {choice.alarms}` makes them (network alarms: {choice.network_alarms}):")
    print(f"{'kind':<16} {'alarms':>8} {'metrics':>8} {'USD/node/month':>15} {'USD/month':>10}")
    alarms_usd = 0.0
    alarmed = max(1, len(nodes))
    for line in lines:
        alarms_usd += line.usd_per_month
        print(f"{line.price.kind:<16} {line.alarms:>8,} {line.metrics:>8,} {line.usd_per_month / alarmed:>15.4f} {line.usd_per_month:>10.2f}")
    count = sum(line.alarms for line in lines)
    print(f"{'total':<16} {count:>8,} {sum(line.metrics for line in lines):>8,} {alarms_usd / alarmed:>15.4f} {alarms_usd:>10.2f}")
    for line in lines:
        print(f"  {line.price.kind}: {line.price.source}")
    total = polling_usd + alarms_usd
    free = f"before the free tier of {FREE_ALARM_METRICS} alarm metrics"
    each = "a node" if watched == len(nodes) else "a node or serverless cache polled"
    print(f"Polling and alarms together: USD {total / watched:.4f} {each}, {total:.2f} a month ({free}).")
    for alert in alerts:
        if alert.cloudwatch and alert.cloudwatch.insufficient_data:
            print(f"Each node's {alert.name} alarm alone notifies INSUFFICIENT_DATA: one notice when a node's data stops.")


def print_cost(config: Config, alarms: AlarmChoice | None = None) -> int:
    from exporter.aws.budget import describe, monthly_usd
    from exporter.aws.cloudwatch import TIERS, pairs_by_tier
    from exporter.aws.monitor import AwsMonitor

    if not config.aws.enabled:
        raise ExporterError("no AWS regions configured: set aws.regions in the config file or --aws.region")
    monitor = AwsMonitor(config.aws, log_failures=False)
    discover(monitor)
    nodes, caches = monitor.nodes(), monitor.serverless()
    metrics, serverless_metrics = monitor.node_metrics, monitor.serverless_metrics
    per_node = sum(len(spec.statistics) for spec in metrics)
    per_cache = sum(len(spec.statistics) for spec in serverless_metrics)
    regions = sorted({n.region for n in nodes} | {c.region for c in caches})
    print(f"nodes discovered: {len(nodes)}, serverless caches: {len(caches)}, in {', '.join(regions) or 'no region'}")
    print(f"metrics: {len(metrics)}, queries per node: {per_node}; per serverless cache: {per_cache} (metric x statistic)")
    left_out = ", ".join(config.aws.exclude_groups) or "none"
    print(f"AWS's node metric groups (aws.cloudwatch.exclude_groups to leave one out): left out {left_out}")
    secondaries = sum(len(d.members_of("secondary")) for d in monitor.global_datastores())
    if secondaries:
        print(f"Global Datastore secondary clusters: {secondaries}; each primary's GlobalDatastoreReplicationLag is polled (1 query)")
    monitor.detect_otel(probe=True)  # which Valkey nodes and series the PromQL API serves (aws.cloudwatch.promql)
    places: dict[tuple[str, str], dict[str, int]] = {}  # GetMetricData pairs per tier, by account and region
    counts: dict[tuple[str, str], list[int]] = {}  # nodes and serverless caches, by account and region
    samples = dict.fromkeys(TIERS, 0)  # the PromQL API's samples a minute, per tier
    bills = monitor.node_bills(lambda node: False)
    for node, node_pairs, node_samples in bills:
        _add_pairs(places.setdefault((node.account_id, node.region), dict.fromkeys(TIERS, 0)), node_pairs)
        _add_pairs(samples, node_samples)
        counts.setdefault((node.account_id, node.region), [0, 0])[0] += 1
    for cache in caches:
        _add_pairs(places.setdefault((cache.account_id, cache.region), dict.fromkeys(TIERS, 0)), pairs_by_tier(serverless_metrics))
        counts.setdefault((cache.account_id, cache.region), [0, 0])[1] += 1
    total = dict.fromkeys(TIERS, 0)
    for pairs in places.values():
        _add_pairs(total, pairs)
    made = monitor.budget_plan  # the intervals the poller would ask the tiers at, for this fleet and the budget
    watched = max(1, len(nodes) + len(caches))
    _print_tiers(made.intervals, total, watched)
    caches_pairs = {tier: count * len(caches) for tier, count in pairs_by_tier(serverless_metrics).items()}
    _print_sources(config, made.intervals, bills, monthly_usd(caches_pairs, made.intervals), watched)
    if made.budget is not None:
        kept = f"CloudWatch budget USD {made.budget:.2f} a month: kept at the configured intervals"
        print(describe(made) if made.lengthened or not made.kept else kept)
    if config.aws.info_first and nodes:
        _print_info_first(config, monitor, len(caches), watched)
    polling_usd = monthly_usd(total, made.intervals, samples)
    _print_alarms(alarms or AlarmChoice(), monitor, nodes, polling_usd, max(1, len(nodes) + len(caches)))
    if places:
        _print_places(places, counts, made.intervals)
    print("GetMetricData is billed per metric requested: USD 0.01 per 1,000. Discovery calls are free.")
    if config.aws.events:
        account_regions = sum(len(account.regions) for account in config.aws.accounts)
        per_hour = account_regions * (3600 / config.aws.poll_interval + 2 * 3600 / config.aws.discovery_interval)
        print(
            f"Events and service updates (free, as discovery): DescribeEvents every {config.aws.poll_interval:.0f}s and "
            f"DescribeServiceUpdates with DescribeUpdateActions every {config.aws.discovery_interval:.0f}s in each of "
            f"{account_regions} account-region(s): about {per_hour:,.0f} calls an hour (a page more per 100 events or updates)."
        )
    return 0


# (period in seconds, days CloudWatch keeps datapoints of that period): one-minute 15 days, five-minute 63, hourly 455
RETENTION_DAYS = ((60.0, 15), (300.0, 63), (3600.0, 455))


def run_capacity(args: argparse.Namespace, environ: Mapping[str, str], clock: Callable[[], float] | None = None) -> int:
    """``clock``: what "now" is (the wall clock unless a test injects one: the report's dates and the history's window
    come from one reading)."""
    import json
    import time

    from exporter.aws.engine_support import affected_rows, cluster_support, load_support_table
    from exporter.aws.monitor import AwsMonitor
    from exporter.baselines.table import load_table
    from exporter.capacity.assess import build_reports
    from exporter.capacity.history import SIGNALS, fetch_history
    from exporter.capacity.render import render_html, render_support_text, render_text
    from exporter.common.progress import Progress

    if not 1 <= args.days <= RETENTION_DAYS[-1][1]:
        raise UsageError(f"--days: CloudWatch keeps hourly data {RETENTION_DAYS[-1][1]} days; give 1 to {RETENTION_DAYS[-1][1]}")
    finest = next(period for period, days in RETENTION_DAYS if args.days <= days)
    period = finest if args.period == "auto" else parse_duration(args.period)
    if period is None or period < 60 or period % 60:
        raise UsageError(f"--period: must be auto or a multiple of 60s, got {args.period!r}")
    if period < finest:
        raise UsageError(f"--period: CloudWatch keeps {args.period} datapoints for less than {args.days} days; give {finest:.0f}s or more")
    config = _aws_config(vars(args), environ)
    table = load_table(args.baselines)
    monitor = AwsMonitor(config.aws, log_failures=False)
    discover(monitor)
    named = monitor.named_nodes()
    # a node by its instance name, or by its CacheClusterId (every account's and region's node of that id)
    check_names(args.node, {name for name, _ in named} | {node.cluster_id for _, node in named}, "--node")
    wanted = {node.key for name, node in named if not args.node or name in args.node or node.cluster_id in args.node}
    now = (clock or time.time)()
    reports = []
    for account, discovered in monitor.nodes_by_account().items():
        nodes = [node for node in discovered if node.key in wanted]
        if not nodes:
            continue
        progress = Progress(len(nodes) * len(SIGNALS), command="capacity")
        history = fetch_history(monitor.apis[account], nodes, args.days, now, progress.counter("CloudWatch history"), int(period))
        progress.finish()
        reports += build_reports(nodes, history, table, args.days, now, names={node.key: name for name, node in named}, period=int(period))
    reports.sort(key=lambda r: (r.urgency, r.node.key))
    support = affected_rows(cluster_support([node for _, node in named if node.key in wanted], load_support_table()), now)
    if args.output_format == "json":
        by_group = {(row["account_id"], row["region"], row["replication_group"]): row for row in support}
        items = [{**r.as_dict(), "engine_support": by_group.get((r.node.account_id, r.node.region, r.node.group))} for r in reports]
        text = json.dumps(items, indent=2, sort_keys=True) + "\n"
    elif args.output_format == "html":
        text = render_html(reports, args.days, now, support)
    else:
        text = render_text(reports) + render_support_text(support)
    emit(text, args.out)
    return 0


def run_alarms(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from exporter.alerts.alarms import apply, describe, desired_alarms, detect_emitters, plan
    from exporter.alerts.catalog import load_catalog
    from exporter.aws.monitor import AwsMonitor
    from exporter.aws.otel_metrics import emits_otel
    from exporter.baselines.table import load_table

    config = _aws_config(vars(args), environ)
    from exporter.aws.api import AwsCallError

    alerts, table = load_catalog(args.catalog), load_table(args.baselines)
    monitor = AwsMonitor(config.aws, log_failures=False)
    discover(monitor)
    applied = 0
    by_account = monitor.nodes_by_account()
    prune = args.action == "apply" and args.prune
    for account in config.aws.accounts:
        api = monitor.apis[account]
        nodes = by_account.get(account, [])
        emits, notes = detect_emitters(api, nodes, args.promql_endpoint) if args.alarms == "fleet" else (emits_otel, [])
        desired, skipped = desired_alarms(nodes, alerts, table, args.sns_topic_arn, args.network_alarms, args.alarms, emits)
        skipped = [*notes, *skipped]
        changes = plan(api, desired, account.regions)
        sys.stdout.write(describe(changes, skipped, prune))
        if args.action == "apply":
            try:
                applied += apply(api, changes, prune)
            except AwsCallError as err:
                raise RuntimeFailure(f"partial apply: {applied} alarm(s) applied before {aws_failure(err)}") from err
    if args.action == "apply":
        print(f"applied {applied} alarm(s)")
    return 0


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    (_add_alarms_arguments if command == "alarms" else _add_capacity_arguments)(parser)


def _add_alarms_arguments(alarms: argparse.ArgumentParser) -> None:
    alarms.add_argument("action", choices=("plan", "apply"), help="plan: show the difference; apply: make it so")
    _add_aws_source(alarms)
    alarms.add_argument("--catalog", metavar="FILE", help="alert catalog (default: the shipped one)")
    alarms.add_argument(
        "--network-alarms",
        choices=("percentage", "bytes"),
        default="percentage",
        help="percentage: AWS's NetworkBaselineUsage*Percentage, one threshold for every node (default); bytes: NetworkBytes "
        "against the node type's baseline from the table",
    )
    alarms.add_argument(
        "--alarms",
        choices=("per-node", "fleet"),
        default="per-node",
        help="per-node: one alarm a node and alert (default); fleet: for nodes of node-based Valkey replication groups, one "
        "CloudWatch PromQL alarm a region (a node type where the threshold is the type's) over ElastiCache's OpenTelemetry "
        "metrics, each node a contributor; alarms without an OpenTelemetry counterpart stay per node",
    )
    alarms.add_argument(
        "--promql-endpoint",
        metavar="URL",
        help="--alarms fleet: where CloudWatch's PromQL API is asked which nodes have the OpenTelemetry metrics (default: "
        "CloudWatch's endpoint of each region, https://monitoring.<region>.amazonaws.com, or AWS_ENDPOINT_URL_CLOUDWATCH)",
    )
    alarms.add_argument("--sns-topic-arn", help="topic for alarm, OK and insufficient-data notifications")
    alarms.add_argument("--prune", action="store_true", help="apply: also delete this tool's own alarms of nodes (or alerts) that are gone")


def _add_capacity_arguments(capacity: argparse.ArgumentParser) -> None:
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


def _add_aws_source(parser: argparse.ArgumentParser) -> None:
    """Where the AWS commands find their accounts and regions, and the baselines they compare with."""
    parser.add_argument("--config.file", dest="config.file", metavar="FILE", help="YAML configuration file (its aws: section)")
    parser.add_argument("--aws.region", dest="aws.region", help="regions, comma-separated (instead of the config file)")
    parser.add_argument("--baselines", metavar="FILE", help="baseline table (default: the shipped one)")
