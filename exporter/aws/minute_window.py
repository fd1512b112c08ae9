"""What the monitor keeps of each node's paging gauges that alerts want held for some minutes: their last CloudWatch
minutes, each once by its timestamp however often a poll brings it back, and the lowest and highest of the last few.
A rule "above X for 5 minutes" over a gauge polled every 5 minutes sees one minute of the 5; over the lowest of the
5 minutes held it sees every one of them."""

from __future__ import annotations

from collections.abc import Mapping

from exporter.common.records import record

# (metric, statistic) → the minutes its alert wants held (the alert's `for` in the catalog before it read the window)
WINDOW_SERIES: dict[tuple[str, str], int] = {
    ("TrafficManagementActive", "Maximum"): 2,
    ("ReplicationLag", "Maximum"): 5,
    ("DatabaseMemoryUsagePercentage", "Maximum"): 5,
    ("FreeableMemory", "Minimum"): 5,
    ("SwapUsage", "Maximum"): 5,
}


@record(frozen=True)
class MinuteWindow:
    minutes: int  # minutes held among the last ``length``
    lowest: float
    highest: float
    newest: float  # the newest minute's timestamp


def minute_window(values: Mapping[float, float], length: int, period: float = 60.0) -> MinuteWindow | None:
    """The minutes within ``length`` periods of the newest, each once, by its timestamp."""
    if not values:
        return None
    newest = max(values)
    inside = [value for stamp, value in values.items() if stamp > newest - length * period]
    return MinuteWindow(len(inside), min(inside), max(inside), newest)


class WindowMinutes:
    """One node's minutes of one gauge; owned by the monitor, used under its lock."""

    __slots__ = ("length", "values")

    def __init__(self, length: int) -> None:
        self.length = length
        self.values: dict[float, float] = {}

    def merge(self, values: Mapping[float, float], period: float = 60.0) -> MinuteWindow | None:
        """Add the minutes of a poll (a minute seen again takes its newer value); keep those of the window."""
        self.values.update(values)
        newest = max(self.values, default=0.0)
        self.values = {stamp: value for stamp, value in self.values.items() if stamp > newest - self.length * period}
        return minute_window(self.values, self.length, period)
