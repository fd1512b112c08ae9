"""Replication heartbeats: parsing the timestamps, and the exporter's own opt-in writer.

ElastiCache keeps the key ``ElastiCacheMasterReplicationTimestamp`` on the
primary, set to the current UTC time as ISO-8601 (``2013-09-05T01:25:01.001Z``);
it replicates, so on a replica "now minus that time" is the replication lag
(plus the writer's interval and the clock skew between the writer and us).
For self-managed Redis the exporter can write a key of its own the same way.
"""

from __future__ import annotations

import logging
import re
import threading
import time

from .failures import classify
from .node import RedisNode
from .node_loop import NodeLoop
from .settings import HeartbeatConfig, TargetConfig

log = logging.getLogger(__name__)

ELASTICACHE_KEY = "ElastiCacheMasterReplicationTimestamp"
SOURCE_ELASTICACHE = "elasticache"
SOURCE_EXPORTER = "exporter"

_ISO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?$",
    re.IGNORECASE,
)
_EPOCH = re.compile(r"^\d{1,16}(?:\.\d{1,9})?$")
EARLIEST = 946684800.0  # 2000-01-01: anything older is not a heartbeat
LATEST = 7258118400.0  # 2200-01-01


class HeartbeatParseError(ValueError):
    pass


def utc_seconds(year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    """calendar.timegm of a proleptic Gregorian UTC time, without loading calendar and datetime (about 0.4 MiB
    of RSS in every exporter process): days since 1970-01-01 by the civil-from-days algorithm."""
    shifted = year - (month <= 2)
    era = shifted // 400
    year_of_era = shifted - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    days = era * 146097 + day_of_era - 719468
    return ((days * 24 + hour) * 60 + minute) * 60 + second


def parse_timestamp(raw: bytes | str) -> float:
    """Unix seconds from an ISO-8601 UTC time (with or without fraction or ``Z``) or epoch s/ms."""
    text = raw.decode("ascii", errors="replace") if isinstance(raw, bytes) else raw
    text = text.strip()
    match = _ISO.match(text)
    if match:
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31 and int(hour) < 24 and int(minute) < 60 and int(second) < 61):
            raise HeartbeatParseError(f"invalid date {text[:40]!r}")
        seconds = utc_seconds(int(year), int(month), int(day), int(hour), int(minute), int(second))
        value = seconds + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)
        if zone and zone.upper() != "Z":
            sign = 1 if zone[0] == "+" else -1
            digits = zone[1:].replace(":", "")
            value -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    elif _EPOCH.match(text):
        value = float(text)
        if value > 1e11:  # milliseconds: 1e11 seconds would be the year 5138
            value /= 1000.0
    else:
        raise HeartbeatParseError(f"not a timestamp: {text[:40]!r}")
    if not EARLIEST <= value <= LATEST:
        raise HeartbeatParseError(f"timestamp out of range: {text[:40]!r}")
    return value


def format_timestamp(seconds: float) -> str:
    """What the exporter's writer stores: ISO-8601 UTC with milliseconds, like ElastiCache."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((seconds - whole) * 1000):03d}Z"


class HeartbeatWriter(NodeLoop):
    """Writes the exporter's heartbeat key on the targets that are primaries, from one background thread.

    Before every write it asks the node its role and writes only to a master, so
    it never writes to a replica and stops as soon as a node is demoted.
    """

    def __init__(self, config: HeartbeatConfig, targets: list[TargetConfig]) -> None:
        super().__init__("heartbeat-writer", targets, config.interval)
        self.config = config
        self._lock = threading.Lock()
        self.writes: dict[str, int] = {}
        self.skipped_not_master: dict[str, int] = {}
        self.errors: dict[tuple[str, str], int] = {}
        self.last_write: dict[str, float] = {}
        self._logged: set[tuple[str, str]] = set()

    def visit(self, name: str, node: RedisNode) -> None:
        self.write_once(name, node)

    def write_once(self, name: str, node: RedisNode) -> None:
        try:
            wrote = node.write_heartbeat(self.config.key, format_timestamp(time.time()), int(self.config.ttl * 1000))
        except Exception as err:  # noqa: BLE001 - a failing node must not stop the writer for the others
            kind = "permission" if _is_permission_error(err) else classify(err)
            with self._lock:
                self.errors[(name, kind)] = self.errors.get((name, kind), 0) + 1
            if (name, kind) not in self._logged:
                self._logged.add((name, kind))
                log.error("heartbeat writer: cannot write key %s on target %s (%s): %.200s", self.config.key, name, kind, err)
            return
        with self._lock:
            if wrote:
                self.writes[name] = self.writes.get(name, 0) + 1
                self.last_write[name] = time.time()
            else:
                self.skipped_not_master[name] = self.skipped_not_master.get(name, 0) + 1

    def snapshot(self) -> tuple[dict[str, int], dict[str, int], dict[tuple[str, str], int], dict[str, float]]:
        with self._lock:
            return dict(self.writes), dict(self.skipped_not_master), dict(self.errors), dict(self.last_write)


def _is_permission_error(err: BaseException) -> bool:
    return "NOPERM" in str(err)
