"""Collect samples into one metric family per name, across targets.

Several targets scraped together must share one ``# TYPE`` block per metric
name, so samples are gathered here and the families yielded once at the end.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric

GAUGE = "gauge"
COUNTER = "counter"
SUMMARY = "summary"


class FamilySet:
    """Metric families keyed by name; the first help text and type of a name win."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def _family(self, name: str, kind: str, help_: str) -> Metric:
        family = self._families.get(name)
        if family is None:
            family_name = name[:-6] if kind == COUNTER and name.endswith("_total") else name
            family = Metric(family_name, help_, kind)
            self._families[name] = family
        return family

    def add(self, name: str, kind: str, help_: str, labels: dict[str, str], value: float) -> None:
        self._family(name, kind, help_).add_sample(name, labels, value)

    def add_summary(
        self,
        name: str,
        help_: str,
        labels: dict[str, str],
        quantiles: list[tuple[str, float]],
        count: float | None,
        total: float | None,
    ) -> None:
        family = self._family(name, SUMMARY, help_)
        for quantile, value in quantiles:
            family.add_sample(name, {**labels, "quantile": quantile}, value)
        if count is not None and total is not None:
            family.add_sample(name + "_sum", labels, total)
            family.add_sample(name + "_count", labels, count)

    def names(self) -> set[str]:
        return set(self._families)

    def __contains__(self, name: str) -> bool:
        return name in self._families

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())
