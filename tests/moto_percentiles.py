"""Percentile statistics (``p50``, ``p99.9``) in moto's GetMetricData, which answers only the five basic statistics.

CloudWatch computes a percentile from the raw values put in the period (PutMetricData's Value, or Values with
Counts); it has none for data put as StatisticValues, and answers no datapoint then. Here: the nearest-rank
percentile of the raw values, and a statistic that is neither basic nor a valid percentile is refused, as CloudWatch
refuses it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from moto.cloudwatch.exceptions import InvalidParameterValue
from moto.cloudwatch.models import MetricDatum, Statistics

_PERCENTILE = re.compile(r"^p(\d{1,2}(\.\d+)?|100)$")


def _nearest_rank(values: list[float], percent: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]


def _with_percentiles(original: Any) -> Any:
    def get_statistics_for_type(self: Statistics, stat: str) -> Any:
        if not stat.startswith("p"):
            return original(self, stat)
        match = _PERCENTILE.match(stat)
        if match is None or float(match.group(1)) > 100:
            raise InvalidParameterValue(f"The value {stat} for parameter MetricDataQueries.member.1.MetricStat.Stat is not valid.")
        raw = [datum.value for datum in self.metric_data or [] if isinstance(datum, MetricDatum)]
        return _nearest_rank(raw, float(match.group(1))) if raw else None

    return get_statistics_for_type


@contextmanager
def percentiles_in_moto() -> Iterator[None]:
    original = Statistics.get_statistics_for_type
    Statistics.get_statistics_for_type = _with_percentiles(original)
    try:
        yield
    finally:
        Statistics.get_statistics_for_type = original
