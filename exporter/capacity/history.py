"""CloudWatch history of each node for the capacity report: per signal, the datapoints of the window, fetched in the
fewest GetMetricData calls that respect 500 queries and 100,800 datapoints a call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from exporter.aws.api import AwsApi
from exporter.aws.cloudwatch import MAX_QUERIES_PER_CALL, Query, get_metric_data, window
from exporter.aws.discovery import Node, NodeKey

History = dict[tuple[NodeKey, str], list[tuple[float, float]]]  # (node, signal) → [(unix time, value)]

DAY = 86400
DELAY = 120  # seconds: CloudWatch's newest minute is still filling
MAX_DATAPOINTS_PER_CALL = 100_800
SIGNALS = (
    # name, CloudWatch metric, statistic, whether the value is a Sum over the period (bytes → bytes/s)
    ("network_out", "NetworkBytesOut", "Sum", True),
    ("network_in", "NetworkBytesIn", "Sum", True),
    ("engine_cpu", "EngineCPUUtilization", "Average", False),
    ("memory", "DatabaseMemoryUsagePercentage", "Maximum", False),
    ("connections", "CurrConnections", "Maximum", False),
    # AWS's own view, where the node publishes it: the share of the instance's baseline (percent), and its busiest second
    ("aws_share_out", "NetworkBaselineUsageOutPercentage", "Average", False),
    ("aws_share_in", "NetworkBaselineUsageInPercentage", "Average", False),
    ("aws_peak_out", "NetworkBaselineMaxUsageOutPercentage", "Maximum", False),
    ("aws_peak_in", "NetworkBaselineMaxUsageInPercentage", "Maximum", False),
)


def history_window(now: float, days: int, period: int = 60) -> tuple[datetime, datetime]:
    """The ``days`` of complete periods before now, as the monitor's window aligns them."""
    return window(now, period, DELAY, days * DAY // period)


def plan_calls(series: int, days: int, period: int = 60) -> list[int]:
    """How many series go in each GetMetricData call: <= 500 queries and <= 100,800 datapoints a call."""
    points = days * DAY // period
    per_call = max(1, min(MAX_QUERIES_PER_CALL, MAX_DATAPOINTS_PER_CALL // max(1, points)))
    return [min(per_call, series - start) for start in range(0, series, per_call)]


def fetch_history(
    api: AwsApi,
    nodes: list[Node],
    days: int,
    now: float,
    progress: Callable[[int, int], None] | None = None,
    period: int = 60,
    wanted: Sequence[tuple[str, str, str, bool]] = SIGNALS,
) -> History:
    """{(node key, signal): [(unix time, value)]} of the ``wanted`` signals (name, metric, statistic, whether a Sum over
    the period is turned into a rate), keyed by the node's account, region, cluster and node, as one account has
    ``sessions-001`` in each of its regions. ``period`` 60 gives the baseline method's per-minute datapoints."""
    span = history_window(now, days, period)
    signals = [(node, name, metric, statistic, is_sum) for node in nodes for name, metric, statistic, is_sum in wanted]
    history: History = {}
    position = 0
    for size in plan_calls(len(signals), days, period):
        batch = signals[position : position + size]
        position += size
        by_region: dict[str, list[tuple[Query, str, bool]]] = {}
        for index, (node, name, metric, statistic, is_sum) in enumerate(batch):
            by_region.setdefault(node.region, []).append((Query(f"h{index}", node, metric, statistic), name, is_sum))
        for region, items in by_region.items():
            lookup = {query.id: (query.node, name, period if is_sum else 1) for query, name, is_sum in items}
            results = get_metric_data(api, api.client("cloudwatch", region), [query for query, _, _ in items], period, span, oldest_first=True)
            for result in results:
                node, name, divisor = lookup[result["Id"]]
                points = history.setdefault((node.key, name), [])
                for stamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                    points.append((stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp), float(value) / divisor))
        if progress:
            progress(position, len(signals))
    return history
