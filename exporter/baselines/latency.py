"""Benchmark latency kept beside the bandwidth: requests per second and p50/p99/p99.9 per command, data size and
client count, as redis-benchmark (its report or ``--csv``) and memtier_benchmark (``--json-out-file``) print them.

Pure: the readers take text, the table keeps :class:`LatencyFigure` records, and :func:`average_passes` turns repeated
runs into one figure each (the seeds average their passes, they do not keep the best).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from exporter.common.records import record

from .errors import BaselineError


@record(frozen=True)
class LatencyFigure:
    command: str  # GET, SET, … as the tool names the test (upper case)
    rps: float  # requests (operations) per second
    p50_ms: float | None = None
    p99_ms: float | None = None
    p99_9_ms: float | None = None
    data_size: int | None = None  # value bytes; memtier's range as its mean
    clients: int | None = None  # connections in all
    tool: str = ""
    passes: int = 1
    client_bound: bool = False  # the same figure on larger nodes: the client's limit, not the node's
    shards: int = 1  # run against a cluster endpoint of this many shards: rps is the cluster's

    @property
    def key(self) -> tuple[str, int | None, int | None, str, int]:
        return self.command, self.data_size, self.clients, self.tool, self.shards


LATENCY_KEYS = ("command", "rps", "p50_ms", "p99_ms", "p99_9_ms", "data_size", "clients", "tool", "passes", "client_bound", "shards")


def average_passes(figures: Iterable[LatencyFigure]) -> list[LatencyFigure]:
    """One figure per command, data size, client count and tool: the mean of its passes (each weighted by its own)."""
    groups: dict[tuple[str, int | None, int | None, str, int], list[LatencyFigure]] = {}
    for figure in figures:
        groups.setdefault(figure.key, []).append(figure)
    averaged = []
    for (command, data_size, clients, tool, shards), items in sorted(groups.items(), key=lambda item: str(item[0])):
        weights = [item.passes for item in items]

        def mean(values: list[float | None], weights: list[int] = weights) -> float | None:
            pairs = [(value, weight) for value, weight in zip(values, weights, strict=True) if value is not None]
            return round(sum(v * w for v, w in pairs) / sum(w for _, w in pairs), 3) if pairs else None

        averaged.append(
            LatencyFigure(
                command=command,
                rps=mean([item.rps for item in items]) or 0.0,
                p50_ms=mean([item.p50_ms for item in items]),
                p99_ms=mean([item.p99_ms for item in items]),
                p99_9_ms=mean([item.p99_9_ms for item in items]),
                data_size=data_size,
                clients=clients,
                tool=tool,
                passes=sum(weights),
                client_bound=any(item.client_bound for item in items),
                shards=shards,
            )
        )
    return averaged


# --- redis-benchmark's text report -----------------------------------------------------------

_TEST = re.compile(r"^=+\s*(.+?)\s*=+\s*$")
_CLIENTS = re.compile(r"^\s*(\d+)\s+parallel clients")
_PAYLOAD = re.compile(r"^\s*(\d+)\s+bytes payload")
_PERCENTILE = re.compile(r"^\s*([\d.]+)%\s*<=\s*([\d.]+)\s*milliseconds")
_THROUGHPUT = re.compile(r"^\s*(?:throughput summary:\s*)?([\d.]+)\s+requests per second")
_SUMMARY_PAIRS = re.compile(r"(min|q50|p50|q95|p95|q99|p99|max|avg)=([\d.]+)")


# redis-benchmark -q: one line per test, "GET: 12482.84 requests per second" (6.2 and later add ", p50=0.175 msec")
_QUIET = re.compile(r"^\s*([A-Za-z_][^:]*):\s*([\d.]+) requests per second(?:, p50=([\d.]+) msec)?\s*(?:<-.*)?$")


def looks_like_report(text: str) -> bool:
    if "requests per second" not in text:
        return False
    return bool(re.search(r"^=+ .+ =+\s*$", text, re.MULTILINE)) or any(_QUIET.match(line) for line in text.splitlines()[:50])


def read_report(text: str, where: str) -> list[LatencyFigure]:
    """Every test of a redis-benchmark report (without ``--csv``): the HDR form (6.2 and later: "Latency by percentile
    distribution", "throughput summary", "latency summary"), the older one (a percent list and "requests per
    second"), and the one-line-per-test form of ``-q``."""
    figures: list[LatencyFigure] = []
    test: dict[str, Any] | None = None
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if match := _TEST.match(line):
            if test is not None:
                figures.append(_figure(test, where))
            test = {"command": match.group(1).upper(), "line": number, "distribution": [], "summary": {}}
            continue
        if test is not None:
            _read_test_line(test, line, lines[number : number + 2])
    if test is not None:
        figures.append(_figure(test, where))
    if not figures:
        figures = [_quiet(match) for line in lines if (match := _QUIET.match(line))]
    if not figures:
        raise BaselineError(
            f"{where}: no test found (a report's tests start with a '====== GET ======' line, or with -q "
            "are lines such as 'GET: 12482.84 requests per second')"
        )
    return figures


def _read_test_line(test: dict[str, Any], line: str, following: list[str]) -> None:
    """What one line of a test's section says, into ``test``."""
    if match := _CLIENTS.match(line):
        test["clients"] = int(match.group(1))
    elif match := _PAYLOAD.match(line):
        test["data_size"] = int(match.group(1))
    elif line.startswith("Cumulative distribution"):
        test["cumulative"] = True  # the same list again by latency step: the percentile list above is the one read
    elif (match := _PERCENTILE.match(line)) and not test.get("cumulative"):
        test["distribution"].append((float(match.group(1)), float(match.group(2))))
    elif match := _THROUGHPUT.match(line):
        test["rps"] = float(match.group(1))
    elif "latency summary" in line:
        test["summary"] = _summary(line, following)


def _quiet(match: re.Match[str]) -> LatencyFigure:
    """A line of ``redis-benchmark -q``: a pass of one test (repeated lines are passes, averaged by derive)."""
    p50 = float(match.group(3)) if match.group(3) else None
    return LatencyFigure(command=match.group(1).strip().upper(), rps=float(match.group(2)), p50_ms=p50, tool="redis-benchmark")


def _summary(line: str, following: list[str]) -> dict[str, float]:
    """``latency summary: min=… q50=… msec`` on one line, or ``latency summary (msec):`` then names and values."""
    pairs = dict(_SUMMARY_PAIRS.findall(line))
    if pairs:
        return {name.replace("q", "p"): float(value) for name, value in pairs.items()}
    if len(following) == 2:
        names, values = following[0].split(), following[1].split()
        if len(names) == len(values):
            try:
                return {name.lower(): float(value) for name, value in zip(names, values, strict=True)}
            except ValueError:
                return {}
    return {}


def _figure(test: dict[str, Any], where: str) -> LatencyFigure:
    if "rps" not in test:
        raise BaselineError(f"{where} line {test['line']}: test {test['command']} has no 'requests per second' line")
    summary, distribution = test["summary"], test["distribution"]
    return LatencyFigure(
        command=test["command"],
        rps=test["rps"],
        p50_ms=summary.get("p50", _at(distribution, 50.0)),
        p99_ms=summary.get("p99", _at(distribution, 99.0)),
        p99_9_ms=_at(distribution, 99.9),
        data_size=test.get("data_size"),
        clients=test.get("clients"),
        tool="redis-benchmark",
    )


def _at(distribution: list[tuple[float, float]], percentile: float) -> float | None:
    """The latency at ``percentile``: the first line of the distribution at or past it."""
    return next((latency for percent, latency in distribution if percent >= percentile), None)


# --- redis-benchmark --csv and memtier_benchmark JSON ------------------------------------------------


def from_csv_row(header: list[str], row: list[str], data_size: int | None, where: str) -> LatencyFigure:
    """A row of ``redis-benchmark --csv``: the header form has p50 and p99 (ms); the old form the rate only."""
    columns = {name.strip().lower(): value.strip() for name, value in zip(header, row, strict=False)} if header else {}

    def number(name: str) -> float | None:
        value = columns.get(name)
        try:
            return float(value) if value else None
        except ValueError as err:
            raise BaselineError(f"{where} column {name!r}: not a number: {value!r}") from err

    rps = number("rps") if header else _float(row[1], f"{where} column 2")
    return LatencyFigure(
        command=row[0].strip().upper(),
        rps=rps or 0.0,
        p50_ms=number("p50_latency_ms"),
        p99_ms=number("p99_latency_ms"),
        data_size=data_size,
        tool="redis-benchmark",
    )


def _float(value: str, where: str) -> float:
    try:
        return float(value)
    except ValueError as err:
        raise BaselineError(f"{where}: not a number: {value!r}") from err


def from_memtier(stats: dict[str, Any], data_size: int | None, where: str) -> list[LatencyFigure]:
    """``ALL STATS`` of memtier_benchmark's JSON: Sets and Gets with Ops/sec and their Percentile Latencies (ms)."""
    figures = []
    for command in ("Sets", "Gets"):
        entry = stats.get(command)
        if not isinstance(entry, dict) or "Ops/sec" not in entry:
            continue
        percentiles = entry.get("Percentile Latencies") or {}
        figures.append(
            LatencyFigure(
                command=command[:-1].upper(),
                rps=_float(str(entry["Ops/sec"]), f"{where} 'ALL STATS.{command}.Ops/sec'"),
                p50_ms=_percentile(percentiles, 50.0),
                p99_ms=_percentile(percentiles, 99.0),
                p99_9_ms=_percentile(percentiles, 99.9),
                data_size=data_size,
                tool="memtier_benchmark",
            )
        )
    return figures


def _percentile(percentiles: dict[str, Any], wanted: float) -> float | None:
    """memtier names them ``p50.00``, ``p99.00``, ``p99.90`` (and some versions ``p99.9``)."""
    for name, value in percentiles.items():
        try:
            if abs(float(str(name).lstrip("pP")) - wanted) < 1e-9 and isinstance(value, (int, float)):
                return float(value)
        except ValueError:
            continue
    return None


# --- the table's YAML ------------------------------------------------------------------------------


def latency_to_document(figures: Iterable[LatencyFigure]) -> list[dict[str, Any]]:
    defaults = {"client_bound": False, "shards": 1}
    return [{key: value for key in LATENCY_KEYS if (value := getattr(figure, key)) is not None and value != defaults.get(key)} for figure in figures]


def parse_latency(raw: Any, where: str) -> tuple[LatencyFigure, ...]:
    from exporter.common.schema import check_known_keys

    if not isinstance(raw, list):
        raise BaselineError(f"{where}: must be a list of figures")
    figures = []
    for index, entry in enumerate(raw):
        place = f"{where}[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str) or not isinstance(entry.get("rps"), (int, float)):
            raise BaselineError(f"{place}: needs a command and its rps")
        check_known_keys(entry, LATENCY_KEYS, place, BaselineError)
        for key in ("p50_ms", "p99_ms", "p99_9_ms", "data_size", "clients", "passes", "shards"):
            if entry.get(key) is not None and (isinstance(entry[key], bool) or not isinstance(entry[key], (int, float))):
                raise BaselineError(f"{place}.{key}: must be a number, got {entry[key]!r}")
        figures.append(LatencyFigure(**{key: entry[key] for key in LATENCY_KEYS if key in entry}))
    return tuple(figures)
