"""Collect samples into one metric family per name, across targets.

Several targets scraped together must share one ``# TYPE`` block per metric
name, so samples are gathered here and the families yielded once at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from .labels import with_label

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

GAUGE = "gauge"
COUNTER = "counter"
SUMMARY = "summary"
HISTOGRAM = "histogram"
NOT_RECORDING: AbstractContextManager[None] = nullcontext()  # reusable: a nullcontext holds no state


class Family:
    """One family's samples as plain tuples; the text encoder reads it directly, ``metric()`` converts it."""

    __slots__ = ("documentation", "name", "samples", "type")

    def __init__(self, name: str, kind: str, documentation: str) -> None:
        self.name = name  # as served: a counter keeps its name, with or without _total (redis_exporter has both)
        self.type = kind
        self.documentation = documentation
        self.samples: list[tuple[str, dict[str, str], float]] = []

    def metric(self) -> Metric:
        from prometheus_client.metrics_core import Metric  # only for OpenMetrics: the text path never loads it

        if self.type != COUNTER:
            metric = Metric(self.name, self.documentation, self.type)
        elif self.name.endswith("_total"):
            metric = Metric(self.name[:-6], self.documentation, COUNTER)
        else:  # OpenMetrics requires _total on a counter's samples: served untyped, under the same name as in text
            metric = Metric(self.name, self.documentation, "unknown")
        for name, labels, value in self.samples:
            metric.add_sample(name, labels, value)
        return metric


class FamilySet:
    """Metric families keyed by name; the first help text and type of a name win."""

    def __init__(self) -> None:
        self._families: dict[str, Family] = {}

    def _family(self, name: str, kind: str, help_: str) -> Family:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = Family(name, kind, help_)
        return family

    def add(self, name: str, kind: str, help_: str, labels: dict[str, str], value: float) -> None:
        family = self._families.get(name)  # _family inlined: this runs for every sample of every scrape
        if family is None:
            family = self._families[name] = Family(name, kind, help_)
        family.samples.append((name, labels, value))

    def add_numbers(self, labels: dict[str, str], samples: list[tuple[str, str, str, float | str]]) -> None:
        """Samples of one label set, each (name, type, help, value): a finite float, or the text ``repr`` writes for
        one (an integer the server wrote, which a text set writes as it is)."""
        for name, kind, help_, value in samples:
            self.add(name, kind, help_, labels, float(value))

    def add_sample(self, family: str, kind: str, help_: str, sample: str, labels: dict[str, str], value: float) -> None:
        """A sample whose name is not the family's (a histogram's ``_bucket``, a summary's ``_sum``)."""
        self._family(family, kind, help_).samples.append((sample, labels, value))

    def add_summary(
        self,
        name: str,
        help_: str,
        labels: dict[str, str],
        quantiles: list[tuple[str, float]],
        count: float | None,
        total: float | None,
    ) -> None:
        add = self.add_sample
        for quantile, value in quantiles:
            add(name, SUMMARY, help_, name, with_label(labels, "quantile", quantile), value)
        if count is not None and total is not None:
            add(name, SUMMARY, help_, name + "_sum", labels, total)
            add(name, SUMMARY, help_, name + "_count", labels, count)

    def add_histogram(
        self,
        name: str,
        help_: str,
        labels: dict[str, str],
        buckets: list[tuple[str, float]],
        count: float,
        total: float,
    ) -> None:
        """``buckets`` are (upper bound as the ``le`` label, cumulative count), in increasing order; +Inf is ``count``."""
        add = self.add_sample
        bucket = name + "_bucket"
        for bound, value in buckets:
            add(name, HISTOGRAM, help_, bucket, with_label(labels, "le", bound), value)
        add(name, HISTOGRAM, help_, bucket, with_label(labels, "le", "+Inf"), count)
        add(name, HISTOGRAM, help_, name + "_sum", labels, total)
        add(name, HISTOGRAM, help_, name + "_count", labels, count)

    # Replaying what a target's inputs rendered to last time: only a set that renders text keeps lines
    # (:class:`~exporter.common.exposition.TextFamilySet`); here every sample is added afresh, and what targets share
    # (add_shared) is rendered for each.

    def rendering(self, rendering: Any) -> AbstractContextManager[None]:
        return NOT_RECORDING

    def memo(self, part: str) -> dict[Any, Any] | None:
        return None

    def replay(self, memo: dict[Any, Any] | None, key: Any, source: Any) -> Any:
        return None

    def replay_each(self, memo: dict[Any, Any] | None, inputs: dict[Any, Any], render: Callable[[Any, Any], None]) -> int:
        for key, source in inputs.items():
            render(key, source)
        return len(inputs)

    def recording(self, memo: dict[Any, Any] | None, key: Any, source: Any) -> AbstractContextManager[None]:
        return NOT_RECORDING

    def record_together(self, memo: dict[Any, Any] | None, key: Any, source: Any, parts: Iterable[Any]) -> None:
        return None

    def add_shared(self, part: str, source: Hashable, base: dict[str, str], render: Callable[[dict[str, str], FamilySet], None]) -> None:
        """``render(base, self)``: samples that depend only on ``source`` and the target's ``instance`` (``base``). A text
        set writes them from what every target with that ``source`` shares (see TextFamilySet)."""
        render(base, self)

    def compact(self) -> None:
        """Called between targets of a fleet: a set that renders joins what it holds (see RenderingFamilySet)."""
        return None

    def names(self) -> set[str]:
        return set(self._families)

    def __contains__(self, name: str) -> bool:
        return name in self._families

    def families(self) -> Iterator[Family]:
        """For the text encoder: no per-sample objects are built."""
        return iter(self._families.values())

    def __iter__(self) -> Iterator[Metric]:
        """prometheus_client families, as a collector's ``collect()`` yields them."""
        return (family.metric() for family in self._families.values())


class FamilyCollector:
    """A collector that writes its samples of this scrape into the set it is given: the text encoder's set (which
    renders each sample as it comes, without prometheus_client objects, so a Redis-only exporter never imports it) or
    a :class:`FamilySet` that ``collect()`` turns into the library's families for its encoders."""

    def write(self, out: FamilySet) -> None:
        raise NotImplementedError

    def build(self) -> FamilySet:
        out = FamilySet()
        self.write(out)
        return out

    def families(self) -> Iterator[Family]:
        return self.build().families()

    def collect(self) -> Iterator[Any]:
        return iter(self.build())
