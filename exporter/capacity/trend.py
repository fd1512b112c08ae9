"""Growth models for the capacity projection: a straight line or compound (log-linear) growth, chosen by fit, a range
from the fit's residuals, and the most recent regime after a step change. Pure functions.

Traffic usually grows by a share each week, which a straight line under-projects; a line fitted to traffic that
doubled ten days ago projects the old regime. Both errors give on-call people more time than they have, so the
projection is the earlier of the model's date and the date its upper band (one-sided 90 %) reaches the level.
"""

from __future__ import annotations

import math

from exporter.common.records import record

DAY = 86400.0
BAND_Z = 1.2816  # one-sided 90 % of a normal residual
MIN_REGIME_POINTS = 4  # a step change is looked for only with this many days on each side
STEP_RATIO = 1.3  # a regime whose level differs by this factor (either way) ...
STEP_GAIN = 0.5  # ... and whose split halves the squared error of one fit is a step change
CLOSE_FIT = 1.1  # fits whose errors are within this factor are equally good: the earlier date is kept


@record(frozen=True)
class Fit:
    model: str  # "linear" or "compound"
    slope: float  # linear: value per second; compound: ln(value) per second
    intercept: float  # at t = 0 (value, or ln(value))
    sigma: float  # residual standard deviation, in the model's space
    sse: float  # squared error in the value's own space, to compare the models

    def value_at(self, t: float, z: float = 0.0) -> float:
        if self.model == "linear":
            return self.slope * t + self.intercept + z * self.sigma
        return math.exp(self.slope * t + self.intercept + z * self.sigma)

    def reaches(self, level: float, now: float, z: float = 0.0) -> float | None:
        """When the model (shifted by ``z`` sigmas) reaches ``level``: now if it is already there, None if never."""
        if self.value_at(now, z) >= level:
            return now
        if self.slope <= 0:
            return None
        if self.model == "linear":
            return (level - self.intercept - z * self.sigma) / self.slope
        if level <= 0:
            return now
        return (math.log(level) - self.intercept - z * self.sigma) / self.slope

    @property
    def growth_per_week(self) -> float:
        """Compound: the share added per week (0.05 = +5 %/week); linear: not defined (nan)."""
        return math.exp(self.slope * 7 * DAY) - 1 if self.model == "compound" else math.nan


def least_squares(points: list[tuple[float, float]]) -> tuple[float, float, float] | None:
    """(slope, intercept, residual standard deviation) of the least-squares line; None below two distinct times."""
    n = len(points)
    if n < 2:
        return None
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return None
    slope = sum((t - mean_t) * (v - mean_v) for t, v in points) / spread
    intercept = mean_v - slope * mean_t
    squared = sum((v - (slope * t + intercept)) ** 2 for t, v in points)
    sigma = math.sqrt(squared / (n - 2)) if n > 2 else 0.0
    return slope, intercept, sigma


def fit_linear(points: list[tuple[float, float]]) -> Fit | None:
    line = least_squares(points)
    if line is None:
        return None
    slope, intercept, sigma = line
    sse = sum((v - (slope * t + intercept)) ** 2 for t, v in points)
    return Fit("linear", slope, intercept, sigma, sse)


def fit_compound(points: list[tuple[float, float]]) -> Fit | None:
    """A line through ln(value): growth by a constant share per unit of time. Needs every value above zero."""
    if any(v <= 0 for _, v in points):
        return None
    line = least_squares([(t, math.log(v)) for t, v in points])
    if line is None:
        return None
    slope, intercept, sigma = line
    sse = sum((v - math.exp(slope * t + intercept)) ** 2 for t, v in points)
    return Fit("compound", slope, intercept, sigma, sse)


def step_start(points: list[tuple[float, float]]) -> int:
    """The index where the latest regime begins: 0 without a step change, else the split of the two means that
    differ by STEP_RATIO and whose separate fits halve the squared error of one fit."""
    whole = fit_linear(points)
    if whole is None or len(points) < 2 * MIN_REGIME_POINTS:
        return 0
    best, best_sse = 0, whole.sse * STEP_GAIN
    for split in range(MIN_REGIME_POINTS, len(points) - MIN_REGIME_POINTS + 1):
        before, after = points[:split], points[split:]
        mean_before = sum(v for _, v in before) / len(before)
        mean_after = sum(v for _, v in after) / len(after)
        if mean_before <= 0 or mean_after <= 0 or 1 / STEP_RATIO < mean_after / mean_before < STEP_RATIO:
            continue
        first, second = fit_linear(before), fit_linear(after)
        if first is None or second is None:
            continue
        if first.sse + second.sse < best_sse:
            best, best_sse = split, first.sse + second.sse
    return best


@record(frozen=True)
class Projection:
    fit: Fit
    regime_start: float  # the time of the first point the fit used
    step: bool  # a step change was found and only the latest regime is used
    other: Fit | None  # the model not chosen, for the report

    def reaches(self, level: float, now: float) -> tuple[float | None, float | None]:
        """(earliest, central): the date the upper band reaches ``level``, and the date the model does."""
        return self.fit.reaches(level, now, BAND_Z), self.fit.reaches(level, now)


def project(points: list[tuple[float, float]]) -> Projection | None:
    """The growth model of a daily series: its latest regime, fitted both ways, the better fit kept (of fits
    equally good, the one that reaches a higher value sooner)."""
    if len(points) < 2:
        return None
    start = step_start(points)
    regime = points[start:]
    linear, compound = fit_linear(regime), fit_compound(regime)
    fits = [fit for fit in (linear, compound) if fit is not None]
    if not fits:
        return None
    fits.sort(key=lambda fit: fit.sse)
    chosen = fits[0]
    if len(fits) == 2 and fits[1].sse <= max(fits[0].sse * CLOSE_FIT, 1e-9):
        horizon = regime[-1][0] + 30 * DAY  # equally good: the one that projects more traffic in a month
        chosen = max(fits, key=lambda fit: fit.value_at(horizon))
    other = next((fit for fit in fits if fit is not chosen), None)
    return Projection(chosen, regime[0][0], start > 0, other)
