"""What a rule set would have paged: its alerting rules evaluated over a Prometheus' history, step by step as Prometheus
evaluates them (``for``, ``keep_firing_for``), then through Alertmanager's inhibit rules and grouping (``notify``).

Pure but for ``query``, the one call that reads history (``query_range``). A recorded series the history does not hold
is evaluated in its place: each recording rule's expression, with its labels, inlined where an alert reads it. An
alert whose inputs the history lacks is not evaluable, with the series it needs, never quiet; one whose answers came
with warnings (partial data) is marked."""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable
from typing import Any

from exporter.common.records import field, record

from .notify import Labels, Notification, notifications, seconds

MAX_POINTS = 11_000
SERVER_SERIES = {"ALERTS", "ALERTS_FOR_STATE"}  # a server's own: never missing  # Prometheus refuses a range query of more steps
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless", "atan2", "inf", "nan"}
AGGREGATIONS = {"sum", "avg", "min", "max", "count", "topk", "bottomk", "quantile", "stddev", "stdvar", "count_values", "group", "limitk"}
LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
FUNCTION_OR_AGGREGATION = re.compile(rf"({NAME})\s*\(")

Series = tuple[dict[str, str], list[tuple[float, float]]]
Query = Callable[[str, float, float, float], tuple[list[Series], list[str]]]  # expr, start, end, step -> series, warnings


class BacktestError(Exception):
    """A rule file that cannot be read, or a history that cannot be asked."""


@record(frozen=True)
class AlertRule:
    name: str
    expr: str  # with the recorded series it reads inlined
    hold: float  # for, in seconds
    keep_firing: float  # keep_firing_for, in seconds
    labels: Labels
    interval: float  # its group's evaluation interval
    group: str


@record(frozen=True)
class RuleSet:
    path: str
    alerts: tuple[AlertRule, ...]


def load_rules(path: str, text: str, default_interval: float, held: Callable[[str], bool] | None = None) -> RuleSet:
    """A Prometheus rule file (``groups``) or a PrometheusRule (its ``spec.groups``); the recorded series the history
    does not hold (``held``: whether it holds a metric name; None: none) inlined."""
    import yaml

    try:
        document = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise BacktestError(f"{path}: not YAML: {str(err).splitlines()[0]}") from err
    groups = (
        (document.get("spec") or {}).get("groups")
        if isinstance(document, dict) and "spec" in document
        else (document or {}).get("groups")
        if isinstance(document, dict)
        else None
    )
    if not isinstance(groups, list):
        raise BacktestError(f"{path}: no rule groups (a Prometheus rule file or a PrometheusRule)")
    recorded: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for group in groups:
        for rule in (group or {}).get("rules") or []:
            if "record" in rule and (held is None or not held(str(rule["record"]))):
                recorded.setdefault(str(rule["record"]), []).append(
                    (str(rule.get("expr", "")), {str(k): str(v) for k, v in (rule.get("labels") or {}).items()})
                )
    alerts = []
    for group in groups:
        name = str((group or {}).get("name", ""))
        try:
            interval = seconds(str(group["interval"])) if group.get("interval") else default_interval
        except ValueError as err:
            raise BacktestError(f"{path}: group {name}: interval: {err}") from err
        for rule in group.get("rules") or []:
            if "alert" not in rule:
                continue
            where = f"{path}: alert {rule['alert']}"
            if not rule.get("expr"):
                raise BacktestError(f"{where}: no expr")
            try:
                hold = seconds(str(rule.get("for", "0s")))
                keep = seconds(str(rule.get("keep_firing_for", "0s")))
            except ValueError as err:
                raise BacktestError(f"{where}: {err}") from err
            labels = tuple(sorted((str(k), str(v)) for k, v in (rule.get("labels") or {}).items()))
            alerts.append(AlertRule(str(rule["alert"]), inline(str(rule["expr"]), recorded), hold, keep, labels, interval, name))
    return RuleSet(path, tuple(alerts))


def _with_labels(expr: str, labels: dict[str, str]) -> str:
    for name, value in sorted(labels.items()):
        # label_replace expands $1 and $name in its replacement: a literal $ is written $$
        quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
        expr = f'label_replace({expr}, "{name}", "{quoted}", "", "")'
    return expr


def inline(expr: str, recorded: dict[str, list[tuple[str, dict[str, str]]]], depth: int = 0) -> str:
    """``expr`` with each recorded series it reads replaced by its recording rules' expressions (their labels set, the
    rules of one name joined with ``or``), recorded series within them too. A recorded series read with label matchers,
    a range, an ``offset`` or an ``@`` is kept as it is (an expression takes none of them): the history must hold it."""
    if depth > 10:
        return expr
    parts = re.split(r'("(?:[^"\\]|\\.)*")', expr)

    def inlined(part: str) -> str:
        def replace(found: re.Match[str]) -> str:
            name = found.group(0)
            after = part[found.end() :].lstrip()
            if name not in recorded or after.startswith(("{", "(", "[", "@")) or re.match(r"offset\b", after):
                return name
            union = " or ".join(_with_labels(f"({rule})", labels) for rule, labels in recorded[name])
            return f"({inline(union, recorded, depth + 1)})"

        return re.sub(rf"(?<![a-zA-Z0-9_:]){NAME}", replace, part)

    # names outside quoted strings only
    return "".join(part if index % 2 else inlined(part) for index, part in enumerate(parts))


def selectors(expr: str) -> set[str]:
    """The metric names an expression reads (for the list of what a history lacks)."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")|(\{[^}]*\})|(\[[^\]]*\])', LABEL_LISTS.sub(" ", expr))
    names = set(re.findall(r'__name__\s*=\s*"([^"]+)"', expr))
    # Prometheus 3's quoted names: {"metric.name", ...}
    names |= set(re.findall(r'\{\s*"((?:[^"\\]|\\.)*)"\s*[,}]', expr))
    functions = {match.group(1) for match in FUNCTION_OR_AGGREGATION.finditer(expr)}
    for part in parts:
        if part is None or part.startswith(('"', "{", "[")):
            continue
        for name in re.findall(rf"(?<![a-zA-Z0-9_:.]){NAME}", part):
            if name.lower() not in KEYWORDS and name not in AGGREGATIONS and name not in functions and not re.fullmatch(r"\d+[smhdwy]", name):
                names.add(name)
    return names


def chunks(start: float, end: float, step: float) -> list[tuple[float, float]]:
    """[start, end] in ranges of at most MAX_POINTS - 1 steps, each starting where the last one's steps end."""
    made = []
    per = step * (MAX_POINTS - 1)
    at = start
    while at <= end:
        last = min(end, at + per - step)
        made.append((at, last))
        at = last + step
    return made


@record
class AlertHistory:
    """One alert's firing over the range: its label sets and, for each, the evaluations it fired at."""

    rule: AlertRule
    firing: dict[Labels, list[float]] = field(factory=dict)
    evaluable: bool = True
    missing: tuple[str, ...] = ()  # what the history lacks, where it is not evaluable
    warnings: tuple[str, ...] = ()
    error: str = ""  # why it could not be evaluated (a query refused), where it could not
    notes: tuple[str, ...] = ()  # where its figures are approximate, and why

    @property
    def reads_alerts(self) -> bool:
        """It reads ``ALERTS``: the history's, of the rules that server ran, not this rule set's own."""
        return "ALERTS" in selectors(self.rule.expr)

    def intervals(self) -> list[tuple[Labels, float, float]]:
        """Each run of consecutive firing evaluations: (labels, first, last)."""
        runs = []
        for labels, times in self.firing.items():
            first = previous = times[0]
            for at in times[1:]:
                if at - previous > self.rule.interval * 1.5:
                    runs.append((labels, first, previous))
                    first = at
                previous = at
            runs.append((labels, first, previous))
        return sorted(runs, key=lambda run: (run[1], run[0]))


@record
class _Active:
    since: float  # when it became active (pending)
    firing: bool = False
    left: float | None = None  # with keep_firing_for: when it first left the answer while firing


def evaluate(rule: AlertRule, steps: list[float], present: dict[float, set[Labels]]) -> dict[Labels, list[float]]:
    """The evaluations each label set fired at, as Prometheus' alerting rule does: active from the first evaluation its
    expression returns it (``present``: the label sets returned at each evaluation), firing once active for ``for``; on
    leaving the answer, resolved, or (``keep_firing_for``) kept firing that long since it first left."""
    active: dict[Labels, _Active] = {}
    fired: dict[Labels, list[float]] = {}
    for at in steps:
        now = present.get(at, set())
        for labels in now:
            alert = active.get(labels)
            if alert is None:
                active[labels] = _Active(at)
            else:
                alert.left = None
        for labels in list(active):
            alert = active[labels]
            if labels not in now:
                if rule.keep_firing > 0 and alert.firing:
                    alert.left = at if alert.left is None else alert.left
                    if at - alert.left < rule.keep_firing:
                        fired.setdefault(labels, []).append(at)
                        continue
                del active[labels]
                continue
            if not alert.firing and at - alert.since >= rule.hold:
                alert.firing = True
            if alert.firing:
                fired.setdefault(labels, []).append(at)
    return fired


Answer = tuple[list[Series], list[str]]


class Cache:
    """The answers of one backtest (both rule sets'), by expression and chunk: a key is asked once, however many alerts
    read it at once (the others wait for its answer; a failure is each one's own)."""

    def __init__(self) -> None:
        self._answers: dict[tuple[str, float, float, float], Answer] = {}
        self._asking: dict[tuple[str, float, float, float], threading.Lock] = {}
        self._lock = threading.Lock()

    def answer(self, key: tuple[str, float, float, float], ask: Callable[[], Answer]) -> Answer:
        with self._lock:
            found = self._answers.get(key)
            if found is not None:
                return found
            asking = self._asking.setdefault(key, threading.Lock())
        with asking:
            with self._lock:
                found = self._answers.get(key)
            if found is not None:
                return found
            answer = ask()
            with self._lock:
                self._answers[key] = answer
                self._asking.pop(key, None)
            return answer


def warm_up(*rule_sets: RuleSet) -> float:
    """How long before a range its evaluations begin: the longest ``for`` and ``keep_firing_for`` of the rule sets (one
    for all, so that an expression two of them hold is asked over the same chunks)."""
    return max((rule.hold + rule.keep_firing for rules in rule_sets for rule in rules.alerts), default=0.0)


MIN_SPLIT_SECONDS = 3600.0  # a chunk a server refuses as too many samples is halved down to an hour
TOO_MANY_SAMPLES = ("too many samples", "would load too many samples", "query processing would load")
AT_RANGE_ENDS = re.compile(r"@\s*(start|end)\s*\(\s*\)")
TEMPLATE = re.compile(r"\{\{\s*(?:\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)|index\s+\$labels\s+\"([^\"]+)\")\s*\}\}")


def backtest(
    rules: RuleSet,
    query: Query,
    start: float,
    end: float,
    progress: Callable[[int, int], None] | None = None,
    cache: Cache | None = None,
    parallel: int = 4,
    warm: float | None = None,
) -> list[AlertHistory]:
    """Every alert of ``rules`` evaluated from ``start`` to ``end`` at its group's interval, ``parallel`` at once; each
    distinct expression asked once a chunk (``cache``: shared with another rule set's run). An alert whose queries fail
    is marked with the error, and the others go on. The evaluations begin the longest ``for`` and ``keep_firing_for``
    before ``start`` (``warm``: :func:`warm_up`, one for all, so the chunks of one expression stay one), so that an alert
    already firing then fires at ``start``, as a Prometheus that restored its alerts' state would have it; none before
    counts."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    cache = Cache() if cache is None else cache
    total = len(rules.alerts)
    before = warm_up(rules) if warm is None else warm

    def one(rule: AlertRule) -> AlertHistory:
        if AT_RANGE_ENDS.search(rule.expr):
            # in a range query @ start() and @ end() are the range's; in a rule's evaluation, the evaluation's time
            return AlertHistory(rule, evaluable=False, error="uses @ start() or @ end(), which a range query reads otherwise")
        try:
            return _backtest_one(rule, query, start - before, start, end, cache)
        except BacktestError as err:
            return AlertHistory(rule, evaluable=False, error=str(err))

    # the server evaluates queries on all its cores: a few at once (the answers' cache is filled by whole entries)
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {pool.submit(one, rule): index for index, rule in enumerate(rules.alerts)}
        done: dict[int, AlertHistory] = {}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            if progress is not None:
                progress(len(done), total)
    return [done[index] for index in range(total)]


def _answer(query: Query, expr: str, start: float, end: float, step: float, cache: Cache) -> tuple[list[Series], list[str]]:
    """A chunk's answer, the chunk halved (down to MIN_SPLIT_SECONDS) where the server refuses it as too many samples."""

    def ask() -> Answer:
        try:
            return query(expr, start, end, step)
        except BacktestError as err:
            if not any(text in str(err) for text in TOO_MANY_SAMPLES) or end - start < 2 * MIN_SPLIT_SECONDS:
                raise
            middle = start + ((end - start) / step // 2) * step
            first, second = _answer(query, expr, start, middle, step, Cache()), _answer(query, expr, middle + step, end, step, Cache())
            return _joined(first[0], second[0]), first[1] + second[1]

    return cache.answer((expr, start, end, step), ask)


def _joined(first: list[Series], second: list[Series]) -> list[Series]:
    by_labels: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
    for labels, points in (*first, *second):
        by_labels.setdefault(tuple(sorted(labels.items())), []).extend(points)
    return [(dict(labels), points) for labels, points in by_labels.items()]


def _expanded(template: str, labels: dict[str, str]) -> str:
    """A rule label's ``{{ $labels.name }}`` (or ``index $labels "name"``) with the series' label."""
    return TEMPLATE.sub(lambda found: labels.get(found.group(1) or found.group(2), ""), template)


def _backtest_one(rule: AlertRule, query: Query, warm: float, start: float, end: float, cache: Cache) -> AlertHistory:
    """One alert evaluated from ``warm`` to ``end``; its firing from ``start`` on."""
    step = rule.interval
    first = warm - warm % step if warm % step else warm
    steps: list[float] = []
    present: dict[float, set[Labels]] = {}
    warnings: list[str] = []
    notes: list[str] = []
    templated = {name: value for name, value in rule.labels if "{{" in value}
    if any(TEMPLATE.sub("", value).find("{{") >= 0 for value in templated.values()):
        notes.append("a label's template other than $labels is left as written")
    for chunk_start, chunk_end in chunks(first, end, step):
        series, said = _answer(query, rule.expr, chunk_start, chunk_end, step, cache)
        warnings += said
        at = chunk_start
        while at <= chunk_end:
            steps.append(round(at, 3))
            at += step
        for labels, points in series:
            merged = {k: v for k, v in labels.items() if k != "__name__"}
            for name, value in rule.labels:
                merged[name] = _expanded(value, labels) if name in templated else value
            merged["alertname"] = rule.name
            labelled = tuple(sorted(merged.items()))
            for at, _ in points:
                now = present.setdefault(round(at, 3), set())
                if labelled in now:  # Prometheus' evaluation fails there, and the alert never fires
                    return AlertHistory(rule, evaluable=False, error="vector contains metrics with the same labelset after applying alert labels")
                now.add(labelled)
    fired = {labels: kept for labels, times in evaluate(rule, steps, present).items() if (kept := [at for at in times if at >= start])}
    return AlertHistory(rule, fired, warnings=tuple(dict.fromkeys(warnings)), notes=tuple(notes))


def mark_missing(histories: list[AlertHistory], known: Callable[[str], bool]) -> None:
    """An alert that reads a series the history does not hold at all is not evaluable (``known``: whether the history
    holds a metric name): one that never fired, and one that fired on ``absent()`` of such a series (it tells that the
    history lacks it, not that a node failed). Either is listed, never counted as quiet or as pages."""
    for history in histories:
        if history.firing and "absent" not in history.rule.expr:
            continue
        missing = tuple(sorted(name for name in selectors(history.rule.expr) - SERVER_SERIES if not known(name)))
        if missing:
            history.evaluable = False
            history.missing = missing
            history.firing = {}


@record
class Outcome:
    """A rule set's backtest: each alert's history and what Alertmanager would have sent."""

    rules: RuleSet
    histories: list[AlertHistory]
    sent: list[Notification]
    start: float
    end: float


def moments(histories: list[AlertHistory]) -> list[tuple[float, list[dict[str, str]]]]:
    """Each time the firing alerts change, with every alert firing then: an alert fires from its first firing
    evaluation until its rule's next evaluation that does not fire it (each rule at its own interval, so between two of
    its evaluations an alert holds as Alertmanager holds it)."""
    runs = [(first, last + history.rule.interval, dict(labels)) for history in histories for labels, first, last in history.intervals()]
    ordered = sorted({at for first, until, _ in runs for at in (first, until)})
    at_time: list[list[dict[str, str]]] = [[] for _ in ordered]
    for first, until, alert in runs:
        index = bisect.bisect_left(ordered, first)
        while index < len(ordered) and ordered[index] < until:
            at_time[index].append(alert)
            index += 1
    return list(zip(ordered, at_time, strict=True))


def outcome(rules: RuleSet, histories: list[AlertHistory], alertmanager: dict[str, Any], start: float, end: float) -> Outcome:
    return Outcome(rules, histories, notifications(moments(histories), alertmanager, end), start, end)


def summary(result: Outcome) -> dict[str, Any]:
    """What on-call reads: per alert its firings, notifications, pages and warnings, longest and flapping runs; per node
    and per day the notifications; the alerts not evaluable."""
    day = 86_400
    per_alert: dict[str, dict[str, Any]] = {}
    keys = _alert_keys(result.histories)
    for history, key in zip(result.histories, keys, strict=True):
        runs = history.intervals()
        per_alert[key] = {
            "severity": dict(history.rule.labels).get("severity", ""),
            "evaluable": history.evaluable,
            "missing": list(history.missing),
            "error": history.error,
            "notes": list(history.notes),
            "warnings": list(history.warnings),
            "reads_alerts": history.reads_alerts,
            "firings": len(runs),
            "firing_minutes": round(sum(last - first + history.rule.interval for _, first, last in runs) / 60),
            "longest_minutes": round(max((last - first + history.rule.interval for _, first, last in runs), default=0) / 60),
            "flapping": sum(1 for _, first, last in runs if last - first + history.rule.interval <= 5 * 60),
            "notifications": 0,
            "pages": 0,
            "warnings_sent": 0,
            "per_day": {},
        }
    keys_by_rule = {(h.rule.name, dict(h.rule.labels).get("severity", "")): key for h, key in zip(result.histories, keys, strict=True)}
    per_node: dict[str, int] = {}
    per_day: dict[str, dict[str, int]] = {}
    for note in result.sent:
        if note.kind == "resolved":
            continue
        stamp = _day(note.at, day)
        names = {_key_of(dict(alert), keys_by_rule) for alert in note.alerts}
        for name in names:
            entry = per_alert.setdefault(name, {"notifications": 0, "pages": 0, "warnings_sent": 0, "per_day": {}})
            entry["notifications"] += 1
            daily = entry["per_day"].setdefault(stamp, {"pages": 0, "warnings": 0, "notifications": 0})
            daily["notifications"] += 1
            if note.kind == "first":
                entry["pages" if note.severity == "critical" else "warnings_sent"] += note.severity in ("critical", "warning")
                if note.severity in ("critical", "warning"):
                    daily["pages" if note.severity == "critical" else "warnings"] += 1
        for alert in note.alerts:
            node = dict(alert).get("instance") or dict(alert).get("dimension_CacheClusterId") or "(no node)"
            per_node[node] = per_node.get(node, 0) + 1
        counts = per_day.setdefault(stamp, {"pages": 0, "warnings": 0, "notifications": 0})
        counts["notifications"] += 1
        if note.kind == "first" and note.severity == "critical":
            counts["pages"] += 1
        elif note.kind == "first" and note.severity == "warning":
            counts["warnings"] += 1
    firsts = [n for n in result.sent if n.kind == "first"]
    return {
        "rules": result.rules.path,
        "start": result.start,
        "end": result.end,
        "alerts": per_alert,
        "pages": sum(1 for n in firsts if n.severity == "critical"),
        "warnings": sum(1 for n in firsts if n.severity == "warning"),
        "notifications": sum(1 for n in result.sent if n.kind != "resolved"),
        "per_node": dict(sorted(per_node.items(), key=lambda item: -item[1])),
        "per_day": per_day,
        "not_evaluable": sorted(name for name, entry in per_alert.items() if not entry.get("evaluable", True)),
    }


def _alert_keys(histories: list[AlertHistory]) -> list[str]:
    """Each rule's name in the report; rules of one name (a warning and a critical variant) told apart by severity."""
    counts: dict[str, int] = {}
    for history in histories:
        counts[history.rule.name] = counts.get(history.rule.name, 0) + 1
    keys = []
    for history in histories:
        name = history.rule.name
        keys.append(name if counts[name] == 1 else f"{name} [{dict(history.rule.labels).get('severity', '') or 'no severity'}]")
    return keys


def _key_of(alert: dict[str, str], keys_by_rule: dict[tuple[str, str], str]) -> str:
    name = alert.get("alertname", "")
    return keys_by_rule.get((name, alert.get("severity", "")), name)


def _day(at: float, day: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(at - at % day, tz=datetime.timezone.utc).strftime("%Y-%m-%d")
