"""What the monitor keeps of each node's paging gauges that alerts want held for some minutes: their last CloudWatch
minutes, each once by its timestamp however often a poll brings it back, and the lowest and highest of the last few.
A rule "above X for 5 minutes" over a gauge polled every 5 minutes sees one minute of the 5; over the windows of 5
minutes ending at each minute a poll brought it sees every one of them."""

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
    ("CPUUtilization", "Average"): 10,
    ("GlobalDatastoreReplicationLag", "Maximum"): 5,
    ("ThrottledCmds", "Sum"): 5,  # serverless: kept by the cache's own key, as its other series
    ("DurabilityLag", "Maximum"): 5,
    # a count of the minute that alerts on any minute above 0: a window of one minute, whose "lowest" is the highest
    # count among the minutes the last poll brought, each minute in exactly one poll's
    ("DurabilityBufferExceededErrorCount", "Sum"): 1,
    # the alerting tier, polled every 15 minutes: never a window shorter than the minutes one poll brings
    ("Evictions", "Sum"): 15,
    ("CurrConnections", "Maximum"): 15,
    ("MajorPageFaults", "Sum"): 15,
    ("DatabaseCapacityUsageCountedForEvictPercentage", "Maximum"): 15,
}


def new_minutes(before: float | None, newest: float, first: int, period: float = 60.0) -> int:
    """How many windows a poll looks at: one ending at each minute newer than the newest held before it (``before``),
    so minutes a poll brings after a failed poll, or a longer gap, are each the end of one; ``first`` on the first poll."""
    if before is None:
        return max(1, first)
    return max(1, round((newest - before) / period))


@record(frozen=True)
class MinuteWindow:
    """Of the windows of ``length`` minutes ending at each minute since the last poll's newest (all minutes held): the
    highest of their lowest values and the lowest of their highest. A value above X in every minute of some window is
    "lowest > X", whichever minute the window ended at and however often the exporter polls."""

    minutes: int  # minutes held in the newest window
    lowest: float | None  # None: no full window ended since the last poll
    highest: float | None
    newest: float  # the newest minute's timestamp


def minute_window(values: Mapping[float, float], length: int, ending: int = 1, period: float = 60.0) -> MinuteWindow | None:
    """The full windows (``length`` minutes, each held) ending at each of the newest ``ending`` minutes, each minute once,
    by its timestamp."""
    if not values:
        return None
    newest = max(values)
    lows, highs = [], []
    for end in (newest - step * period for step in range(ending)):
        inside = [value for stamp, value in values.items() if end - length * period < stamp <= end]
        if len(inside) == length:
            lows.append(min(inside))
            highs.append(max(inside))
    held = sum(1 for stamp in values if stamp > newest - length * period)
    return MinuteWindow(held, max(lows) if lows else None, min(highs) if highs else None, newest)


class WindowMinutes:
    """One node's minutes of one gauge; owned by the monitor, used under its lock."""

    __slots__ = ("ending", "length", "values")

    def __init__(self, length: int, ending: int = 1) -> None:
        self.length = length
        self.ending = max(1, ending)  # the minutes a poll brings: the poll interval in periods
        self.values: dict[float, float] = {}

    def merge(self, values: Mapping[float, float], period: float = 60.0) -> MinuteWindow | None:
        """Add the minutes of a poll (a minute seen again takes its newer value), once a poll; the windows ending at each
        minute it brought; keep those of the windows."""
        before = max(self.values, default=None)
        self.values.update(values)
        newest = max(self.values, default=0.0)
        ending = new_minutes(before, newest, self.ending, period)
        keep = (self.length + ending - 1) * period
        self.values = {stamp: value for stamp, value in self.values.items() if stamp > newest - keep}
        return minute_window(self.values, self.length, ending, period)
