"""The baseline bandwidth AWS counts for a node, implied by its traffic and the share of that baseline AWS reports.

ElastiCache publishes ``NetworkBaselineUsage{In,Out}Percentage``: a minute's traffic as a percentage of the instance's
baseline bandwidth. The same minute's traffic in bytes per second divided by that fraction is the baseline AWS applied.
A minute under :data:`MIN_SHARE_PERCENT` is left out: a few bytes over a rounded fraction of a percent is noise. Used by
the exporter (a node's last hour) and by ``baseline derive --from-cloudwatch`` (a fleet's days).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

MIN_SHARE_PERCENT = 1.0


def implied_by_minute(traffic: Mapping[float, float], share_percent: Mapping[float, float]) -> dict[float, float]:
    """Per minute that has both (and a share of at least 1 %): bytes per second of traffic / (share / 100)."""
    return {stamp: traffic[stamp] / (share / 100.0) for stamp, share in share_percent.items() if share >= MIN_SHARE_PERCENT and stamp in traffic}


def implied_minutes(traffic: Mapping[float, float], share_percent: Mapping[float, float]) -> list[float]:
    """The values of :func:`implied_by_minute`."""
    return list(implied_by_minute(traffic, share_percent).values())


def implied_baseline(traffic: Mapping[float, float], share_percent: Mapping[float, float]) -> float | None:
    """The median of :func:`implied_minutes`, or None without such a minute."""
    implied = implied_minutes(traffic, share_percent)
    return statistics.median(implied) if implied else None
