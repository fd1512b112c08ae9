"""AWS's own view of a node's bandwidth: the baseline AWS counts for it, implied by its traffic and the share of that
baseline it reports.

ElastiCache publishes ``NetworkBaselineUsage{In,Out}Percentage``: a minute's traffic as a percentage of the instance's
baseline bandwidth. The same minute's ``NetworkBytes{In,Out}`` (Sum) over the period is the traffic in bytes per second,
so traffic / (percentage / 100) is the baseline AWS applied. A minute under 1 % is left out: a few bytes divided by a
rounded fraction of a percent is noise. The median of the last hour's minutes is the node's figure.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping

HISTORY_SECONDS = 3600  # the minutes a node's implied baseline is the median of
MIN_SHARE_PERCENT = 1.0  # minutes under this share of the baseline are not divided
# the series kept minute by minute for it: (metric, statistic)
HISTORY_SERIES = frozenset(
    {
        ("NetworkBytesIn", "Sum"),
        ("NetworkBytesOut", "Sum"),
        ("NetworkBaselineUsageInPercentage", "Average"),
        ("NetworkBaselineUsageOutPercentage", "Average"),
    }
)
DIRECTIONS = {"in": "In", "out": "Out"}


class MinuteHistory:
    """One series' datapoints by their minute's start (Unix seconds); owned by the monitor, used under its lock."""

    __slots__ = ("points",)

    def __init__(self) -> None:
        self.points: dict[float, float] = {}

    def add(self, timestamps: Iterable[object], values: Iterable[float]) -> None:
        for stamp, value in zip(timestamps, values, strict=False):
            seconds = stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp)  # type: ignore[arg-type]
            self.points[seconds] = float(value)

    def prune(self, oldest: float) -> bool:
        """Drop the minutes before ``oldest``; whether any is left."""
        for stamp in [stamp for stamp in self.points if stamp < oldest]:
            del self.points[stamp]
        return bool(self.points)


def implied_baseline(traffic: Mapping[float, float], share_percent: Mapping[float, float], period: int) -> float | None:
    """Bytes per second of the baseline AWS counts: the median over the minutes that have both series and a share of at
    least :data:`MIN_SHARE_PERCENT` of (bytes in the minute / ``period``) / (share / 100); None without such a minute."""
    implied = [traffic[stamp] / period / (share / 100.0) for stamp, share in share_percent.items() if share >= MIN_SHARE_PERCENT and stamp in traffic]
    return statistics.median(implied) if implied else None


def series_names(direction: str) -> tuple[str, str]:
    """The traffic and share metrics of a direction (``in`` or ``out``)."""
    word = DIRECTIONS[direction]
    return f"NetworkBytes{word}", f"NetworkBaselineUsage{word}Percentage"
