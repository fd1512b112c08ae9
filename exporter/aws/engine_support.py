"""Engine end of support: the shipped table of engine major versions (``data/engine_support.yml``) and where each
discovered cluster stands against it. Pure but for reading the table.

A cluster past its end of standard support runs on Extended Support, billed from the first day of the next month;
when Extended Support ends ElastiCache upgrades the cache itself. A version the table lacks is reported as unknown,
never guessed from its neighbours.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from exporter.common.errors import ExporterError
from exporter.common.records import record
from exporter.common.schema import check_known_keys
from exporter.common.yamlfile import read_yaml

from .discovery import Node

TABLE_PATH = Path(__file__).parent / "data" / "engine_support.yml"
FORMAT = "elasticache-exporter-engine-support"
ROW_KEYS = ("engine", "major", "standard_end", "extended_end", "upgrade_to", "source", "read", "note")
WARN_DAYS = 90  # the alert's lead before standard support ends


class EngineSupportError(ExporterError):
    exit_code = 2


@record(frozen=True)
class SupportRow:
    engine: str
    major: str
    standard_day: datetime.date | None  # the last day of standard support, as AWS names it
    extended_day: datetime.date | None  # the last day of Extended Support
    upgrade_to: str
    source: str
    read: str

    @property
    def standard_end(self) -> float | None:
        """Unix seconds: the end of the last day of standard support (UTC); billing starts the day after."""
        return _day_end(self.standard_day)

    @property
    def extended_end(self) -> float | None:
        return _day_end(self.extended_day)


@record(frozen=True)
class ClusterSupport:
    """A replication group (or a cluster outside any group) and its engine's row, None where the table lacks it."""

    account_id: str
    region: str
    replication_group: str
    engine: str
    engine_version: str
    row: SupportRow | None

    def phase(self, now: float) -> str:
        """``unknown``, ``current`` (no end announced, or more than WARN_DAYS away), ``ending`` (standard support ends
        within WARN_DAYS), ``extended`` (billed for Extended Support) or ``ended`` (past every support)."""
        row = self.row
        if row is None:
            return "unknown"
        if row.standard_end is None:
            return "current"
        if now < row.standard_end:
            return "ending" if row.standard_end - now < WARN_DAYS * 86400 else "current"
        if row.extended_end is not None and now < row.extended_end:
            return "extended"
        return "ended"


def _day_end(day: datetime.date | None) -> float | None:
    if day is None:
        return None
    return (datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.timezone.utc) + datetime.timedelta(days=1)).timestamp()


def _date(value: Any, where: str) -> datetime.date | None:
    if value is None or (isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise EngineSupportError(f"{where}: {value!r} is no date (YYYY-MM-DD)")


def parse_support_table(data: Any, source: str) -> list[SupportRow]:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise EngineSupportError(f"{source}: not an engine support table (format: {FORMAT})")
    check_known_keys(data, ("format", "version", "engines"), source + ":", EngineSupportError)
    rows = []
    for index, item in enumerate(data.get("engines") or []):
        where = f"{source}: engines[{index}]"
        if not isinstance(item, dict):
            raise EngineSupportError(f"{where}: must be a mapping")
        check_known_keys(item, ROW_KEYS, where + ":", EngineSupportError)
        for key in ("engine", "major", "source", "read"):
            if not str(item.get(key) or ""):
                raise EngineSupportError(f"{where}.{key}: missing")
        standard, extended = _date(item.get("standard_end"), where + ".standard_end"), _date(item.get("extended_end"), where + ".extended_end")
        if standard is None and extended is not None:
            raise EngineSupportError(f"{where}: an end of Extended Support without an end of standard support")
        if standard is not None and extended is not None and extended <= standard:
            raise EngineSupportError(f"{where}: Extended Support must end after standard support")
        rows.append(
            SupportRow(
                engine=str(item["engine"]).lower(),
                major=str(item["major"]),
                standard_day=standard,
                extended_day=extended,
                upgrade_to=str(item.get("upgrade_to") or ""),
                source=str(item["source"]),
                read=str(item["read"]),
            )
        )
    return rows


def load_support_table(path: str | Path | None = None) -> list[SupportRow]:
    path = Path(path) if path is not None else TABLE_PATH
    return parse_support_table(read_yaml(path, EngineSupportError), str(path))


def major_of(engine_version: str) -> str:
    """``6.2.6`` → ``6``; "" for what has no leading number."""
    head = engine_version.strip().split(".", 1)[0]
    return head if head.isdigit() else ""


def row_for(table: Iterable[SupportRow], engine: str, engine_version: str) -> SupportRow | None:
    major = major_of(engine_version)
    return next((row for row in table if row.engine == engine.lower() and row.major == major), None) if major else None


def cluster_support(nodes: Iterable[Node], table: list[SupportRow]) -> list[ClusterSupport]:
    """One entry per replication group (a node outside any group counts as its own), with the engine version of its
    nodes (the oldest, should an upgrade be under way), sorted."""
    versions: dict[tuple[str, str, str], tuple[str, str]] = {}
    for node in nodes:
        if node.serverless:
            continue
        key = (node.account_id, node.region, node.group)
        seen = versions.get(key)
        if seen is None or _version_key(node.engine_version) < _version_key(seen[1]):
            versions[key] = (node.engine, node.engine_version)
    return [
        ClusterSupport(account_id, region, group, engine, version, row_for(table, engine, version))
        for (account_id, region, group), (engine, version) in sorted(versions.items())
    ]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


AFFECTED = ("ended", "extended", "ending", "unknown")  # the phases a report lists, the most pressing first


def affected_rows(clusters: Iterable[ClusterSupport], now: float) -> list[dict[str, str]]:
    """The clusters a report lists: past or within 90 days of their end of standard support, or on a version the table
    lacks; as text fields, the most pressing first."""
    rows = []
    for cluster in clusters:
        phase = cluster.phase(now)
        if phase not in AFFECTED:
            continue
        row = cluster.row
        rows.append(
            {
                "account_id": cluster.account_id,
                "region": cluster.region,
                "replication_group": cluster.replication_group,
                "engine": cluster.engine,
                "engine_version": cluster.engine_version,
                "phase": phase,
                "standard_end": row.standard_day.isoformat() if row and row.standard_day else "",
                "extended_end": row.extended_day.isoformat() if row and row.extended_day else "",
                "upgrade_to": row.upgrade_to if row else "",
            }
        )
    return sorted(rows, key=lambda r: (AFFECTED.index(r["phase"]), r["account_id"], r["region"], r["replication_group"]))
