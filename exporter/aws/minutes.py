"""The CloudWatch minutes the monitor keeps for the alerts that reason about several of them, in one place with one merge
rule: each minute once, by its own timestamp, however often a poll brings it back; a poll's minutes end one window each
when they are newer than the newest held before; and a merge that brings no newer minute (a poll of another tier, a
failed poll, a poll AWS had nothing new for) leaves every window as it was.

Three views are made of them: a gauge's windows of a few minutes, lowest and highest (``WindowMinutes``, the paging
and alerting gauges of ``WINDOW_SERIES``); a counter's rising minutes among its last five (``RisingMinutes``, the
allowance-exceeded counters of ``RISING_SERIES``); a node's microbursts and its sustained share of the baseline
(``BurstMinutes``, per direction). Each keeper is owned by the monitor's poll thread; what it makes is swapped in for
the scrapes to read."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Generic, TypeVar

from exporter.common.records import record

PERIOD = 60.0
Made = TypeVar("Made")

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
# the allowance-exceeded counters kept minute by minute: (metric, statistic)
RISING_SERIES = frozenset(
    {
        ("NetworkBandwidthInAllowanceExceeded", "Maximum"),
        ("NetworkBandwidthOutAllowanceExceeded", "Maximum"),
        ("NetworkPacketsPerSecondAllowanceExceeded", "Maximum"),
        ("NetworkConntrackAllowanceExceeded", "Maximum"),
    }
)
RISING_WINDOW_SECONDS = 300  # the CloudWatch minutes counted, up to the newest
BURST_WINDOW_SECONDS = 600  # the CloudWatch minutes a node's microbursts are counted over, up to its newest
BURST_PERCENT = 100.0  # a minute bursts when its busiest second is above the baseline
SUSTAINED_SECONDS = 900  # the CloudWatch minutes a node's sustained share of the baseline is the lowest of, up to its newest


def windows_ended(before: float | None, newest: float | None, first: int, period: float = PERIOD) -> int:
    """The one merge rule: how many windows a poll's minutes end, one at each minute newer than the newest held before
    (``before``); ``first`` (at least 1) when none was held; 0 when none is newer, so nothing moves."""
    if newest is None:
        return 0
    if before is None:
        return max(1, first)
    return max(0, round((newest - before) / period))


class Minutes:
    """One series' minutes by their timestamps."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: dict[float, float] = {}

    @property
    def newest(self) -> float | None:
        return max(self.values, default=None)

    def merge(self, values: Mapping[float, float], first: int, period: float = PERIOD) -> int:
        """Add a poll's minutes (a minute seen again takes its newer value); how many windows it ends (``windows_ended``)."""
        before = self.newest
        self.values.update(values)
        return windows_ended(before, self.newest, first, period)

    def keep_after(self, oldest: float, one_before: bool = False) -> None:
        """Drop the minutes at or before ``oldest``; ``one_before``: but the newest of those, which the first minute
        kept is compared with (across a minute not published)."""
        before = max((stamp for stamp in self.values if stamp <= oldest), default=None) if one_before else None
        self.values = {stamp: value for stamp, value in self.values.items() if stamp > oldest or stamp == before}


# --- a gauge's windows --------------------------------------------------------------------------------------------


@record(frozen=True)
class MinuteWindow:
    """Of the windows of ``length`` minutes ending at each minute a poll brought (all minutes held): the highest of
    their lowest values and the lowest of their highest. A value above X in every minute of some window is "lowest > X",
    whichever minute the window ended at and however often the exporter polls."""

    minutes: int  # minutes held in the newest window
    lowest: float | None  # None: no full window ended at a minute the poll brought
    highest: float | None
    newest: float  # the newest minute's timestamp


def minute_window(values: Mapping[float, float], length: int, ending: int = 1, period: float = PERIOD) -> MinuteWindow | None:
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


class _SeriesKeeper(Generic[Made]):
    """One node's minutes of one series, and what the last poll with a newer minute made of them: a merge that brings
    none serves that again."""

    __slots__ = ("first", "held", "made")
    keeps_one_before = False  # whether the newest minute before the span is kept too

    def __init__(self, first: int = 1) -> None:
        self.first = max(1, first)  # the minutes the first poll is taken to bring
        self.held = Minutes()
        self.made: Made | None = None

    @property
    def values(self) -> dict[float, float]:
        return self.held.values

    def merge(self, values: Mapping[float, float], period: float = PERIOD) -> Made | None:
        """Add a poll's minutes; what the windows ending at each newer minute it brought make, keeping the minutes they
        need (``_span`` before the newest); what they made before when it brought none."""
        ending = self.held.merge(values, self.first, period)
        if ending:
            newest = self.held.newest
            assert newest is not None
            self.held.keep_after(newest - self._span(ending, period), self.keeps_one_before)
            self.made = self._make(ending, period)
        return self.made

    def _span(self, ending: int, period: float) -> float:
        raise NotImplementedError

    def _make(self, ending: int, period: float) -> Made | None:
        raise NotImplementedError


class WindowMinutes(_SeriesKeeper[MinuteWindow]):
    """A gauge's windows of ``length`` minutes."""

    __slots__ = ("length",)

    def __init__(self, length: int, first: int = 1) -> None:
        super().__init__(first)
        self.length = length

    def _span(self, ending: int, period: float) -> float:
        return (self.length + ending - 1) * period

    def _make(self, ending: int, period: float) -> MinuteWindow | None:
        return minute_window(self.held.values, self.length, ending, period)


# --- a counter's rising minutes -----------------------------------------------------------------------------------


@record(frozen=True)
class Rising:
    minutes: int  # minutes held among the last 5
    rising: int  # the most minutes above the minute before's among the 5 ending at any minute the poll brought
    newest: float  # the newest minute's timestamp


def rising(values: Mapping[float, float], period: float = PERIOD, seconds: float = RISING_WINDOW_SECONDS, ending: int = 1) -> Rising | None:
    """A count of the minute above a calm one, or a cumulative counter that grew: either way packets were shaped in that
    minute. Of the windows of ``seconds`` ending at each of the newest ``ending`` minutes, the most minutes that rose, as
    a CloudWatch alarm on the counter's DIFF above 0 in M of N datapoints counts them at each minute. Each minute once,
    by its timestamp, against the minute held before it (as DIFF, across a minute AWS did not publish); the oldest minute
    held rises over nothing."""
    if not values:
        return None
    newest = max(values)
    stamps = sorted(values)
    rose = [stamp for before, stamp in itertools.pairwise(stamps) if values[stamp] > values[before]]
    ends = [newest - step * period for step in range(max(1, ending))]
    count = max(sum(1 for stamp in rose if end - seconds < stamp <= end) for end in ends)
    return Rising(sum(1 for stamp in values if stamp > newest - seconds), count, newest)


class RisingMinutes(_SeriesKeeper[Rising]):
    """A counter's rising minutes among 5, in the windows ending at each minute a poll brought (and the minute before
    the oldest of them, which a first minute rises over)."""

    __slots__ = ()
    keeps_one_before = True

    def _span(self, ending: int, period: float) -> float:
        return RISING_WINDOW_SECONDS + (ending - 1) * period

    def _make(self, ending: int, period: float) -> Rising | None:
        return rising(self.held.values, period, RISING_WINDOW_SECONDS, ending)


# --- a node's microbursts and sustained share, per direction ------------------------------------------------------


@record(frozen=True)
class BurstWindow:
    """The CloudWatch minutes of a node and direction within :data:`BURST_WINDOW_SECONDS` of a minute a poll brought."""

    minutes: int  # minutes with a busiest-second datapoint
    burst_minutes: int  # of them, the minutes whose busiest second was above the baseline
    max_usage_percent: float | None  # the highest minute average of the same minutes (None: no average came)
    newest: float  # the newest minute's timestamp


def burst_window(
    peaks: Mapping[float, float], averages: Mapping[float, float], seconds: float = BURST_WINDOW_SECONDS, ending: int = 1
) -> BurstWindow | None:
    """Count each minute once, by its timestamp: ``peaks`` and ``averages`` are percentages by minute (a minute polled
    again is one key), so the count is the same whether a poll brings one minute or many, every minute or every ten. Of
    the windows ending at each of the newest ``ending`` minutes (those the last poll brought), the one with the most burst
    minutes (of those, the calmest on average), with the newest minute's timestamp."""
    if not peaks:
        return None
    newest = max(peaks)
    best: tuple[int, float, int, float | None] | None = None
    for end in (newest - step * PERIOD for step in range(max(1, ending))):
        inside = [value for stamp, value in peaks.items() if end - seconds < stamp <= end]
        usage = [value for stamp, value in averages.items() if end - seconds < stamp <= end]
        highest = max(usage) if usage else None
        candidate = (sum(value > BURST_PERCENT for value in inside), -(highest if highest is not None else 0.0), len(inside), highest)
        if best is None or candidate[:2] > best[:2]:
            best = candidate
    assert best is not None
    return BurstWindow(best[2], best[0], best[3], newest)


@record(frozen=True)
class SustainedWindow:
    """The minute averages of a node and direction over :data:`SUSTAINED_SECONDS`: a share held in every minute of a
    window is held "for 15 minutes", whether the minutes came one poll at a time or five, whichever minute it ended."""

    minutes: int  # minutes with an average: 15 where a full window ended at a minute the last poll brought
    min_usage_percent: float  # the lowest of them
    newest: float  # the newest minute's timestamp


def sustained_window(averages: Mapping[float, float], ending: int = 1, seconds: float = SUSTAINED_SECONDS) -> SustainedWindow | None:
    """Of the full windows (every minute held) ending at each of the newest ``ending`` minutes, the one whose lowest
    average is highest; without one, the newest window as held (fewer minutes than the window has)."""
    length = int(seconds // PERIOD)
    held = minute_window(averages, length, ending)
    if held is None:
        return None
    if held.lowest is not None:
        return SustainedWindow(length, held.lowest, held.newest)
    inside = [value for stamp, value in averages.items() if stamp > held.newest - seconds]
    return SustainedWindow(len(inside), min(inside), held.newest)


class BurstMinutes:
    """One node's and direction's minutes of the busiest second and of the average share, merged as one: the windows of
    both end at each minute newer than the newest of either held before."""

    __slots__ = ("averages", "first", "made", "peaks")

    def __init__(self, first: int = 1) -> None:
        self.first = max(1, first)
        self.peaks = Minutes()
        self.averages = Minutes()
        self.made: tuple[BurstWindow | None, SustainedWindow | None] = (None, None)

    def merge(self, peaks: Mapping[float, float], averages: Mapping[float, float]) -> BurstWindow | None:
        """Add a poll's minutes; the microburst window and the sustained one (``sustained``) ending at each newer minute it
        brought, the best of each; those of before when it brought no newer minute."""
        before = self._newest()
        self.peaks.values.update(peaks)
        self.averages.values.update(averages)
        newest = self._newest()
        ending = windows_ended(before, newest, self.first)
        if ending and newest is not None:
            self.peaks.keep_after(newest - BURST_WINDOW_SECONDS - (ending - 1) * PERIOD)
            self.averages.keep_after(newest - max(SUSTAINED_SECONDS, BURST_WINDOW_SECONDS) - (ending - 1) * PERIOD)
            self.made = (burst_window(self.peaks.values, self.averages.values, ending=ending), sustained_window(self.averages.values, ending))
        return self.made[0]

    def _newest(self) -> float | None:
        held = [stamp for stamp in (self.peaks.newest, self.averages.newest) if stamp is not None]
        return max(held, default=None)

    def sustained(self) -> SustainedWindow | None:
        """The best full window of minute averages ending at a minute the last poll with a newer minute brought."""
        return self.made[1]
