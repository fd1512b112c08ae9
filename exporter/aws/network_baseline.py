"""What the monitor keeps of each node for AWS's implied baseline (``common.implied_bandwidth``): per direction, the
implied bandwidth of each of the last hour's minutes, in two arrays (about 1 KiB a node and direction, where a dict
of floats would take several); and the series its microbursts and sustained share are read from (kept in
``minutes.BurstMinutes``)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping

from exporter.common.implied_bandwidth import implied_by_minute

HISTORY_SECONDS = 3600  # the minutes a node's implied baseline is the median of
# the series a poll reads minute by minute for it: (metric, statistic)
HISTORY_SERIES = frozenset(
    {
        ("NetworkBytesIn", "Sum"),
        ("NetworkBytesOut", "Sum"),
        ("NetworkBaselineUsageInPercentage", "Average"),
        ("NetworkBaselineUsageOutPercentage", "Average"),
    }
)
DIRECTIONS = {"in": "In", "out": "Out"}
# the series a poll keeps minute by minute for the microbursts: (metric, statistic)
BURST_SERIES = frozenset(
    {
        ("NetworkBaselineMaxUsageInPercentage", "Maximum"),
        ("NetworkBaselineMaxUsageOutPercentage", "Maximum"),
        ("NetworkBaselineUsageInPercentage", "Average"),
        ("NetworkBaselineUsageOutPercentage", "Average"),
    }
)


def series_names(direction: str) -> tuple[str, str]:
    """The traffic and share metrics of a direction (``in`` or ``out``)."""
    word = DIRECTIONS[direction]
    return f"NetworkBytes{word}", f"NetworkBaselineUsage{word}Percentage"


def datapoints(timestamps: Iterable[object], values: Iterable[float]) -> dict[float, float]:
    """A MetricDataResult's datapoints by their period's start (Unix seconds)."""
    return {
        (stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp)): float(value)  # type: ignore[arg-type]
        for stamp, value in zip(timestamps, values, strict=False)
    }


class ImpliedMinutes:
    """One node's and direction's implied baseline (bytes/s) per minute; owned by the monitor, used under its lock."""

    __slots__ = ("stamps", "values")

    def __init__(self) -> None:
        self.stamps = array("d")
        self.values = array("d")

    def merge(self, traffic: Mapping[float, float], share_percent: Mapping[float, float], period: int, oldest: float) -> bool:
        """Add the minutes of a poll (traffic as the period's Sum), drop those before ``oldest``; whether any is left."""
        minutes = dict(zip(self.stamps, self.values, strict=True))
        minutes.update(implied_by_minute({stamp: value / period for stamp, value in traffic.items()}, share_percent))
        kept = sorted((stamp, value) for stamp, value in minutes.items() if stamp >= oldest)
        self.stamps = array("d", (stamp for stamp, _ in kept))
        self.values = array("d", (value for _, value in kept))
        return bool(kept)


def burst_series_names(direction: str) -> tuple[str, str]:
    """The busiest-second and average share metrics of a direction (``in`` or ``out``)."""
    word = DIRECTIONS[direction]
    return f"NetworkBaselineMaxUsage{word}Percentage", f"NetworkBaselineUsage{word}Percentage"
