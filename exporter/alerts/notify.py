"""What Alertmanager makes of what fired (pure): its inhibit rules, and its grouping with ``group_wait``,
``group_interval`` and ``repeat_interval``, as notifications.

The model: alerts change only at the rules' evaluations, and Alertmanager has each evaluation's firing alerts at once.
A firing source silences a target whose ``equal`` labels are the same (a missing label is the empty one), never itself;
of a rule whose source also matches its target, only the sources that are no targets count. An alert goes to the
first child route it matches (none: the root), with that route's timers and ``group_by``; a group's first notification
goes out ``group_wait`` after its first alert, then every ``group_interval`` an update where its alerts changed, or a
repeat once ``repeat_interval`` has passed since the last; a group whose alerts all resolved sends the resolution and
ends, and the next alert of its labels starts a new group."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from exporter.common.records import record

Labels = tuple[tuple[str, str], ...]  # an alert's labels, sorted
DURATION = re.compile(r"(\d+)(ms|[ywdhms])")
SECONDS = {"y": 31_536_000, "w": 604_800, "d": 86_400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}


def seconds(duration: str) -> float:
    """A Prometheus duration (``1h30m``, ``30s``) in seconds."""
    parts = DURATION.findall(duration)
    if not parts or "".join(f"{amount}{unit}" for amount, unit in parts) != duration.strip():
        raise ValueError(f"not a duration: {duration!r}")
    return sum(int(amount) * SECONDS[unit] for amount, unit in parts)


def _unquoted(text: str) -> str:
    return re.sub(r'\\(["\\])', r"\1", text)


def matcher(text: str) -> Callable[[dict[str, str]], bool]:
    """One Alertmanager matcher (``name="value"``, ``=~``, ``!=``, ``!~``)."""
    parsed = re.fullmatch(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*', text)
    if parsed is None:
        raise ValueError(f"not an Alertmanager matcher: {text}")
    name, op, value = parsed.group(1), parsed.group(2), _unquoted(parsed.group(3))
    if op in ("=~", "!~"):
        pattern = re.compile(f"^(?:{value})$")
        return lambda a: bool(pattern.match(a.get(name, ""))) == (op == "=~")
    return lambda a: (a.get(name, "") == value) == (op == "=")


def all_of(matchers: Iterable[str]) -> Callable[[dict[str, str]], bool]:
    tests = [matcher(m) for m in matchers]
    return lambda alert: all(test(alert) for test in tests)


def inhibited(config: dict[str, Any]) -> Callable[[list[dict[str, str]]], list[dict[str, str]]]:
    """The alerts of one moment that the inhibit rules of ``config`` leave."""
    rules = [
        (all_of(r.get("source_matchers", [])), all_of(r.get("target_matchers", [])), r.get("equal", [])) for r in config.get("inhibit_rules") or []
    ]

    def silenced(alert: dict[str, str], alerts: list[dict[str, str]]) -> bool:
        for source, target, equal in rules:
            if not target(alert):
                continue
            two_sided = source(alert)
            for other in alerts:
                if other is alert or not source(other) or (two_sided and target(other)):
                    continue
                if all(other.get(k, "") == alert.get(k, "") for k in equal):
                    return True
        return False

    return lambda alerts: [alert for alert in alerts if not silenced(alert, alerts)]


@record(frozen=True)
class Route:
    name: str  # its receiver
    matches: Callable[[dict[str, str]], bool]
    group_by: tuple[str, ...]
    group_wait: float
    group_interval: float
    repeat_interval: float


def routes(config: dict[str, Any]) -> list[Route]:
    """The root route's children with what they inherit, then the root itself (the first that matches takes an alert)."""
    root = config.get("route") or {}

    def timers(node: dict[str, Any], parent: tuple[tuple[str, ...], float, float, float]) -> tuple[tuple[str, ...], float, float, float]:
        return (
            tuple(node.get("group_by", parent[0])),
            seconds(node["group_wait"]) if "group_wait" in node else parent[1],
            seconds(node["group_interval"]) if "group_interval" in node else parent[2],
            seconds(node["repeat_interval"]) if "repeat_interval" in node else parent[3],
        )

    top = timers(root, ((), 30.0, 300.0, 14_400.0))  # Alertmanager's defaults
    root_match = all_of(root.get("matchers", []))
    made = []
    for child in root.get("routes") or []:
        child_match = all_of(child.get("matchers", []))
        made.append(Route(child.get("receiver", root.get("receiver", "")), _both(root_match, child_match), *timers(child, top)))
    made.append(Route(root.get("receiver", ""), root_match, *top))
    return made


def _both(first: Callable[[dict[str, str]], bool], second: Callable[[dict[str, str]], bool]) -> Callable[[dict[str, str]], bool]:
    return lambda alert: first(alert) and second(alert)


@record(frozen=True)
class Notification:
    at: float  # Unix seconds
    receiver: str
    group: Labels  # the group's labels (group_by)
    kind: str  # first, update, repeat, resolved
    alerts: tuple[Labels, ...]  # the firing alerts it carries

    @property
    def severity(self) -> str:
        found = {dict(alert).get("severity", "") for alert in self.alerts}
        return "critical" if "critical" in found else (found.pop() if len(found) == 1 else "")


def notifications(moments: list[tuple[float, list[dict[str, str]]]], config: dict[str, Any], end: float) -> list[Notification]:
    """The notifications Alertmanager sends for ``moments`` (each evaluation's time and firing alerts, in time order),
    up to ``end``."""
    leave = inhibited(config)
    made = routes(config)
    # each group's firing alerts at each moment
    by_group: dict[tuple[int, Labels], list[tuple[float, frozenset[Labels]]]] = {}
    for at, alerts in moments:
        now: dict[tuple[int, Labels], set[Labels]] = {}
        for alert in leave(alerts):
            index = next((i for i, route in enumerate(made) if route.matches(alert)), None)
            if index is None:
                continue
            key = (index, tuple((name, alert.get(name, "")) for name in made[index].group_by))
            now.setdefault(key, set()).add(tuple(sorted(alert.items())))
        for key in by_group.keys() | now.keys():
            by_group.setdefault(key, []).append((at, frozenset(now.get(key, set()))))
    sent: list[Notification] = []
    for (index, group), states in by_group.items():
        sent += _group_notifications(made[index], group, states, end)
    return sorted(sent, key=lambda n: (n.at, n.receiver, n.group))


def _group_notifications(route: Route, group: Labels, states: list[tuple[float, frozenset[Labels]]], end: float) -> list[Notification]:
    """One group's notifications from its alerts at each moment (a state holds until the next moment)."""
    sent: list[Notification] = []
    position = 0
    while position < len(states):
        while position < len(states) and not states[position][1]:
            position += 1
        if position == len(states):
            break
        flush, last, last_at = states[position][0] + route.group_wait, frozenset[Labels](), 0.0
        while flush <= end:
            while position + 1 < len(states) and states[position + 1][0] <= flush:
                position += 1
            alerts = states[position][1]
            if not alerts:
                if last:
                    sent.append(Notification(flush, route.name, group, "resolved", ()))
                break
            kind = "first" if not last else ("update" if alerts != last else ("repeat" if flush - last_at >= route.repeat_interval else ""))
            if kind:
                sent.append(Notification(flush, route.name, group, kind, tuple(sorted(alerts))))
                last, last_at = alerts, flush
            flush += route.group_interval
        else:
            break
        position += 1
    return sent
