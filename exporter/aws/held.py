"""The CloudWatch minutes the monitor holds between polls, every node's, and what they make after each poll: the hour of
implied baseline, the microburst and sustained windows by node and direction, the rising minutes of the
allowance-exceeded counters and the windows of the gauges alerts hold, by series. One owner: the poll thread, the only
caller of :meth:`MinutesHeld.keep`; what it returns is swapped in for the scrapes under the monitor's lock."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from exporter.common.records import record

from .discovery import NodeKey
from .minutes import RISING_SERIES, WINDOW_SERIES, BurstMinutes, BurstWindow, MinuteWindow, Rising, RisingMinutes, SustainedWindow, WindowMinutes
from .network_baseline import DIRECTIONS, ImpliedMinutes, burst_series_names, datapoints, series_names

SeriesKey = tuple[str, str, str, str, str, str]  # account, region, CacheClusterId (or serverless cache), CacheNodeId, metric, statistic
Polled = dict[tuple[NodeKey, str, str], dict[float, float]]  # (node, metric, statistic) → the minutes a poll brought


@record(frozen=True)
class Held:
    """What a poll's minutes make, for the scrapes to read."""

    implied: dict[tuple[str, str], float]
    bursts: dict[tuple[str, str], BurstWindow]
    sustained: dict[tuple[str, str], SustainedWindow]
    rising: dict[SeriesKey, Rising]
    windows: dict[SeriesKey, MinuteWindow]


class MinutesHeld:
    """Every keeper of ``minutes``, by series or by node and direction."""

    def __init__(self, period: int) -> None:
        self.period = period
        self._implied: dict[tuple[NodeKey, str], ImpliedMinutes] = {}  # the last hour's implied baseline per minute
        self._bursts: dict[tuple[NodeKey, str], BurstMinutes] = {}  # the busiest seconds and averages
        self._rising: dict[SeriesKey, RisingMinutes] = {}  # the allowance-exceeded counters
        self._windows: dict[SeriesKey, WindowMinutes] = {}  # the gauges alerts hold for minutes (WINDOW_SERIES)

    def keep(
        self,
        minutes: list[tuple[tuple[NodeKey, str, str], dict[str, Any]]],
        live: set[NodeKey],
        keeps: Callable[[SeriesKey], bool],
        names: dict[NodeKey, str],
        first: int,
        oldest: float,
    ) -> Held:
        """Add a poll's minutes (MetricDataResults by node, metric and statistic) to the keepers, each once: a keeper
        that gets no newer minute serves what it did. Drop the implied minutes before ``oldest``, the keepers of nodes
        not ``live`` and of series a node no longer gets from CloudWatch (``keeps``); ``first``: the minutes the first poll
        of a new keeper is taken to bring. What they make, by instance ``names``."""
        polled: Polled = {}
        for key, result in minutes:
            polled.setdefault(key, {}).update(datapoints(result.get("Timestamps", []), result.get("Values", [])))
        bursts, sustained = self._keep_bursts(polled, live, names, first)
        rising = self._keep_by_series(polled, keeps, self._rising, lambda key: RisingMinutes(first) if key in RISING_SERIES else None)
        windows = self._keep_by_series(
            polled, keeps, self._windows, lambda key: WindowMinutes(WINDOW_SERIES[key], first) if key in WINDOW_SERIES else None
        )
        return Held(self._keep_implied(polled, live, names, oldest), bursts, sustained, rising, windows)

    def _keep_implied(self, polled: Polled, live: set[NodeKey], names: dict[NodeKey, str], oldest: float) -> dict[tuple[str, str], float]:
        """The hour of implied baseline per minute (traffic over its share of the baseline): its median, by (instance,
        direction)."""
        for node_key in {key[0] for key in polled}:
            for direction in DIRECTIONS:
                traffic_metric, share_metric = series_names(direction)
                traffic, share = polled.get((node_key, traffic_metric, "Sum")), polled.get((node_key, share_metric, "Average"))
                if traffic and share:
                    self._implied.setdefault((node_key, direction), ImpliedMinutes()).merge(traffic, share, self.period, oldest)
        implied: dict[tuple[str, str], float] = {}
        for (node_key, direction), kept in list(self._implied.items()):
            if node_key not in live or not kept.merge({}, {}, self.period, oldest):
                del self._implied[(node_key, direction)]
            else:
                implied[(names.get(node_key, node_key[2]), direction)] = statistics.median(kept.values)
        return implied

    def _keep_by_series(
        self, polled: Polled, keeps: Callable[[SeriesKey], bool], store: dict[SeriesKey, Any], keeper: Callable[[tuple[str, str]], Any]
    ) -> dict[SeriesKey, Any]:
        """Each series' keeper (``keeper`` makes one for a (metric, statistic) kept by minute, None for the others) given
        the minutes of this poll, once; the keepers of series no longer kept dropped; what each holds now."""
        brought: dict[SeriesKey, dict[float, float]] = {}
        for (node_key, metric, statistic), values in polled.items():
            key: SeriesKey = (*node_key, metric, statistic)
            if key not in store:
                made = keeper((metric, statistic))
                if made is None:
                    continue
                store[key] = made
            brought[key] = values
        held: dict[SeriesKey, Any] = {}
        for key, kept in list(store.items()):
            now = kept.merge(brought.get(key, {}), self.period) if keeps(key) else None
            if now is None:
                del store[key]
            else:
                held[key] = now
        return held

    def _keep_bursts(
        self, polled: Polled, live: set[NodeKey], names: dict[NodeKey, str], first: int
    ) -> tuple[dict[tuple[str, str], BurstWindow], dict[tuple[str, str], SustainedWindow]]:
        """The busiest seconds and averages of this poll, once each: the microburst and sustained windows, by (instance,
        direction)."""
        brought: dict[tuple[NodeKey, str], tuple[dict[float, float], dict[float, float]]] = {}
        for node_key in {key[0] for key in polled}:
            for direction in DIRECTIONS:
                peak_metric, usage_metric = burst_series_names(direction)
                peaks, usage = polled.get((node_key, peak_metric, "Maximum")), polled.get((node_key, usage_metric, "Average"))
                if peaks or usage:
                    self._bursts.setdefault((node_key, direction), BurstMinutes(first))
                    brought[(node_key, direction)] = (peaks or {}, usage or {})
        bursts: dict[tuple[str, str], BurstWindow] = {}
        sustained: dict[tuple[str, str], SustainedWindow] = {}
        for (node_key, direction), kept in list(self._bursts.items()):
            if node_key not in live:
                del self._bursts[(node_key, direction)]
                continue
            name = (names.get(node_key, node_key[2]), direction)
            window_now = kept.merge(*brought.get((node_key, direction), ({}, {})))
            held = kept.sustained()
            if window_now is not None:
                bursts[name] = window_now
            if held is not None:
                sustained[name] = held
            if window_now is None and held is None:
                del self._bursts[(node_key, direction)]
        return bursts, sustained
