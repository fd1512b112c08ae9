"""What AWS does to the fleet, from ElastiCache's own API: events (DescribeEvents), service updates
(DescribeUpdateActions) and maintenance windows. Pure: replies in, records out; the monitor makes the calls.

An event's category comes from its message by the table below (AWS documents the messages; tests/data holds real
ones). DescribeEvents is polled over the window since the last poll and a little before it, since an event can be
listed a while after its date: every event is counted once, however the windows overlap.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from typing import Any

from exporter.common.records import record

# first match wins: a failed failover is a failover, a failed snapshot an error. Matched against the message with its
# CamelCase words apart, so that SNS-style names (ElastiCache:CacheNodeReplaceComplete) read as words too.
_GLOBAL = r"\bglobal (datastore|replication group)s?\b"
_FAILOVER = r"\bfail ?over\b|\bpromot(ed|ion)\b"
CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # a Global Datastore's primary region moved: before "failover", whose words it shares
    ("global_failover", re.compile(rf"({_GLOBAL}).*({_FAILOVER})|({_FAILOVER}).*({_GLOBAL})", re.IGNORECASE)),
    ("failover", re.compile(r"\bfail ?over\b|\bpromot(ed|ion)\b", re.IGNORECASE)),
    ("node_replaced", re.compile(r"\breplac(e|ed|ing|ement)\b|\brecover(y|ing|ed)\b", re.IGNORECASE)),
    ("error", re.compile(r"\bfail(ed|ure|s)?\b|\berror\b|\binsufficient\b|\bunable\b|\bcould not\b|\bincompatible\b", re.IGNORECASE)),
    ("snapshot", re.compile(r"\bsnapshot|\bbackup", re.IGNORECASE)),
    (
        "scaling",
        re.compile(
            r"\bscal(e|ed|ing)\b|\b(add|added|adding|remove|removed|removing) cache nodes?\b|\breplica count\b"
            r"|\bnumber of (nodes|replicas|shards)\b|\bresharding\b|\bnode type\b",
            re.IGNORECASE,
        ),
    ),
    (
        "maintenance",
        re.compile(
            r"\bmaintenance\b|\bservice update|\bupgrad|\bengine version\b|\bpatch|\brestart(ed)?\b|\breboot"
            r"|\bcertificate renewal\b",
            re.IGNORECASE,
        ),
    ),
)
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
OTHER = "other"
EVENT_CATEGORIES = (*(name for name, _ in CATEGORIES), OTHER)


def categorize(message: str) -> str:
    text = _CAMEL.sub(" ", message)
    for name, pattern in CATEGORIES:
        if pattern.search(text):
            return name
    return OTHER


@record(frozen=True)
class FleetEvent:
    account_id: str
    region: str
    source_type: str
    source_id: str
    message: str
    date: float  # Unix seconds
    category: str

    @property
    def key(self) -> tuple[str, str, str, str, float, str]:
        return (self.account_id, self.region, self.source_type, self.source_id, self.date, self.message)


def _seconds(value: Any) -> float | None:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value.timestamp()
    return None


def parse_events(events: Iterable[Mapping[str, Any]], account_id: str, region: str) -> list[FleetEvent]:
    """DescribeEvents' ``Events`` as records; one without a date or a source is left out."""
    parsed = []
    for event in events:
        date = _seconds(event.get("Date"))
        source = event.get("SourceIdentifier") or ""
        if date is None or not source:
            continue
        message = str(event.get("Message") or "")
        parsed.append(FleetEvent(account_id, region, str(event.get("SourceType") or ""), str(source), message, date, categorize(message)))
    return parsed


class EventLog:
    """Events counted once each, per account and region, and the window of the next DescribeEvents poll."""

    OVERLAP = 300.0  # seconds before the last poll's end that the next poll asks for again
    FIRST_LOOKBACK = 3600.0  # the first poll's window: DescribeEvents' own default, the last hour
    MAX_KEPT = 20000  # event keys kept to tell a repeat from a new one (bounded: a storm of events cannot grow it)

    def __init__(self) -> None:
        self._polled: dict[tuple[str, str], float] = {}  # (account, region) -> the end of its last poll
        self._seen: dict[tuple[str, str, str, str, float, str], float] = {}
        self.totals: dict[tuple[str, str, str, str, str], int] = {}  # (account, region, source type, source, category)
        self.last: dict[tuple[str, str, str, str, str], float] = {}  # the same key -> the newest event's date
        self.newest: dict[tuple[str, str, str, str], FleetEvent] = {}  # (account, region, source type, source) -> its newest

    def window(self, account_id: str, region: str, now: float) -> tuple[float, float]:
        """(start, end) in Unix seconds of the next poll of this account and region."""
        last = self._polled.get((account_id, region))
        start = now - self.FIRST_LOOKBACK if last is None else last - self.OVERLAP
        return max(start, now - 14 * 86400), now  # DescribeEvents keeps 14 days

    def add(self, account_id: str, region: str, window_end: float, events: Iterable[FleetEvent]) -> list[FleetEvent]:
        """Record one poll's events; returns those not seen before."""
        self._polled[(account_id, region)] = window_end
        new = []
        for event in sorted(events, key=lambda e: e.date):
            if event.key in self._seen:
                continue
            self._seen[event.key] = event.date
            new.append(event)
            key = (event.account_id, event.region, event.source_type, event.source_id, event.category)
            self.totals[key] = self.totals.get(key, 0) + 1
            self.last[key] = max(self.last.get(key, 0.0), event.date)
            source = key[:4]
            if source not in self.newest or self.newest[source].date <= event.date:
                self.newest[source] = event
        self._forget(window_end)
        return new

    def _forget(self, now: float) -> None:
        """Keys older than any window still to be asked for can go (a later poll never lists them again)."""
        horizon = min(self._polled.values(), default=now) - self.OVERLAP - 60
        if len(self._seen) > self.MAX_KEPT or any(date < horizon for date in self._seen.values()):
            kept = sorted(((date, key) for key, date in self._seen.items() if date >= horizon), reverse=True)[: self.MAX_KEPT]
            self._seen = {key: date for date, key in kept}


# --- maintenance windows -------------------------------------------------------------------------------------------

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WINDOW = re.compile(r"^(mon|tue|wed|thu|fri|sat|sun):(\d\d):(\d\d)-(mon|tue|wed|thu|fri|sat|sun):(\d\d):(\d\d)$")
WEEK = 7 * 86400


def window_start_minute(window: str) -> int | None:
    """The start of a PreferredMaintenanceWindow (``sun:23:00-mon:01:30``, UTC) as minutes into the week from Monday
    00:00; None for what is not such a window."""
    match = _WINDOW.match(window.strip().lower())
    if match is None:
        return None
    day, hour, minute = match.group(1), int(match.group(2)), int(match.group(3))
    if hour > 23 or minute > 59 or int(match.group(5)) > 23 or int(match.group(6)) > 59:
        return None
    return _DAYS.index(day) * 1440 + hour * 60 + minute


def next_window_start(window: str, now: float) -> float | None:
    """The Unix time the window next starts at or after ``now`` (a window under way counts as next week's)."""
    start = window_start_minute(window)
    if start is None:
        return None
    moment = datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
    monday = (moment - datetime.timedelta(days=moment.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    candidate = monday.timestamp() + start * 60
    while candidate < now:
        candidate += WEEK
    return candidate


# --- service updates -----------------------------------------------------------------------------------------------

DONE_STATUSES = frozenset({"complete", "not-applicable"})


@record(frozen=True)
class UpdateAction:
    account_id: str
    region: str
    replication_group: str  # or the cache cluster, for a node outside any group
    service_update: str
    severity: str
    update_type: str
    status: str
    apply_by: float | None  # the recommended apply-by date, Unix seconds
    auto_update_start: float | None = None  # where AWS applies it itself after that date: when


def parse_update_actions(
    actions: Iterable[Mapping[str, Any]], account_id: str, region: str, auto_update: Mapping[str, bool] | None = None
) -> list[UpdateAction]:
    """DescribeUpdateActions' ``UpdateActions`` not yet done. ``auto_update``: service update name → whether AWS applies
    it itself after the apply-by date (DescribeServiceUpdates' AutoUpdateAfterRecommendedApplyByDate)."""
    parsed = []
    for action in actions:
        status = str(action.get("UpdateActionStatus") or "").lower()
        group = action.get("ReplicationGroupId") or action.get("CacheClusterId") or ""
        name = str(action.get("ServiceUpdateName") or "")
        if status in DONE_STATUSES or not group or not name:
            continue
        apply_by = _seconds(action.get("ServiceUpdateRecommendedApplyByDate"))
        auto = (auto_update or {}).get(name, False)
        parsed.append(
            UpdateAction(
                account_id=account_id,
                region=region,
                replication_group=str(group),
                service_update=name,
                severity=str(action.get("ServiceUpdateSeverity") or "").lower(),
                update_type=str(action.get("ServiceUpdateType") or "").lower(),
                status=status,
                apply_by=apply_by,
                auto_update_start=apply_by if auto else None,
            )
        )
    return sorted(parsed, key=lambda a: (a.account_id, a.region, a.replication_group, a.service_update))


# --- tags as labels ------------------------------------------------------------------------------------------------

_TAG_REPLACED = str.maketrans({c: "_" for c in " ,\t/\\.-:=@<>()\u201c"})
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def tag_label(key: str) -> str | None:
    """``tag_<key>`` as YACE names a tag's label (the characters it replaces become ``_``, ``%`` becomes ``_percent``);
    None where the result is still no valid label name, which YACE skips too."""
    name = key.translate(_TAG_REPLACED).replace("%", "_percent")
    return "tag_" + name if _LABEL_NAME.match(name) else None
