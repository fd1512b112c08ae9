"""Baselines calibrated from the fleet itself: per node type, the baseline bandwidth AWS implies for its nodes
(``common.implied_bandwidth``) over days of CloudWatch history, as a table row at seed 000's 100/90/80 % levels.

Pure: the caller fetches each node's per-period ``NetworkBytesOut`` (as bytes per second) and
``NetworkBaselineUsageOutPercentage``; this pools every node's minutes of a node type and takes their median.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping

from exporter.common.implied_bandwidth import MIN_SHARE_PERCENT, implied_minutes
from exporter.common.records import field, record

from .table import LEVELS, BaselineTable, Measured, NodeBaseline

SOURCE = "cloudwatch"


@record(frozen=True)
class NodeSeries:
    """One node's history: bytes per second out and AWS's share of the baseline (percent), by period start."""

    node_type: str
    node: str
    traffic: Mapping[float, float] = field(factory=dict)
    share_percent: Mapping[float, float] = field(factory=dict)


def derive_from_cloudwatch(series: Iterable[NodeSeries], days: int, period: int, date: str) -> tuple[BaselineTable, list[str]]:
    """The table of every node type with at least one period at 1 % of its baseline or more, and a note per node type
    left out."""
    by_type: dict[str, list[NodeSeries]] = {}
    for one in series:
        by_type.setdefault(one.node_type, []).append(one)
    rows: dict[str, NodeBaseline] = {}
    notes: list[str] = []
    for node_type, nodes in sorted(by_type.items()):
        implied = {one.node: implied_minutes(one.traffic, one.share_percent) for one in nodes}
        minutes = [value for values in implied.values() for value in values]
        if not minutes:
            notes.append(
                f"{node_type}: no row: none of its {len(nodes)} node(s) had a period at {MIN_SHARE_PERCENT:g} % of its baseline or "
                f"more in {days} days (too little traffic to divide)"
            )
            continue
        full = statistics.median(minutes)
        counted = sum(1 for values in implied.values() if values)
        rows[node_type] = NodeBaseline(
            node_type=node_type,
            measured=Measured(
                bytes_per_second={level: round(full * level / 100) for level in LEVELS},
                date=date,
                method=(
                    f"NetworkBytesOut / NetworkBaselineUsageOutPercentage: median of {len(minutes)} periods of {counted} node(s) "
                    f"over {days} days at {period} s"
                ),
                source=SOURCE,
                nodes=counted,
                periods=len(minutes),
                period=period,
            ),
        )
    return BaselineTable(node_types=rows, source="cloudwatch"), notes
