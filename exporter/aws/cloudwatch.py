"""CloudWatch ``AWS/ElastiCache`` metrics: queries, batching, the time window, and the one place GetMetricData is called.

One query per (node, metric, statistic), node-level dimensions only
(CacheClusterId with CacheNodeId, so no series is counted twice; a serverless
cache's are by clusterId), at most 500 queries per GetMetricData call, so a
cycle makes ceil(queries / 500) calls per account and region. Everything here is pure
but :func:`get_metric_data`, which the background monitor and the capacity report both use.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from exporter.common.records import record

from .discovery import Node
from .pricing import GET_METRIC_DATA_PER_1000, SECONDS_PER_MONTH

if TYPE_CHECKING:
    from .api import AwsApi

NAMESPACE = "AWS/ElastiCache"
NODE_DIMENSIONS = ("CacheClusterId", "CacheNodeId")  # a node's own series: never the cluster-wide aggregate
SERVERLESS_DIMENSION = "clusterId"  # a serverless cache's series
MAX_QUERIES_PER_CALL = 500
BASIC_STATISTICS = ("Average", "Maximum", "Minimum", "Sum", "SampleCount")
_PERCENTILE = re.compile(r"^p(\d{1,2}(\.\d{1,2})?|100)$")


@record(frozen=True)
class MetricSpec:
    name: str
    statistics: tuple[str, ...]


DEFAULT_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("CPUUtilization", ("Average", "Maximum")),
    MetricSpec("EngineCPUUtilization", ("Average", "Maximum")),
    MetricSpec("NetworkBytesIn", ("Sum",)),
    MetricSpec("NetworkBytesOut", ("Sum",)),
    MetricSpec("NetworkPacketsIn", ("Sum",)),
    MetricSpec("NetworkPacketsOut", ("Sum",)),
    MetricSpec("NetworkBandwidthInAllowanceExceeded", ("Maximum",)),
    MetricSpec("NetworkBandwidthOutAllowanceExceeded", ("Maximum",)),
    MetricSpec("NetworkPacketsPerSecondAllowanceExceeded", ("Maximum",)),
    MetricSpec("NetworkConntrackAllowanceExceeded", ("Maximum",)),
    MetricSpec("DatabaseMemoryUsagePercentage", ("Maximum",)),
    MetricSpec("FreeableMemory", ("Minimum",)),
    MetricSpec("SwapUsage", ("Maximum",)),
    MetricSpec("CurrConnections", ("Maximum",)),
    MetricSpec("NewConnections", ("Sum",)),
    MetricSpec("Evictions", ("Sum",)),
    MetricSpec("ReplicationLag", ("Maximum",)),
    MetricSpec("ReplicationBytes", ("Sum",)),
    MetricSpec("CacheHits", ("Sum",)),
    MetricSpec("CacheMisses", ("Sum",)),
    MetricSpec("IsPrimary", ("Maximum",)),
)

# AWS's own view of each node (published since May 2026 for node-based clusters), polled beside the metric set unless a
# group is left out (aws.cloudwatch.exclude_groups). Statistics as AWS recommends them: Average and Maximum for a
# percentage of the minute, Maximum for a per-second maximum within the minute and for a gauge, Sum for a count. A node
# whose engine or node type does not publish one returns no datapoint for it, so it gets no series.
METRIC_GROUPS: dict[str, tuple[MetricSpec, ...]] = {
    "network_capacity": (  # traffic as a percentage of the instance's baseline bandwidth; Max*: its busiest second
        MetricSpec("NetworkBaselineUsageInPercentage", ("Average", "Maximum")),
        MetricSpec("NetworkBaselineUsageOutPercentage", ("Average", "Maximum")),
        MetricSpec("NetworkBaselineMaxUsageInPercentage", ("Maximum",)),
        MetricSpec("NetworkBaselineMaxUsageOutPercentage", ("Maximum",)),
    ),
    "memory_health": (
        MetricSpec("UsedMemoryDataset", ("Maximum",)),
        MetricSpec("AllocatorFragmentationBytes", ("Maximum",)),
        MetricSpec("AllocatorFragmentationRatio", ("Maximum",)),
        MetricSpec("MajorPageFaults", ("Sum",)),
    ),
    "connections": (
        MetricSpec("BlockedConnections", ("Maximum",)),
        MetricSpec("RejectedConnections", ("Sum",)),  # refused at maxclients
    ),
    "pubsub": (MetricSpec("PubSubChannels", ("Maximum",)), MetricSpec("PubSubShardChannels", ("Maximum",))),
    "throughput": (MetricSpec("ProcessedCommands", ("Sum",)),),
    "request_latency": (  # microseconds, server side, as percentiles of the minute (Valkey 7.2+, Redis OSS 7.0.7+)
        MetricSpec("SuccessfulReadRequestLatency", ("p50", "p99")),
        MetricSpec("SuccessfulWriteRequestLatency", ("p50", "p99")),
    ),
    "host_peaks": (  # host-level: per-second maxima within the minute, ElastiCache's own throttling, link-local shaping
        MetricSpec("NetworkMaxBytesIn", ("Maximum",)),
        MetricSpec("NetworkMaxBytesOut", ("Maximum",)),
        MetricSpec("NetworkMaxPacketsIn", ("Maximum",)),
        MetricSpec("NetworkMaxPacketsOut", ("Maximum",)),
        MetricSpec("TrafficManagementActive", ("Maximum",)),
        MetricSpec("NetworkLinkLocalAllowanceExceeded", ("Sum",)),
    ),
}


# What a node's INFO says exactly (its fields, counted the same way): for a node the exporter scrapes, CloudWatch's copy
# is not bought while its INFO answers (AwsMonitor's "INFO first"); what only AWS sees (host CPU and network, the
# allowances, swap, freeable memory, page faults, traffic management, server-side latency) always is, and so is
# ReplicationLag: seconds behind, which INFO gives in bytes only (the heartbeat reads it only where its key lives).
INFO_EQUIVALENT: frozenset[str] = frozenset(
    {
        "CurrConnections",  # connected_clients
        "NewConnections",  # total_connections_received
        "Evictions",  # evicted_keys
        "CacheHits",  # keyspace_hits
        "CacheMisses",  # keyspace_misses
        "ReplicationBytes",  # master_repl_offset
        "IsPrimary",  # role
        "UsedMemoryDataset",  # used_memory_dataset
        "AllocatorFragmentationBytes",  # allocator_frag_bytes
        "AllocatorFragmentationRatio",  # allocator_frag_ratio
        "BlockedConnections",  # blocked_clients
        "RejectedConnections",  # rejected_connections
        "PubSubChannels",  # pubsub_channels
        "PubSubShardChannels",  # pubsubshard_channels
        "ProcessedCommands",  # total_commands_processed
    }
)


def split_info_equivalent(specs: Iterable[MetricSpec]) -> tuple[tuple[MetricSpec, ...], tuple[MetricSpec, ...]]:
    """``specs`` as (what only AWS sees, what INFO says as well)."""
    specs = tuple(specs)
    return tuple(s for s in specs if s.name not in INFO_EQUIVALENT), tuple(s for s in specs if s.name in INFO_EQUIVALENT)


def polled_metrics(metrics: Sequence[MetricSpec], exclude_groups: Iterable[str] = ()) -> tuple[MetricSpec, ...]:
    """The metric set and the groups not left out, each metric once (a metric the set names keeps its statistics)."""
    left_out = set(exclude_groups)
    names = {spec.name for spec in metrics}
    extra = [spec for group, specs in METRIC_GROUPS.items() if group not in left_out for spec in specs if spec.name not in names]
    return (*metrics, *extra)


# Metrics only some node types publish, polled for those nodes beside the metric set (aws.cloudwatch.node_type_metrics):
# data tiering's SSD traffic and fill on r6gd, the CPU credits of the burstable t family.
NODE_TYPE_METRICS: tuple[tuple[str, tuple[MetricSpec, ...]], ...] = (
    (
        "cache.r6gd.",
        (
            MetricSpec("BytesReadFromDisk", ("Sum",)),
            MetricSpec("BytesWrittenToDisk", ("Sum",)),
            MetricSpec("DatabaseCapacityUsageCountedForEvictPercentage", ("Maximum",)),
        ),
    ),
    ("cache.t", (MetricSpec("CPUCreditBalance", ("Minimum",)), MetricSpec("CPUCreditUsage", ("Sum",)))),
)


def node_type_metrics(node_type: str) -> tuple[MetricSpec, ...]:
    return next((specs for prefix, specs in NODE_TYPE_METRICS if node_type.startswith(prefix)), ())


# Polled for the primary nodes of a Global Datastore's secondary clusters: how far (seconds) the secondary region's
# primary is behind the primary region's.
GLOBAL_DATASTORE_METRICS: tuple[MetricSpec, ...] = (MetricSpec("GlobalDatastoreReplicationLag", ("Maximum",)),)


# Polled for the nodes of a replication group with asynchronous durability (discovery's Node.durability, from
# EffectiveDurability; Valkey 9.0+): how old (milliseconds) the oldest write acknowledged but not yet in the Multi-AZ
# transactional log is (writes are rejected as it nears 10,000), and how many writes were rejected for it. AWS publishes
# both as always 0 under synchronous durability (writes are logged before they are acknowledged), so a sync group gets
# none; it gets them at the next discovery after a switch to async.
DURABILITY_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("DurabilityLag", ("Maximum",)),
    MetricSpec("DurabilityBufferExceededErrorCount", ("Sum",)),
)
DURABILITY_METRICS_MODES = frozenset({"async"})


def durability_metrics(node: Node) -> tuple[MetricSpec, ...]:
    return DURABILITY_METRICS if node.durability in DURABILITY_METRICS_MODES else ()


# A serverless cache's usage, set against its CacheUsageLimits (ECPUs per second, data storage), and its throttling.
SERVERLESS_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("ElastiCacheProcessingUnits", ("Sum",)),
    MetricSpec("BytesUsedForCache", ("Maximum",)),
    MetricSpec("ThrottledCmds", ("Sum",)),
    MetricSpec("CurrConnections", ("Maximum",)),
    MetricSpec("SuccessfulReadRequestLatency", ("p50", "p99")),  # microseconds
    MetricSpec("SuccessfulWriteRequestLatency", ("p50", "p99")),
    MetricSpec("TotalCmdsCount", ("Sum",)),
    MetricSpec("CacheHitRate", ("Average",)),  # percent
)


def _known_series() -> dict[str, str]:
    specs = [*DEFAULT_METRICS, *(spec for group in METRIC_GROUPS.values() for spec in group), *GLOBAL_DATASTORE_METRICS, *SERVERLESS_METRICS]
    specs += DURABILITY_METRICS
    specs += [spec for _, group in NODE_TYPE_METRICS for spec in group]
    return {prometheus_name(spec.name, statistic): tier_of(spec.name, statistic) for spec in specs for statistic in spec.statistics}


def valid_statistic(statistic: str) -> bool:
    if statistic in BASIC_STATISTICS:
        return True
    match = _PERCENTILE.match(statistic)
    return match is not None and float(match.group(1)) <= 100


def snake(name: str) -> str:
    """YACE's conversion: an underscore only where a lower-case letter meets an upper-case one."""
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


@functools.lru_cache(maxsize=4096)  # a scrape names each of the fleet's series: a few dozen names, asked thousands of times
def prometheus_name(metric: str, statistic: str) -> str:
    """``aws_elasticache_<metric>_<statistic>``, as YACE names it."""
    return f"aws_elasticache_{snake(metric)}_{statistic.lower().replace('.', '_')}"


def dimensions(node: Node) -> tuple[tuple[str, str], ...]:
    """The CloudWatch dimensions of the node's own series: a serverless cache's are by ``clusterId`` alone."""
    if node.serverless:
        return ((SERVERLESS_DIMENSION, node.cluster_id),)
    return (NODE_DIMENSIONS[0], node.cluster_id), (NODE_DIMENSIONS[1], node.node_id)


def metric_of(node: Node, metric: str) -> dict[str, Any]:
    """The ``Metric`` of a node's series, as GetMetricData and PutMetricAlarm take it."""
    return {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": [{"Name": name, "Value": value} for name, value in dimensions(node)]}


@record(frozen=True)
class Query:
    id: str
    node: Node
    metric: str
    statistic: str

    def to_api(self, period: int) -> dict[str, Any]:
        return {
            "Id": self.id,
            "MetricStat": {
                "Metric": metric_of(self.node, self.metric),
                "Period": period,
                "Stat": self.statistic,
            },
            "ReturnData": True,
        }


def build_queries(
    nodes: Iterable[Node], metrics: Sequence[MetricSpec], *, first: int = 0, extra: Callable[[Node], Sequence[MetricSpec]] | None = None
) -> list[Query]:
    """The queries of the nodes, with ids from ``q<first>`` on (ids must be unique within a call); ``extra`` gives the
    metrics polled for one node beside the set (those the set lacks: :data:`NODE_TYPE_METRICS`,
    :data:`GLOBAL_DATASTORE_METRICS`, :data:`DURABILITY_METRICS`)."""
    queries: list[Query] = []
    names = {spec.name for spec in metrics}
    for node in nodes:
        more = [spec for spec in extra(node) if spec.name not in names] if extra is not None else []
        for spec in (*metrics, *more):
            for statistic in spec.statistics:
                queries.append(Query(f"q{first + len(queries)}", node, spec.name, statistic))
    return queries


def in_tiers(specs: Iterable[MetricSpec], tiers: Iterable[str]) -> tuple[MetricSpec, ...]:
    """The metric-statistics of ``specs`` asked in ``tiers``: each metric with only those of its statistics."""
    wanted = set(tiers)
    kept = ((spec, tuple(s for s in spec.statistics if tier_of(spec.name, s) in wanted)) for spec in specs)
    return tuple(MetricSpec(spec.name, statistics) for spec, statistics in kept if statistics)


def batches(queries: Sequence[Query], size: int = MAX_QUERIES_PER_CALL) -> list[list[Query]]:
    return [list(queries[i : i + size]) for i in range(0, len(queries), size)]


def get_metric_data(
    api: AwsApi,
    client: Any,
    queries: Sequence[Query],
    period: int,
    span: tuple[datetime, datetime],
    *,
    deadline: float | None = None,
    oldest_first: bool = False,
) -> list[dict[str, Any]]:
    """The MetricDataResults of one batch (at most MAX_QUERIES_PER_CALL queries) over ``span``, every page of it;
    each page is billed for every query of the batch, and counted so."""
    start, end = span
    results: list[dict[str, Any]] = []
    pages = api.pages(
        client,
        "get_metric_data",
        deadline=deadline,
        MetricDataQueries=[query.to_api(period) for query in queries],
        StartTime=start,
        EndTime=end,
        ScanBy="TimestampAscending" if oldest_first else "TimestampDescending",
    )
    for reply in pages:
        api.stats.count_metrics(len(queries))
        results.extend(reply.get("MetricDataResults", []))
    return results


def window(now: float, period: int, delay: float, lookback_periods: int, since: float | None = None) -> tuple[datetime, datetime]:
    """[start, end): end is a period boundary at least ``delay`` before now, so its buckets are complete. ``since``: the
    start of the newest complete minute the last poll asked for; the window reaches back to it, so no minute between two
    polls goes unasked (a minute asked twice is kept once, by its timestamp), within :data:`MAX_WINDOW_SECONDS`."""
    end = math.floor((now - delay) / period) * period
    start: float = end - lookback_periods * period
    if since is not None:
        start = max(min(start, since), end - MAX_WINDOW_SECONDS)
    return datetime.fromtimestamp(start, tz=timezone.utc), datetime.fromtimestamp(end, tz=timezone.utc)


# The longest window a poll asks: 500 queries of 180 one-minute datapoints are 90,000, under the 100,800 one
# GetMetricData reply holds, so a poll never pages (a poller stalled longer than this loses the minutes before it).
MAX_WINDOW_SECONDS = 180 * 60


# --- tiers: how often a (metric, statistic) is asked, by what its data is for -----------------------------------------
# paging: the inputs of the alerts that page (network against the baselines, engine and host CPU, memory, swap, the
# allowance-exceeded counters, replication lag, traffic management, a serverless cache's limits); alerting: the inputs
# of the other warnings; trends: dashboards and capacity planning. A metric this table does not name is a trend.
TIERS = ("paging", "alerting", "trends")
DEFAULT_TIER_INTERVALS = {"paging": 300.0, "alerting": 900.0, "trends": 3600.0}
_PAGING: frozenset[tuple[str, str]] = frozenset(
    {
        ("NetworkBytesIn", "Sum"),
        ("NetworkBytesOut", "Sum"),
        ("NetworkBaselineUsageInPercentage", "Average"),
        ("NetworkBaselineUsageOutPercentage", "Average"),
        ("NetworkBaselineMaxUsageInPercentage", "Maximum"),
        ("NetworkBaselineMaxUsageOutPercentage", "Maximum"),
        ("EngineCPUUtilization", "Average"),
        ("CPUUtilization", "Average"),
        ("DatabaseMemoryUsagePercentage", "Maximum"),
        ("FreeableMemory", "Minimum"),
        ("SwapUsage", "Maximum"),
        ("NetworkBandwidthInAllowanceExceeded", "Maximum"),
        ("NetworkBandwidthOutAllowanceExceeded", "Maximum"),
        ("NetworkPacketsPerSecondAllowanceExceeded", "Maximum"),
        ("NetworkConntrackAllowanceExceeded", "Maximum"),
        ("ReplicationLag", "Maximum"),
        ("TrafficManagementActive", "Maximum"),
        ("GlobalDatastoreReplicationLag", "Maximum"),
        ("DurabilityLag", "Maximum"),  # durability: writes are rejected near 10 s
        ("DurabilityBufferExceededErrorCount", "Sum"),
        ("ElastiCacheProcessingUnits", "Sum"),  # serverless: against its ECPU limit
        ("BytesUsedForCache", "Maximum"),  # serverless: against its storage limit
        ("ThrottledCmds", "Sum"),  # serverless
    }
)
_ALERTING: frozenset[tuple[str, str]] = frozenset(
    {
        ("MajorPageFaults", "Sum"),
        ("AllocatorFragmentationBytes", "Maximum"),
        ("AllocatorFragmentationRatio", "Maximum"),
        ("Evictions", "Sum"),
        ("CurrConnections", "Maximum"),
        ("RejectedConnections", "Sum"),
        ("IsPrimary", "Maximum"),
        ("SuccessfulReadRequestLatency", "p99"),
        ("SuccessfulWriteRequestLatency", "p99"),
        ("CPUCreditBalance", "Minimum"),
        ("DatabaseCapacityUsageCountedForEvictPercentage", "Maximum"),
    }
)


def tier_of(metric: str, statistic: str) -> str:
    """The tier a (metric, statistic) is asked in."""
    if (metric, statistic) in _PAGING:
        return "paging"
    return "alerting" if (metric, statistic) in _ALERTING else "trends"


def tier_of_series(name: str) -> str:
    """The tier of a served ``aws_elasticache_*`` series, by its name (a name no known metric gives: trends)."""
    return _SERIES_TIERS.get(name, "trends")


def fresh_seconds(interval: float, period: int = 60, delay: float = 120.0) -> float:
    """How old a datapoint asked every ``interval`` may be while its poller is healthy: the delay, the newest complete
    minute's own period and its start stamp (two periods), the interval until the next poll, a minute for the poll
    itself, and one more interval: one poll may fail (throttled, its deadline passed) or bring no newer minute (AWS
    published it late; the next poll asks it again) without silencing an alert that holds. Older, the poller has missed
    two polls: the datapoint no longer speaks for the node. The exporter serves it per series
    (``elasticache_cloudwatch_fresh_seconds``) for the intervals it really polls at, and the rules' guards read that."""
    return delay + 2 * period + 2 * interval + 60.0


_SERIES_TIERS = _known_series()


@record(frozen=True)
class Datapoint:
    value: float
    timestamp: float


def newest_datapoints(results: Iterable[dict[str, Any]]) -> dict[str, Datapoint]:
    """Query id → its newest datapoint, from MetricDataResults (across every page)."""
    newest: dict[str, Datapoint] = {}
    for result in results:
        for stamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
            seconds = stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp)
            current = newest.get(result["Id"])
            if current is None or seconds > current.timestamp:
                newest[result["Id"]] = Datapoint(float(value), seconds)
    return newest


@record(frozen=True)
class CostEstimate:
    nodes: int
    queries_per_cycle: int
    calls_per_cycle: int
    interval: float

    @property
    def cycles_per_month(self) -> float:
        return SECONDS_PER_MONTH / self.interval

    @property
    def metrics_per_month(self) -> float:
        return self.queries_per_cycle * self.cycles_per_month

    @property
    def usd_per_month(self) -> float:
        return self.metrics_per_month / 1000 * GET_METRIC_DATA_PER_1000


def usd_per_month(pairs: float, interval: float) -> float:
    """What asking ``pairs`` metric-statistics every ``interval`` seconds costs a month (each asked once per request,
    however many minutes its window holds)."""
    return pairs * SECONDS_PER_MONTH / interval / 1000 * GET_METRIC_DATA_PER_1000


def pairs_by_tier(specs: Iterable[MetricSpec]) -> dict[str, int]:
    """The metric-statistics of ``specs`` per tier (every tier named, 0 where none)."""
    counts = dict.fromkeys(TIERS, 0)
    for spec in specs:
        for statistic in spec.statistics:
            counts[tier_of(spec.name, statistic)] += 1
    return counts


def estimate_cost(
    nodes: int,
    metrics: Sequence[MetricSpec],
    interval: float,
    *,
    serverless: int = 0,
    serverless_metrics: Sequence[MetricSpec] = SERVERLESS_METRICS,
    node_type_queries: int = 0,
) -> CostEstimate:
    """The cost of polling ``nodes`` nodes and ``serverless`` serverless caches of one account and region, and the queries
    of the metrics only some of the nodes' types publish (:data:`NODE_TYPE_METRICS`)."""
    queries = nodes * sum(len(spec.statistics) for spec in metrics) + serverless * sum(len(spec.statistics) for spec in serverless_metrics)
    queries += node_type_queries
    return CostEstimate(nodes + serverless, queries, math.ceil(queries / MAX_QUERIES_PER_CALL), interval)
