"""What the monitor keeps of each node's allowance-exceeded counters: their last CloudWatch minutes, each once by its
timestamp however often a poll brings it back, and how many of the last 5 rose over the minute before (a count of the
minute above a calm one, or a cumulative counter that grew: either way packets were shaped in that minute). A poller
every 5 minutes serves one minute of 5 as the gauge; the rules read this count, which misses no minute between polls."""

from __future__ import annotations

from collections.abc import Mapping

from exporter.common.records import record

from .minute_window import new_minutes

# the series a poll keeps minute by minute for it: (metric, statistic)
RISING_SERIES = frozenset(
    {
        ("NetworkBandwidthInAllowanceExceeded", "Maximum"),
        ("NetworkBandwidthOutAllowanceExceeded", "Maximum"),
        ("NetworkPacketsPerSecondAllowanceExceeded", "Maximum"),
        ("NetworkConntrackAllowanceExceeded", "Maximum"),
    }
)
RISING_WINDOW_SECONDS = 300  # the CloudWatch minutes counted, up to the newest


@record(frozen=True)
class Rising:
    minutes: int  # minutes held among the last 5 (or as many as a poll brings, if more)
    rising: int  # of them, the minutes whose value is above the minute before's
    newest: float  # the newest minute's timestamp


def rising(values: Mapping[float, float], period: float = 60.0, seconds: float = RISING_WINDOW_SECONDS) -> Rising | None:
    """Each minute once, by its timestamp; a minute whose minute before is not held does not count as rising. ``seconds``:
    at least the time between two polls, so every minute is in some poll's window."""
    if not values:
        return None
    newest = max(values)
    inside = [stamp for stamp in values if stamp > newest - seconds]
    count = sum(1 for stamp in inside if stamp - period in values and values[stamp] > values[stamp - period])
    return Rising(len(inside), count, newest)


class RisingMinutes:
    """One node's minutes of one counter; owned by the monitor, used under its lock."""

    __slots__ = ("ending", "values")

    def __init__(self, ending: int = 1) -> None:
        self.ending = max(1, ending)  # the minutes a poll brings: the window is at least as long
        self.values: dict[float, float] = {}

    def merge(self, values: Mapping[float, float], period: float = 60.0) -> Rising | None:
        """Add the minutes of a poll (a minute seen again takes its newer value), once a poll; count over every minute it
        brought, and at least the last 5; keep the window and the minute before."""
        before = max(self.values, default=None)
        self.values.update(values)
        newest = max(self.values, default=0.0)
        seconds = max(RISING_WINDOW_SECONDS, new_minutes(before, newest, self.ending, period) * period)
        self.values = {stamp: value for stamp, value in self.values.items() if stamp > newest - seconds - period}
        return rising(self.values, period, seconds)
