"""What Alertmanager makes of what fired (pure): its inhibit rules, and its routing tree and grouping with
``group_wait``, ``group_interval`` and ``repeat_interval``, as notifications.

The model: alerts change only at the rules' evaluations (each holds until its own rule's next), and Alertmanager has
each evaluation's firing alerts at once. A firing source silences (mutes at a flush) a target whose ``equal`` labels
are the same (a missing label is the empty one), never itself; of a rule whose source also matches its target, only
the sources that are no targets count. An alert walks the routing
tree as Alertmanager's does (``matchers``, ``match``, ``match_re``; the first matching child, the next ones too where
it says ``continue``; a route with no matching child takes it itself), and joins the group of its route and
``group_by`` labels (``...``: all of them). A group's first notification goes out ``group_wait`` after its first alert;
then at each ``group_interval`` one goes out where a new alert fires, where alerts resolved and the receiver sends
resolved notifications, or, nothing new, once more than ``repeat_interval`` has passed since the last, as its
notification log decides; a group whose alerts all resolved ends (with a notification where the receiver sends resolved
ones), and the next alert of its labels starts a new one, told against the same log."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from typing import Any

from exporter.common.records import record

Labels = tuple[tuple[str, str], ...]  # an alert's labels, sorted
Alert = dict[str, str]
DURATION = re.compile(r"(\d+)(ms|[ywdhms])")
SECONDS = {"y": 31_536_000, "w": 604_800, "d": 86_400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
# the integrations that send resolved notifications unless told not to (Alertmanager's defaults); the others do not
RESOLVED_BY_DEFAULT = frozenset(
    {"webhook_configs", "pagerduty_configs", "opsgenie_configs", "victorops_configs", "sns_configs", "discord_configs",
     "msteams_configs", "msteamsv2_configs", "telegram_configs", "webex_configs", "jira_configs", "rocketchat_configs"}
)  # fmt: skip


class ConfigError(ValueError):
    """An Alertmanager configuration this model cannot read."""


def seconds(duration: str) -> float:
    """A Prometheus duration (``1h30m``, ``30s``; ``0`` alone takes no unit) in seconds."""
    if duration.strip() == "0":
        return 0.0
    parts = DURATION.findall(duration)
    if not parts or "".join(f"{amount}{unit}" for amount, unit in parts) != duration.strip():
        raise ValueError(f"not a duration: {duration!r}")
    return sum(int(amount) * SECONDS[unit] for amount, unit in parts)


def _unquoted(text: str) -> str:
    return re.sub(r'\\(["\\])', r"\1", text)


def matcher(text: str) -> Callable[[Alert], bool]:
    """One Alertmanager matcher (``name="value"``, ``=~``, ``!=``, ``!~``; the value quoted or not)."""
    parsed = re.fullmatch(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(?:"((?:[^"\\]|\\.)*)"|([^"]*?))\s*', text)
    if parsed is None:
        raise ConfigError(f"not an Alertmanager matcher: {text}")
    name, op = parsed.group(1), parsed.group(2)
    value = _unquoted(parsed.group(3)) if parsed.group(3) is not None else (parsed.group(4) or "")
    return _test(name, op, value)


def _test(name: str, op: str, value: str) -> Callable[[Alert], bool]:
    if op in ("=~", "!~"):
        pattern = re.compile(f"^(?:{value})$")
        return lambda a: bool(pattern.match(a.get(name, ""))) == (op == "=~")
    return lambda a: (a.get(name, "") == value) == (op == "=")


def all_of(matchers: Iterable[str]) -> Callable[[Alert], bool]:
    tests = [matcher(m) for m in matchers]
    return lambda alert: all(test(alert) for test in tests)


def _matching(node: dict[str, Any], prefix: str = "") -> Callable[[Alert], bool]:
    """A route's or an inhibit side's matchers, in the current form and the older ``match`` and ``match_re``."""
    tests = [matcher(m) for m in node.get(f"{prefix}matchers") or []]
    tests += [_test(str(k), "=", str(v)) for k, v in (node.get(f"{prefix}match") or {}).items()]
    tests += [_test(str(k), "=~", str(v)) for k, v in (node.get(f"{prefix}match_re") or {}).items()]
    return lambda alert: all(test(alert) for test in tests)


def inhibited(config: dict[str, Any]) -> Callable[[list[Alert]], list[Alert]]:
    """The alerts of one moment that the inhibit rules of ``config`` leave (:func:`muter`'s sources indexed by their
    ``equal`` labels: linear in the alerts)."""
    muter_at = muter(config)

    def leave(alerts: list[Alert]) -> list[Alert]:
        muted = muter_at(alerts)
        return [alert for alert in alerts if not muted(alert)]

    return leave


@record(frozen=True)
class Route:
    receiver: str
    matches: Callable[[Alert], bool]
    group_by: tuple[str, ...]  # ("...",): every label
    group_wait: float
    group_interval: float
    repeat_interval: float
    keeps_going: bool  # continue
    children: tuple[Route, ...]


def route_tree(config: dict[str, Any]) -> Route:
    """The routing tree, each route with what it inherits (Alertmanager's defaults at the root)."""
    root = config.get("route") or {}

    def build(node: dict[str, Any], parent: Route | None) -> Route:
        inherited = parent or Route("", lambda _alert: True, (), 30.0, 300.0, 14_400.0, False, ())
        made = Route(
            str(node.get("receiver", inherited.receiver)),
            _matching(node) if parent is not None else (lambda _alert: True),  # the root takes every alert
            tuple(node.get("group_by", inherited.group_by)),
            seconds(str(node["group_wait"])) if "group_wait" in node else inherited.group_wait,
            seconds(str(node["group_interval"])) if "group_interval" in node else inherited.group_interval,
            seconds(str(node["repeat_interval"])) if "repeat_interval" in node else inherited.repeat_interval,
            bool(node.get("continue", False)),
            (),
        )
        children = tuple(build(child, made) for child in node.get("routes") or [])
        return Route(
            made.receiver, made.matches, made.group_by, made.group_wait, made.group_interval, made.repeat_interval, made.keeps_going, children
        )

    try:
        return build(root, None)
    except (ValueError, re.error) as err:
        raise ConfigError(f"route: {err}") from err


def routes_of(tree: Route, alert: Alert) -> list[Route]:
    """The routes an alert ends at, as Alertmanager's dispatcher walks the tree."""
    found: list[Route] = []
    for child in tree.children:
        if child.matches(alert):
            found += routes_of(child, alert)
            if not child.keeps_going:
                break
    return found or [tree]


def sends_resolved(config: dict[str, Any]) -> dict[str, bool]:
    """Per receiver, whether it sends resolved notifications (any of its integrations does; one with none: yes)."""
    sending = {}
    for receiver in config.get("receivers") or []:
        integrations = [(kind, item) for kind, items in receiver.items() if kind.endswith("_configs") for item in items or []]
        sending[str(receiver.get("name", ""))] = not integrations or any(
            item.get("send_resolved", kind in RESOLVED_BY_DEFAULT) for kind, item in integrations if isinstance(item, dict)
        )
    return sending


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


def muter(config: dict[str, Any]) -> Callable[[list[Alert]], Callable[[Alert], bool]]:
    """For the firing alerts of one moment, whether an alert (firing or resolved) is muted by the inhibit rules of
    ``config``: a firing source whose ``equal`` labels are the same silences it, never the alert itself; of a rule whose
    source also matches its target, only the sources that are no targets count."""
    rules = [(_matching(r, "source_"), _matching(r, "target_"), tuple(r.get("equal") or ())) for r in config.get("inhibit_rules") or []]

    def at(firing: list[Alert]) -> Callable[[Alert], bool]:
        indexed = []
        for source, target, equal in rules:
            sources: dict[tuple[str, ...], list[Alert]] = {}
            for alert in firing:
                if source(alert):
                    sources.setdefault(tuple(alert.get(k, "") for k in equal), []).append(alert)
            if sources:
                indexed.append((source, target, equal, sources))

        def muted(alert: Alert) -> bool:
            for source, target, equal, sources in indexed:
                if not target(alert):
                    continue
                two_sided = source(alert)
                for other in sources.get(tuple(alert.get(k, "") for k in equal), []):
                    if other != alert and not (two_sided and target(other)):
                        return True
            return False

        return muted

    return at


def notifications(moments: list[tuple[float, list[Alert]]], config: dict[str, Any], end: float) -> list[Notification]:
    """The notifications Alertmanager sends for ``moments`` (the times the firing alerts change, each with every alert
    firing then, in time order), up to ``end``."""
    tree = route_tree(config)
    resolved = sends_resolved(config)
    mutes_at = muter(config)
    times = [at for at, _ in moments]
    muted_by_moment: dict[int, Callable[[Alert], bool]] = {}

    def muted(at: float) -> Callable[[Alert], bool]:
        index = bisect.bisect_right(times, at) - 1
        found = muted_by_moment.get(index)
        if found is None:
            found = muted_by_moment[index] = mutes_at(moments[index][1] if index >= 0 else [])
        return found

    # each group's firing alerts, where they change: (route, group labels) -> [(time, alerts)]
    by_group: dict[tuple[int, Labels], list[tuple[float, frozenset[Labels]]]] = {}
    routes: dict[int, Route] = {}
    for at, alerts in moments:
        now: dict[tuple[int, Labels], set[Labels]] = {}
        for alert in alerts:
            for route in routes_of(tree, alert):
                routes[id(route)] = route
                names = sorted(alert) if route.group_by == ("...",) else route.group_by
                now.setdefault((id(route), tuple((name, alert.get(name, "")) for name in names)), set()).add(tuple(sorted(alert.items())))
        for key in by_group.keys() | now.keys():
            state = frozenset(now.get(key, set()))
            states = by_group.setdefault(key, [])
            if not states or states[-1][1] != state:
                states.append((at, state))
    sent: list[Notification] = []
    for (route_id, group), states in by_group.items():
        route = routes[route_id]
        sent += _group_notifications(route, group, states, end, resolved.get(route.receiver, True), muted)
    return sorted(sent, key=lambda n: (n.at, n.receiver, n.group))


@record
class _Logged:
    """A group's entry in Alertmanager's notification log: what its last notification held, and when. It outlives the
    group (a group that ends and comes back is told against it)."""

    firing: frozenset[Labels] = frozenset()
    resolved: frozenset[Labels] = frozenset()
    at: float | None = None


def _needs_update(log: _Logged, firing: frozenset[Labels], resolved: frozenset[Labels], now: float, repeat: float, send_resolved: bool) -> str:
    """What a flush sends, as Alertmanager's deduplication decides it (``needsUpdate``): "" for nothing."""
    if log.at is None:
        return "first" if firing else ""
    if not firing <= log.firing:
        return "first" if not log.firing else "update"
    if not firing:
        return "resolved" if log.firing else ""  # all resolved: logged even where the receiver is not told
    if send_resolved and not resolved <= log.resolved:
        return "update"
    return "repeat" if log.at < now - repeat else ""  # strictly: a repeat due at a flush goes at the next one


def _group_notifications(
    route: Route,
    group: Labels,
    states: list[tuple[float, frozenset[Labels]]],
    end: float,
    send_resolved: bool,
    muted: Callable[[float], Callable[[Alert], bool]],
) -> list[Notification]:
    """One group's notifications from its firing alerts where they change (a state holds until the next), as
    Alertmanager's aggregation group and deduplication make them: the group starts with its first alert and flushes
    ``group_wait`` later, then every ``group_interval``; each flush holds the alerts firing then and those resolved since
    the last flush (then let go), less those the inhibit rules mute at that moment (a flush of muted alerts only sends
    and logs nothing); the group ends at a flush that leaves it empty, and its log entry stays."""
    sent: list[Notification] = []
    log = _Logged()
    position = 0
    while position < len(states):
        while position < len(states) and not states[position][1]:
            position += 1
        if position == len(states):
            break
        held: dict[Labels, bool] = dict.fromkeys(states[position][1], True)  # alert -> firing
        flush = states[position][0] + route.group_wait
        while flush <= end:
            while position + 1 < len(states) and states[position + 1][0] <= flush:
                position += 1
                firing = states[position][1]
                for alert in held.keys() | firing:
                    held[alert] = alert in firing
            mutes = muted(flush)
            shown = {alert: firing for alert, firing in held.items() if not mutes(dict(alert))}
            if shown:
                now_firing = frozenset(alert for alert, firing in shown.items() if firing)
                now_resolved = frozenset(alert for alert, firing in shown.items() if not firing)
                kind = _needs_update(log, now_firing, now_resolved, flush, route.repeat_interval, send_resolved)
                if kind:
                    if kind != "resolved" or send_resolved:
                        sent.append(Notification(flush, route.receiver, group, kind, tuple(sorted(now_firing))))
                    log = _Logged(now_firing, now_resolved, flush)
            held = {alert: firing for alert, firing in held.items() if firing}
            if not held:
                break
            flush += route.group_interval
        else:
            break
        position += 1
    return sent
