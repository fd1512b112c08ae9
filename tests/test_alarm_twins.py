"""The two renderings of one catalog entry fire on the same CloudWatch minutes: the Prometheus rule (through promtool,
over what the exporter serves from those minutes) and the CloudWatch alarm of the rendered template (evaluated as
CloudWatch evaluates M of N datapoints of its metric math)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
import yaml
from test_rule_guards import run_promtool
from test_rules import OURS, TEMPLATE, series

from exporter.alerts.catalog import load_catalog
from exporter.aws.cloudwatch import prometheus_name
from exporter.aws.minutes import RisingMinutes

CW = {"account_id": "111111111111", "region": "eu-west-1", "dimension_CacheNodeId": "0001"}
MINUTES = 16
COMPARISONS = {
    "GreaterThanThreshold": lambda value, threshold: value > threshold,
    "GreaterThanOrEqualToThreshold": lambda value, threshold: value >= threshold,
}


class _CfnLoader(yaml.SafeLoader):
    """CloudFormation's short forms (!Ref, !Sub, !If, ...) read as their plain values."""


def _any_tag(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_CfnLoader.add_multi_constructor("!", _any_tag)


def _template() -> Any:
    return yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)  # noqa: S506 (a SafeLoader that reads CloudFormation's tags)


def _template_alarms(node: Any) -> dict[str, dict[str, Any]]:
    """The rendered template's alarms by the catalog alert they are named after."""
    found: dict[str, dict[str, Any]] = {}
    if isinstance(node, dict):
        if node.get("Type") == "AWS::CloudWatch::Alarm":
            name = str(node["Properties"]["AlarmName"]).rpartition("-")[2]
            found[name] = node["Properties"]
        for value in node.values():
            found.update(_template_alarms(value))
    elif isinstance(node, list):
        for value in node:
            found.update(_template_alarms(value))
    return found


def alarm_minutes(values: list[float | None], alarm: dict[str, Any]) -> set[int]:
    """The minutes at which CloudWatch holds the alarm in ALARM: of the datapoints of the returned expression in the last
    EvaluationPeriods periods (DIFF of the metric: each datapoint's value less the one before it, across a minute not
    published; the first has none), at least DatapointsToAlarm breach the threshold (TreatMissingData: missing counts
    the datapoints there are)."""
    returned = [metric for metric in alarm["Metrics"] if metric.get("ReturnData")]
    assert [metric["Expression"] for metric in returned] == ["DIFF(m1)"]
    assert alarm["TreatMissingData"] == "missing"
    breaches = COMPARISONS[alarm["ComparisonOperator"]]
    threshold, periods, needed = float(alarm["Threshold"]), int(alarm["EvaluationPeriods"]), int(alarm["DatapointsToAlarm"])
    published = [(minute, value) for minute, value in enumerate(values) if value is not None]
    diffs = {minute: value - before for (_, before), (minute, value) in itertools.pairwise(published)}
    alarming = set()
    for minute in range(len(values)):
        window = [diffs[m] for m in range(minute - periods + 1, minute + 1) if m in diffs]
        if sum(breaches(diff, threshold) for diff in window) >= needed:
            alarming.add(minute)
    return alarming


def served_rising(values: list[float | None], every: int) -> list[float | None]:
    """What the exporter serves each minute from the counter's minutes (minute i published at minute i), polled every
    ``every`` minutes."""
    kept = RisingMinutes(every)
    served: list[float | None] = []
    now = None
    for minute in range(len(values)):
        if minute % every == 0:
            now = kept.merge({60.0 * i: value for i in range(minute + 1) if (value := values[i]) is not None})
        served.append(None if now is None else float(now.rising))
    return served


def sequences() -> list[list[float | None]]:
    """Per-minute counts: every pattern of shaped minutes in minutes 3..8, and counts that rise, hold and fall at random
    (a held count does not rise: DIFF 0). Every minute published: where AWS leaves one out, CloudWatch evaluates the most
    recent datapoints of a range a little longer than the alarm's periods, and the rule the windows of 5 minutes ending at
    each minute held; they can differ by a minute there."""
    shaped: list[list[float | None]] = [
        [3.0 if 3 <= m <= 8 and pattern[m - 3] else 0.0 for m in range(MINUTES)] for pattern in itertools.product((0, 1), repeat=6)
    ]
    rng = random.Random(4)
    wandering: list[list[float | None]] = [[0.0, 0.0, *(rng.choice((0.0, 3.0, 6.0)) for _ in range(MINUTES - 2))] for _ in range(24)]
    return shaped + wandering


def test_each_allowance_alert_fires_on_the_minutes_its_cloudwatch_alarm_does(tmp_path):
    """Polled every minute, the rule fires exactly at the minutes the alarm is in ALARM; polled every 5 minutes, it
    fires from each poll that brought a minute at which the alarm was in ALARM until the next poll, and at no other."""
    template = _template_alarms(_template())
    rising_alerts = {
        alert.name: alert
        for alert in load_catalog()
        if alert.cloudwatch is not None and alert.cloudwatch.increase and "elasticache_cloudwatch_rising_minutes" in (alert.expr or "")
    }
    assert sorted(rising_alerts) == sorted(
        [
            "ElastiCacheBandwidthInAllowanceExceeded",
            "ElastiCacheBandwidthOutAllowanceExceeded",
            "ElastiCacheConntrackAllowanceExceeded",
            "ElastiCachePPSAllowanceExceeded",
        ]
    )
    tests, fired, alarmed = [], 0, 0
    for name, alert in sorted(rising_alerts.items()):
        cw = alert.cloudwatch
        assert cw is not None
        metric = prometheus_name(cw.metric, cw.statistic)
        inputs: list[dict[str, str]] = []
        expected: dict[int, list[dict[str, str]]] = {minute: [] for minute in range(MINUTES)}
        for index, values in enumerate(sequences()):
            alarming = alarm_minutes(values, template[name])
            alarmed += bool(alarming)
            for every in (1, 5):
                labels = {**CW, "dimension_CacheClusterId": f"seq{index}-every-{every}m"}
                served = served_rising(values, every)
                inputs.append({"series": series("elasticache_cloudwatch_rising_minutes", **labels, metric=metric), "values": _values(served)})
                inputs.append({"series": series("elasticache_cloudwatch_datapoint_timestamp_seconds", **labels, metric=metric), "values": "0+60x20"})
                for minute in range(MINUTES):
                    poll = minute - minute % every  # the last poll: it brought the minutes since the one before
                    if any(poll - every < at <= poll for at in alarming):
                        expected[minute].append({**labels, "severity": alert.severity, **OURS})
                        fired += 1
        checks = [
            {"eval_time": f"{minute}m", "alertname": name, "exp_alerts": [{"exp_labels": labels} for labels in firing]}
            for minute, firing in expected.items()
        ]
        tests.append({"interval": "1m", "input_series": inputs, "alert_rule_test": checks})
    assert fired > 100  # some patterns alarm, others do not
    assert 0 < alarmed < 4 * len(sequences())
    run_promtool(tmp_path, tests)  # the shipped rules, each test's CloudWatch series with its served freshness


@pytest.mark.unit
def test_one_shaped_minute_alarms_in_neither_twin_and_two_alarm_in_both():
    """The alarm side alone: a minute shaped once is no ALARM; two shaped minutes within 5 are."""
    template = _template_alarms(_template())
    once = [0.0] * 5 + [3.0] + [0.0] * 10
    twice = [0.0] * 5 + [3.0, 0.0, 0.0, 3.0] + [0.0] * 7
    for name in ("ElastiCacheBandwidthOutAllowanceExceeded", "ElastiCacheBandwidthInAllowanceExceeded", "ElastiCachePPSAllowanceExceeded"):
        assert alarm_minutes(once, template[name]) == set()
        assert alarm_minutes(twice, template[name]) == {8, 9}
        assert max(value for value in served_rising(once, 1) if value is not None) == 1
        assert [minute for minute, value in enumerate(served_rising(twice, 1)) if value is not None and value >= 2] == [8, 9]


def _values(served: list[float | None]) -> str:
    return " ".join("_" if value is None else f"{value:g}" for value in served)
