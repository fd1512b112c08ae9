"""What the monitor keeps of each node for AWS's implied baseline (``common.implied_bandwidth``): per direction, the
implied bandwidth of each of the last hour's minutes, in two arrays (about 1 KiB a node and direction, where a dict
of floats would take several); and for its microbursts, the last 10 minutes' busiest second and the last 15 minutes'
average, each minute counted once by its own timestamp however often a poll brings it back."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping

from exporter.common.implied_bandwidth import implied_by_minute
from exporter.common.records import record

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
BURST_WINDOW_SECONDS = 600  # the CloudWatch minutes a node's microbursts are counted over, up to its newest
BURST_PERCENT = 100.0  # a minute bursts when its busiest second is above the baseline
SUSTAINED_SECONDS = 900  # the CloudWatch minutes a node's sustained share of the baseline is the lowest of, up to its newest
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


@record(frozen=True)
class BurstWindow:
    """The CloudWatch minutes of a node and direction within :data:`BURST_WINDOW_SECONDS` of its newest one."""

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
    for end in (newest - step * 60.0 for step in range(max(1, ending))):
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
    from .minute_window import minute_window

    length = int(seconds // 60)
    held = minute_window(averages, length, ending)
    if held is None:
        return None
    if held.lowest is not None:
        return SustainedWindow(length, held.lowest, held.newest)
    inside = [value for stamp, value in averages.items() if stamp > held.newest - seconds]
    return SustainedWindow(len(inside), min(inside), held.newest)


class BurstMinutes:
    """One node's and direction's minutes of the busiest second and the average share; owned by the monitor, used under
    its lock."""

    __slots__ = ("averages", "ending", "peaks", "polled")

    def __init__(self, ending: int = 1) -> None:
        self.ending = max(1, ending)  # the minutes the first poll is taken to bring
        self.polled = self.ending  # the minutes the last poll brought: the windows ending at each of them are looked at
        self.peaks: dict[float, float] = {}
        self.averages: dict[float, float] = {}

    def merge(self, peaks: Mapping[float, float], averages: Mapping[float, float]) -> BurstWindow | None:
        """Add the minutes of a poll (a minute seen again takes its newer value), once a poll; keep those of the windows
        ending at each minute it brought; the best of those windows."""
        from .minute_window import new_minutes

        before = max(self.peaks, default=max(self.averages, default=None))
        self.peaks.update(peaks)
        self.averages.update(averages)
        newest = max(self.peaks, default=max(self.averages, default=0.0))
        self.polled = new_minutes(before, newest, self.ending)
        self.peaks = {stamp: value for stamp, value in self.peaks.items() if stamp > newest - BURST_WINDOW_SECONDS - (self.polled - 1) * 60}
        keep = max(SUSTAINED_SECONDS, BURST_WINDOW_SECONDS) + (self.polled - 1) * 60
        self.averages = {stamp: value for stamp, value in self.averages.items() if stamp > newest - keep}
        return burst_window(self.peaks, self.averages, ending=self.polled)

    def sustained(self) -> SustainedWindow | None:
        """The best full window of minute averages ending at a minute the last poll brought (``sustained_window``)."""
        return sustained_window(self.averages, self.polled)
