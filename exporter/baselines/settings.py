"""Which baseline table the exporter compares nodes with (built by exporter.config)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BaselineConfig:
    file: str | None = None  # the shipped table when None
    basis: str | None = None  # the table's own basis when None
    window: float = 300.0  # seconds of INFO counters a rate is taken over
