"""CloudWatch ``AWS/ElastiCache`` metrics: queries, batching, the time window, and the one place GetMetricData is called.

One query per (node, metric, statistic), node-level dimensions only
(CacheClusterId with CacheNodeId, so no series is counted twice; a serverless
cache's are by clusterId), at most 500 queries per GetMetricData call, so a
cycle makes ceil(queries / 500) calls per account and region. Everything here is pure
but :func:`get_metric_data`, which the background monitor and the capacity report both use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from exporter.common.records import record

from .discovery import Node

if TYPE_CHECKING:
    from .api import AwsApi

NAMESPACE = "AWS/ElastiCache"
NODE_DIMENSIONS = ("CacheClusterId", "CacheNodeId")  # a node's own series: never the cluster-wide aggregate
SERVERLESS_DIMENSION = "clusterId"  # a serverless cache's series
MAX_QUERIES_PER_CALL = 500
PRICE_PER_1000_METRICS = 0.01  # USD, GetMetricData, billed per metric-statistic requested
SECONDS_PER_MONTH = 30 * 24 * 3600
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


def valid_statistic(statistic: str) -> bool:
    if statistic in BASIC_STATISTICS:
        return True
    match = _PERCENTILE.match(statistic)
    return match is not None and float(match.group(1)) <= 100


def snake(name: str) -> str:
    """YACE's conversion: an underscore only where a lower-case letter meets an upper-case one."""
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


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
    :data:`GLOBAL_DATASTORE_METRICS`)."""
    queries: list[Query] = []
    names = {spec.name for spec in metrics}
    for node in nodes:
        more = [spec for spec in extra(node) if spec.name not in names] if extra is not None else []
        for spec in (*metrics, *more):
            for statistic in spec.statistics:
                queries.append(Query(f"q{first + len(queries)}", node, spec.name, statistic))
    return queries


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


def window(now: float, period: int, delay: float, lookback_periods: int) -> tuple[datetime, datetime]:
    """[start, end): end is a period boundary at least ``delay`` before now, so its buckets are complete."""
    end = math.floor((now - delay) / period) * period
    start = end - lookback_periods * period
    return datetime.fromtimestamp(start, tz=timezone.utc), datetime.fromtimestamp(end, tz=timezone.utc)


FRESH_SECONDS = 600  # a datapoint older than this no longer speaks for the node (the rules' guard uses the same)


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
        return self.metrics_per_month / 1000 * PRICE_PER_1000_METRICS


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
