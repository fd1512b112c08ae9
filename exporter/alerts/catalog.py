"""The alert catalog (``rules/catalog.yml``), the single source of every alert: loaded and checked into typed
records, with the guard each expression gets so that it is silent on stale data."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

from exporter.common.errors import ExporterError
from exporter.common.records import record
from exporter.common.schema import check_known_keys
from exporter.common.yamlfile import read_yaml

from .inhibitions import Inhibition, parse_inhibits, parse_join, resolve

FORMAT = "elasticache-exporter-alerts"
# a baseline signal: the series compared, and the recorded baseline it is divided by
SIGNALS = {
    "network_out": ('elasticache_network_bytes_per_second{direction="out"}', "elasticache:baseline_network_bytes_per_second"),
    "network_in": ('elasticache_network_bytes_per_second{direction="in"}', "elasticache:baseline_network_bytes_per_second"),
    "engine_cpu": ("elasticache_engine_cpu_utilization_percent", "elasticache:baseline_engine_cpu_percent"),
}
LEVELS = (80, 90, 100)
NETWORK_ALARMS = ("percentage", "bytes")  # the CloudWatch alarm families for network; the first is the default
SEVERITIES = ("critical", "warning", "info")
CLOUDWATCH_SERIES = re.compile(r"\baws_elasticache_[a-z0-9_]+")
UTILIZATION_SERIES = re.compile(r"\belasticache_(network_bytes_per_second|network_utilization_ratio|engine_cpu_utilization_(percent|ratio))\b")
# a utilization series' selector, with its matchers if any: served from INFO and from CloudWatch for a node both scraped
# and polled, so an alert reads one source per node (one saturation, one alert)
UTILIZATION_SELECTOR = re.compile(
    r"\b(elasticache_(?:network_bytes_per_second|network_utilization_ratio|engine_cpu_utilization_(?:percent|ratio)))\b"
    r'(\{(?:[^}"]|"(?:[^"\\]|\\.)*")*\})?'
)
# what makes a selector more than an instant one: a range, an offset, an @ time (it stays as written)
NOT_INSTANT = re.compile(r"\s*(\[|offset\b|@)", re.IGNORECASE)
PREFERRED_SOURCES = ("info", "cloudwatch")  # INFO's figure where the exporter reads the node, else CloudWatch's
LABEL_LOOKUP = re.compile(r"\bgroup by \([^)]*\) \([a-z_:]+(?:\{[^}]*\})?\)")  # reads labels only: any source will do
# a node's series have the first four, a serverless cache's the account, region and clusterId: the guard matches both
CLOUDWATCH_DIMENSIONS = "account_id, region, dimension_CacheClusterId, dimension_CacheNodeId, dimension_clusterId"
SERVED_WHILE_FRESH = re.compile(
    r"\belasticache_(serverless_[a-z_]+_utilization_ratio|network_aws_baseline_(usage_ratio|peak_usage_ratio|burst_minutes|window_minutes|sustained_minutes|sustained_min_usage_ratio"
    r"|window_max_usage_ratio))\b"
)
# AWS's own records of the fleet (events, service updates, maintenance windows): kept between polls, so fresh only while
# discovery still succeeds somewhere
FLEET_SERIES = re.compile(
    r"\belasticache_(events_total|event_last_timestamp_seconds|service_update_[a-z_]+|maintenance_window_[a-z_]+"
    r"|pending_modification_info|global_datastore_[a-z_]+|engine_support_[a-z_]+)\b"
)
FLEET_FRESH_SECONDS = 1800  # six discovery intervals of five minutes
# what an arm of an expression may read, declared per arm (prometheus.any / prometheus.all), and the labels that name its
# node; each arm holds only while its own series is fresh (``render_arms``)
ARM_SOURCES = {"cloudwatch": CLOUDWATCH_DIMENSIONS, "redis": "instance"}
COMBINATIONS = {"any": "or", "all": "and"}  # any: each arm alerts alone; all: a node alerts where every arm holds
ARM_COMPARISON = re.compile(r"(==|!=|>=|<=|>|<)\s*-?[0-9.e+]+")
DEFAULT_RUNBOOK_BASE = "docs/runbooks.md"
# the label every rendered alert carries, naming the rule set it comes from: the Alertmanager route and every inhibit
# rule match on it, so alerts of the same name from other rule sets (redis_exporter's mixin, awesome-prometheus-alerts)
# are neither routed nor silenced by ours. Not `source`: our own series use that label (redis or cloudwatch), and a rule
# label would overwrite it; not `service` or `job`: Kubernetes service discovery sets those
SOURCE_LABEL = "alert_source"
DEFAULT_SOURCE = "elasticache-exporter"
SOURCE_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]*")
# the jobs that scrape the exporter itself, as a regex: a catalog expression names it `$exporter_job`
EXPORTER_JOB = "$exporter_job"
DEFAULT_EXPORTER_JOB = ".*elasticache.*"
ALERT_KEYS = (
    "name",
    "severity",
    "for",
    "window",
    "keep_firing_for",
    "summary",
    "description",
    "runbook",
    "guard",
    "baseline",
    "prometheus",
    "cloudwatch",
    "join",
    "inhibits",
)
CLOUDWATCH_KEYS = (
    "metric",
    "statistic",
    "period",
    "evaluation_periods",
    "datapoints_to_alarm",
    "comparison",
    "threshold",
    "unit",
    "increase",
    "per_node_type",
    "node_types",
    "insufficient_data",
)
# AWS's view of a node's traffic against its instance's baseline, as the table's baseline signals name it
AWS_BASELINE_SIGNALS = {"NetworkBaselineUsageOutPercentage": "network_out", "NetworkBaselineUsageInPercentage": "network_in"}
PER_NODE_TYPE = ("host_cpu",)  # thresholds a CloudWatch alarm reads from the node type, not from the catalog


class RenderError(ExporterError):
    exit_code = 2


def checked_source(value: str) -> str:
    """The value of :data:`SOURCE_LABEL`, or a one-line error: letters, digits and ``_.:/-``, as a matcher needs no quoting."""
    if not SOURCE_VALUE.fullmatch(value):
        raise RenderError(f'alert source {value!r}: use letters, digits and _.:/- (it is matched as {SOURCE_LABEL}="...")')
    return value


def checked_exporter_job(value: str) -> str:
    """The job regex of the exporter's own scrapes, or a one-line error."""
    try:
        re.compile(value)
    except re.error as error:
        raise RenderError(f"exporter job {value!r}: not a regular expression ({error})") from None
    if not value or '"' in value or "\n" in value:
        raise RenderError(f"exporter job {value!r}: must be a one-line regex without double quotes")
    return value


@record(frozen=True)
class BaselineRule:
    """Fire above ``level`` % of the node type's baseline of ``signal``."""

    signal: str
    level: int


@record(frozen=True)
class CloudWatchAlarm:
    """The alert as a CloudWatch alarm on each node's own series. ``threshold`` keeps the catalog's number as written."""

    metric: str
    statistic: str
    period: int = 60
    evaluation_periods: int = 5
    datapoints_to_alarm: int | None = None  # M of the N evaluation periods that must breach; None: every one
    comparison: str = "GreaterThanThreshold"
    threshold: float | None = None
    unit: str | None = None
    increase: bool = False  # alarm on DIFF() of the statistic: a counter's increase
    per_node_type: str | None = None
    node_types: str | None = None  # a node-type prefix (cache.t): the alarm exists only for nodes of those types
    insufficient_data: bool = False  # the one alarm of each node that notifies INSUFFICIENT_DATA: its data stopped


@record(frozen=True)
class Arm:
    """One condition of an expression on one series, silent while that series is stale: its own guard, whatever the
    other arms read."""

    source: str  # ARM_SOURCES
    series: str
    when: str  # the comparison: "> 2000"
    labels: tuple[tuple[str, str], ...] = ()  # set on the alerts this arm fires (which arm it was)


@record(frozen=True)
class Alert:
    name: str
    severity: str
    duration: str
    keep_firing_for: str | None
    summary: str
    description: str
    runbook: str
    expr: str | None
    baseline: BaselineRule | None
    cloudwatch: CloudWatchAlarm | None
    guard: str = "none"
    arms: tuple[Arm, ...] = ()  # an expression built from arms: ``expr`` is their rendering, each arm guarded
    join: tuple[str, ...] = ()  # inhibitions.JOINS: labels joined in so that an inhibition can match them
    inhibits: tuple[Inhibition, ...] = ()  # the alerts this one silences while it fires
    # how long the expression's condition must already have held before it is true at all (a window series the exporter
    # computes, such as every minute of the last 15 above a level): declared, so that a check never guesses it
    window: str | None = None

    @property
    def signal_level(self) -> tuple[str, int] | None:
        """The baseline signal this alert watches and the percent of a baseline it fires at: the table's (``baseline``)
        or AWS's own (a NetworkBaselineUsage*Percentage alarm's threshold); None for any other alert."""
        if self.baseline is not None:
            return self.baseline.signal, self.baseline.level
        cloudwatch = self.cloudwatch
        if cloudwatch is not None and cloudwatch.metric in AWS_BASELINE_SIGNALS and cloudwatch.threshold is not None:
            return AWS_BASELINE_SIGNALS[cloudwatch.metric], int(cloudwatch.threshold)
        return None

    @property
    def wait_seconds(self) -> int:
        """How long a condition holds before the alert fires: its ``for`` or its declared ``window``."""
        return max(duration_seconds(self.duration), duration_seconds(self.window) if self.window else 0)

    @property
    def network_alarms(self) -> str | None:
        """Which family of network alarms this is: ``bytes`` (NetworkBytes against the node type's baseline from the
        table: a threshold per node type) or ``percentage`` (AWS's NetworkBaselineUsage*Percentage: one threshold for
        every node); a fleet alarms with one of them (:data:`NETWORK_ALARMS`)."""
        if self.cloudwatch is None:
            return None
        if self.baseline is not None and self.baseline.signal in ("network_out", "network_in"):
            return "bytes"
        return "percentage" if self.cloudwatch.metric.startswith("NetworkBaselineUsage") else None


def default_catalog_path() -> Path:
    return Path(str(resources.files("exporter.rules") / "catalog.yml"))


def _check_data_watch(alerts: list[Alert], path: Path) -> None:
    """At most one alarm notifies INSUFFICIENT_DATA, and every node must get it: a node replaced or gone leaves each of
    its alarms without data, and one notification says so where one per alarm would be a flood."""
    watching = [alert for alert in alerts if alert.cloudwatch and alert.cloudwatch.insufficient_data]
    if len(watching) > 1:
        raise RenderError(f"{path}: insufficient_data is set on {', '.join(a.name for a in watching)}: one alarm a node tells its data stopped")
    for alert in watching:
        cw = alert.cloudwatch
        assert cw is not None
        if cw.node_types or cw.per_node_type or alert.baseline or alert.network_alarms:
            raise RenderError(f"{path}: alert {alert.name}: insufficient_data needs an alarm every node gets (a fixed threshold, no node_types)")


def load_catalog(path: str | Path | None = None) -> list[Alert]:
    path = Path(path) if path else default_catalog_path()
    data = read_yaml(path, RenderError)
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("alerts"), list):
        raise RenderError(f"{path}: not an alert catalog (expected 'format: {FORMAT}' and a list 'alerts')")
    check_known_keys(data, ("format", "version", "alerts"), f"{path}:", RenderError)
    alerts, names = [], set()
    for index, item in enumerate(data["alerts"]):
        alert = _alert(item, f"{path}: alerts[{index}]")
        if alert.name in names:
            raise RenderError(f"{path}: alerts[{index}]: the name {alert.name} is used twice")
        names.add(alert.name)
        alerts.append(alert)
    _check_data_watch(alerts, path)
    for index, alert in enumerate(alerts):
        for number, inhibition in enumerate(alert.inhibits):
            resolve(alert.name, inhibition, names, f"{path}: alerts[{index}].inhibits[{number}]", RenderError)
    return alerts


def _alert(item: Any, where: str) -> Alert:
    _check_alert_shape(item, where)
    baseline = item.get("baseline")
    arms, combination = _arms(item.get("prometheus") or {}, f"{where}.prometheus")
    expr = render_arms(arms, combination) if arms else (item.get("prometheus") or {}).get("expr")
    if baseline is not None:
        if baseline.get("signal") not in SIGNALS or baseline.get("level") not in LEVELS:
            raise RenderError(f"{where}: baseline needs a signal ({', '.join(SIGNALS)}) and a level (80, 90 or 100)")
    elif not expr and not item.get("cloudwatch"):
        raise RenderError(f"{where}: needs prometheus.expr, a baseline or cloudwatch")
    guard = item.get("guard")
    if guard is not None and guard != "none":
        raise RenderError(f"{where}.guard: only 'none' may be set (the guard is chosen from what the expression reads)")
    guard = guard or (arms[0].source if arms else _guard_for(expr, baseline is not None))
    if guard == "cloudwatch" and not arms and len(set(CLOUDWATCH_SERIES.findall(expr or ""))) > 1:
        raise RenderError(
            f"{where}.prometheus.expr: reads several CloudWatch series, and each needs its own freshness: write it as "
            "prometheus.any or prometheus.all, an arm per series"
        )
    if item.get("keep_firing_for") and guard != "none":
        raise RenderError(
            f"{where}.keep_firing_for: would keep the alert firing from old values after its data stopped; widen the expression's window"
        )
    rule = BaselineRule(baseline["signal"], baseline["level"]) if baseline else None
    cloudwatch = _cloudwatch(item["cloudwatch"], rule, item["name"], f"{where}.cloudwatch") if item.get("cloudwatch") else None
    return Alert(
        name=item["name"],
        severity=item["severity"],
        duration=item["for"],
        keep_firing_for=item.get("keep_firing_for"),
        summary=item["summary"],
        description=" ".join(item["description"].split()),
        runbook=item["runbook"],
        expr=expr,
        baseline=rule,
        cloudwatch=cloudwatch,
        guard=guard,
        arms=arms,
        join=parse_join(item.get("join"), f"{where}.join", RenderError),
        inhibits=parse_inhibits(item.get("inhibits"), f"{where}.inhibits", RenderError),
        window=_window(item.get("window"), f"{where}.window"),
    )


DURATION = re.compile(r"([0-9]+)([smhd])")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int:
    """A catalog duration (``0m``, ``15m``, ``1h``: one number and unit) in seconds; ValueError otherwise."""
    match = DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"not a duration such as 5m: {text!r}")
    return int(match.group(1)) * UNIT_SECONDS[match.group(2)]


def _window(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not DURATION.fullmatch(value) or duration_seconds(value) == 0:
        raise RenderError(f"{where}: must be a duration above zero such as 15m (how long the expression's condition must hold)")
    return value


def _check_alert_shape(item: Any, where: str) -> None:
    """A mapping of known keys, with its parts mappings of theirs, its texts present and a known severity."""
    if not isinstance(item, dict):
        raise RenderError(f"{where}: must be a mapping")
    check_known_keys(item, ALERT_KEYS, where, RenderError)
    for part, keys in (("baseline", ("signal", "level")), ("prometheus", ("expr", *COMBINATIONS)), ("cloudwatch", CLOUDWATCH_KEYS)):
        if item.get(part) is not None:
            if not isinstance(item[part], dict):
                raise RenderError(f"{where}.{part}: must be a mapping")
            check_known_keys(item[part], keys, f"{where}.{part}", RenderError)
    for key in ("name", "severity", "for", "summary", "description", "runbook"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise RenderError(f"{where}: '{key}' must be a non-empty string")
    if item["severity"] not in SEVERITIES:
        raise RenderError(f"{where}: severity must be critical, warning or info")


def _arms(prometheus: dict[str, Any], where: str) -> tuple[tuple[Arm, ...], str]:
    """The arms of ``prometheus.any`` or ``prometheus.all`` (each a mapping of its source, the series it reads, the
    comparison ``when`` and optional ``labels``), and which of the two combines them."""
    given = [key for key in ("expr", *COMBINATIONS) if prometheus.get(key) is not None]
    if len(given) > 1:
        raise RenderError(f"{where}: give one of expr, any and all, not {' and '.join(given)}")
    combination = next((key for key in COMBINATIONS if key in given), None)
    if combination is None:
        return (), ""
    raw = prometheus[combination]
    if not isinstance(raw, list) or len(raw) < 2:
        raise RenderError(f"{where}.{combination}: must be a list of at least two arms")
    arms = tuple(_arm(item, f"{where}.{combination}[{index}]") for index, item in enumerate(raw))
    if len({arm.source for arm in arms}) > 1:
        raise RenderError(f"{where}.{combination}: every arm reads the same source (its node's labels join them)")
    return arms, combination


def _arm(raw: Any, where: str) -> Arm:
    if not isinstance(raw, dict):
        raise RenderError(f"{where}: must be a mapping")
    check_known_keys(raw, (*ARM_SOURCES, "when", "labels"), where, RenderError)
    sources = [source for source in ARM_SOURCES if source in raw]
    if len(sources) != 1 or not isinstance(raw[sources[0]], str) or not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", raw[sources[0]]):
        raise RenderError(f"{where}: needs one series name, under the source it comes from ({', '.join(ARM_SOURCES)})")
    when = raw.get("when")
    if not isinstance(when, str) or not ARM_COMPARISON.fullmatch(when.strip()):
        raise RenderError(f"{where}.when: must be a comparison with a number, such as '> 2000'")
    labels = raw.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise RenderError(f"{where}.labels: must map label names to strings")
    return Arm(sources[0], raw[sources[0]], when.strip(), tuple(sorted(labels.items())))


def render_arms(arms: tuple[Arm, ...], combination: str) -> str:
    """The arms as one expression: each its series' condition, silent while that series is stale, with its labels set;
    joined with ``or`` (any) or ``and`` on the node's labels (all: the value is the first arm's)."""
    rendered = []
    for arm in arms:
        on = ARM_SOURCES[arm.source]
        fresh = cloudwatch_fresh(arm.series) if arm.source == "cloudwatch" else "redis_up == 1"
        text = f"({arm.series} {arm.when}) and on ({on}) ({fresh})"
        for name, value in arm.labels:
            text = f'label_replace({text}, "{name}", "{value}", "", "")'
        rendered.append(f"({text})")
    operator = COMBINATIONS[combination]
    if combination == "all":
        operator = f"{operator} on ({ARM_SOURCES[arms[0].source]})"
    return f" {operator} ".join(rendered)


def _cloudwatch(raw: dict[str, Any], baseline: BaselineRule | None, name: str, where: str) -> CloudWatchAlarm:
    for key in ("metric", "statistic"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise RenderError(f"{where}.{key}: must be a non-empty string")
    per_node_type = raw.get("per_node_type")
    if per_node_type is not None and per_node_type not in PER_NODE_TYPE:
        raise RenderError(f"{where}.per_node_type: must be one of {', '.join(PER_NODE_TYPE)}")
    threshold = raw.get("threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int | float)):
        raise RenderError(f"{where}.threshold: must be a number")
    if threshold is None and baseline is None and per_node_type is None:
        raise RenderError(f"catalog: alert {name}: cloudwatch needs a threshold or a baseline")
    evaluation_periods = int(raw.get("evaluation_periods", 5))
    datapoints = raw.get("datapoints_to_alarm")
    if datapoints is not None and (isinstance(datapoints, bool) or not isinstance(datapoints, int) or not 1 <= datapoints <= evaluation_periods):
        raise RenderError(f"{where}.datapoints_to_alarm: must be a whole number from 1 to evaluation_periods ({evaluation_periods})")
    return CloudWatchAlarm(
        metric=raw["metric"],
        statistic=raw["statistic"],
        period=int(raw.get("period", 60)),
        evaluation_periods=evaluation_periods,
        datapoints_to_alarm=datapoints,
        comparison=raw.get("comparison", "GreaterThanThreshold"),
        threshold=threshold,
        unit=raw.get("unit"),
        increase=bool(raw.get("increase", False)),
        per_node_type=per_node_type,
        node_types=_node_types(raw.get("node_types"), where),
        insufficient_data=_flag(raw.get("insufficient_data", False), f"{where}.insufficient_data"),
    )


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise RenderError(f"{where}: must be true or false")
    return value


def _node_types(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"cache\.[a-z0-9]+\.?", value):
        raise RenderError(f"{where}.node_types: must be a node-type prefix such as cache.t or cache.r6gd.")
    return value


def _guard_for(expr: str | None, baseline: bool) -> str:
    if expr and FLEET_SERIES.search(expr):
        return "fleet"
    if expr and SERVED_WHILE_FRESH.search(expr) and not (CLOUDWATCH_SERIES.search(expr) or "redis_" in expr):
        return "fresh"
    if baseline or (expr and UTILIZATION_SERIES.search(expr)):
        return "utilization"
    if expr and CLOUDWATCH_SERIES.search(expr):
        return "cloudwatch"
    return "redis"


def cloudwatch_fresh(series: str) -> str:
    """A CloudWatch series' datapoints younger than the exporter serving them says its tier's may be
    (``elasticache_cloudwatch_fresh_seconds``, for the intervals it polls at, whatever they are configured or budgeted
    to). Each exporter of a sharded fleet serves it: the most lenient one speaks."""
    return (
        f'time() - elasticache_cloudwatch_datapoint_timestamp_seconds{{metric="{series}"}}'
        f' < on (metric) group_left () max by (metric) (elasticache_cloudwatch_fresh_seconds{{metric="{series}"}})'
    )


def one_source(expr: str) -> str:
    """Every utilization series the expression reads, from one source per node: INFO's where the exporter reads it,
    else CloudWatch's (a selector that names its source keeps it)."""

    def preferred(match: re.Match[str]) -> str:
        name, matchers = match.group(1), (match.group(2) or "{}")[1:-1].strip()
        if re.search(r"\bsource\s*[!=]", matchers) or NOT_INSTANT.match(match.string, match.end()):
            return match.group(0)
        first, then = (name + "{" + ", ".join(filter(None, (matchers, f'source="{source}"'))) + "}" for source in PREFERRED_SOURCES)
        return f"({first} or on (instance, direction) {then})"

    parts, start = [], 0
    for lookup in LABEL_LOOKUP.finditer(expr):
        parts += [UTILIZATION_SELECTOR.sub(preferred, expr[start : lookup.start()]), lookup.group(0)]
        start = lookup.end()
    return "".join([*parts, UTILIZATION_SELECTOR.sub(preferred, expr[start:])])


def guarded(expr: str, guard: str) -> str:
    """The expression, silent when its data is stale: its target is down, its CloudWatch datapoint is old, or discovery
    (which reads the fleet's events and updates) has not succeeded for half an hour. A "fresh"
    expression reads only series the exporter drops once their data is old, so it needs no guard."""
    if guard == "redis":
        return f"({expr}) and on (instance) (redis_up == 1)"
    if guard == "utilization":
        return f"({expr}) unless on (instance) (redis_up == 0)"
    if guard == "cloudwatch":
        metric = CLOUDWATCH_SERIES.search(expr)
        assert metric is not None
        return f"({expr}) and on ({CLOUDWATCH_DIMENSIONS}) ({cloudwatch_fresh(metric.group(0))})"
    if guard == "fleet":
        return f"({expr}) and on () (time() - max(elasticache_exporter_discovery_last_success_timestamp_seconds) < {FLEET_FRESH_SECONDS})"
    return expr
