"""The baseline table: per node type, the bandwidth and CPU a node reached under benchmark load,
and AWS's published network figures. Loading, validation and the thresholds; pure apart from reading the file.
"""

from __future__ import annotations

import os
from typing import Any

from exporter.common.records import field, record
from exporter.common.schema import check_known_keys
from exporter.common.yamlfile import read_yaml

from .errors import BaselineError
from .latency import LatencyFigure, latency_to_document, parse_latency

FORMAT = "elasticache-exporter-baselines"
VERSION = 1
LEVELS = (100, 90, 80)
BASES = ("lower", "measured", "published")
BYTES_PER_GBIT = 125_000_000  # 10^9 bits / 8
DEFAULT_ENGINE_CPU_PERCENT = 90.0  # where no benchmark measured the engine CPU: AWS's 90 % of a core
SUGGESTED_FAMILIES = ("r7g", "r6g", "m7g", "m6g", "r5", "m5")  # current families a node is moved to, Graviton first


@record(frozen=True)
class Measured:
    bytes_per_second: dict[int, int]  # level (100/90/80) -> bytes/s
    data_size: int | None = None
    cpu_utilization_p90: float | None = None
    engine_cpu_utilization_p90: float | None = None
    runs: int | None = None
    date: str | None = None
    method: str = ""
    source: str = "benchmark"  # benchmark, or cloudwatch: the baseline AWS implies for the fleet's nodes (from_cloudwatch.py)
    estimated: bool = False
    nodes: int | None = None  # cloudwatch: the nodes and periods the median is of, and the period in seconds
    periods: int | None = None
    period: int | None = None


@record(frozen=True)
class Published:
    baseline_gbps: float | None = None
    burst_gbps: float | None = None
    source: str = ""
    date: str | None = None

    @property
    def baseline_bytes_per_second(self) -> float | None:
        return None if self.baseline_gbps is None else self.baseline_gbps * BYTES_PER_GBIT


@record(frozen=True)
class NodeBaseline:
    node_type: str
    vcpus: int | None = None
    memory_gib: float | None = None
    measured: Measured | None = None
    published: Published | None = None
    latency: tuple[LatencyFigure, ...] = ()  # requests/s and percentiles per command and data size (latency.py)

    def full_bandwidth(self, basis: str = "lower") -> tuple[float, str] | None:
        """Bytes/s at 100 % and where it comes from (``measured``, ``published``, or ``cloudwatch``: what AWS itself
        counted for the fleet's nodes, which outranks a published figure whatever the basis but ``published``)."""
        measured = self.measured.bytes_per_second.get(100) if self.measured else None
        published = self.published.baseline_bytes_per_second if self.published else None
        from_aws = measured is not None and self.measured is not None and self.measured.source == "cloudwatch"
        if from_aws and measured is not None and (basis != "published" or published is None):
            return float(measured), "cloudwatch"
        if basis == "measured" and measured is not None:
            return float(measured), "measured"
        if basis == "published" and published is not None:
            return published, "published"
        candidates = [(float(v), name) for v, name in ((measured, "measured"), (published, "published")) if v is not None]
        return min(candidates) if candidates else None

    def levels(self, basis: str = "lower") -> dict[int, int] | None:
        full = self.full_bandwidth(basis)
        if full is None:
            return None
        value, source = full
        if source in ("measured", "cloudwatch") and self.measured is not None:
            return dict(self.measured.bytes_per_second)
        return {level: int(value * level / 100) for level in LEVELS}

    @property
    def measured_engine_cpu(self) -> float | None:
        """The engine CPU (p90, % of a core) the node type showed at its benchmarked bandwidth, if measured."""
        return (self.measured.engine_cpu_utilization_p90 or None) if self.measured else None

    def engine_cpu_baseline(self) -> tuple[float, str]:
        """The engine CPU to compare with: the benchmarked one, else AWS's 90 % of a core; and which it is."""
        measured = self.measured_engine_cpu
        return (measured, "benchmarked") if measured else (DEFAULT_ENGINE_CPU_PERCENT, "aws-guidance")


@record(frozen=True)
class BaselineTable:
    node_types: dict[str, NodeBaseline]
    basis: str = "lower"
    source: str = ""
    extra: dict[str, Any] = field(factory=dict)

    def get(self, node_type: str) -> NodeBaseline | None:
        if not node_type:
            return None
        return self.node_types.get(node_type) or self.node_types.get("cache." + node_type)

    def suggest(self, bytes_per_second: float, *, memory_gib: float | None = None, like: str = "") -> str | None:
        """The node type to move to: the smallest current type (Graviton first) whose full baseline carries
        ``bytes_per_second`` at 80 % and that has at least ``memory_gib``; of the class of ``like`` (r, m; t grows
        into m) first, where given. None where no type in the table does."""
        own_class = like.split(".")[1][0] if like.count(".") == 2 else ""
        own_class = "m" if own_class == "t" else own_class
        candidates = []
        for name, node in self.node_types.items():
            parts = name.split(".")
            if len(parts) != 3 or parts[1] not in SUGGESTED_FAMILIES:
                continue
            levels = node.levels(self.basis)
            if not levels or levels[100] * 0.8 < bytes_per_second:
                continue
            if memory_gib is not None and (node.memory_gib is None or node.memory_gib < memory_gib):
                continue
            other_class = bool(own_class) and parts[1][0] != own_class
            candidates.append((other_class, levels[100], not parts[1].endswith("g"), SUGGESTED_FAMILIES.index(parts[1]), name))
        return min(candidates)[-1] if candidates else None


def default_table_path() -> str:
    # installed as a plain file beside this module (setup.cfg package_data); importlib.resources would
    # load tempfile, zipfile and pathlib into every exporter process for one path
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "baselines.yml")


def load_table(path: str | os.PathLike[str] | None = None, basis: str | None = None) -> BaselineTable:
    path = os.fspath(path) if path else default_table_path()
    return parse_table(read_yaml(path, BaselineError), path, basis)


def parse_table(data: Any, source: str, basis: str | None = None) -> BaselineTable:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(f"{source}: not a baseline table (expected 'format: {FORMAT}')")
    check_known_keys(data, ("format", "version", "basis", "node_types"), source + ":", BaselineError)
    if data.get("version") != VERSION:
        raise BaselineError(f"{source}: unsupported version {data.get('version')!r} (this exporter reads version {VERSION})")
    chosen = basis or data.get("basis", "lower")
    if chosen not in BASES:
        raise BaselineError(f"{source}: basis must be one of {', '.join(BASES)}, got {chosen!r}")
    raw_types = data.get("node_types")
    if not isinstance(raw_types, dict) or not raw_types:
        raise BaselineError(f"{source}: node_types must be a non-empty mapping")
    node_types = {}
    for node_type, entry in raw_types.items():
        node_types[str(node_type)] = _node(str(node_type), entry, f"{source}: node_types.{node_type}")
    return BaselineTable(node_types=node_types, basis=chosen, source=source)


def _node(node_type: str, entry: Any, where: str) -> NodeBaseline:
    if not isinstance(entry, dict):
        raise BaselineError(f"{where}: must be a mapping")
    check_known_keys(entry, ("vcpus", "memory_gib", "measured", "published", "latency"), where, BaselineError)
    measured = entry.get("measured")
    published = entry.get("published")
    if measured is None and published is None and not entry.get("latency"):
        raise BaselineError(f"{where}: needs 'measured' or 'published' figures (or benchmark 'latency')")
    return NodeBaseline(
        node_type=node_type,
        vcpus=_optional_number(entry.get("vcpus"), f"{where}.vcpus", int),
        memory_gib=_optional_number(entry.get("memory_gib"), f"{where}.memory_gib", float),
        measured=_measured(measured, f"{where}.measured") if measured is not None else None,
        published=_published(published, f"{where}.published") if published is not None else None,
        latency=_latency(entry.get("latency"), f"{where}.latency"),
    )


def _latency(raw: Any, where: str) -> tuple[LatencyFigure, ...]:
    if raw is None:
        return ()

    return parse_latency(raw, where)


MEASURED_KEYS = (
    "bytes_per_second",
    "data_size",
    "cpu_utilization_p90",
    "engine_cpu_utilization_p90",
    "runs",
    "date",
    "method",
    "source",
    "estimated",
    "nodes",
    "periods",
    "period",
)


def _measured(raw: Any, where: str) -> Measured:
    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: must be a mapping")
    check_known_keys(raw, MEASURED_KEYS, where, BaselineError)
    levels_raw = raw.get("bytes_per_second")
    if not isinstance(levels_raw, dict):
        raise BaselineError(f"{where}.bytes_per_second: must map the levels 100, 90 and 80 to bytes per second")
    check_known_keys({str(k): v for k, v in levels_raw.items()}, [str(level) for level in LEVELS], f"{where}.bytes_per_second", BaselineError)
    levels = {}
    for level in LEVELS:
        value = levels_raw.get(str(level), levels_raw.get(level))
        number = _optional_number(value, f"{where}.bytes_per_second.{level}", int)
        if number is None or number <= 0:
            raise BaselineError(f"{where}.bytes_per_second.{level}: must be a positive number of bytes per second")
        levels[level] = number
    return Measured(
        bytes_per_second=levels,
        data_size=_optional_number(raw.get("data_size"), f"{where}.data_size", int),
        cpu_utilization_p90=_optional_number(raw.get("cpu_utilization_p90"), f"{where}.cpu_utilization_p90", float),
        engine_cpu_utilization_p90=_optional_number(raw.get("engine_cpu_utilization_p90"), f"{where}.engine_cpu_utilization_p90", float),
        runs=_optional_number(raw.get("runs"), f"{where}.runs", int),
        date=None if raw.get("date") is None else str(raw["date"]),
        method=str(raw.get("method", "")),
        source=str(raw.get("source", "benchmark")),
        estimated=bool(raw.get("estimated", False)),
        nodes=_optional_number(raw.get("nodes"), f"{where}.nodes", int),
        periods=_optional_number(raw.get("periods"), f"{where}.periods", int),
        period=_optional_number(raw.get("period"), f"{where}.period", int),
    )


def _published(raw: Any, where: str) -> Published:
    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: must be a mapping")
    check_known_keys(raw, ("baseline_gbps", "burst_gbps", "source", "date"), where, BaselineError)
    return Published(
        baseline_gbps=_optional_number(raw.get("baseline_gbps"), f"{where}.baseline_gbps", float),
        burst_gbps=_optional_number(raw.get("burst_gbps"), f"{where}.burst_gbps", float),
        source=str(raw.get("source", "")),
        date=None if raw.get("date") is None else str(raw["date"]),
    )


def _optional_number(value: Any, where: str, kind: type) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BaselineError(f"{where}: must be a number, got {value!r}")
    return kind(value)


def table_to_document(table: BaselineTable) -> dict[str, Any]:
    """The YAML document of a table (the inverse of :func:`parse_table`)."""
    node_types: dict[str, Any] = {}
    for name in sorted(table.node_types):
        node = table.node_types[name]
        entry: dict[str, Any] = {"vcpus": node.vcpus, "memory_gib": node.memory_gib}
        if node.published is not None:
            p = node.published
            entry["published"] = {"baseline_gbps": p.baseline_gbps, "burst_gbps": p.burst_gbps, "source": p.source, "date": p.date}
        if node.measured is not None:
            m = node.measured
            entry["measured"] = {
                "bytes_per_second": {str(level): m.bytes_per_second[level] for level in LEVELS},
                "data_size": m.data_size,
                "cpu_utilization_p90": m.cpu_utilization_p90,
                "engine_cpu_utilization_p90": m.engine_cpu_utilization_p90,
                "runs": m.runs,
                "date": m.date,
                "method": m.method,
                "source": m.source,
                **({"estimated": True} if m.estimated else {}),
                **({"nodes": m.nodes, "periods": m.periods, "period": m.period} if m.source == "cloudwatch" else {}),
            }
        if node.latency:
            entry["latency"] = latency_to_document(node.latency)
        node_types[name] = entry
    return {"format": FORMAT, "version": VERSION, "basis": table.basis, "node_types": node_types}
