"""What reaches on-call, and the verdict: the rendered Alertmanager inhibit rules and grouping applied to what fired,
and each notification attributed to the incident whose node or shard it names."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from exporter.alerts.notify import inhibited

from .capture import EXPORTER
from .plan import CLASSES, Incident, Plan
from .replay import Firing

ALERTMANAGER = Path(__file__).resolve().parents[2] / "rules" / "alertmanager" / "elasticache-exporter.alertmanager.yml"
GRACE = 30  # minutes after an incident's end in which a notification is still its own (a recovery's echo counts)
Alert = dict[str, str]


def _config(config: dict[str, Any] | None) -> dict[str, Any]:
    return config if config is not None else yaml.safe_load(ALERTMANAGER.read_text())


def notified(firing: Firing, config: dict[str, Any] | None = None) -> Firing:
    """The alerts left at each minute after the inhibit rules, as Alertmanager applies them (the backtest's model,
    ``exporter.alerts.notify.inhibited``, which a real Alertmanager checks at the busiest minute)."""
    leave = inhibited(_config(config))
    return {minute: leave(alerts) for minute, alerts in firing.items()}


@dataclasses.dataclass(frozen=True)
class Notification:
    severity: str
    group: tuple[tuple[str, str], ...]
    minute: int  # when the group's first notification goes out
    alerts: tuple[tuple[tuple[str, str], ...], ...]  # the alerts the group held then, each its labels


def notifications(left: Firing, minutes: int, config: dict[str, Any] | None = None) -> list[Notification]:
    """A group's first notification, each time it becomes active (the route's ``group_by``, a severity's receiver): a
    group that stays active sends updates and repeats under the same group key, which on-call's pager folds into the
    page it already has."""
    group_by = _config(config)["route"]["group_by"]
    active: set[tuple] = set()
    sent: list[Notification] = []
    for minute in range(minutes):
        now: dict[tuple, list[Alert]] = {}
        for alert in left.get(minute, []):
            now.setdefault((alert.get("severity", ""), tuple((k, alert.get(k, "")) for k in group_by)), []).append(alert)
        for key in now.keys() - active:
            held = tuple(sorted(tuple(sorted(a.items())) for a in now[key]))
            sent.append(Notification(key[0], key[1], minute, held))
        active = set(now)
    return sorted(sent, key=lambda n: (n.minute, n.group))


def _names(notification: Notification, scope: str) -> bool:
    for alert in map(dict, notification.alerts):
        instance = alert.get("instance", "")
        if scope in (alert.get("replication_group"), alert.get("dimension_CacheClusterId"), instance) or instance.startswith(scope + "-"):
            return True
    return False


def _about_a_node(notification: Notification) -> bool:
    return any(
        dict(a).get("instance", EXPORTER["instance"]) != EXPORTER["instance"] or "dimension_CacheClusterId" in dict(a) for a in notification.alerts
    )


@dataclasses.dataclass
class Verdict:
    incident: Incident
    pages: list[Notification] = dataclasses.field(default_factory=list)
    warnings: list[Notification] = dataclasses.field(default_factory=list)

    @property
    def minutes_to_page(self) -> int | None:
        return self.pages[0].minute - self.incident.start if self.pages else None


def judge(the_plan: Plan, sent: list[Notification]) -> tuple[list[Verdict], list[Notification]]:
    """Each page and warning to the incident it names (its node or shard, from the incident's start to GRACE minutes
    after its end); one that names no node to an exporter event under way. What is left is unexplained. Info
    notifications go to a receiver nobody is woken by or handed: not judged."""
    verdicts = [Verdict(i) for i in the_plan.incidents]
    unexplained = []
    for note in sent:
        if note.severity not in ("critical", "warning"):
            continue
        near = [v for v in verdicts if v.incident.start <= note.minute <= v.incident.end + GRACE]
        mine = [v for v in near if v.incident.scope and _names(note, v.incident.scope)]
        if not mine and not _about_a_node(note):
            mine = [v for v in near if not v.incident.scope]
        if not mine:
            unexplained.append(note)
            continue
        (mine[0].pages if note.severity == "critical" else mine[0].warnings).append(note)
    return verdicts, unexplained


@dataclasses.dataclass
class Report:
    verdicts: list[Verdict]
    unexplained: list[Notification]
    timings: dict[str, float]  # seconds each part took
    firing: Firing = dataclasses.field(default_factory=dict)  # what promtool said fired, minute by minute

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for kind, cls in CLASSES.items():
            mine = [v for v in self.verdicts if v.incident.kind == kind]
            if not mine:
                continue
            waits = sorted(v.minutes_to_page for v in mine if v.minutes_to_page is not None)
            pages = sum(len(v.pages) for v in mine)
            rows.append(
                {
                    "class": kind,
                    "expect": cls.expect,
                    "incidents": len(mine),
                    "paged": sum(1 for v in mine if v.pages),
                    "pages": pages,
                    "false_pages": pages - sum(1 for v in mine if v.pages) if cls.expect == "page" else pages,
                    "minutes_to_page": (waits[len(waits) // 2], waits[-1]) if waits else None,
                    "warnings": sum(len(v.warnings) for v in mine),
                    "alerts": sorted({dict(a)["alertname"] for v in mine for n in v.pages + v.warnings for a in n.alerts}),
                }
            )
        return rows

    @property
    def precision(self) -> float:
        """Pages for an incident that should page, first of each, over all pages."""
        pages = sum(len(v.pages) for v in self.verdicts) + sum(1 for n in self.unexplained if n.severity == "critical")
        true = sum(1 for v in self.verdicts if CLASSES[v.incident.kind].expect == "page" and v.pages)
        return true / pages if pages else 1.0

    @property
    def recall(self) -> float:
        should = [v for v in self.verdicts if CLASSES[v.incident.kind].expect == "page"]
        return sum(1 for v in should if v.pages) / len(should) if should else 1.0

    def late(self) -> list[Verdict]:
        return [v for v in self.verdicts if (v.minutes_to_page or 0) > CLASSES[v.incident.kind].promise and CLASSES[v.incident.kind].expect == "page"]

    def table(self) -> str:
        lines = [
            "| Incident | Expected | Incidents | Paged | Pages | False pages | Minutes to the page (median, max) | Warnings | Alerts notified |",
            "|---|---|---:|---:|---:|---:|---|---:|---|",
        ]
        for row in self.rows():
            wait = "-" if row["minutes_to_page"] is None else "{}, {}".format(*row["minutes_to_page"])
            cells = [row["class"], row["expect"], row["incidents"], row["paged"], row["pages"], row["false_pages"], wait, row["warnings"]]
            lines.append("| " + " | ".join(map(str, cells)) + f" | {', '.join(row['alerts']) or '-'} |")
        lines.append(f"\nPrecision {self.precision:.2f}, recall {self.recall:.2f}; notifications naming no incident: {len(self.unexplained)}")
        unexplained = sorted({dict(a)["alertname"] + f" ({n.severity}, minute {n.minute})" for n in self.unexplained for a in n.alerts})
        if unexplained:
            lines.append("  " + ", ".join(unexplained))
        return "\n".join(lines)
