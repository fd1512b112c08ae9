"""A node's minutes of the series AWS's implied baseline is computed from (``common.implied_bandwidth``), kept by the
monitor for the last hour."""

from __future__ import annotations

from collections.abc import Iterable

HISTORY_SECONDS = 3600  # the minutes a node's implied baseline is the median of
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


def series_names(direction: str) -> tuple[str, str]:
    """The traffic and share metrics of a direction (``in`` or ``out``)."""
    word = DIRECTIONS[direction]
    return f"NetworkBytes{word}", f"NetworkBaselineUsage{word}Percentage"
