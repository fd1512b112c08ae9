"""ElastiCache's OpenTelemetry metrics (vended every 60 s for node-based Valkey, no emission cost) as the CloudWatch
metrics they stand for, in PromQL over CloudWatch's PromQL API. Pure: expressions, and answers turned into the shape of
GetMetricData's MetricDataResults, so what either source brings is kept the same way.

Two uses, two tables. ``OTEL_VALUES``: what an alarm compares, a counter's increase in a minute (the alarms' ``DIFF``
and ``Sum``). ``POLLED``: what a poll serves, the CloudWatch metric-statistic's own value for the minute (a counter's
Sum per minute; a cumulative count, such as an allowance-exceeded counter, as the count). ElastiCache's vended set lacks
CPUUtilization, ReplicationLag, the NetworkBaselineUsage percentages, the packet counts, hits and misses, CPU credits
and data tiering: those stay with GetMetricData."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from .discovery import Node

NODE_LABEL = "@resource.aws.elasticache.node.id"
MINUTE = 60  # the vended metrics' resolution, and the only period the OpenTelemetry source serves
_NODES = "{nodes}"  # where the node matcher goes in an expression
_BY_NODE = f'by ("{NODE_LABEL}")'

ALLOWANCE = '"system.network.allowance_exceeded", "network.allowance_exceeded.reason"="{reason}"'
_SELECTORS = {
    # seconds of CPU the main thread used: engine CPU
    "EngineCPUUtilization": '"process.cpu.time", "thread.type"="main"',
    # "!=" keeps series without the label: the interface (never loopback) and the fault type (major only), where given
    "NetworkBytesOut": '"system.network.io", "network.io.direction"="transmit", "network.interface.name"!="lo"',
    "NetworkBytesIn": '"system.network.io", "network.io.direction"="receive", "network.interface.name"!="lo"',
    "NetworkBandwidthOutAllowanceExceeded": ALLOWANCE.format(reason="bandwidth_out"),
    "NetworkBandwidthInAllowanceExceeded": ALLOWANCE.format(reason="bandwidth_in"),
    "NetworkPacketsPerSecondAllowanceExceeded": ALLOWANCE.format(reason="pps"),
    "NetworkConntrackAllowanceExceeded": ALLOWANCE.format(reason="conntrack"),
    "MajorPageFaults": '"process.paging.faults", "process.paging.fault_type"!="minor"',
    "Evictions": '"valkey.keys.evicted"',
    "RejectedConnections": '"valkey.connections.rejected"',
    "TrafficManagementActive": '"valkey.throttling.active"',
    # ElastiCache's reference: the "free" state reports freeable memory (FreeableMemory's own figure)
    "FreeableMemory": '"system.memory.usage", "system.memory.state"="free"',
    "SwapUsage": '"system.paging.usage", "system.paging.state"="used"',
    "CurrConnections": '"valkey.clients.connected"',
    "MEMORY_USED": '"valkey.memory.used"',
    "MEMORY_MAX": '"valkey.memory.max"',
}


def _counter_per_minute(selector: str, window: str = "3m") -> str:
    """A cumulative counter's increase over its last minute: irate reads the last two samples as they are (rate would
    extrapolate, and under-read a counter that starts near zero: a node new, restarted or failed over)."""
    return f"60 * sum {_BY_NODE} (irate({{{selector}, {_NODES}}}[{window}]))"


def _gauge(aggregation: str, selector: str, window: str | None = None) -> str:
    series = f"{{{selector}, {_NODES}}}"
    return f"{aggregation} {_BY_NODE} ({f'last_over_time({series}[{window}])' if window else series})"


def _engine_cpu(window: str) -> str:
    """Seconds of the main thread's CPU in a minute, per cent of one core (ElastiCache's engine CPU): 100 / 60 s * 60."""
    return _counter_per_minute(_SELECTORS["EngineCPUUtilization"], window).replace("60 * ", "100 * ", 1)


def _memory_percentage(window: str | None = None) -> str:
    used, limit = _gauge("max", _SELECTORS["MEMORY_USED"], window), _gauge("max", _SELECTORS["MEMORY_MAX"], window)
    return f"100 * {used} / ({limit} > 0)"


_COUNTERS = ("NetworkBytesOut", "NetworkBytesIn", "MajorPageFaults", "Evictions", "RejectedConnections")
_ALLOWANCES = tuple(name for name in _SELECTORS if name.endswith("AllowanceExceeded"))
_STATISTIC = {"min": "Minimum", "max": "Maximum"}
_GAUGES = {"TrafficManagementActive": "max", "FreeableMemory": "min", "SwapUsage": "max", "CurrConnections": "max"}

# CloudWatch metric -> PromQL of one value per node an alarm compares: in the metric's unit over one minute, a counter's
# increase (an alarm's 3-minute irate still holds two samples across one missing one: a node never drops out of an
# alarm for two evaluations)
OTEL_VALUES: dict[str, str] = {
    "EngineCPUUtilization": _engine_cpu("3m"),
    **{name: _counter_per_minute(_SELECTORS[name]) for name in (*_COUNTERS, *_ALLOWANCES)},
    **{name: _gauge(aggregation, _SELECTORS[name]) for name, aggregation in _GAUGES.items()},
    "DatabaseMemoryUsagePercentage": _memory_percentage(),
}


# (CloudWatch metric, statistic) -> PromQL of the minute a poll serves, evaluated at the minute's end. A sample belongs to
# the minute it comes within or at the end of (M < t <= M + 60), at whatever second of the minute the node emits: a
# gauge's minute is its sample's; a counter's is its rise from the sample of the minute before (the left-open window of
# 2 minutes holds exactly those two, so a minute without its sample, and the one after it, have no value rather than a
# value of two minutes). With one datapoint a minute, every statistic of a one-minute period is that datapoint.
# The allowance-exceeded counts are left to GetMetricData: their CloudWatch value is a count whose rises the alerts read,
# and the OpenTelemetry counter's count starts elsewhere, so a node whose minutes came from both sources (a failed
# query, a fallback) would show a rise that is only the two origins.
def _rise(selector: str) -> str:
    """A cumulative counter's rise from the sample of the minute before to the minute's: the difference of its last two
    samples (at whatever seconds they came, never scaled to a rate), or where it fell (a restart), the count since."""
    series = f"{{{selector}, {_NODES}}}"
    delta = f"idelta({series}[2m])"
    return f"sum {_BY_NODE} (({delta} >= 0) or (last_over_time({series}[1m]) and {delta} < 0))"


POLLED: dict[tuple[str, str], str] = {
    # seconds of the main thread's CPU in the minute, per cent of one core
    **{("EngineCPUUtilization", statistic): f"100 / 60 * {_rise(_SELECTORS['EngineCPUUtilization'])}" for statistic in ("Average", "Maximum")},
    **{(name, "Sum"): _rise(_SELECTORS[name]) for name in _COUNTERS},
    **{(name, _STATISTIC[aggregation]): _gauge(aggregation, _SELECTORS[name], "1m") for name, aggregation in _GAUGES.items()},
    ("DatabaseMemoryUsagePercentage", "Maximum"): _memory_percentage("1m"),
}


def samples_per_minute(metric: str, statistic: str) -> int:
    """The samples a node's minute of ``POLLED[(metric, statistic)]`` scans, a series each: five of a counter (its last
    two, twice, and the minute's), two of the memory percentage (used and max), one of a gauge. The samples-scanned bill
    is estimated by it."""
    expression = POLLED[(metric, statistic)]
    return 5 if "idelta(" in expression else (2 if " / (" in expression else 1)


def emits_otel(node: Node) -> bool:
    """Whether ElastiCache emits the vended OpenTelemetry metrics for the node: a node-based Valkey one (on ElastiCache a
    node-based Valkey cache is always a replication group; serverless caches are no nodes here)."""
    return node.engine == "valkey" and not node.serverless


def node_matcher(ids: Iterable[str]) -> str:
    return f'"{NODE_LABEL}"=~{json.dumps("|".join(sorted(ids)))}'


def with_nodes(expression: str, ids: Iterable[str]) -> str:
    return expression.replace(_NODES, node_matcher(ids))


def as_results(series: list[tuple[dict[str, str], list[tuple[float, float]]]], query_ids: dict[str, list[str]]) -> list[dict[str, Any]]:
    """A range query's answer as MetricDataResults: each node's values (``query_ids``: node id -> the query ids a
    GetMetricData request would have given the node's metric-statistics this expression answers), each stamped with the
    start of its minute (a value evaluated at a minute's end is that minute's, as CloudWatch stamps a period by its
    start)."""
    results = []
    for labels, points in series:
        if not points:
            continue
        stamps = [datetime.fromtimestamp(at - MINUTE, tz=timezone.utc) for at, _ in points]
        values = [value for _, value in points]
        for query_id in query_ids.get(labels.get(NODE_LABEL, ""), []):
            results.append({"Id": query_id, "Timestamps": stamps, "Values": values, "StatusCode": "Complete"})
    return results
