"""When the poller asks each tier, and from which minute: the poll thread's own marks. When a tier was last asked is
counted on the monotonic clock, so a step of the wall clock never stalls or rushes the schedule; where each tier's next
window starts, in each account and region, is a minute's stamp, AWS's time, moved on only by a poll that was answered."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .cloudwatch import TIERS

# The newest minutes of a poll that the next poll of its tier asks again: a minute AWS publishes a few minutes late, or
# one that was not complete yet because the exporter's clock runs ahead of AWS's, is still asked (GetMetricData bills
# the metrics asked, not their datapoints; a minute brought twice is kept once, by its timestamp).
ASKED_AGAIN_SECONDS = 300.0


class PollSchedule:
    """Per tier, when it was last asked; per (tier, place), the first minute its next window asks."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._asked: dict[str, float] = {}
        self._since: dict[tuple[str, object], float] = {}

    def due(self, interval: Callable[[str], float], slack: float) -> tuple[str, ...]:
        """The tiers whose ``interval`` has passed since they were last asked, ``slack`` early (half a wake-up, so a tier
        of 15 minutes polled by a 5-minute poller is asked every third poll, not every fourth)."""
        now = self._monotonic()
        return tuple(tier for tier in TIERS if tier not in self._asked or now - self._asked[tier] >= interval(tier) - slack)

    def asking(self, tiers: Iterable[str]) -> None:
        now = self._monotonic()
        for tier in tiers:
            self._asked[tier] = now

    def since(self, tiers: Iterable[str], place: object) -> float | None:
        """Where a window of ``tiers`` in ``place`` starts: the earliest of their marks (None: none asked there yet)."""
        return min((self._since[(tier, place)] for tier in tiers if (tier, place) in self._since), default=None)

    def answered(self, tiers: Iterable[str], place: object, end: float) -> None:
        """A window ending at ``end`` was answered whole: the next one asks from its last minutes again."""
        for tier in tiers:
            self._since[(tier, place)] = end - ASKED_AGAIN_SECONDS
