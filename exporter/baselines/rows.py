"""A benchmark result as the seed's Athena query gives it: one node type at one data size, its p90 bandwidth and CPU."""

from __future__ import annotations

import math
from typing import Any

from exporter.common.records import record

from .latency import LatencyFigure
from .table import BaselineError

METHOD = "p90 of per-minute NetworkBytesOut / 60, maximum over data sizes"


@record(frozen=True)
class BenchmarkRow:
    """One row of the seed's Athena query: a node type at one data size."""

    instancetype: str
    data_size: int
    mbps_p90: float | None  # None: a run that measured latency only (no GET test to estimate bandwidth from)
    mbps_p70: float | None = None
    test_passes: int | None = None
    cpuutilization_90: float | None = None
    enginecpuutilization_90: float | None = None
    cpuutilization_50: float | None = None
    enginecpuutilization_50: float | None = None
    byte_per_min_p90: float | None = None
    estimated: bool = False
    method: str = METHOD
    latency: tuple[LatencyFigure, ...] = ()


def mbps_from_bytes_per_minute(value: float) -> float:
    """The Athena query's unit: Mibit/s from bytes per one-minute datapoint."""
    return value / 60 / 1024 / 1024 * 8


def mbps_from_bytes_per_second(value: float) -> float:
    return value / 1024 / 1024 * 8


def number(text: Any, kind: type, where: str) -> Any:  # text: a CSV cell or a JSON value
    try:
        value = kind(float(text)) if kind is int else kind(text)
    except (TypeError, ValueError) as err:
        raise BaselineError(f"{where}: not a number: {text!r}") from err
    if kind is float and math.isnan(value):
        raise BaselineError(f"{where}: not a number: {text!r}")
    return value
