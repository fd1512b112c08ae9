"""Fleet alarms: a CloudWatch PromQL alarm over ElastiCache's OpenTelemetry metrics fires for the same nodes on the same
minutes as the nodes' own CloudWatch alarms of the same catalog entry. The queries run in a real PromQL engine (promtool,
Prometheus 3, with the UTF-8 metric and label names AWS uses), a PendingPeriod as `for`, over series written in the
OpenTelemetry shape ElastiCache emits (cumulative counters, gauges, one sample a minute); the nodes' own alarms are
evaluated as CloudWatch evaluates M of N datapoints."""

from __future__ import annotations

import random
import subprocess

import boto3
import pytest
import yaml
from helpers import recording_api
from moto import mock_aws
from tools import promtool

from exporter.alerts.alarms import apply, desired_alarms, plan
from exporter.alerts.catalog import load_catalog
from exporter.alerts.promql_alarms import MAX_QUERY_CHARS, RECOVERY_SECONDS, fleet_alertable, query
from exporter.alerts.thresholds import alarm_threshold_key, alarm_thresholds
from exporter.aws.discovery import Node
from exporter.aws.otel_metrics import NODE_LABEL
from exporter.aws.pricing import PROMQL_ALARM, alarm_lines
from exporter.baselines.table import load_table

REGION = "eu-west-1"
NODE_TYPE = "cache.r6g.large"
MINUTES = 40
WATCHED = ("shop-0001-001", "shop-0001-002", "shop-0002-001")
OUTSIDER = "other-0001-001"  # breaching all along, but not a node the alarm was made for
FRESH = "shop-0002-001"  # its counters start at zero
MEMORY_MAX = 10e9


def _otel_series(metric: str, node: str, per_minute: list[float]) -> list[tuple[str, list[float]]]:
    """The OpenTelemetry series ElastiCache emits whose CloudWatch twin had ``per_minute`` (value i: the minute ending
    at sample i), as the vended metrics are documented: counters cumulative, gauges as they are."""
    node_label = f'"{NODE_LABEL}"="{node}", "valkey.role"="primary"'

    def counter(name: str, scale: float = 1.0) -> list[tuple[str, list[float]]]:
        total, values = (0.0 if node == FRESH else 1000.0), []
        for value in per_minute:
            total += value * scale
            values.append(total)
        return [(f"{{{name}, {node_label}}}", values)]

    if metric == "EngineCPUUtilization":  # seconds of the main thread's CPU, split by mode
        user = counter('"process.cpu.time", "thread.type"="main", "cpu.mode"="user"', 0.6 * 60 / 100)
        system = counter('"process.cpu.time", "thread.type"="main", "cpu.mode"="system"', 0.4 * 60 / 100)
        io_thread = counter('"process.cpu.time", "thread.type"="io", "cpu.mode"="user"', 60 / 100)  # not the engine's
        return user + system + io_thread
    direction = {"NetworkBytesOut": "transmit", "NetworkBytesIn": "receive"}
    if metric in direction:
        other = "receive" if direction[metric] == "transmit" else "transmit"
        return [
            *counter(f'"system.network.io", "network.io.direction"="{direction[metric]}", "network.interface.name"="eth0"'),
            *counter(f'"system.network.io", "network.io.direction"="{other}", "network.interface.name"="eth0"', 0.5),
            *counter(f'"system.network.io", "network.io.direction"="{direction[metric]}", "network.interface.name"="lo"', 3.0),  # not the node's
        ]
    reasons = {
        "NetworkBandwidthOutAllowanceExceeded": "bandwidth_out",
        "NetworkBandwidthInAllowanceExceeded": "bandwidth_in",
        "NetworkPacketsPerSecondAllowanceExceeded": "pps",
        "NetworkConntrackAllowanceExceeded": "conntrack",
    }
    if metric in reasons:
        return counter(f'"system.network.allowance_exceeded", "network.allowance_exceeded.reason"="{reasons[metric]}"')
    counters = {
        "MajorPageFaults": '"process.paging.faults"',
        "Evictions": '"valkey.keys.evicted"',
        "RejectedConnections": '"valkey.connections.rejected"',
    }
    if metric == "MajorPageFaults":  # minor faults happen all the time: never counted
        return (
            counter('"process.paging.faults"')
            + counter('"process.paging.faults", "process.paging.fault_type"="minor"', 0)
            + [(f'{{"process.paging.faults", "process.paging.fault_type"="minor", {node_label}}}', [5000.0 * i for i in range(len(per_minute))])]
        )
    if metric in counters:
        return counter(counters[metric])
    if metric == "DatabaseMemoryUsagePercentage":
        return [
            (f'{{"valkey.memory.used", {node_label}}}', [value / 100 * MEMORY_MAX for value in per_minute]),
            (f'{{"valkey.memory.max", {node_label}}}', [MEMORY_MAX] * len(per_minute)),
        ]
    gauges = {
        "TrafficManagementActive": '"valkey.throttling.active"',
        "FreeableMemory": '"system.memory.usage", "system.memory.state"="free"',
        "SwapUsage": '"system.paging.usage", "system.paging.state"="used"',
        "CurrConnections": '"valkey.clients.connected"',
    }
    return [(f"{{{gauges[metric]}, {node_label}}}", list(per_minute))]


def _threshold(alert) -> float:
    key = alarm_threshold_key(alert)
    if key is None:
        return float(alert.cloudwatch.threshold)
    row = next(row for row in alarm_thresholds(load_table()) if row.node_type == NODE_TYPE)
    return float(row.alarm_values()[key])  # type: ignore[arg-type]


def _minutes(alert, threshold: float, rng: random.Random) -> dict[str, list[float]]:
    """Per node, a minute's value each minute: runs over and under the threshold of random length, long and short."""
    cw = alert.cloudwatch
    below = cw.comparison.startswith("Less")
    scale = threshold if threshold > 0 else 10.0

    def breaching(yes: bool) -> float:
        if cw.comparison == "GreaterThanOrEqualToThreshold":
            return threshold if yes else max(threshold - 1, 0)
        if below:
            return threshold * (0.95 if yes else 1.05)
        return threshold + scale * 0.05 if yes else (threshold * 0.95 if threshold > 0 else 0.0)

    runs = {}
    for node in (*WATCHED, OUTSIDER):
        values: list[float] = [breaching(False)] * 3  # a counter's first minutes: rate needs two samples
        state = False
        while len(values) < MINUTES:
            length = rng.choice((1, 2, cw.evaluation_periods - 1, cw.evaluation_periods, cw.evaluation_periods + 3))
            values += [breaching(state or node == OUTSIDER)] * max(1, length)
            state = not state
        runs[node] = values[:MINUTES]
    return runs


def _cloudwatch_fires(alert, threshold: float, values: list[float], minute: int) -> bool:
    """The node's own alarm at ``minute``: M of the last N one-minute datapoints breach (each DIFF already: the minute's
    value is its increase)."""
    cw = alert.cloudwatch
    needed = cw.datapoints_to_alarm or cw.evaluation_periods
    window = values[max(3, minute - cw.evaluation_periods + 1) : minute + 1]
    compare = {
        "GreaterThanThreshold": lambda v: v > threshold,
        "GreaterThanOrEqualToThreshold": lambda v: v >= threshold,
        "LessThanThreshold": lambda v: v < threshold,
        "LessThanOrEqualToThreshold": lambda v: v <= threshold,
    }[cw.comparison]
    return sum(1 for value in window if compare(value)) >= needed


FLEET_ALERTS = [alert for alert in load_catalog() if fleet_alertable(alert)]


@pytest.mark.parametrize("alert", FLEET_ALERTS, ids=[alert.name for alert in FLEET_ALERTS])
def test_a_fleet_alarm_fires_for_the_nodes_and_minutes_their_own_alarms_do(alert, tmp_path):
    rng = random.Random(alert.name)
    threshold = _threshold(alert)
    text, pending = query(alert, threshold, WATCHED)
    runs = _minutes(alert, threshold, rng)
    inputs = [
        {"series": series, "values": " ".join(f"{value:.10g}" for value in values)}
        for node, per_minute in runs.items()
        for series, values in _otel_series(alert.cloudwatch.metric, node, per_minute)
    ]
    expected_by_minute = {
        minute: sorted(node for node in WATCHED if _cloudwatch_fires(alert, threshold, runs[node], minute)) for minute in range(4, MINUTES)
    }
    assert any(expected_by_minute.values()), "the minutes never breach: the test would prove nothing"
    assert any(not fired for fired in expected_by_minute.values())
    rules = tmp_path / "fleet.rules.yml"
    assert RECOVERY_SECONDS == 0  # the contributor is OK as soon as the node's own alarm would be
    rule = {"alert": alert.name, "expr": text, "for": f"{pending}s"}
    rules.write_text(yaml.safe_dump({"groups": [{"name": "fleet", "rules": [rule]}]}))
    document = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [
                    {
                        "eval_time": f"{minute}m",
                        "alertname": alert.name,
                        "exp_alerts": [{"exp_labels": {NODE_LABEL: node}} for node in fired],
                    }
                    for minute, fired in expected_by_minute.items()
                ],
            }
        ],
    }
    test_file = tmp_path / "fleet.test.yml"
    test_file.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def _node(cluster_id: str, node_type: str, engine: str, group: str) -> Node:
    version = "8.0" if engine == "valkey" else "7.1"
    return Node(
        region=REGION, cluster_id=cluster_id, node_id="0001", node_type=node_type, engine=engine, engine_version=version, replication_group=group
    )


def _nodes() -> list[Node]:
    valkey = [_node(f"shop-{i:04d}-001", NODE_TYPE, "valkey", f"shop-{i:04d}") for i in range(1, 4)]
    return [*valkey, _node("cart-0001-001", "cache.t3.medium", "valkey", "cart"), _node("legacy-0001-001", NODE_TYPE, "redis", "legacy")]


@pytest.mark.unit
def test_fleet_style_puts_valkey_nodes_in_promql_alarms_and_keeps_the_rest_per_node():
    alerts, table = load_catalog(), load_table()
    per_node, _ = desired_alarms(_nodes(), alerts, table, "arn:aws:sns:eu-west-1:123456789012:pages", "bytes")
    fleet, _ = desired_alarms(_nodes(), alerts, table, "arn:aws:sns:eu-west-1:123456789012:pages", "bytes", "fleet")
    promql = [alarm for _, alarm in fleet if "EvaluationCriteria" in alarm]
    own = [alarm for _, alarm in fleet if "EvaluationCriteria" not in alarm]
    # the Redis OSS node emits no OpenTelemetry metrics: all its alarms are its own, as before
    assert sorted(a["AlarmName"] for a in own if a["AlarmName"].startswith("legacy-")) == sorted(
        a["AlarmName"] for _, a in per_node if a["AlarmName"].startswith("legacy-")
    )
    # a Valkey node keeps what has no OpenTelemetry counterpart, and the alarm that tells its data stopped
    kept = {a["AlarmName"].removeprefix("shop-0001-001-") for a in own if a["AlarmName"].startswith("shop-0001-001-")}
    assert kept == {"ElastiCacheEngineCPUSaturated", "ElastiCacheReplicationLag", "ElastiCacheHostCPUHigh"}
    assert "cart-0001-001-ElastiCacheBurstCreditsLow" in {a["AlarmName"] for a in own}
    by_name = {alarm["AlarmName"]: alarm for alarm in promql}
    # a per-node-type threshold: one alarm a node type, naming its nodes; a fixed one: one alarm for every node
    assert "elasticache-exporter-ElastiCacheNetworkOutAtBaseline-r6g.large-1" in by_name
    assert "elasticache-exporter-ElastiCacheNetworkOutAtBaseline-t3.medium-1" in by_name
    evictions = by_name["elasticache-exporter-ElastiCacheEvictions-1"]["EvaluationCriteria"]["PromQLCriteria"]["Query"]
    assert all(node in evictions for node in ("shop-0001-001", "shop-0003-001", "cart-0001-001"))
    assert "legacy-0001-001" not in evictions
    for alarm in promql:
        criteria = alarm["EvaluationCriteria"]["PromQLCriteria"]
        assert len(criteria["Query"]) <= MAX_QUERY_CHARS
        assert alarm["EvaluationInterval"] == 60
        assert not {"Threshold", "ComparisonOperator", "MetricName", "Metrics", "Period", "TreatMissingData"} & set(alarm)
    # every node's alarm of each alert is in exactly one place
    covered = {(name.removeprefix("shop-0001-001-")) for name in (a["AlarmName"] for _, a in per_node) if name.startswith("shop-0001-001-")}
    fleet_alerts = {name.removeprefix("elasticache-exporter-").split("-")[0] for name in by_name}
    assert covered == kept | fleet_alerts
    lines = {line.price.kind: line for line in alarm_lines([a for _, a in fleet])}
    assert lines[PROMQL_ALARM.kind].alarms == len(promql)
    assert len(fleet) < len(per_node)


def test_a_fleet_alarms_apply_sends_the_promql_criteria_and_a_second_plan_finds_them(aws_credentials):
    """moto keeps a PromQL alarm's name, actions and tags but not its EvaluationCriteria or EvaluationInterval: the
    request is checked as sent, and the alarm found by name."""

    with mock_aws():
        boto3.client("sns", region_name=REGION).create_topic(Name="pages")
        api = recording_api("put_metric_alarm")
        desired, _ = desired_alarms(_nodes(), load_catalog(), load_table(), None, "bytes", "fleet")
        changes = plan(api, desired, (REGION,))
        assert apply(api, changes) == len(desired)
        sent = {request["AlarmName"]: request for _, request in api.sent}
        promql = {name: request for name, request in sent.items() if "EvaluationCriteria" in request}
        assert promql
        for name, request in promql.items():
            assert request == dict(next(alarm for _, alarm in desired if alarm["AlarmName"] == name))
        again = plan(api, desired, (REGION,))
    assert {change.action for change in again if change.name not in promql} == {"unchanged"}
    assert {change.name for change in again if change.action == "create"} == set()  # found by name


@pytest.mark.unit
def test_a_promql_alarm_as_cloudwatch_describes_it_compares_equal_to_the_one_wanted():
    """moto does not keep EvaluationCriteria, so this is DescribeAlarms' MetricAlarm shape as botocore's model gives it
    (no Threshold, no metric; the criteria and interval echoed back): a second plan finds nothing to update."""
    from exporter.alerts.alarms import _normal

    desired, _ = desired_alarms(_nodes(), load_catalog(), load_table(), "arn:aws:sns:eu-west-1:123456789012:pages", "bytes", "fleet")
    wanted = next(alarm for _, alarm in desired if "EvaluationCriteria" in alarm)
    described = {
        **{key: value for key, value in wanted.items() if key != "Tags"},
        "AlarmArn": f"arn:aws:cloudwatch:eu-west-1:123456789012:alarm:{wanted['AlarmName']}",
        "StateValue": "OK",
        "Dimensions": [],
        "InsufficientDataActions": [],
        "EvaluationCriteria": {"PromQLCriteria": dict(reversed(list(wanted["EvaluationCriteria"]["PromQLCriteria"].items())))},
    }
    assert _normal(described) == _normal(wanted)
    changed = {**described, "EvaluationCriteria": {"PromQLCriteria": {**described["EvaluationCriteria"]["PromQLCriteria"], "PendingPeriod": 1}}}
    assert _normal(changed) != _normal(wanted)
