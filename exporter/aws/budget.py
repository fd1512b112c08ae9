"""What the exporter's CloudWatch polling costs a month, and the tier intervals that keep it within a budget (pure).

The poller wakes every paging interval and asks the tiers that are due, a tier being due half a wake-up early, so a tier
is really asked every whole number of wake-ups nearest its interval: that is what the bill counts. Over a budget
(``aws.cloudwatch.budget_usd_per_month``), the trends tier, which no alert reads, is asked less often; the paging and
alerting tiers never are: the alerts' freshness guards are rendered for their intervals, so a longer one would silence
them between polls."""

from __future__ import annotations

import math
from collections.abc import Mapping

from exporter.common.records import record

from .cloudwatch import MAX_WINDOW_SECONDS, TIERS, usd_per_month
from .pricing import PROMQL_USD_PER_MILLION_SAMPLES, SECONDS_PER_MONTH
from .schedule import ASKED_AGAIN_SECONDS

# the trends tier's longer intervals, tried in turn while the bill is over the budget: up to 3 hours, the longest window a
# poll asks, less a wake-up (see plan), so not a minute is lost
LENGTHENING: tuple[tuple[str, float], ...] = (("trends", 7200.0), ("trends", MAX_WINDOW_SECONDS))


def effective_interval(interval: float, wake_up: float) -> float:
    """How often a tier of ``interval`` is asked by a poller that wakes every ``wake_up`` seconds (due half a wake-up
    early): the whole number of wake-ups nearest the interval, at least one."""
    return wake_up * max(1, math.ceil(interval / wake_up - 0.5))


def promql_samples_per_month(samples_per_minute: float, interval: float) -> float:
    """The samples the PromQL API scans a month for series scanning ``samples_per_minute`` asked every ``interval``:
    each poll asks the minutes since the last one and the last 5 again (``schedule.ASKED_AGAIN_SECONDS``)."""
    minutes_a_poll = (interval + ASKED_AGAIN_SECONDS) / 60
    return samples_per_minute * minutes_a_poll * SECONDS_PER_MONTH / interval


def promql_usd_per_month(samples_per_minute: float, interval: float) -> float:
    return promql_samples_per_month(samples_per_minute, interval) / 1e6 * PROMQL_USD_PER_MILLION_SAMPLES


def promql_is_cheaper(samples_per_minute: float, interval: float) -> bool:
    """Whether a node's metric-statistic costs less through the PromQL API than as a GetMetricData pair, at ``interval``."""
    return promql_usd_per_month(samples_per_minute, interval) < usd_per_month(1, interval)


def monthly_usd(pairs: Mapping[str, int], intervals: Mapping[str, float], promql: Mapping[str, int] | None = None) -> float:
    """The month's bill of asking each tier's GetMetricData ``pairs``, and the PromQL series scanning ``promql`` samples
    a minute, every its interval."""
    promql = promql or {}
    return sum(usd_per_month(pairs.get(tier, 0), intervals[tier]) + promql_usd_per_month(promql.get(tier, 0), intervals[tier]) for tier in TIERS)


@record(frozen=True)
class BudgetPlan:
    intervals: dict[str, float]  # tier → how often it is asked
    usd_per_month: float  # the bill at those intervals
    configured_usd_per_month: float  # the bill at the configured ones
    budget: float | None

    @property
    def lengthened(self) -> bool:
        return self.usd_per_month < self.configured_usd_per_month

    @property
    def kept(self) -> bool:
        return self.budget is None or self.usd_per_month <= self.budget


def plan(
    pairs: Mapping[str, int], configured: Mapping[str, float], wake_up: float, budget: float | None = None, promql: Mapping[str, int] | None = None
) -> BudgetPlan:
    """The tier intervals to ask ``pairs`` (per tier, the whole fleet's GetMetricData pairs; ``promql``: the samples a
    minute of the metric-statistics asked of the PromQL API) at: the configured ones, as the poller asks them, lengthened
    by :data:`LENGTHENING` while the bill is over ``budget`` (where it cannot be kept, the longest)."""
    intervals = {tier: effective_interval(configured[tier], wake_up) for tier in TIERS}
    configured_usd = usd = monthly_usd(pairs, intervals, promql)
    for tier, longer in LENGTHENING:
        if budget is None or usd <= budget:
            break
        # whole wake-ups, a wake-up shorter than a poll's longest window: a poll that starts late still reaches the last
        within_window = max(wake_up, (MAX_WINDOW_SECONDS - wake_up) // wake_up * wake_up)
        intervals[tier] = max(intervals[tier], min(effective_interval(longer, wake_up), within_window))
        usd = monthly_usd(pairs, intervals, promql)
    return BudgetPlan(intervals, usd, configured_usd, budget)


def describe(plan_made: BudgetPlan) -> str:
    """One line with the figures, for the warning a lengthened or passed budget gives."""
    every = ", ".join(f"{tier} every {_duration(plan_made.intervals[tier])}" for tier in TIERS)
    figures = f"USD {plan_made.usd_per_month:.2f} a month ({every}); at the configured intervals USD {plan_made.configured_usd_per_month:.2f}"
    if plan_made.kept:
        return f"CloudWatch budget USD {plan_made.budget:.2f} a month kept by asking the trends tier less often: {figures}"
    return (
        f"CloudWatch budget USD {plan_made.budget:.2f} a month cannot be kept: {figures}; the tiers alerts read are never "
        "asked less often than configured (raise the budget, lengthen aws.cloudwatch.interval or alerting_interval, leave "
        "metric groups out, or let the exporter read the nodes' INFO)"
    )


def _duration(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 60:.0f}m" if seconds % 60 == 0 else f"{seconds:.0f}s"
