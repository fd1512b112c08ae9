"""What the background profilers' collectors share: their failures by target and kind."""

from __future__ import annotations

from exporter.common.families import COUNTER, FamilySet


def add_failures(out: FamilySet, family: str, help_: str, errors: dict[tuple[str, str], int]) -> None:
    """``family{instance, kind}``: a profiler's failed reads of each target, by kind."""
    for (name, kind), count in sorted(errors.items()):
        out.add(family, COUNTER, help_, {"instance": name, "kind": kind}, float(count))
