"""A cache of what was used lately: an entry not looked up for a generation or two is let go.

Rendered text is kept between scrapes because most of it recurs, but some keys churn (a restarted node's ``run_id``
makes a new label set every restart): a cache emptied only when full would grow to its bound under such churn and sit
there. Here entries live in two generations; a lookup that finds an entry in the old one brings it into the young one,
and the young one becomes the old one (the old one dropped) when it is full or when a generation's time is up, so an
entry unused for two generations is gone and memory follows the working set.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class RecentCache(Generic[K, V]):
    def __init__(self, max_entries: int, generation_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.generation_seconds = generation_seconds
        self._clock = clock
        self.young: dict[K, V] = {}  # looked up directly by the hot path; a miss there goes to recall()
        self._old: dict[K, V] = {}
        self._turned_at = clock()

    def recall(self, key: K) -> V | None:
        """The value of a key the young generation lacks, brought into it from the old one if it is there."""
        value = self._old.get(key)
        if value is not None:
            self.put(key, value)
        return value

    def get(self, key: K) -> V | None:
        value = self.young.get(key)
        return self.recall(key) if value is None else value

    def put(self, key: K, value: V) -> None:
        if len(self.young) >= self.max_entries:
            self.turn()
        self.young[key] = value

    def tick(self) -> None:
        """Called once per use of the whole cache (an encoding): turns the generation when its time is up."""
        if self._clock() - self._turned_at >= self.generation_seconds:
            self.turn()

    def turn(self) -> None:
        self._old, self.young = self.young, {}
        self._turned_at = self._clock()

    def __len__(self) -> int:
        return len(self.young) + len(self._old)

    def held_keys(self) -> set[K]:
        return self.young.keys() | self._old.keys()
