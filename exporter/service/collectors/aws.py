"""The AWS side as served: the monitor's cached CloudWatch series with their datapoints' times, node info, serverless
caches against their limits, and the AWS calls' own health. Reads the cache only: nothing here calls AWS."""

from __future__ import annotations

from exporter.aws.cloudwatch import NAMESPACE, dimensions, prometheus_name, tier_of
from exporter.aws.discovery import ServerlessCache
from exporter.aws.engine_support import SupportRow, cluster_support, load_support_table
from exporter.aws.minutes import MinuteWindow
from exporter.aws.monitor import AwsMonitor, series_key
from exporter.baselines.table import BaselineTable
from exporter.common.families import COUNTER, GAUGE, FamilyCollector, FamilySet

from .aws_baseline import add_aws_baseline
from .aws_fleet import add_fleet, tag_labels
from .aws_lifecycle import add_engine_support, add_global_datastores


class AwsCollector(FamilyCollector):
    """Serves the monitor's cache: CloudWatch series, node info, and the AWS side's own health."""

    def __init__(self, monitor: AwsMonitor, baselines: BaselineTable | None = None, support_table: list[SupportRow] | None = None) -> None:
        self._monitor = monitor
        self._baselines = baselines
        self.support_table = support_table if support_table is not None else load_support_table()

    def write(self, out: FamilySet) -> None:
        monitor = self._monitor
        tiers: dict[str, str] = {}  # each served series' tier
        rising = monitor.rising()
        windows = monitor.windows()
        for value in sorted(monitor.cache().values(), key=lambda v: series_key(v.query)):
            query = value.query
            labels = {"account_id": query.node.account_id, "region": query.node.region}
            labels.update((f"dimension_{name}", value) for name, value in dimensions(query.node))
            name = prometheus_name(query.metric, query.statistic)
            out.add(name, GAUGE, f"CloudWatch {NAMESPACE} {query.metric}, statistic {query.statistic}.", labels, value.datapoint.value)
            out.add(
                "elasticache_cloudwatch_datapoint_timestamp_seconds",
                GAUGE,
                "Time of the CloudWatch datapoint behind each aws_elasticache_* series.",
                {**labels, "metric": name},
                value.datapoint.timestamp,
            )
            tiers[name] = tier_of(query.metric, query.statistic)
            held = windows.get(series_key(query))
            if held is not None:
                _add_window(held, {**labels, "metric": name}, out)
            counted = rising.get(series_key(query))
            if counted is not None:
                out.add(
                    "elasticache_cloudwatch_rising_minutes",
                    GAUGE,
                    "Of the windows of 5 CloudWatch minutes ending at each minute the last poll brought, the most minutes of "
                    "each allowance-exceeded series above the minute held before it (each minute once, however often the exporter polls).",
                    {**labels, "metric": name},
                    counted.rising,
                )
        for name, tier in sorted(tiers.items()):
            out.add(
                "elasticache_cloudwatch_fresh_seconds",
                GAUGE,
                "How old the datapoint of each aws_elasticache_* series may be while its poller is healthy (its tier's interval).",
                {"metric": name, "tier": tier},
                monitor.fresh_seconds(tier),
            )
        for name, node in monitor.named_nodes():
            if not monitor.owns(name):
                continue
            out.add(
                "elasticache_node_info",
                GAUGE,
                "A discovered ElastiCache node; join on instance, or on account_id, region and dimension_CacheClusterId.",
                {
                    "instance": name,
                    "account_id": node.account_id,
                    "replication_group": node.replication_group,
                    "shard": node.shard,
                    "node": node.cluster_id,
                    "node_type": node.node_type,
                    "engine": node.engine,
                    "engine_version": node.engine_version,
                    "az": node.az,
                    "region": node.region,
                    "role": node.role,
                    "dimension_CacheClusterId": node.cluster_id,
                    "dimension_CacheNodeId": node.node_id,
                    **tag_labels(node.tags, monitor.config.export_tags),
                },
                1.0,
            )
        for cache in monitor.serverless():
            if monitor.owns(cache.name):
                _add_serverless(monitor, cache, out)
        add_aws_baseline(monitor, self._baselines, out)
        # fleet-wide families: each on the one shard that owns the name of the group it describes
        add_fleet(monitor, monitor.now(), out)
        add_global_datastores(monitor.global_datastores(), out, monitor.owns)
        add_engine_support(cluster_support(monitor.nodes(), self.support_table), out, monitor.owns)
        _add_api_health(monitor, out)


def _add_window(held: MinuteWindow, labels: dict[str, str], out: FamilySet) -> None:
    """A gauge's windows of minutes (1 to 15, as its alert holds it) ending at each minute the last poll brought."""
    out.add(
        "elasticache_cloudwatch_window_minutes",
        GAUGE,
        "CloudWatch minutes held of each windowed gauge's newest window (the last 1 to 15, as its alert wants them held).",
        labels,
        held.minutes,
    )
    if held.lowest is not None and held.highest is not None:
        out.add(
            "elasticache_cloudwatch_window_lowest",
            GAUGE,
            "Of the full windows ending at each minute the last poll brought, the highest lowest value: held in every minute of one.",
            labels,
            held.lowest,
        )
        out.add(
            "elasticache_cloudwatch_window_highest",
            GAUGE,
            "Of the same windows, the lowest highest value: not passed in any minute of one.",
            labels,
            held.highest,
        )


def _add_serverless(monitor: AwsMonitor, cache: ServerlessCache, out: FamilySet) -> None:
    """A serverless cache has no node type: its limits are the ECPUs per second and the data storage it may use, and its
    use of them is served as a ratio while its CloudWatch data is fresh."""
    labels = {"account_id": cache.account_id, "region": cache.region, "cache": cache.name}
    out.add(
        "elasticache_serverless_cache_info",
        GAUGE,
        "A discovered ElastiCache Serverless cache.",
        {
            **labels,
            "engine": cache.engine,
            "engine_version": cache.engine_version,
            "status": cache.status,
            **tag_labels(cache.tags, monitor.config.export_tags),
        },
        1.0,
    )
    if cache.ecpu_per_second_max is not None:
        out.add(
            "elasticache_serverless_ecpu_per_second_limit",
            GAUGE,
            "The cache's maximum ElastiCache Processing Units per second.",
            labels,
            cache.ecpu_per_second_max,
        )
    if cache.data_storage_max_bytes is not None:
        out.add(
            "elasticache_serverless_data_storage_limit_bytes",
            GAUGE,
            "The cache's maximum data storage, in bytes.",
            labels,
            cache.data_storage_max_bytes,
        )
    ecpus = monitor.serverless_datapoint(cache, "ElastiCacheProcessingUnits", "Sum")
    if ecpus is not None and cache.ecpu_per_second_max:
        out.add(
            "elasticache_serverless_ecpu_utilization_ratio",
            GAUGE,
            "ECPUs per second used over the last CloudWatch period, as a fraction of the cache's maximum (served while fresh).",
            labels,
            ecpus.value / monitor.config.period / cache.ecpu_per_second_max,
        )
    stored = monitor.serverless_datapoint(cache, "BytesUsedForCache", "Maximum")
    if stored is not None and cache.data_storage_max_bytes:
        out.add(
            "elasticache_serverless_data_storage_utilization_ratio",
            GAUGE,
            "Bytes used for data, as a fraction of the cache's maximum data storage (served while fresh).",
            labels,
            stored.value / cache.data_storage_max_bytes,
        )


def _add_bill(monitor: AwsMonitor, out: FamilySet) -> None:
    """What the poller's schedule costs a month for the fleet of the moment, the budget it keeps, and how often each tier
    is asked (the figures `cost` prints)."""
    made = monitor.budget_plan
    out.add(
        "elasticache_exporter_cloudwatch_usd_per_month_estimate",
        GAUGE,
        "The month's GetMetricData bill at the tiers' intervals for the fleet of the moment (USD).",
        {},
        made.usd_per_month,
    )
    if made.budget is not None:
        out.add("elasticache_exporter_cloudwatch_budget_usd_per_month", GAUGE, "aws.cloudwatch.budget_usd_per_month (USD).", {}, made.budget)
    for tier, interval in made.intervals.items():
        out.add("elasticache_exporter_cloudwatch_tier_interval_seconds", GAUGE, "How often a tier is asked.", {"tier": tier}, interval)
    out.add(
        "elasticache_exporter_cloudwatch_nodes_on_info",
        GAUGE,
        "Nodes whose INFO the exporter read lately, so the last poll left CloudWatch's copy of it out.",
        {},
        monitor.nodes_on_info,
    )


def _add_api_health(monitor: AwsMonitor, out: FamilySet) -> None:
    calls: dict[str, int] = {}
    errors: dict[tuple[str, str], int] = {}
    metrics_requested = 0
    for stats in monitor.api_stats():
        api_calls, api_errors, api_metrics = stats.snapshot()
        for name, count in api_calls.items():
            calls[name] = calls.get(name, 0) + count
        for key, count in api_errors.items():
            errors[key] = errors.get(key, 0) + count
        metrics_requested += api_metrics
    for name, count in sorted(calls.items()):
        out.add("elasticache_exporter_aws_api_calls_total", COUNTER, "AWS API calls made, by API (the bill).", {"api": name}, count)
    for (name, kind), count in sorted(errors.items()):
        out.add("elasticache_exporter_aws_api_errors_total", COUNTER, "Failed AWS API calls by API and kind.", {"api": name, "kind": kind}, count)
    out.add(
        "elasticache_exporter_cloudwatch_metrics_requested_total",
        COUNTER,
        "Metric-statistics requested with GetMetricData (billed per 1,000).",
        {},
        metrics_requested,
    )
    out.add(
        "elasticache_exporter_cloudwatch_promql_samples_total",
        COUNTER,
        "Samples CloudWatch's PromQL API scanned for the polls, as estimated from each query (billed per million).",
        {},
        sum(stats.promql_samples for stats in monitor.api_stats()),
    )
    out.add("elasticache_exporter_cloudwatch_queries", GAUGE, "GetMetricData queries in the last cycle.", {}, monitor.last_queries)
    _add_bill(monitor, out)
    out.add(
        "elasticache_exporter_cloudwatch_last_success_timestamp_seconds",
        GAUGE,
        "When a CloudWatch poll last brought data, or had nothing to ask of the fleet discovery found (0: never).",
        {},
        monitor.last_poll,
    )
    out.add("elasticache_exporter_cloudwatch_poll_duration_seconds", GAUGE, "Duration of the last CloudWatch poll.", {}, monitor.last_poll_duration)
    out.add(
        "elasticache_exporter_discovery_last_success_timestamp_seconds",
        GAUGE,
        "When discovery last succeeded in some region (0: never).",
        {},
        monitor.last_discovery,
    )
    counts: dict[tuple[str, str], int] = {}
    for node in monitor.nodes():
        counts[(node.account_id, node.region)] = counts.get((node.account_id, node.region), 0) + 1
    for (account_id, region), count in sorted(counts.items()):
        out.add("elasticache_exporter_discovered_nodes", GAUGE, "Nodes found by discovery.", {"account_id": account_id, "region": region}, count)
