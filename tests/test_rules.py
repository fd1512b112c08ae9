"""The rendered rules and template: up to date, deterministic, and checked by promtool and cfn-lint.

Every alert of the catalog has a promtool unit test here: it fires at its threshold after its `for`,
is silent before that, is silent below the threshold, and is silent on stale data (its target down,
or its CloudWatch datapoint old) with the same inputs that fire it otherwise.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import cfn_lint, with_served_freshness
from tools import promtool

from exporter.alerts.catalog import DEFAULT_SOURCE, SOURCE_LABEL, load_catalog, one_source
from exporter.alerts.cloudformation import render_cloudformation
from exporter.alerts.prometheus import as_prometheus_rule, render_prometheus
from exporter.alerts.thresholds import ENGINE_CPU_FLOOR_PERCENT
from exporter.baselines.table import load_table

ROOT = Path(__file__).parent.parent
RULES = ROOT / "rules" / "prometheus" / "elasticache-exporter.rules.yml"
TEMPLATE = ROOT / "rules" / "cloudformation" / "elasticache-alarms.yaml"
PROMETHEUS_RULE = ROOT / "rules" / "prometheus-operator" / "elasticache-exporter.prometheusrule.yaml"
OURS = {SOURCE_LABEL: DEFAULT_SOURCE}  # the label every rendered alert carries


@pytest.mark.unit
def test_committed_outputs_are_up_to_date_and_deterministic():
    alerts, table = load_catalog(), load_table()
    assert render_prometheus(alerts, table) == render_prometheus(load_catalog(), load_table()) == RULES.read_text(), (
        "stale: run elasticache-exporter render prometheus --out rules/prometheus"
    )
    assert render_cloudformation(alerts, table) == TEMPLATE.read_text(), (
        "stale: run elasticache-exporter render cloudformation --out rules/cloudformation"
    )
    assert as_prometheus_rule(RULES.read_text()) == PROMETHEUS_RULE.read_text(), (
        "stale: run elasticache-exporter render prometheus-operator --out rules/prometheus-operator"
    )


def test_the_prometheus_rule_holds_exactly_the_rule_files_groups(tmp_path):
    rule = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert (rule["apiVersion"], rule["kind"], rule["metadata"]["name"]) == ("monitoring.coreos.com/v1", "PrometheusRule", "elasticache-exporter")
    assert set(rule) == {"apiVersion", "kind", "metadata", "spec"}
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    # what the operator hands Prometheus is spec as a rule file: promtool accepts it
    (tmp_path / "from-operator.yml").write_text(yaml.safe_dump(rule["spec"]))
    result = subprocess.run(
        [promtool(), "check", "rules", str(tmp_path / "from-operator.yml")], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_check_rules_with_every_lint():
    """Prometheus 3's promtool, every lint fatal (duplicate rules and whatever later releases add to ``all``)."""
    result = subprocess.run(
        [promtool(), "check", "rules", "--lint=all", "--lint-fatal", str(RULES)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    assert "version 3." in subprocess.run([promtool(), "--version"], capture_output=True, text=True, timeout=60, check=False).stdout


def test_cfn_lint_reports_nothing():
    result = subprocess.run([cfn_lint(), str(TEMPLATE)], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(loader, tag_suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {tag_suffix: value}


_CfnLoader.add_multi_constructor("!", _tag)


def _check_fixed_threshold_alarm(template: dict, logical: str, alarm: dict, node_types: list[str]) -> None:
    """An alarm on a metric only some node types publish is for those types only; the others are for every node."""
    limited = {
        "BurstCreditsLow&{NodeId}": ("NodeTypeIsCacheT", "cache.t"),
        "DataTieringFull&{NodeId}": ("NodeTypeIsCacheR6gd", "cache.r6gd."),
    }
    if alarm["Properties"].get("MetricName", "").startswith("NetworkBaselineUsage"):
        assert alarm["Condition"] == "NetworkAlarmsByPercentage", logical
        return
    if logical not in limited:
        assert "Condition" not in alarm, logical
        return
    condition, prefix = limited[logical]
    assert alarm["Condition"] == condition
    tested = {test["Equals"][1] for test in template["Conditions"][condition]["Or"]}
    assert tested == {node_type for node_type in node_types if node_type.startswith(prefix)}
    assert len(tested) >= 6


def _check_threshold(row: dict, key: str, properties: dict, table, node_type: str) -> None:
    """One node type's threshold of a baseline alarm is the table's level, in the alarm's statistic and period."""
    value = row[key]
    node = table.get(node_type)
    if key.startswith("NetworkBytesPerMinute"):
        level = int(key.removeprefix("NetworkBytesPerMinute"))
        assert properties["Statistic"] == "Sum"
        assert properties["Period"] == 60
        assert value == node.levels(table.basis)[level] * properties["Period"], (key, node_type)
    elif key.startswith("EngineCpuPercent"):
        level = int(key.removeprefix("EngineCpuPercent"))
        assert properties["Statistic"] == "Average"
        engine = node.measured.engine_cpu_utilization_p90 if node.measured and node.measured.engine_cpu_utilization_p90 else 90.0
        assert value == pytest.approx(max(engine * level / 100, ENGINE_CPU_FLOOR_PERCENT), abs=0.01)
        assert value >= ENGINE_CPU_FLOOR_PERCENT  # never where healthy nodes run
        assert row["EngineCpuBaseline"] == ("benchmarked" if engine != 90.0 else "aws-guidance")
    else:
        assert key == "HostCpuPercent"
        assert value == pytest.approx(90 / node.vcpus, abs=0.01)


@pytest.mark.unit
def test_network_alarms_are_aws_percentages_by_default_and_the_table_bytes_on_request():
    template = yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass for CloudFormation tags
    parameter = template["Parameters"]["NetworkAlarms"]
    assert (parameter["Default"], parameter["AllowedValues"]) == ("percentage", ["percentage", "bytes"])
    conditions = template["Conditions"]
    assert conditions["NetworkAlarmsByPercentage"] == {"Equals": [{"Ref": "NetworkAlarms"}, "percentage"]}
    assert conditions["NetworkAlarmsByBytes"] == {"And": [{"Condition": "HasBaseline"}, {"Equals": [{"Ref": "NetworkAlarms"}, "bytes"]}]}
    _, _, alarms = template["Resources"]["Fn::ForEach::NodeAlarms"]
    by_percentage = {
        logical: (alarm["Properties"]["MetricName"], alarm["Properties"]["Statistic"], alarm["Properties"]["Threshold"])
        for logical, alarm in alarms.items()
        if alarm.get("Condition") == "NetworkAlarmsByPercentage"
    }
    # one threshold for every node type: no mapping, no node-type condition
    assert by_percentage == {
        f"Network{word}{name}AWSBaseline&{{NodeId}}": (f"NetworkBaselineUsage{word}Percentage", "Average", level)
        for word in ("Out", "In")
        for name, level in (("Near", 80), ("At", 90), ("Over", 100))
    }
    by_bytes = [logical for logical, alarm in alarms.items() if alarm.get("Condition") == "NetworkAlarmsByBytes"]
    assert sorted(by_bytes) == sorted(f"Network{word}{name}Baseline&{{NodeId}}" for word in ("Out", "In") for name in ("Near", "At"))


@pytest.mark.unit
def test_every_threshold_resolves_to_the_baseline_in_the_alarms_statistic_and_period():
    template = yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass for CloudFormation tags
    table = load_table()
    node_types = template["Parameters"]["CacheNodeType"]["AllowedValues"]
    mapping = template["Mappings"]["BaselineThresholds"]
    assert node_types[-1] == "none"  # a node type without a baseline: the fixed-threshold alarms only
    node_types = node_types[:-1]
    assert sorted(node_types) == sorted(mapping)
    assert len(node_types) > 50
    assert template["Conditions"]["HasBaseline"] == {"Not": [{"Equals": [{"Ref": "CacheNodeType"}, "none"]}]}
    _, _, alarms = template["Resources"]["Fn::ForEach::NodeAlarms"]
    checked = 0
    for logical, alarm in alarms.items():
        properties = alarm["Properties"]
        threshold = properties["Threshold"]
        if not isinstance(threshold, dict):
            _check_fixed_threshold_alarm(template, logical, alarm, node_types)
            continue
        map_name, node_type_ref, key, default = threshold["FindInMap"]
        # the table's byte alarms for network are one family of two: the template's NetworkAlarms parameter chooses
        assert alarm["Condition"] == ("NetworkAlarmsByBytes" if key.startswith("NetworkBytesPerMinute") else "HasBaseline"), logical
        assert map_name == "BaselineThresholds"
        assert node_type_ref == {"Ref": "CacheNodeType"}
        assert default == {"DefaultValue": 0}
        for node_type in node_types:
            _check_threshold(mapping[node_type], key, properties, table, node_type)
            checked += 1
    assert checked >= 6 * len(node_types)
    r6g = mapping["cache.r6g.large"]
    assert r6g["NetworkBytesPerMinute80"] == 75_000_000 * 60
    assert r6g["HostCpuPercent"] == 45.0
    assert r6g["NetworkBaseline"] == "published"
    assert mapping["cache.m4.xlarge"]["EngineCpuPercent90"] == 65.0  # benchmarked 28.7 %: the floor, not 23 %
    assert mapping["cache.r4.large"]["NetworkBaseline"] == "published"


@pytest.mark.unit
def test_every_alarm_notifies_on_alarm_and_ok_and_one_a_node_on_insufficient_data():
    template = yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)  # noqa: S506
    _, _, alarms = template["Resources"]["Fn::ForEach::NodeAlarms"]
    catalog = {alert.name for alert in load_catalog() if alert.cloudwatch}
    assert {alarm["Properties"]["AlarmName"]["Sub"].removeprefix("${NodeId}-") for alarm in alarms.values()} == catalog
    descriptions = [alarm["Properties"]["AlarmDescription"] for alarm in alarms.values()]
    baseline_descriptions = [d["Sub"] for d in descriptions if isinstance(d, dict) and isinstance(d["Sub"], list)]
    assert len(baseline_descriptions) == 5
    assert any(isinstance(d, dict) and "vCPUs of ${CacheNodeType}" in d["Sub"] for d in descriptions)  # the host CPU alarm
    for text, values in baseline_descriptions:
        assert "${Baseline}" in text
        assert "${CacheNodeType}" in text
        assert values["Baseline"]["FindInMap"][2] in ("NetworkBaseline", "EngineCpuBaseline")
    for alarm in alarms.values():
        for actions in ("AlarmActions", "OKActions"):
            assert alarm["Properties"][actions]
    # a node gone or replaced leaves every alarm of it without data: one alarm a node says so, on a metric every node
    # publishes every minute, with no condition that could leave it out
    watching = [alarm for alarm in alarms.values() if "InsufficientDataActions" in alarm["Properties"]]
    assert [alarm["Properties"]["MetricName"] for alarm in watching] == ["EngineCPUUtilization"]
    assert "Condition" not in watching[0]


# --- promtool unit tests for every alert ---------------------------------------------------------------

R6G = {"node_type": "cache.r6g.large", "suggested_node_type": "cache.r6g.xlarge"}
T3 = {"node_type": "cache.t3.micro", "suggested_node_type": "cache.m6g.large"}


def series(name: str, **labels: str) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


# alert: (input series [(series, values)], eval time when firing, eval time when still quiet or None,
#         labels of the firing alert (besides severity), input series that must stay silent)
CASES: dict[str, tuple] = {}


def case(alert, inputs, fire_at, quiet_at, labels, silent):
    CASES[alert] = (inputs, fire_at, quiet_at, labels, silent)


def _baseline_case(alert, metric_labels, value_fraction, baseline, signal_name, node):
    labels = {**metric_labels, "node_type": node["node_type"]}
    node = {**node, "baseline": node.get("baseline", "published")}
    firing = f"{baseline * value_fraction:.0f}+0x20"
    below = f"{baseline * (value_fraction - 0.15):.0f}+0x20"
    return ([(series(signal_name, **labels), firing)], labels, [(series(signal_name, **{**labels, "instance": "quiet"}), below)])


for alert, direction, fraction, node, baseline in (
    ("ElastiCacheNetworkOutNearBaseline", "out", 0.85, R6G, 93_750_000),
    ("ElastiCacheNetworkOutAtBaseline", "out", 0.95, T3, 8_000_000),
    ("ElastiCacheNetworkInNearBaseline", "in", 0.85, T3, 8_000_000),
    ("ElastiCacheNetworkInAtBaseline", "in", 0.95, R6G, 93_750_000),
):
    inputs, labels, silent = _baseline_case(
        alert, {"instance": "a", "direction": direction, "source": "info"}, fraction, baseline, "elasticache_network_bytes_per_second", node
    )
    case(alert, inputs, "6m", "4m", {**labels, "suggested_node_type": node["suggested_node_type"], "baseline": "published"}, silent)
inputs, labels, silent = _baseline_case(
    "ElastiCacheEngineCPUNearBaseline", {"instance": "a", "source": "info"}, 0.95, 90, "elasticache_engine_cpu_utilization_percent", R6G
)
M4 = {"instance": "m4", "source": "cloudwatch", "node_type": "cache.m4.xlarge"}
silent.append((series("elasticache_engine_cpu_utilization_percent", **M4), "40+0x20"))  # 1.4x its benchmark, under the 65 % floor
case(
    "ElastiCacheEngineCPUNearBaseline",
    inputs,
    "16m",
    "14m",
    {**labels, "suggested_node_type": R6G["suggested_node_type"], "baseline": "aws-guidance"},
    silent,
)
CPU = {"instance": "a", "source": "info", "node_type": "cache.r6g.large"}
case(
    "ElastiCacheEngineCPUSaturated",
    [(series("elasticache_engine_cpu_utilization_percent", **CPU), "95+0x10")],
    "6m",
    "4m",
    CPU,
    [(series("elasticache_engine_cpu_utilization_percent", **{**CPU, "instance": "q"}), "80+0x10")],
)

CW = {"account_id": "111111111111", "dimension_CacheClusterId": "rg-001", "dimension_CacheNodeId": "0001", "region": "eu-west-1"}
RISING = "elasticache_cloudwatch_rising_minutes"


def served_window(values: list[float], poll_every: int, length: int) -> tuple[str, str]:
    """What the exporter serves each minute of a promtool test from a gauge's CloudWatch minutes (minute i there at
    minute i), polled every ``poll_every`` minutes: the window's lowest and highest, as promtool values."""
    from exporter.aws.minutes import WindowMinutes

    kept = WindowMinutes(length, poll_every)
    lowest, highest, now = [], [], None
    for minute in range(len(values)):
        if minute % poll_every == 0:
            now = kept.merge({60.0 * i: values[i] for i in range(minute + 1)})
        full = now is not None and now.lowest is not None and now.highest is not None
        lowest.append(f"{now.lowest:g}" if full else "_")
        highest.append(f"{now.highest:g}" if full else "_")
    return " ".join(lowest), " ".join(highest)


def window_case(
    alert: str,
    metric: str,
    length: int,
    held: float,
    other: float,
    below: bool = False,
    poll: int = 5,
    where: dict[str, str] = CW,
    joined: str | None = None,
) -> None:
    """A value past the threshold every minute fires at either poll interval (every minute, or every ``poll`` minutes,
    its tier's); one that leaves it one minute in every ``length`` (never held for the whole window, but past it at each
    minute a poller every ``poll`` minutes serves), or is past it only in the minutes such a poller samples (each held a
    whole poll), does not. ``joined``: the replication group the alert takes from the node's elasticache_node_info."""
    family = "elasticache_cloudwatch_window_highest" if below else "elasticache_cloudwatch_window_lowest"
    name_label = "dimension_clusterId" if "dimension_clusterId" in where else "dimension_CacheClusterId"
    first_full = -(-(length - 1) // poll) * poll  # the first poll that brings a full window held from minute 0
    minutes = first_full + 7
    firing, inputs, silent = [], [], []
    for every in (1, poll):
        for name, values, into in (
            ("held", [held] * minutes, inputs),
            ("broken", [other if m % length == length - 1 else held for m in range(minutes)], silent),
            ("sampled", [held if m % poll == 0 else other for m in range(minutes)], silent),
            ("calm", [other] * minutes, silent),
        ):
            labels = {**where, name_label: f"{name}-every-{every}m"}
            lowest, highest = served_window(values, every, length)
            into.append((series(family, **labels, metric=metric), highest if below else lowest))
            if joined is not None:
                into.append(
                    (series("elasticache_node_info", **labels, instance=labels[name_label], replication_group=joined, role="primary"), f"1x{minutes}")
                )
            if name == "held":
                firing.append(labels if joined is None else {**labels, "replication_group": joined, "instance": labels[name_label]})
    # held from minute 0: a full window from minute length-1 (every minute) or the first poll after it; none by minute 0
    case(alert, inputs, f"{first_full + 2}m", "0m", firing, silent)


window_case("ElastiCacheTrafficManagementActive", "aws_elasticache_traffic_management_active_maximum", 2, 1, 0)
window_case("ElastiCacheReplicationLag", "aws_elasticache_replication_lag_maximum", 5, 45, 3)
window_case("ElastiCacheDatabaseMemoryHigh", "aws_elasticache_database_memory_usage_percentage_maximum", 5, 95, 50)
window_case("ElastiCacheFreeableMemoryLow", "aws_elasticache_freeable_memory_minimum", 5, 5e7, 5e8, below=True)
window_case("ElastiCacheSwapUsageHigh", "aws_elasticache_swap_usage_maximum", 5, 6e7, 1000)
# the alerting tier, polled every 15 minutes: windows of 15
window_case("ElastiCacheEvictions", "aws_elasticache_evictions_sum", 15, 2000, 10, poll=15)
window_case("ElastiCacheTooManyConnections", "aws_elasticache_curr_connections_maximum", 15, 60000, 100, poll=15)
window_case("ElastiCacheMajorPageFaults", "aws_elasticache_major_page_faults_sum", 15, 5, 0, poll=15)
window_case(
    "ElastiCacheDataTieringFull",
    "aws_elasticache_database_capacity_usage_counted_for_evict_percentage_maximum",
    15,
    95,
    60,
    poll=15,
    where={**CW, "dimension_CacheClusterId": "archive-001"},
)
# a serverless cache's series, by its clusterId
window_case(
    "ElastiCacheServerlessThrottled",
    "aws_elasticache_throttled_cmds_sum",
    5,
    3,
    0,
    where={"account_id": "111111111111", "region": "eu-west-1", "dimension_clusterId": "carts"},
)
# durability (milliseconds): 5 s warns, 8 s pages; 6 s held pages nothing
DURABILITY_LAG = "aws_elasticache_durability_lag_maximum"
window_case("ElastiCacheDurabilityLag", DURABILITY_LAG, 5, 6000, 1000)
window_case("ElastiCacheDurabilityLagNearRejection", DURABILITY_LAG, 5, 9000, 6000)


def durability_buffer_case() -> None:
    """Writes rejected in one minute (8, which a poller every 5 minutes never serves as its newest: a gauge read at its
    polls shows 0 throughout) fire at either poll interval; rejected 12 minutes before, or never, they do not."""
    metric = "aws_elasticache_durability_buffer_exceeded_error_count_sum"
    firing, inputs, silent = [], [], []
    for every in (1, 5):
        for name, values, into in (
            ("rejected", [0.0] * 8 + [4.0] + [0.0] * 16, inputs),
            ("long-ago", [4.0] + [0.0] * 24, silent),
            ("calm", [0.0] * 25, silent),
        ):
            labels = {**CW, "dimension_CacheClusterId": f"{name}-every-{every}m"}
            lowest, _ = served_window(values, every, 1)
            into.append((series("elasticache_cloudwatch_window_lowest", **labels, metric=metric), lowest))
            if name == "rejected":
                firing.append(labels)
    # served from minute 8 (every minute) or 10 (the poll that brings minute 8): both fire at 12, neither by minute 6
    case("ElastiCacheDurabilityBufferExceeded", inputs, "12m", "6m", firing, silent)


durability_buffer_case()


def served_rising(values: list[float], poll_every: int) -> str:
    """What the exporter serves each minute of a promtool test from a counter's CloudWatch minutes (``values``, minute i
    there at minute i), polled every ``poll_every`` minutes: the rising minutes among the last 5 it holds."""
    from exporter.aws.minutes import RisingMinutes

    kept = RisingMinutes(poll_every)
    served, now = [], None
    for minute in range(len(values)):
        if minute % poll_every == 0:
            now = kept.merge({60.0 * i: values[i] for i in range(minute + 1)})
        served.append("_" if now is None else str(now.rising))
    return " ".join(served)


def rising_case(alert: str, metric: str, fire_at: str, quiet_at: str, minutes: int = 1) -> None:
    """A per-minute count above 0 in ``minutes`` minutes from minute 8 (which a poller every 5 minutes never serves as its
    newest) and a cumulative counter that grew in them: the alert fires at either poll interval; a counter that stays, at 0
    or not, does not, nor (``minutes`` above 1) one that rose in fewer minutes."""
    firing, inputs, silent = [], [], []
    for every in (1, 5):
        rose = [3.0 * (i + 1) for i in range(minutes)] + [0.0] * (12 - minutes)  # each minute's count above the one before
        grew = [9.0 + 3 * (i + 1) for i in range(minutes)] + [9.0 + 3 * minutes] * (12 - minutes)
        for shape, values in (("count", [0.0] * 8 + rose), ("cumulative", [9.0] * 8 + grew)):
            labels = {**CW, "dimension_CacheClusterId": f"{shape}-every-{every}m"}
            firing.append(labels)
            inputs.append((series(RISING, **labels, metric=metric), served_rising(values, every)))
        fewer = [("once", [0.0] * 8 + [3.0] * (minutes - 1) + [0.0] * (13 - minutes))] if minutes > 1 else []
        for name, values in (("calm", [0.0] * 20), ("steady", [7.0] * 20), *fewer):
            silent.append(
                (series(RISING, **{**CW, "dimension_CacheClusterId": f"{name}-every-{every}m"}, metric=metric), served_rising(values, every))
            )
    case(alert, inputs, fire_at, quiet_at, firing, silent)


# shaped in 2 of the last 5 minutes (one shaped minute pages no one, as in the CloudWatch alarm): counted from minute 9 to
# 13 (every minute) or 10 to 14 (every 5), firing at 12 either way, with no `for`
for alert, metric in (
    ("ElastiCacheBandwidthOutAllowanceExceeded", "aws_elasticache_network_bandwidth_out_allowance_exceeded_maximum"),
    ("ElastiCacheBandwidthInAllowanceExceeded", "aws_elasticache_network_bandwidth_in_allowance_exceeded_maximum"),
    ("ElastiCachePPSAllowanceExceeded", "aws_elasticache_network_packets_per_second_allowance_exceeded_maximum"),
    ("ElastiCacheConntrackAllowanceExceeded", "aws_elasticache_network_conntrack_allowance_exceeded_maximum"),
):
    rising_case(alert, metric, "12m", "6m", minutes=2)

T = {"instance": "a"}
case("RedisDown", [(series("redis_up", **T), "0+0x5")], "2m", "0m", T, [(series("redis_up", instance="q"), "1+0x5")])
case(  # scraped for half an hour, then gone from service discovery: absent 5 minutes on (Prometheus 3's lookback leaves
    # out a sample exactly 5 minutes old: absent from 34m), a page 10 minutes later
    "ElastiCacheExporterAbsent",
    [(series("elasticache_exporter_build_info", job="elasticache-exporter", instance="e:9769", version="1"), "1x29")],
    "44m",
    "43m",
    {},
    [(series("elasticache_exporter_build_info", job="elasticache-exporter", instance="e:9769", version="1"), "1x60")],
)
case(  # a read fails every 5 s until the first count, then every refresh (30 s): both keep the counter rising
    "ElastiCacheExporterShardCountUnread",
    [(series("elasticache_exporter_shard_count_read_errors_total", job="elasticache", instance="e-1:9769"), "0+2x30")],
    "12m",
    "10m",
    {"job": "elasticache", "instance": "e-1:9769"},
    [(series("elasticache_exporter_shard_count_read_errors_total", job="elasticache", instance="e-0:9769"), "3+0x30")],
)
case(
    "ElastiCacheExporterTargetDown",
    [(series("up", job="elasticache", instance="e:9769"), "0+0x10")],
    "6m",
    "4m",
    {"job": "elasticache", "instance": "e:9769"},
    [(series("up", job="elasticache", instance="q:9769"), "1+0x10")],
)


def member(target, role, shard, group="orders"):
    return series("elasticache_shard_member_info", instance=target, role=role, shard=shard, replication_group=group, shard_source="config")


def healthy_shards(shards: int, replicas: int, group: str = "orders") -> list[tuple[str, str]]:
    nodes = []
    for shard in range(1, shards + 1):
        nodes.append((member(f"{group}-{shard}-0", "master", f"{shard:04d}", group), "1+0x10"))
        nodes += [(member(f"{group}-{shard}-{r}", "slave", f"{shard:04d}", group), "1+0x10") for r in range(1, replicas + 1)]
    return nodes


# a cluster of 3 shards x 2 replicas, and a second group with the same shard names: healthy, nothing fires
HEALTHY = healthy_shards(3, 2) + healthy_shards(2, 1, "sessions")
case(
    "RedisMissingMaster",
    [(member("a", "slave", "0001"), "1+0x5"), (member("b", "master", "0002"), "1+0x5"), (member("c", "slave", "0002"), "1+0x5")],
    "2m",
    "0m",
    {"replication_group": "orders", "shard": "0001"},
    HEALTHY,
)
case(
    "RedisTooManyMasters",
    [(member("a", "master", "0001"), "1+0x5"), (member("b", "master", "0001"), "1+0x5"), (member("c", "master", "0002"), "1+0x5")],
    "2m",
    "0m",
    {"replication_group": "orders", "shard": "0001"},
    HEALTHY,
)
case(
    "RedisFailover",
    [
        (series("redis_instance_role", instance="a", role="slave"), " ".join(["1"] * 12 + ["_"] * 8)),
        (series("redis_instance_role", instance="a", role="master"), " ".join(["_"] * 12 + ["1"] * 8)),
    ],
    "13m",
    "11m",
    {"instance": "a", "role": "master"},
    [(series("redis_instance_role", instance="q", role="master"), "1+0x20")],
)
case(
    "ElastiCachePrimaryChanged",
    [(series("aws_elasticache_is_primary_maximum", **CW), "1 1 1 0 0 0")],
    "4m",
    "2m",
    CW,
    [(series("aws_elasticache_is_primary_maximum", **{**CW, "dimension_CacheClusterId": "q"}), "1+0x6")],
)
LINK = {"instance": "a", "master_host": "10.0.0.1", "master_port": "6379"}
case(
    "RedisMasterLinkDown",
    [(series("redis_master_link_up", **LINK), "0+0x5")],
    "3m",
    "1m",
    LINK,
    [(series("redis_master_link_up", **{**LINK, "instance": "q"}), "1+0x5")],
)
case(  # a replica gone at the first hour: pending 15 minutes, then a page; one that restarts within them never pages
    "RedisDisconnectedReplicas",
    [(series("redis_connected_slaves", **T), "2x59 1x60"), (series("redis_instance_role", **T, role="master"), "1x120")],
    "76m",
    "74m",
    T,
    [
        (series("redis_connected_slaves", instance="q"), "2x59 1x5 2x60"),
        (series("redis_connected_slaves", instance="r"), "2x120"),
        (series("redis_instance_role", instance="q", role="master"), "1x120"),
        (series("redis_instance_role", instance="r", role="master"), "1x120"),
    ],
)
case(
    "RedisReplicationFlapping",
    [(series("redis_connected_slaves", **T), "1 2 1 2 1 2 1 2 1 2")],
    "6m",
    "2m",
    T,
    [(series("redis_connected_slaves", instance="q"), "2+0x10")],
)
case(
    "RedisClusterStateNotOk",
    [(series("redis_cluster_state", **T), "0+0x10")],
    "6m",
    "4m",
    T,
    [(series("redis_cluster_state", instance="q"), "1+0x10")],
)
case(
    "RedisClusterSlotFail",
    [(series("redis_cluster_slots_fail", **T), "3+0x10")],
    "6m",
    "4m",
    T,
    [(series("redis_cluster_slots_fail", instance="q"), "0+0x10")],
)
case(
    "RedisClusterSlotPfail",
    [(series("redis_cluster_slots_pfail", **T), "3+0x10")],
    "6m",
    "4m",
    T,
    [(series("redis_cluster_slots_pfail", instance="q"), "0+0x10")],
)
HB = {"instance": "a", "source": "elasticache"}
case(
    "RedisReplicationHeartbeatLag",
    [(series("elasticache_replication_heartbeat_lag_seconds", **HB), "15+0x5")],
    "3m",
    "1m",
    HB,
    [(series("elasticache_replication_heartbeat_lag_seconds", **{**HB, "instance": "q"}), "5+0x5")],
)
case(
    "RedisReplicationHeartbeatStale",
    [(series("elasticache_replication_heartbeat_age_seconds", **HB), "120+0x10")],
    "6m",
    "4m",
    HB,
    [(series("elasticache_replication_heartbeat_age_seconds", **{**HB, "instance": "q"}), "1+0x10")],
)
BL = {"instance": "a", "slave_ip": "10.0.0.2", "slave_port": "6379"}
case(
    "RedisReplicationByteLag",
    [(series("elasticache_replication_lag_bytes", **BL), "20000000+0x10")],
    "6m",
    "4m",
    BL,
    [(series("elasticache_replication_lag_bytes", **{**BL, "instance": "q"}), "1000+0x10")],
)
case(
    "RedisOutOfConfiguredMaxmemory",
    [(series("redis_memory_used_bytes", **T), "95+0x5"), (series("redis_memory_max_bytes", **T), "100+0x5")],
    "3m",
    "1m",
    T,
    [
        (series("redis_memory_used_bytes", instance="q"), "50+0x5"),
        (series("redis_memory_max_bytes", instance="q"), "100+0x5"),
        (series("redis_memory_used_bytes", instance="z"), "50+0x5"),
        (series("redis_memory_max_bytes", instance="z"), "0+0x5"),
    ],
)
case(
    "RedisOutOfSystemMemory",
    [(series("redis_memory_used_bytes", **T), "95+0x5"), (series("redis_total_system_memory_bytes", **T), "100+0x5")],
    "3m",
    "1m",
    T,
    [(series("redis_memory_used_bytes", instance="q"), "50+0x5"), (series("redis_total_system_memory_bytes", instance="q"), "100+0x5")],
)
case(
    "RedisEvictions",
    [(series("redis_evicted_keys_total", **T), "0+60x15")],
    "7m",
    "4m",
    T,
    [(series("redis_evicted_keys_total", instance="q"), "5+0x15")],
)
case(
    "RedisForkSlow",
    [(series("redis_latest_fork_seconds", **T), "2+0x3")],
    "1m",
    None,
    T,
    [(series("redis_latest_fork_seconds", instance="q"), "0.1+0x3")],
)
case(
    "RedisMissingBackup",
    [(series("redis_rdb_last_save_timestamp_seconds", **T), "-200000+0x5"), (series("redis_rdb_last_bgsave_status", **T), "0+0x5")],
    "2m",
    None,
    T,
    [(series("redis_rdb_last_save_timestamp_seconds", instance="q"), "0+0x5"), (series("redis_rdb_last_bgsave_status", instance="q"), "1+0x5")],
)
NODE = {
    **CW,
    "instance": "rg-001",
    "node": "rg-001",
    "node_type": "cache.r6g.large",
    "replication_group": "rg",
    "shard": "0001",
    "role": "primary",
    "engine": "redis",
    "engine_version": "7.1",
    "az": "eu-west-1a",
}
OTHER_ACCOUNT = {"account_id": "222222222222", "instance": "222222222222/eu-west-1/rg-001", "node_type": "cache.r6g.4xlarge"}
HOST_CPU, CPU_WINDOW = "aws_elasticache_cpuutilization_average", "elasticache_cloudwatch_window_lowest"


def host_cpu_inputs(cw: dict[str, str], node: dict[str, str], values: list[float]) -> list[tuple[str, str]]:
    """A node's CPUUtilization minutes as a poller every minute and one every 5 serve its window of 10 (two nodes)."""
    inputs = []
    for every in (1, 5):
        labels = {**cw, "dimension_CacheClusterId": f"{cw['dimension_CacheClusterId']}-every-{every}m"}
        inputs.append((series(CPU_WINDOW, **labels, metric=HOST_CPU), served_window(values, every, 10)[0]))
        inputs.append((series("elasticache_node_info", **{**node, **labels}), "1+0x15"))
    return inputs


case(
    "ElastiCacheHostCPUHigh",
    # above 45 % (90 % over 2 vCPUs) every minute: a full window of 10 at minute 9 (every minute) or 10 (every 5)
    host_cpu_inputs(CW, NODE, [50.0] * 16)
    # the same CacheClusterId in another account, a larger node type, idle: joined to its own node_info only
    + host_cpu_inputs({**CW, "account_id": "222222222222"}, {**NODE, **OTHER_ACCOUNT}, [5.0] * 16),
    "11m",
    "8m",
    # named as the Redis side names the node: its instance, group and shard from its elasticache_node_info
    [
        {
            **CW,
            "dimension_CacheClusterId": f"rg-001-every-{every}m",
            "node_type": "cache.r6g.large",
            "instance": "rg-001",
            "replication_group": "rg",
            "shard": "0001",
        }
        for every in (1, 5)
    ],
    # under it one minute in 10: never held for the whole window, though a 5-minute poller serves minutes above it
    host_cpu_inputs(
        {**CW, "dimension_CacheClusterId": "q"}, {**NODE, "instance": "q", "node": "q"}, [40.0 if m % 10 == 9 else 50.0 for m in range(16)]
    ),
)
case(
    "RedisTooManyConnections",
    [(series("redis_connected_clients", **T), "95+0x5"), (series("redis_config_maxclients", **T), "100+0x5")],
    "3m",
    "1m",
    T,
    [(series("redis_connected_clients", instance="q"), "10+0x5"), (series("redis_config_maxclients", instance="q"), "100+0x5")],
)
case(
    "RedisNotEnoughConnections",
    [(series("redis_connected_clients", **T), "20 20 20 2 2 2 2 2 2 2 2 2"), (series("redis_instance_role", instance="a", role="master"), "1+0x12")],
    "9m",
    "7m",
    T,
    [
        (series("redis_connected_clients", instance="replica"), "20 20 20 2 2 2 2 2 2 2 2 2"),
        (series("redis_instance_role", instance="replica", role="slave"), "1+0x12"),
        (series("redis_connected_clients", instance="unused"), "1+0x12"),
        (series("redis_instance_role", instance="unused", role="master"), "1+0x12"),
    ],
)
case(
    "RedisRejectedConnections",
    [(series("redis_rejected_connections_total", **T), "0 0 5 5")],
    "2m",
    None,
    T,
    [(series("redis_rejected_connections_total", instance="q"), "3+0x4")],
)
T4G = {**CW, "dimension_CacheClusterId": "carts-001"}
CREDITS, CPU_AVG = "aws_elasticache_cpucredit_balance_minimum", "aws_elasticache_cpuutilization_average"
case(
    "ElastiCacheBurstCreditsLow",
    [(series(CREDITS, **T4G), "3+0x20"), (series(CPU_AVG, **T4G), "35+0x20")],
    "16m",
    "14m",
    T4G,
    [
        (series(CREDITS, **{**T4G, "dimension_CacheClusterId": "idle"}), "3+0x20"),
        (series(CPU_AVG, **{**T4G, "dimension_CacheClusterId": "idle"}), "8+0x20"),
        (series(CREDITS, **{**T4G, "dimension_CacheClusterId": "rich"}), "120+0x20"),
        (series(CPU_AVG, **{**T4G, "dimension_CacheClusterId": "rich"}), "60+0x20"),
    ],
)
EVENT = {"account_id": "111111111111", "region": "eu-west-1", "source_type": "cache-cluster", "source_id": "orders-0001-001"}
LAST_EVENT = "elasticache_event_last_timestamp_seconds"
for alert, category, other in (
    ("ElastiCacheFailover", "failover", "node_replaced"),
    ("ElastiCacheNodeReplaced", "node_replaced", "failover"),
    ("ElastiCacheGlobalFailover", "global_failover", "failover"),
    ("ElastiCacheMaintenanceUnderWay", "maintenance", "failover"),
):
    # an event of now (promtool's time() is the evaluation time: +60 a minute), one 83 minutes old, one of another category
    case(
        alert,
        [(series(LAST_EVENT, **EVENT, category=category), "0+60x40")],
        "5m",
        None,
        {**EVENT, "category": category},
        [
            (series(LAST_EVENT, **{**EVENT, "source_id": "old"}, category=category), "-5000+0x40"),
            (series(LAST_EVENT, **EVENT, category=other), "0+60x40"),
        ],
    )
UPDATE = {"account_id": "111111111111", "region": "eu-west-1", "replication_group": "orders", "service_update": "elasticache-20261101-001"}
APPLY_BY, INFO = "elasticache_service_update_apply_by_timestamp_seconds", "elasticache_service_update_info"
case(
    "ElastiCacheServiceUpdateDue",
    [
        (series(APPLY_BY, **UPDATE), f"{3 * 86400}+0x40"),
        (series(INFO, **UPDATE, severity="critical", update_type="security-update", status="not-applied"), "1+0x40"),
    ],
    "11m",
    "9m",
    UPDATE,
    [
        (series(APPLY_BY, **{**UPDATE, "replication_group": "low"}), f"{3 * 86400}+0x40"),
        (series(INFO, **{**UPDATE, "replication_group": "low"}, severity="low", update_type="security-update", status="not-applied"), "1+0x40"),
        (series(APPLY_BY, **{**UPDATE, "replication_group": "later"}), f"{30 * 86400}+0x40"),
        (
            series(INFO, **{**UPDATE, "replication_group": "later"}, severity="important", update_type="security-update", status="not-applied"),
            "1+0x40",
        ),
    ],
)
GLOBAL_LAG = "aws_elasticache_global_datastore_replication_lag_maximum"
SECONDARY = {**CW, "dimension_CacheClusterId": "orders-euw1-001"}


window_case("ElastiCacheGlobalDatastoreReplicationLag", GLOBAL_LAG, 5, 25, 3, where=SECONDARY, joined="orders-euw1")
GDS = {"account_id": "111111111111", "global_replication_group": "ldgnf-orders"}
case(
    "ElastiCacheGlobalDatastoreSecondaryMissing",
    [(series("elasticache_global_datastore_members", **GDS, role="secondary"), "0+0x30")],
    "16m",
    "14m",
    {**GDS, "role": "secondary"},
    [
        (series("elasticache_global_datastore_members", **{**GDS, "global_replication_group": "ldgnf-carts"}, role="secondary"), "1+0x30"),
        (series("elasticache_global_datastore_members", **{**GDS, "global_replication_group": "ldgnf-carts"}, role="primary"), "0+0x30"),
    ],
)
MEMBER = {**GDS, "replication_group": "orders-apse1", "region": "ap-southeast-1", "role": "secondary"}
case(
    "ElastiCacheGlobalDatastoreMemberNotAssociated",
    [(series("elasticache_global_datastore_member_associated", **MEMBER), "0+0x30")],
    "16m",
    "14m",
    MEMBER,
    [
        (series("elasticache_global_datastore_member_associated", **{**MEMBER, "replication_group": "orders-euw1"}), "1+0x30"),
        (series("elasticache_global_datastore_member_associated", **{**MEMBER, "replication_group": "orders-use1"}), "0x5 1x20"),
    ],
)
SUPPORT_END, UPGRADE = "elasticache_engine_support_end_timestamp_seconds", "elasticache_engine_support_upgrade_info"


def _engine(group: str, version: str, standard_end: int, upgrade_to: str = "valkey 8") -> list[tuple[str, str]]:
    """A cluster's end of standard support (seconds after the test's start: promtool's time() counts from 0) and the
    version to move to."""
    where = {"account_id": "111111111111", "region": "eu-west-1", "replication_group": group, "engine": "redis", "engine_version": version}
    return [(series(SUPPORT_END, **where, phase="standard"), f"{standard_end}+0x90"), (series(UPGRADE, **where, upgrade_to=upgrade_to), "1+0x90")]


ENDING = {"account_id": "111111111111", "region": "eu-west-1", "replication_group": "mid", "engine": "redis", "engine_version": "6.2.6"}
case(
    "ElastiCacheEngineStandardSupportEnding",
    _engine("mid", "6.2.6", 60 * 86400),
    "61m",
    "59m",
    {**ENDING, "phase": "standard", "upgrade_to": "valkey 8"},
    [*_engine("new", "6.2.6", 120 * 86400), *_engine("old", "5.0.6", -300 * 86400)],
)
case(
    "ElastiCacheEngineOnExtendedSupport",
    _engine("old", "5.0.6", -300 * 86400),
    "61m",
    "59m",
    {**ENDING, "replication_group": "old", "engine_version": "5.0.6", "phase": "standard", "upgrade_to": "valkey 8"},
    [*_engine("mid", "6.2.6", 60 * 86400)],
)
GROUP = {"account_id": "111111111111", "region": "eu-west-1", "replication_group": "orders"}
WINDOW, NODE = "elasticache_maintenance_window_next_start_timestamp_seconds", "elasticache_node_info"


def _group(name: str, window_in: int, replica: tuple[str, str] | None) -> list[tuple[str, str]]:
    """A group's window (starting ``window_in`` seconds after the test's start), its primary, and its replica with
    (link up, heartbeat lag) values, if it has one."""
    where = {**GROUP, "replication_group": name}
    inputs = [(series(WINDOW, **where), f"{window_in}+0x40"), (series(NODE, **where, shard="0001", role="primary", instance=f"{name}-001"), "1+0x40")]
    if replica is not None:
        inputs += [
            (series(NODE, **where, shard="0001", role="replica", instance=f"{name}-002"), "1+0x40"),
            (series("redis_master_link_up", instance=f"{name}-002"), replica[0]),
            (series("elasticache_replication_heartbeat_lag_seconds", instance=f"{name}-002", source="elasticache"), replica[1]),
        ]
    return inputs


# its only replica lags 30 s; a group with a healthy replica, one whose window is 3 days away, and one without a
# replica but far from its window stay quiet
STANDALONE = {"account_id": "111111111111", "region": "eu-west-1", "replication_group": "legacy-001"}
# a cluster outside any replication group: its window series names it as its group, its node info has none
standalone = [
    (series(WINDOW, **STANDALONE), f"{3600 * 5}+0x40"),
    (series(NODE, **{**STANDALONE, "replication_group": ""}, node="legacy-001", shard="", role="", instance="legacy-001"), "1+0x40"),
]
case(
    "ElastiCacheMaintenanceAtRisk",
    _group("orders", 3600 * 5, ("1+0x40", "30+0x40")) + standalone,
    "16m",
    "14m",
    [GROUP, STANDALONE],
    _group("carts", 3600 * 5, ("1+0x40", "0.5+0x40")) + _group("later", 3 * 86400, ("0+0x40", "30+0x40")) + _group("single", 86400 * 2, None),
)
LOGGED = "elasticache_commandlog_last_id"
case(
    "RedisLargeRepliesBurst",
    [(series(LOGGED, instance="a", log="large-reply"), "0+120x20")],
    "14m",
    "10m",
    {"instance": "a", "log": "large-reply"},
    [
        (series(LOGGED, instance="q", log="large-reply"), "0+30x20"),  # half a reply a second
        (series(LOGGED, instance="a", log="large-request"), "0+120x20"),
        (series(LOGGED, instance="full", log="large-reply"), "128+0x20"),
    ],
)
LEAK = {"instance": "a", "client_name": "orders-api"}
CONNECTED = "elasticache_clients_connected"
case(
    "RedisClientConnectionLeak",
    [
        (series(CONNECTED, **LEAK), "100+20x90"),
        (series("redis_connected_clients", instance="a"), "8500+0x90"),
        (series("redis_config_maxclients", instance="a"), "10000+0x90"),
    ],
    "75m",
    "55m",
    LEAK,
    [
        (series(CONNECTED, instance="a", client_name="cron"), " ".join(["100 200 300 400 500 0"] * 16)),  # grows, then drops: a cycle
        (series(CONNECTED, instance="calm", client_name="orders-api"), "100+20x90"),  # grows, far from maxclients
        (series("redis_connected_clients", instance="calm"), "2000+0x90"),
        (series("redis_config_maxclients", instance="calm"), "10000+0x90"),
    ],
)
EXPIRING, DB = "elasticache_keyspace_expiring_keys", {"instance": "a", "db": "db0"}
case(
    "RedisExpiryWave",
    [
        (series(EXPIRING, **DB, within="5m"), "60000+0x5"),
        (series(EXPIRING, **DB, within="1m"), "50000+0x5"),
        (series("redis_db_keys", **DB), "100000+0x5"),
    ],
    "1m",
    None,
    DB,
    [
        (series(EXPIRING, instance="steady", db="db0", within="5m"), "90000+0x5"),  # short TTLs spread evenly: a fifth each minute
        (series(EXPIRING, instance="steady", db="db0", within="1m"), "18000+0x5"),
        (series("redis_db_keys", instance="steady", db="db0"), "100000+0x5"),
        (series(EXPIRING, instance="few", db="db0", within="5m"), "10000+0x5"),
        (series(EXPIRING, instance="few", db="db0", within="1m"), "9000+0x5"),
        (series("redis_db_keys", instance="few", db="db0"), "100000+0x5"),
    ],
)
PREFIX = {"instance": "a", "db": "db0", "prefix": "session:user"}
case(
    "RedisPrefixWithoutTtlHoldsMemory",
    [
        (series("elasticache_keyspace_prefix_memory_bytes", **PREFIX), "8000000+0x80"),
        (series("elasticache_keyspace_prefix_keys_without_ttl", **PREFIX), "900+0x80"),
        (series("elasticache_keyspace_prefix_keys", **PREFIX), "1000+0x80"),
        (series("redis_memory_used_bytes", instance="a"), "10000000+0x80"),
    ],
    "61m",
    "59m",
    PREFIX,
    [
        (series("elasticache_keyspace_prefix_memory_bytes", **{**PREFIX, "prefix": "cache"}), "8000000+0x80"),  # has TTLs
        (series("elasticache_keyspace_prefix_keys_without_ttl", **{**PREFIX, "prefix": "cache"}), "0+0x80"),
        (series("elasticache_keyspace_prefix_keys", **{**PREFIX, "prefix": "cache"}), "1000+0x80"),
    ],
)
IDLE = "elasticache_clients_idle"
case(
    "RedisIdleConnectionsHoldMaxclients",
    [
        (series(IDLE, instance="a", client_name="cron", idle="10m"), "4000+0x40"),
        (series(IDLE, instance="a", client_name="api", idle="10m"), "2000+0x40"),
        (series(IDLE, instance="a", client_name="api", idle="1m"), "9000+0x40"),
        (series("redis_config_maxclients", instance="a"), "10000+0x40"),
    ],
    "31m",
    "29m",
    {"instance": "a"},
    [
        (series(IDLE, instance="q", client_name="cron", idle="10m"), "3000+0x40"),
        (series(IDLE, instance="q", client_name="cron", idle="1m"), "9000+0x40"),
        (series("redis_config_maxclients", instance="q"), "10000+0x40"),
    ],
)
Q = {"instance": "a", "db": "db0", "key": "queue:jobs"}
LIMIT = "elasticache_exporter_queue_length_limit"
case(
    "RedisQueueTooLong",
    [(series("redis_key_size", **Q), "20000+0x10"), (series(LIMIT, **Q), "10000+0x10")],
    "6m",
    "4m",
    Q,
    [
        (series("redis_key_size", **{**Q, "key": "queue:low"}), "500+0x10"),
        (series(LIMIT, **{**Q, "key": "queue:low"}), "10000+0x10"),
        (series("redis_key_size", **{**Q, "key": "queue:nolimit"}), "20000+0x10"),
        (series(LIMIT, **{**Q, "key": "queue:nolimit"}), "Inf+0x10"),
        (series("redis_key_size", **{**Q, "key": "not-a-queue"}), "20000+0x10"),
    ],
)
case(
    "RedisQueueGrowing",
    [(series("redis_key_size", **Q), "0+10x30"), (series(LIMIT, **Q), "Inf+0x30")],
    "21m",
    "14m",
    Q,
    [
        (series("redis_key_size", **{**Q, "key": "a-set"}), "0+10x30"),  # grows, and is no queue
        (series("redis_key_size", **{**Q, "key": "queue:steady"}), "500+0x30"),
        (series(LIMIT, **{**Q, "key": "queue:steady"}), "Inf+0x30"),
        (series("redis_key_size", **{**Q, "key": "queue:busy"}), " ".join(["100 200 300 400 500 600 0"] * 5)),
        (series(LIMIT, **{**Q, "key": "queue:busy"}), "Inf+0x35"),
    ],
)
G = {"instance": "a", "db": "db0", "stream": "events", "group": "billing"}
case(
    "RedisStreamGroupFallingBehind",
    [(series("redis_stream_group_lag", **G), "0+5x30")],
    "21m",
    "14m",
    G,
    [
        (series("redis_stream_group_lag", **{**G, "group": "steady"}), "100+0x30"),
        (series("redis_stream_group_lag", **{**G, "group": "drains"}), " ".join(["0 50 100 150 200 250 300 0"] * 4)),
    ],
)
SL = {"account_id": "111111111111", "region": "eu-west-1", "cache": "carts"}
for alert, ratio in (
    ("ElastiCacheServerlessECPUNearLimit", "elasticache_serverless_ecpu_utilization_ratio"),
    ("ElastiCacheServerlessStorageNearLimit", "elasticache_serverless_data_storage_utilization_ratio"),
):
    # the same cache name in another account, under its own limit, stays quiet
    case(
        alert,
        [(series(ratio, **SL), "0.85+0x20")],
        "16m",
        "14m",
        SL,
        [(series(ratio, **{**SL, "account_id": "222222222222"}), "0.75+0x20"), (series(ratio, **{**SL, "cache": "gone"}), "0.9 0.9 _ _")],
    )
# AWS's own view of the node: served only while fresh, so no guard
AWSN = {"instance": "rg-001", "node_type": "cache.r6g.large"}
USAGE, PEAK = "elasticache_network_aws_baseline_usage_ratio", "elasticache_network_aws_baseline_peak_usage_ratio"
SUSTAINED, HELD = "elasticache_network_aws_baseline_sustained_min_usage_ratio", "elasticache_network_aws_baseline_sustained_minutes"


def served_sustained(percents: list[float], poll_every: int) -> tuple[str, str]:
    """What the exporter serves each minute of a promtool test from one CloudWatch minute a minute (``percents``): its
    poller, every ``poll_every`` minutes, brings every minute since its last poll (minute i is there at minute i); the
    15-minute window of what it holds, as promtool values (``_`` before the first poll brings a minute)."""
    from exporter.aws.minutes import BurstMinutes

    kept = BurstMinutes(poll_every)
    lowest, held = [], []
    window = None
    for minute in range(len(percents)):
        if minute % poll_every == 0:
            kept.merge({}, {60.0 * i: percents[i] for i in range(minute + 1)})
            window = kept.sustained()
        lowest.append("_" if window is None else f"{window.min_usage_percent / 100:g}")
        held.append("_" if window is None else str(window.minutes))
    return " ".join(lowest), " ".join(held)


def sustained_inputs(labels: dict[str, str], percents: list[float], poll_every: int) -> list[tuple[str, str]]:
    lowest, held = served_sustained(percents, poll_every)
    return [(series(SUSTAINED, **labels), lowest), (series(HELD, **labels), held)]


for alert, direction, level in (
    ("ElastiCacheNetworkOutNearAWSBaseline", "out", 0.8),
    ("ElastiCacheNetworkOutAtAWSBaseline", "out", 0.9),
    ("ElastiCacheNetworkOutOverAWSBaseline", "out", 1.0),
    ("ElastiCacheNetworkInNearAWSBaseline", "in", 0.8),
    ("ElastiCacheNetworkInAtAWSBaseline", "in", 0.9),
    ("ElastiCacheNetworkInOverAWSBaseline", "in", 1.0),
):
    other = "in" if direction == "out" else "out"
    above, below = 100 * level + 5, 100 * level - 5
    # one minute under the level, at minute 12: a poller every 5 minutes never serves it as its newest minute, but
    # holds it: the alert waits for 15 minutes without it, at either poll interval
    dip = [above] * 12 + [below] + [above] * 17
    firing, silent = [], []
    for every in (1, 5):
        labels = {**AWSN, "instance": f"polled-every-{every}m", "direction": direction}
        firing.append(labels)
        firing_inputs = sustained_inputs(labels, [above] * 30, every)
        silent += sustained_inputs({**labels, "instance": f"calm-{every}m"}, [below] * 30, every)
        silent += sustained_inputs({**labels, "direction": other}, [above] * 30, every)
        silent += sustained_inputs({**labels, "instance": f"dip-{every}m"}, dip, every)
        # the table's alert of the same severity tells it (10 minutes earlier): silent; where the table's does not fire
        # (its baseline off for this node type, or its source reading less), AWS's alert speaks
        extra_firing = []
        for name, ratio, speaks in (("told", min(level, 0.9) + 0.05, False), ("table-off", 0.5, True)):
            node = {**labels, "instance": f"{name}-{every}m"}
            node_inputs = sustained_inputs(node, [above] * 30, every)
            traffic = {"instance": node["instance"], "direction": direction, "source": "cloudwatch", "node_type": "cache.r6g.large"}
            node_inputs.append((series("elasticache_network_bytes_per_second", **traffic), f"{ratio * 93_750_000:.0f}+0x30"))
            if speaks:
                firing.append(node)
                extra_firing += node_inputs
            else:
                silent += node_inputs
        if every == 1:
            inputs = firing_inputs + extra_firing
        else:
            inputs += firing_inputs + extra_firing
    # 15 minutes held (0 to 14) at minute 14 when polled every minute, at minute 15 every 5: neither before minute 14
    case(alert, inputs, "16m", "13m", firing, silent)
BURST = {**AWSN, "direction": "out"}
BURSTS, WINDOW_USAGE = "elasticache_network_aws_baseline_burst_minutes", "elasticache_network_aws_baseline_window_max_usage_ratio"
case(
    "ElastiCacheNetworkMicrobursts",
    # one more of the last 10 CloudWatch minutes bursts each minute (counted by the exporter), the minute averages at most 70 %
    [(series(BURSTS, **BURST), "0+1x15"), (series(WINDOW_USAGE, **BURST), "0.7+0x15")],
    "5m",
    "4m",
    BURST,
    [
        # steady at 70 %, its busiest seconds under the baseline: nothing bursts
        (series(BURSTS, **{**BURST, "instance": "steady"}), "0+0x15"),
        (series(WINDOW_USAGE, **{**BURST, "instance": "steady"}), "0.7+0x15"),
        # bursting, but a minute's average is at 85 %: the average-based alerts speak for it
        (series(BURSTS, **{**BURST, "instance": "busy"}), "6+0x15"),
        (series(WINDOW_USAGE, **{**BURST, "instance": "busy"}), "0.85+0x15"),
    ],
)
case(
    "ElastiCacheRejectedConnections",
    [(series("aws_elasticache_rejected_connections_sum", **CW), "0 0 0 3 0 0 0 0")],
    "3m",
    "2m",
    CW,
    [(series("aws_elasticache_rejected_connections_sum", **{**CW, "dimension_CacheClusterId": "calm"}), "0+0x8")],
)
FRAG_CW = {"account_id": "111111111111", "region": "eu-west-1", "dimension_CacheClusterId": "rg-001", "dimension_CacheNodeId": "0001"}
FRAG_RATIO = "aws_elasticache_allocator_fragmentation_ratio_maximum"
case(
    "RedisAllocatorFragmentation",
    [
        # a node CloudWatch reports on (its INFO, also scraped, does not make a second alert)
        (series(FRAG_RATIO, **FRAG_CW), "1.8+0x40"),
        (series("aws_elasticache_allocator_fragmentation_bytes_maximum", **FRAG_CW), "500000000+0x40"),
        (series("elasticache_cloudwatch_datapoint_timestamp_seconds", **FRAG_CW, metric=FRAG_RATIO), "0+60x40"),
        (series("elasticache_node_info", **FRAG_CW, instance="rg-001", node_type="cache.r6g.large"), "1+0x40"),
        (series("redis_allocator_frag_ratio", instance="rg-001"), "2+0x40"),
        (series("redis_allocator_frag_bytes", instance="rg-001"), "600000000+0x40"),
        (series("redis_up", instance="rg-001"), "1+0x40"),
        # a self-managed node: INFO alone
        (series("redis_allocator_frag_ratio", instance="self"), "1.7+0x40"),
        (series("redis_allocator_frag_bytes", instance="self"), "300000000+0x40"),
        (series("redis_up", instance="self"), "1+0x40"),
    ],
    "31m",
    "29m",
    [{**FRAG_CW, "instance": "rg-001"}, {"instance": "self"}],
    [
        (series("redis_allocator_frag_ratio", instance="small"), "3+0x40"),  # fragmented, but under 256 MiB
        (series("redis_allocator_frag_bytes", instance="small"), "100000000+0x40"),
        (series("redis_up", instance="small"), "1+0x40"),
        (series("redis_allocator_frag_ratio", instance="dense"), "1.3+0x40"),  # much memory, a ratio under 1.5
        (series("redis_allocator_frag_bytes", instance="dense"), "1000000000+0x40"),
        (series("redis_up", instance="dense"), "1+0x40"),
        (series("redis_allocator_frag_ratio", instance="down"), "2+0x40"),  # its last values, while it is down
        (series("redis_allocator_frag_bytes", instance="down"), "600000000+0x40"),
        (series("redis_up", instance="down"), "0+0x40"),
        (series(FRAG_RATIO, **{**FRAG_CW, "dimension_CacheClusterId": "old"}), "1.8+0x40"),  # an old datapoint
        (series("aws_elasticache_allocator_fragmentation_bytes_maximum", **{**FRAG_CW, "dimension_CacheClusterId": "old"}), "5e8+0x40"),
        (
            series("elasticache_cloudwatch_datapoint_timestamp_seconds", **{**FRAG_CW, "dimension_CacheClusterId": "old"}, metric=FRAG_RATIO),
            "-1000+0x40",
        ),
        (series("elasticache_node_info", **{**FRAG_CW, "dimension_CacheClusterId": "old"}, instance="old"), "1+0x40"),
    ],
)

BUCKET = "redis_commands_latencies_usec_bucket"


def _latency_histogram(instance: str, cmd: str, slow: bool) -> list[tuple[str, str]]:
    """100 calls a minute, all under 1 ms, or all between 1 ms and 100 ms (a p99 near 99 ms)."""
    low = "0+100x40" if not slow else "0+0x40"
    return [
        (series(BUCKET, instance=instance, cmd=cmd, le="1000"), low),
        (series(BUCKET, instance=instance, cmd=cmd, le="100000"), "0+100x40"),
        (series(BUCKET, instance=instance, cmd=cmd, le="+Inf"), "0+100x40"),
    ]


ENGINE = "elasticache_engine_cpu_utilization_percent"
BENCH = "elasticache:baseline_command_p99_seconds"
case(
    "RedisCommandLatencyAboveBenchmark",
    [
        *_latency_histogram("a", "get", slow=True),
        (series(ENGINE, instance="a", source="info", node_type="cache.r6g.large"), "30+0x40"),
        (series(BENCH, node_type="cache.r6g.large", command_class="read"), "0.0008+0x40"),  # as a table with latency renders it
    ],
    "16m",
    "9m",  # the rate has samples from the first minute; 10 minutes of `for` after that
    {"instance": "a", "cmd": "get", "command_class": "read", "node_type": "cache.r6g.large"},
    [
        *_latency_histogram("quick", "get", slow=False),
        (series(ENGINE, instance="quick", source="info", node_type="cache.r6g.large"), "30+0x40"),
        # slow, but its node type's benchmark p99 was 50 ms: 10 times that is 500 ms
        *_latency_histogram("tolerant", "get", slow=True),
        (series(ENGINE, instance="tolerant", source="info", node_type="cache.m5.large"), "30+0x40"),
        (series(BENCH, node_type="cache.m5.large", command_class="read"), "0.05+0x40"),
    ],
)
case(
    "RedisCommandLatencyHigh",
    [*_latency_histogram("b", "set", slow=True), (series(ENGINE, instance="b", source="info", node_type="cache.z9.huge"), "30+0x40")],
    "16m",
    "9m",
    {"instance": "b", "cmd": "set", "command_class": "write"},
    [
        *_latency_histogram("quick", "set", slow=False),
        # slow too, but its node type has a benchmark latency: the alert above speaks for it
        *_latency_histogram("benchmarked", "set", slow=True),
        (series(ENGINE, instance="benchmarked", source="info", node_type="cache.r6g.large"), "30+0x40"),
        (series(BENCH, node_type="cache.r6g.large", command_class="write"), "0.0009+0x40"),
    ],
)
HITS, MISSES = "redis_keyspace_hits_total", "redis_keyspace_misses_total"
ARMED = [(series("elasticache:hit_ratio_min"), "0.8+0x40"), (series("elasticache:miss_rate_min"), "10+0x40")]
case(
    "RedisCacheHitRateLow",
    # 1,200 hits and 1,800 misses a minute: a ratio of 0.4, 30 misses a second
    [(series(HITS, instance="a"), "0+1200x40"), (series(MISSES, instance="a"), "0+1800x40"), *ARMED],
    "26m",
    "14m",
    {"instance": "a"},
    [
        (series(HITS, instance="few"), "0+12x40"),  # the same ratio, 0.3 misses a second: too few to matter
        (series(MISSES, instance="few"), "0+18x40"),
        (series(HITS, instance="good"), "0+9000x40"),  # 30 misses a second, but 0.83 of reads hit
        (series(MISSES, instance="good"), "0+1800x40"),
    ],
)

OVER_MEAN = "elasticache_cluster_shard_load_over_mean"


def _shard(group: str, shard: str, over_mean: str, node: str, engine_cpu: str | None = None) -> list[tuple[str, str]]:
    """A shard's CPU load over the mean shard's and, where given, its primary's engine CPU (percent)."""
    inputs = [(series(OVER_MEAN, replication_group=group, shard=shard, resource="cpu"), f"{over_mean}+0x40")]
    if engine_cpu is not None:
        member = {"instance": node, "replication_group": group, "shard": shard, "role": "master", "shard_source": "cluster"}
        inputs.append((series("elasticache_shard_member_info", **member), "1+0x40"))
        engine = series("elasticache_engine_cpu_utilization_percent", instance=node, source="info", node_type="cache.r6g.large")
        inputs.append((engine, f"{engine_cpu}+0x40"))
    return inputs


case(
    "RedisClusterHotShard",
    [
        # three shards: a carries 70 % of the CPU, 2.1 times the mean
        *_shard("rg", "a", "2.1", "n0", "60"), *_shard("rg", "b", "0.45", "n1"), *_shard("rg", "c", "0.45", "n2"),
        # two shards, 80 % and 20 %: 1.6 times the mean (a share times the shard count never exceeds 2 here)
        *_shard("two", "x", "1.6", "t0", "60"), *_shard("two", "y", "0.4", "t1"),
    ],
    "31m",
    "29m",
    [{"replication_group": "rg", "shard": "a", "resource": "cpu"}, {"replication_group": "two", "shard": "x", "resource": "cpu"}],
    [
        # the same skew, its primary's engine at 30 % of the 90 % a core it may reach: not yet a problem
        *_shard("calm", "a", "2.1", "m0", "30"), *_shard("calm", "b", "0.45", "m1"), *_shard("calm", "c", "0.45", "m2"),
        # an even group with a busy engine
        *_shard("even", "a", "1.02", "e0", "80"), *_shard("even", "b", "0.99", "e1"), *_shard("even", "c", "0.99", "e2"),
        # two shards at 70 % and 30 % with a busy engine: 1.4 times the mean, under 1.5
        *_shard("mild", "x", "1.4", "d0", "80"), *_shard("mild", "y", "0.6", "d1"),
    ],
)  # fmt: skip

SLCW = {"account_id": "111111111111", "region": "eu-west-1", "dimension_clusterId": "carts"}
READ_P99, WRITE_P99 = "aws_elasticache_successful_read_request_latency_p99", "aws_elasticache_successful_write_request_latency_p99"
case(
    "ElastiCacheRequestLatencyHigh",
    [(series(READ_P99, **SLCW), "3000+0x20"), (series(WRITE_P99, **CW), "2500+0x20"), (series(READ_P99, **CW), "400+0x20")],
    "11m",
    "9m",
    [{**SLCW, "operation": "read"}, {**CW, "operation": "write"}],
    [
        (series(READ_P99, **{**SLCW, "dimension_clusterId": "calm"}), "1500+0x20"),
        (series(WRITE_P99, **{**SLCW, "dimension_clusterId": "calm"}), "1800+0x20"),
        (series(READ_P99, **{**SLCW, "dimension_clusterId": "spiky"}), "0 0 0 0 5000 0 0 0 0 0 0 0 0 0 0"),
    ],
)
DISCOVERY = "elasticache_exporter_discovery_last_success_timestamp_seconds"
case(
    "ElastiCacheDiscoveryFailing",
    [(series(DISCOVERY, instance="exporter-a:9769", job="elasticache"), "-2000+0x40")],  # 2000 s before the test's start
    "16m",
    "14m",
    {"instance": "exporter-a:9769", "job": "elasticache"},
    [(series(DISCOVERY, instance="exporter-b:9769", job="elasticache"), "0+60x40")],  # succeeding every minute
)
STALE = {**CW, "metric": "aws_elasticache_cpuutilization_average"}
TREND = {**CW, "metric": "aws_elasticache_pub_sub_channels_maximum"}
case(
    "ElastiCacheCloudWatchDataStale",
    [
        (series("elasticache_cloudwatch_datapoint_timestamp_seconds", **STALE), "0+0x30"),
        # each exporter of a sharded fleet serves the limits of its tiers (10 minutes for a paging series)
        *((series("elasticache_cloudwatch_fresh_seconds", metric=STALE["metric"], tier="paging", instance=e), "600+0x30") for e in ("a", "b")),
    ],
    "21m",
    "19m",
    STALE,
    [
        (series("elasticache_cloudwatch_datapoint_timestamp_seconds", **{**STALE, "metric": "q"}), "0+60x30"),
        # a trends series asked once an hour: 21 minutes old is still fresh
        (series("elasticache_cloudwatch_datapoint_timestamp_seconds", **TREND), "0+0x30"),
        (series("elasticache_cloudwatch_fresh_seconds", metric=TREND["metric"], tier="trends", instance="a"), "3900+0x30"),
    ],
)
case(
    "ElastiCacheCloudWatchPollFailing",
    [(series("elasticache_exporter_cloudwatch_last_success_timestamp_seconds", instance="e:9769", job="x"), "1+0x30")],
    "21m",
    "19m",
    {"instance": "e:9769", "job": "x"},
    [(series("elasticache_exporter_cloudwatch_last_success_timestamp_seconds", instance="q:9769", job="x"), "0+0x30")],
)
case(
    "ElastiCacheBaselineMissing",
    [(series("elasticache_exporter_baseline_missing_total", instance="a", node_type="cache.z9.huge"), "0+1x30")],
    "16m",
    "14m",
    {"instance": "a", "node_type": "cache.z9.huge"},
    [(series("elasticache_exporter_baseline_missing_total", instance="q", node_type="cache.z9.huge"), "5+0x30")],
)


def _without_annotations(rules_text: str) -> str:
    document = yaml.safe_load(rules_text)
    for group in document["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    return yaml.safe_dump(document, sort_keys=False)


@pytest.mark.unit
def test_every_alert_has_a_unit_test():
    assert sorted(CASES) == sorted(alert.name for alert in load_catalog() if alert.baseline or alert.expr)


CW_SERIES = re.compile(r"aws_elasticache_[a-z0-9_]+")
LABEL = re.compile(r'(\w+)="([^"]*)"')


def guard_inputs(guard: str, expr: str, inputs: list[tuple[str, str]], fresh: bool) -> list[tuple[str, str]]:
    """What the guard of an alert reads, for every node of the inputs: redis_up 1 (or 0), or a fresh (or old)
    CloudWatch datapoint timestamp."""
    extra: dict[str, str] = {}
    for text, _ in inputs:
        labels = dict(LABEL.findall(text))
        if guard in ("redis", "utilization") and "instance" in labels:
            extra[series("redis_up", instance=labels["instance"])] = "1+0x120" if fresh else "0+0x120"
        elif guard == "cloudwatch" and ("dimension_CacheClusterId" in labels or "dimension_clusterId" in labels):
            dims = {k: v for k, v in labels.items() if k in ("account_id", "region") or k.startswith("dimension_")}
            # each CloudWatch input its own datapoints' time (an input of another family: the one the expression reads)
            metric = text.partition("{")[0] if CW_SERIES.fullmatch(text.partition("{")[0]) else CW_SERIES.search(expr).group(0)
            # promtool's time() is the evaluation time: +60 a minute is a datapoint of now, a constant -2000 is stale (older
            # than the 20 minutes the alerting tier's guard allows)
            extra[series("elasticache_cloudwatch_datapoint_timestamp_seconds", **dims, metric=metric)] = "0+60x120" if fresh else "-2000+0x120"
        elif guard == "fleet":  # discovery of the exporter that polls AWS succeeded now, or 50 minutes before the test's start
            extra[series("elasticache_exporter_discovery_last_success_timestamp_seconds", instance="e:9769", job="x")] = (
                "0+60x120" if fresh else "-3000+0x120"
            )
    return list(extra.items())


def test_promtool_unit_tests_for_every_alert(tmp_path):
    """Annotations are checked by `promtool check rules` and below; here the expressions, `for`, labels and guards."""
    rules = tmp_path / "rules.yml"
    rules.write_text(_without_annotations(RULES.read_text()))
    exprs = {rule["alert"]: rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"] if "alert" in rule}
    catalog = {alert.name: alert for alert in load_catalog()}
    tests = []
    stale_checked = set()
    for alert, (inputs, fire_at, quiet_at, labels, silent) in sorted(CASES.items()):
        guard, expr = catalog[alert].guard, exprs[alert]
        # labels: of the one alert that fires, or a list of them
        # every alert carries our source label: a case per alert (test_every_alert_has_a_unit_test) checks it on each rule
        expected = [
            {"exp_labels": {**one, "severity": catalog[alert].severity, **OURS}} for one in (labels if isinstance(labels, list) else [labels])
        ]
        checks = [{"eval_time": fire_at, "alertname": alert, "exp_alerts": expected}]
        if quiet_at:
            checks.append({"eval_time": quiet_at, "alertname": alert, "exp_alerts": []})
        firing = inputs + guard_inputs(guard, expr, inputs, fresh=True)
        tests.append({"interval": "1m", "input_series": [{"series": s, "values": v} for s, v in firing], "alert_rule_test": checks})
        if silent:
            quiet = silent + guard_inputs(guard, expr, silent, fresh=True)
            tests.append(
                {
                    "interval": "1m",
                    "input_series": [{"series": s, "values": v} for s, v in quiet],
                    "alert_rule_test": [{"eval_time": fire_at, "alertname": alert, "exp_alerts": []}],
                }
            )
        if guard not in ("none", "fresh"):  # a "fresh" series is gone once old: the cases' silent inputs show that
            stale = inputs + guard_inputs(guard, expr, inputs, fresh=False)
            assert len(stale) > len(inputs), f"{alert}: its inputs name no node the {guard} guard could check"
            stale_checked.add(alert)
            tests.append(
                {
                    "interval": "1m",
                    "input_series": [{"series": s, "values": v} for s, v in stale],
                    "alert_rule_test": [{"eval_time": fire_at, "alertname": alert, "exp_alerts": []}],
                }
            )
    assert len(stale_checked) >= 30
    test_file = tmp_path / "rules.test.yml"
    document = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": with_served_freshness(tests)}
    test_file.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]


@pytest.mark.unit
def test_every_rule_reading_per_node_data_has_its_guard():
    guards = {
        "redis": "and on (instance) (redis_up == 1)",
        "utilization": "unless on (instance) (redis_up == 0)",
        "cloudwatch": "elasticache_cloudwatch_datapoint_timestamp_seconds",
        "fleet": "elasticache_exporter_discovery_last_success_timestamp_seconds",
    }
    served_while_fresh = {
        "elasticache_serverless_ecpu_utilization_ratio",
        "elasticache_serverless_data_storage_utilization_ratio",
        "elasticache_network_aws_baseline_usage_ratio",
        "elasticache_network_aws_baseline_peak_usage_ratio",
        "elasticache_network_aws_baseline_burst_minutes",
        "elasticache_network_aws_baseline_window_max_usage_ratio",
        "elasticache_network_aws_baseline_sustained_min_usage_ratio",
        "elasticache_network_aws_baseline_sustained_minutes",
    }
    rules = {rule["alert"]: rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"] if "alert" in rule}
    unguarded = set()
    for alert in load_catalog():
        if alert.name not in rules:
            continue
        rule = rules[alert.name]
        assert "keep_firing_for" not in rule or alert.guard == "none", alert.name  # only an alert about the data itself
        if alert.guard == "none":
            unguarded.add(alert.name)
        elif alert.guard == "fresh":
            assert set(re.findall(r"\b[a-z_:]+_[a-z_]+\b(?=\s*[>{<])", rule["expr"])) <= served_while_fresh, alert.name
            assert rule["expr"] == one_source(" ".join((alert.expr or "").split())), alert.name  # no guard added
        else:
            assert guards[alert.guard] in rule["expr"], alert.name
    assert unguarded == {
        "RedisDown",
        "ElastiCacheExporterTargetDown",
        "ElastiCacheExporterAbsent",
        "ElastiCacheExporterShardCountUnread",
        "RedisMissingMaster",
        "RedisTooManyMasters",
        "ElastiCacheCloudWatchDataStale",
        "ElastiCacheCloudWatchPollFailing",
        "ElastiCacheBaselineMissing",
        "ElastiCacheDiscoveryFailing",
        "RedisAllocatorFragmentation",  # two sources, each guarded in its own part of the expression
        "RedisClusterHotShard",  # joined with the engine CPU, which is served only while fresh
    }


def test_annotations_of_a_baseline_alert_render_with_value_node_type_and_suggestion(tmp_path):
    test_file = tmp_path / "annotations.test.yml"
    labels = {"instance": "a", "direction": "out", "source": "info", "node_type": "cache.r6g.large"}
    test_file.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(RULES)],
                "evaluation_interval": "1m",
                "tests": [
                    {
                        "interval": "1m",
                        "input_series": [
                            {"series": series("elasticache_network_bytes_per_second", **labels), "values": "85000000+0x10"},
                            {"series": series("redis_up", instance="a"), "values": "1+0x10"},
                        ],
                        "alert_rule_test": [
                            {
                                "eval_time": "6m",
                                "alertname": "ElastiCacheNetworkOutAtBaseline",
                                "exp_alerts": [
                                    {
                                        "exp_labels": {
                                            **labels,
                                            "suggested_node_type": "cache.r6g.xlarge",
                                            "baseline": "published",
                                            "severity": "critical",
                                            **OURS,
                                        },
                                        "exp_annotations": {
                                            "summary": "Network out of a node is above 90 % of its node type's baseline.",
                                            "description": "a sends 90.67% of the published baseline bandwidth of cache.r6g.large (page at "
                                            "90 %; traffic from info); it will be shaped soon. Suggested action: move to cache.r6g.xlarge "
                                            "now, or shed read traffic to replicas.",
                                            "runbook_url": "docs/runbooks.md#network-near-baseline",
                                        },
                                    }
                                ],
                            }
                        ],
                    }
                ],
            },
            sort_keys=False,
        )
    )
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr


def test_a_redis_down_page_says_why_without_becoming_a_second_alert_when_the_reason_changes(tmp_path):
    """The kind of the last error (elasticache_exporter_target_last_error) is in the page's text; it changes from timeout
    to refused during the outage, and the alert stays one alert (the same labels) whose text says the newer kind. A node
    whose exporter serves no kind says "unknown"."""
    down = {"instance": "a", "severity": "critical", **OURS}
    unknown = {"instance": "b", "severity": "critical", **OURS}

    def page(labels: dict[str, str], kind: str) -> dict:
        text = f"{labels['instance']} has been down for the exporter for 1 minute (last error: {kind}; the kinds are in the runbook)."
        annotations = {"summary": "A Redis target does not answer the exporter.", "description": text, "runbook_url": "docs/runbooks.md#redis-down"}
        return {"exp_labels": labels, "exp_annotations": annotations}

    test = {
        "interval": "1m",
        "input_series": [
            {"series": series("redis_up", instance="a"), "values": "0x20"},
            {"series": series("elasticache_exporter_target_last_error", instance="a", kind="timeout"), "values": "1x9 _x11"},
            {"series": series("elasticache_exporter_target_last_error", instance="a", kind="refused"), "values": "_x9 1x11"},
            {"series": series("redis_up", instance="b"), "values": "0x20"},
        ],
        "alert_rule_test": [
            {"eval_time": "5m", "alertname": "RedisDown", "exp_alerts": [page(down, "timeout"), page(unknown, "unknown")]},
            {"eval_time": "15m", "alertname": "RedisDown", "exp_alerts": [page(down, "refused"), page(unknown, "unknown")]},
        ],
    }
    test_file = tmp_path / "down.test.yml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [test]}, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr


def test_the_labels_inhibitions_match_are_joined_into_the_alerts(tmp_path):
    """RedisDown carries the shard its node had before it went down, its replica's RedisMasterLinkDown that shard and the
    discovered node's account, region and group, and a CloudWatch alert its node's instance and group (one alert, though
    two exporter replicas serve its series, each under its own instance): so Alertmanager's equal labels find them
    (tests/test_alertmanager.py). A node without membership or discovery still alerts, without them."""
    rules = tmp_path / "rules.yml"
    rules.write_text(_without_annotations(RULES.read_text()))
    shard = {"replication_group": "orders", "shard": "0001"}
    node = {"account_id": CW["account_id"], "region": CW["region"], "replication_group": "orders"}
    replica_dims = {**CW, "dimension_CacheClusterId": "orders-002"}
    dims = {k: v for k, v in replica_dims.items() if k.startswith("dim")}
    lag = "aws_elasticache_replication_lag_maximum"
    inputs = [
        # the primary answers for 3 minutes, then is down: its membership series ends with it
        (series("elasticache_shard_member_info", instance="orders-001", **shard, shard_source="config", role="master"), "1 1 1"),
        (series("redis_up", instance="orders-001"), "1 1 1 0x20"),
        (series("redis_up", instance="solo"), "0x20"),  # no membership ever: alerts without the labels
        (series("elasticache_shard_member_info", instance="orders-002", **shard, shard_source="config", role="slave"), "1x20"),
        (series("redis_up", instance="orders-002"), "1x20"),
        (series("redis_master_link_up", instance="orders-002"), "1 1 1 0x20"),
        (series("elasticache_node_info", instance="orders-002", **node, **dims), "1x20"),
        *(
            (series(family, **replica_dims, metric=lag, instance=f"exporter-{replica}:9769"), values)
            for replica in "ab"
            for family, values in (
                ("elasticache_cloudwatch_window_lowest", "45x20"),
                ("elasticache_cloudwatch_datapoint_timestamp_seconds", "0+60x20"),
            )
        ),
    ]
    checks = [
        {
            "eval_time": "6m",
            "alertname": "RedisDown",
            "exp_alerts": [
                {"exp_labels": {"instance": "orders-001", **shard, "shard_source": "config", "severity": "critical", **OURS}},
                {"exp_labels": {"instance": "solo", "severity": "critical", **OURS}},
            ],
        },
        {
            "eval_time": "6m",
            "alertname": "RedisMasterLinkDown",
            "exp_alerts": [{"exp_labels": {"instance": "orders-002", **shard, "shard_source": "config", **node, "severity": "critical", **OURS}}],
        },
        {
            "eval_time": "6m",
            "alertname": "ElastiCacheReplicationLag",
            "exp_alerts": [{"exp_labels": {**replica_dims, "instance": "orders-002", "replication_group": "orders", "severity": "warning", **OURS}}],
        },
    ]
    test_file = tmp_path / "joins.test.yml"
    document = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": with_served_freshness(
            [{"interval": "1m", "input_series": [{"series": s, "values": v} for s, v in inputs], "alert_rule_test": checks}]
        ),
    }
    test_file.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr


@pytest.mark.unit
def test_runbooks_exist_for_every_alert():
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    for alert in load_catalog():
        assert f'<a id="{alert.runbook}"></a>' in runbooks, alert.runbook


@pytest.mark.unit
def test_each_alert_s_runbook_section_says_why_its_severity_and_its_wait():
    """A line per alert in its own section, with the severity, `for` and window the catalog gives: a change of either
    without its reason fails here."""
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    for alert in load_catalog():
        start = runbooks.index(f'<a id="{alert.runbook}"></a>')
        end = runbooks.find('<a id="', start + 1)
        section = runbooks[start : end if end != -1 else len(runbooks)]
        window = f", window {alert.window}" if alert.window else ""
        line = re.search(rf"^- \*\*{alert.name}\*\* \((\w+), for (\w+)(, window \w+)?\): (.+)$", section, re.M)
        assert line, f"{alert.name}: no line '- **{alert.name}** (severity, for ...): why' in section {alert.runbook}"
        assert line.group(0).startswith(f"- **{alert.name}** ({alert.severity}, for {alert.duration}{window}): "), line.group(0)
        assert len(line.group(4)) > 20, alert.name


def test_a_fleet_of_100_nodes_renders_into_stacks_under_the_resource_limit_that_pass_cfn_lint(tmp_path):
    types = ["cache.r6g.large"] * 60 + ["cache.t3.micro"] * 25 + ["cache.z9.huge"] * 10 + [""] * 5
    fleet = tmp_path / "fleet.yml"
    fleet.write_text(yaml.safe_dump({"nodes": [{"cluster_id": f"fleet-{i:04d}-001", "node_type": t} for i, t in enumerate(types)]}))
    out = tmp_path / "stacks"
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "render", "cloudformation", "--fleet", str(fleet), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "node type cache.z9.huge has no baseline: 10 node(s) get the fixed-threshold alarms only" in result.stderr
    stacks = sorted(out.glob("*.yaml"))
    lint = subprocess.run([cfn_lint(), *map(str, stacks)], capture_output=True, text=True, timeout=300, check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    catalog = load_catalog()
    # an alarm limited to some node types (t: CPU credits, r6gd: data tiering) is in the stacks of those types only
    every = {a.name for a in catalog if a.cloudwatch and not a.cloudwatch.node_types}
    fixed = {a.name for a in catalog if a.cloudwatch and not (a.baseline or a.cloudwatch.per_node_type or a.cloudwatch.node_types)}
    burstable = {a.name for a in catalog if a.cloudwatch and a.cloudwatch.node_types == "cache.t"}
    assert burstable == {"ElastiCacheBurstCreditsLow"}
    found: dict[str, set[str]] = {}
    for path in stacks:
        template = yaml.load(path.read_text(), Loader=_CfnLoader)  # noqa: S506
        _, ids, alarms = template["Resources"]["Fn::ForEach::NodeAlarms"]
        assert len(ids) * len(alarms) + 1 <= 500, path.name
        node_type = template["Parameters"]["CacheNodeType"]["Default"]
        for node_id in ids:
            assert node_id not in found, node_id
            found[node_id] = {alarm["Properties"]["AlarmName"]["Sub"].removeprefix("${NodeId}-") for alarm in alarms.values()}
            expected = fixed if node_type == "none" else every | (burstable if node_type.startswith("cache.t") else set())
            assert found[node_id] == expected, (path.name, node_id)
    assert len(found) == 100
    assert sum(len(names) for names in found.values()) == 85 * len(every) + 25 * len(burstable) + 15 * len(fixed)


def test_render_names_the_node_types_only_fixed_alerts_cover(tmp_path):
    table = tmp_path / "baselines.yml"
    table.write_text(
        "format: elasticache-exporter-baselines\nversion: 1\nbasis: lower\nnode_types:\n"
        "  cache.r6g.large:\n    vcpus: 2\n    memory_gib: 13\n    published: {baseline_gbps: 0.75, burst_gbps: 10}\n"
        "  cache.y9.large:\n    memory_gib: 13\n    published: {baseline_gbps: 1, burst_gbps: 10}\n"
    )
    for what, said in (
        ("prometheus", ""),
        ("cloudformation", "render: fixed-threshold alerts only for 1 node type(s) with no bandwidth figure or vCPU count: cache.y9.large"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "exporter", "render", what, "--baselines", str(table), "--runbook-base-url", "https://runbooks.example/r.md"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip() == said


def test_rules_rendered_with_tags_carry_the_node_s_tags_and_still_alert_without_them(tmp_path):
    """render prometheus --tags team: a discovered node's alerts carry tag_team from elasticache_node_info (for
    Alertmanager routes); a node that discovery does not know still alerts, untagged."""
    rules = tmp_path / "rules.yml"
    rendered = subprocess.run(
        [sys.executable, "-m", "exporter", "render", "prometheus", "--tags", "team"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    rules.write_text(_without_annotations(rendered))
    known = {
        "instance": "orders-001",
        "account_id": CW["account_id"],
        "region": CW["region"],
        "dimension_CacheClusterId": "orders-001",
        "dimension_CacheNodeId": "0001",
    }
    node_info = series("elasticache_node_info", **known, tag_team="payments", role="primary")
    rejected = "redis_rejected_connections_total"
    allowance = "aws_elasticache_network_bandwidth_out_allowance_exceeded_maximum"
    cw_known = {k: v for k, v in known.items() if k != "instance"}
    cw_other = {**cw_known, "dimension_CacheClusterId": "legacy-001"}
    tests = [
        {
            "interval": "1m",
            "input_series": [
                {"series": node_info, "values": "1+0x20"},
                {"series": series(rejected, instance="orders-001"), "values": "0 0 5 5"},
                {"series": series(rejected, instance="self-managed"), "values": "0 0 5 5"},
                {"series": series("redis_up", instance="orders-001"), "values": "1+0x20"},
                {"series": series("redis_up", instance="self-managed"), "values": "1+0x20"},
                {"series": series(RISING, **cw_known, metric=allowance), "values": "0 0 0 1 2 3 4 5 5 5"},
                {"series": series(RISING, **cw_other, metric=allowance), "values": "0 0 0 1 2 3 4 5 5 5"},
                {"series": series("elasticache_cloudwatch_datapoint_timestamp_seconds", **cw_known, metric=allowance), "values": "0+60x20"},
                {"series": series("elasticache_cloudwatch_datapoint_timestamp_seconds", **cw_other, metric=allowance), "values": "0+60x20"},
            ],
            "alert_rule_test": [
                {
                    "eval_time": "2m",
                    "alertname": "RedisRejectedConnections",
                    "exp_alerts": [
                        {"exp_labels": {"instance": "orders-001", "tag_team": "payments", "severity": "warning", **OURS}},
                        {"exp_labels": {"instance": "self-managed", "severity": "warning", **OURS}},
                    ],
                },
                {
                    "eval_time": "5m",
                    "alertname": "ElastiCacheBandwidthOutAllowanceExceeded",
                    "exp_alerts": [
                        {"exp_labels": {**cw_known, "instance": "orders-001", "tag_team": "payments", "severity": "critical", **OURS}},
                        {"exp_labels": {**cw_other, "severity": "critical", **OURS}},
                    ],
                },
            ],
        }
    ]
    test_file = tmp_path / "tags.test.yml"
    document = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": with_served_freshness(tests)}
    test_file.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    check = subprocess.run([promtool(), "check", "rules", str(rules)], capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    refused = subprocess.run(
        [sys.executable, "-m", "exporter", "render", "prometheus", "--tags", "2fa"], capture_output=True, text=True, timeout=60, check=False
    )
    assert refused.returncode == 2
    assert "--tags: tag '2fa' makes no valid label name" in refused.stderr


@pytest.mark.unit
def test_no_suggested_node_type_has_less_memory_than_the_node_it_relieves():
    """A node moved for bandwidth keeps its data: the rules' suggested_node_type has at least the memory of the node
    type it is suggested for (the rule the capacity report uses too)."""
    table = load_table()
    suggested = {}
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            labels = rule.get("labels", {})
            if "suggested_node_type" in labels and labels["suggested_node_type"].startswith("cache."):
                suggested[labels["node_type"]] = labels["suggested_node_type"]
    assert len(suggested) > 40
    smaller = [(node_type, to) for node_type, to in suggested.items() if (table.get(node_type).memory_gib or 0) > (table.get(to).memory_gib or 0)]
    assert smaller == []
    assert suggested["cache.m3.2xlarge"] != "cache.m6g.large"  # 27.9 GiB was told to move to 6.38 GiB


@pytest.mark.unit
def test_a_table_with_benchmark_latency_renders_a_p99_per_node_type_and_command_class():
    from exporter.alerts.prometheus import render_prometheus
    from exporter.baselines.latency import LatencyFigure
    from exporter.common.records import replace

    table = load_table()
    figures = (
        LatencyFigure("GET", 100_000.0, p99_ms=0.5, data_size=100),
        LatencyFigure("GET", 90_000.0, p99_ms=0.9, data_size=1000),
        LatencyFigure("GET", 80_000.0, p99_ms=1.5, data_size=10000),
        LatencyFigure("SET", 70_000.0, p99_ms=2.0, data_size=1000),
    )
    node = replace(table.node_types["cache.r6g.large"], latency=figures)
    rendered = render_prometheus(load_catalog(), replace(table, node_types={**table.node_types, "cache.r6g.large": node}), hit_rate=(0.8, 100.0))
    document = yaml.safe_load(rendered)
    records = [rule for group in document["groups"] for rule in group["rules"] if rule.get("record") == "elasticache:baseline_command_p99_seconds"]
    assert {(r["labels"]["node_type"], r["labels"]["command_class"], r["expr"]) for r in records} == {
        ("cache.r6g.large", "read", "vector(0.0009)"),  # the median of the GET figures' p99
        ("cache.r6g.large", "write", "vector(0.002)"),
    }
    armed = {rule["record"]: rule["expr"] for group in document["groups"] for rule in group["rules"] if rule.get("record", "").endswith("_min")}
    assert armed == {"elasticache:hit_ratio_min": "vector(0.8)", "elasticache:miss_rate_min": "vector(100.0)"}


def render_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "exporter", "render", *args], capture_output=True, text=True, timeout=60, check=False)


def test_render_says_when_runbook_links_are_relative_and_takes_the_base_url():
    for what in ("prometheus", "prometheus-operator", "cloudformation"):
        bare = render_cli(what)
        assert bare.returncode == 0, bare.stderr
        assert "render: warning: runbook links are the relative docs/runbooks.md#..." in bare.stderr, what
        assert "--runbook-base-url" in bare.stderr
        given = render_cli(what, "--runbook-base-url", "https://wiki.example/elasticache/runbooks.md")
        assert given.returncode == 0, (what, given.stderr)
        assert "warning" not in given.stderr, (what, given.stderr)
        assert "https://wiki.example/elasticache/runbooks.md#allowance-exceeded" in given.stdout, what
        assert "docs/runbooks.md#" not in given.stdout, what
    assert "warning" not in render_cli("alertmanager").stderr  # no links there


def test_render_sets_the_source_label_and_exporter_job_it_is_given():
    rendered = render_cli("prometheus", "--alert-source", "team-cache", "--exporter-job", "ecx|cache-mon", "--runbook-base-url", "https://x/r.md")
    assert rendered.returncode == 0, rendered.stderr
    alerts = [rule for group in yaml.safe_load(rendered.stdout)["groups"] for rule in group["rules"] if "alert" in rule]
    assert len(alerts) == len([alert for alert in load_catalog() if alert.expr or alert.baseline])
    assert all(rule["labels"][SOURCE_LABEL] == "team-cache" for rule in alerts)
    exprs = {rule["alert"]: rule["expr"] for rule in alerts}
    assert exprs["ElastiCacheExporterAbsent"] == 'absent(elasticache_exporter_build_info{job=~"ecx|cache-mon"})'
    assert exprs["ElastiCacheExporterTargetDown"] == 'up{job=~"ecx|cache-mon"} == 0'
    assert not any("$exporter_job" in expr for expr in exprs.values())
    routing = yaml.safe_load(render_cli("alertmanager", "--alert-source", "team-cache").stdout)
    assert routing["route"]["matchers"] == [f'{SOURCE_LABEL}="team-cache"']
    assert all(f'{SOURCE_LABEL}="team-cache"' in rule["source_matchers"] and f'{SOURCE_LABEL}="team-cache"' in rule["target_matchers"]
               for rule in routing["inhibit_rules"])  # fmt: skip
    for args, said in (
        (("alertmanager", "--alert-source", 'a"b'), "alert source 'a\"b': use letters, digits and _.:/-"),
        (("prometheus", "--exporter-job", "(ecx", "--runbook-base-url", "https://x/r.md"), "exporter job '(ecx': not a regular expression"),
    ):
        refused = render_cli(*args)
        assert refused.returncode == 2, refused.stderr
        assert said in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def _promtool_test(tmp_path: Path, inputs: list[tuple[str, str]], checks: list[dict]) -> None:
    """The shipped rules (without annotations) against ``inputs`` at one-minute steps, checked at each of ``checks``."""
    rules = tmp_path / "rules.yml"
    rules.write_text(_without_annotations(RULES.read_text()))
    test_file = tmp_path / "hours.test.yml"
    document = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": with_served_freshness(
            [{"interval": "1m", "input_series": [{"series": s, "values": v} for s, v in inputs], "alert_rule_test": checks}]
        ),
    }
    test_file.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def _every(alert: str, minutes: range, firing: dict[int, list[dict]]) -> list[dict]:
    """A check of ``alert`` at each of ``minutes``: the labels of ``firing[minute]``, else nothing."""
    return [
        {"eval_time": f"{minute}m", "alertname": alert, "exp_alerts": [{"exp_labels": labels} for labels in firing.get(minute, [])]}
        for minute in minutes
    ]


def test_a_replica_restart_pages_no_one_and_a_lost_replica_does_over_hours(tmp_path):
    """Four hours of a primary with two replicas each: a replica that restarts (6 minutes away), one that resyncs in full
    (14 minutes, then back), one that restarts three times in an afternoon, one lost at 1h that stays lost, and a
    primary failed over at 1h (a replica now, with none of its own): only the lost one pages, 15 minutes on, and keeps
    paging while it is lost."""
    shapes = {
        "restart": "2x59 1x5 2x175",
        "resync": "2x59 1x13 2x167",
        "thrice": "2x59 1x4 2x55 1x4 2x55 1x4 2x57",
        "lost": "2x59 1x180",
        "demoted": "2x59 0x180",
    }
    inputs = [(series("redis_connected_slaves", instance=name), values) for name, values in shapes.items()]
    inputs += [(series("redis_up", instance=name), "1x240") for name in shapes]
    inputs += [(series("redis_instance_role", instance=name, role="master"), "1x240") for name in shapes if name != "demoted"]
    inputs += [(series("redis_instance_role", instance="demoted", role="master"), "1x59")]
    inputs += [(series("redis_instance_role", instance="demoted", role="slave"), "_x60 1x180")]
    lost = {"instance": "lost", "severity": "critical", **OURS}
    minutes = range(0, 241, 2)
    checks = _every("RedisDisconnectedReplicas", minutes, {minute: [lost] for minute in minutes if minute >= 75})
    _promtool_test(tmp_path, inputs, checks)


def test_a_restarted_replica_resyncing_pages_no_one_and_a_resync_loop_pages_after_15_minutes(tmp_path):
    """Three hours of replicas whose link drops at 1h: one restarts and resyncs in full for 9 minutes (its link down all
    that time, as Redis reports it), one stays in a resync that never ends, one loses its link without a resync, one
    resyncs in a loop (each sync done, its link up a minute, then dropped again). The first never pages; the second
    pages once its link has been down 15 minutes (and 2 more of ``for``); the third at 2 minutes, as before; the loop
    once its link was down a quarter of the hour."""
    cycles = " ".join(["0x7 1"] * 13)  # down 8 minutes, up 1, from 1h: each full sync done, then dropped again
    link = {"quick": "1x59 0x9 1x111", "loop": "1x59 0x120", "lost": "1x59 0x120", "cycles": f"1x59 {cycles}"}
    syncing = {"quick": "0x59 1x9 0x111", "loop": "0x59 1x120", "lost": "0x180", "cycles": "0x59 " + " ".join(["1x7 0"] * 13)}
    inputs = [(series("redis_master_link_up", instance=name), values) for name, values in link.items()]
    inputs += [(series("redis_master_sync_in_progress", instance=name), values) for name, values in syncing.items()]
    inputs += [(series("redis_up", instance=name), "1x180") for name in link]
    alert = {"severity": "critical", **OURS}
    firing = {m: [{**alert, "instance": "lost"}] + ([{**alert, "instance": "loop"}] if m >= 76 else []) for m in range(62, 180)}
    # the cycles: once the link was down a quarter of the hour (at 75m), each down run pages from its third minute
    for run in range(2, 13):
        for m in range(60 + 9 * run + 2, 68 + 9 * run):
            firing[m].append({**alert, "instance": "cycles"})
    firing = {m: sorted(alerts, key=lambda a: a["instance"]) for m, alerts in firing.items()}
    _promtool_test(tmp_path, inputs, _every("RedisMasterLinkDown", range(0, 180, 2), firing))


def test_evictions_of_a_node_at_its_maxmemory_are_told_by_the_memory_alert_alone(tmp_path):
    """Memory at 95 % of maxmemory and evicting from 10m to 40m, then the limit raised (or lifted: 0): the memory alert
    fires while memory is at the limit, and RedisEvictions stays silent, also while its 5-minute rate outlasts the
    limit; evictions on a node far from its maxmemory (a volatile policy's expiries) still alert."""
    inputs = []
    for name, used, limit_after in (("raised", 95, "1000+0x140"), ("lifted", 95, "0+0x140"), ("roomy", 50, "100+0x140")):
        inputs += [
            (series("redis_memory_used_bytes", instance=name), f"50+0x9 {used}+0x30 {used}+0x140"),
            (series("redis_memory_max_bytes", instance=name), "100+0x40 " + limit_after),
            (series("redis_evicted_keys_total", instance=name), "0+0x9 0+100x30 3000+0x140"),
            (series("redis_up", instance=name), "1x180"),
        ]
    memory = {m: [{"instance": name, "severity": "warning", **OURS} for name in ("lifted", "raised")] for m in range(12, 41)}
    evictions = {m: [{"instance": "roomy", "severity": "warning", **OURS}] for m in range(16, 44)}
    checks = _every("RedisOutOfConfiguredMaxmemory", range(0, 60), memory) + _every("RedisEvictions", range(0, 60), evictions)
    _promtool_test(tmp_path, inputs, checks)


def test_connection_tracking_pages_on_drops_in_more_than_one_minute_only(tmp_path):
    """Two hours of AWS's cumulative counter, polled every minute: a one-minute reconnect storm every 20 minutes never
    pages; drops in 3 minutes running (100 to 102) page at the second of them, while 2 of the last 5 minutes rose, as
    its CloudWatch alarm (2 of 5 datapoints) does."""
    metric = "aws_elasticache_network_conntrack_allowance_exceeded_maximum"
    storms = {**CW, "dimension_CacheClusterId": "storms"}
    outage = {**CW, "dimension_CacheClusterId": "outage"}
    counts = [5.0 * ((minute + 10) // 20) for minute in range(120)]  # grows at 10, 30, 50, 70, 90, 110
    sustained = [5.0 * min(max(minute - 99, 0), 3) for minute in range(120)]  # grows at 100, 101, 102
    inputs = []
    for labels, values in ((storms, counts), (outage, sustained)):
        inputs.append((series(RISING, **labels, metric=metric), served_rising(values, 1)))
        inputs.append((series("elasticache_cloudwatch_datapoint_timestamp_seconds", **labels, metric=metric), "0+60x120"))
    # two of the last five minutes rose from 101 to 105 (at 106 only 102 is left): firing from 101 to 105
    firing = {minute: [{**outage, "severity": "critical", **OURS}] for minute in range(101, 106)}
    _promtool_test(tmp_path, inputs, _every("ElastiCacheConntrackAllowanceExceeded", range(0, 119), firing))


def test_a_node_two_exporters_name_differently_for_a_discovery_interval_still_alerts_once(tmp_path):
    """A cluster of the same id created elsewhere renames a node on the exporter that discovered it first, not yet on
    the other: for a discovery interval its elasticache_node_info carries two names. The CloudWatch alert's join takes
    one of them (no many-to-many error, which would fail the rule for every node) and the alert fires once."""
    dims = {**CW, "dimension_CacheClusterId": "orders-002"}
    lag = "aws_elasticache_replication_lag_maximum"
    names = ("orders-002", f"{CW['account_id']}/{CW['region']}/orders-002")
    inputs = [
        *((series("elasticache_node_info", **dims, instance=name, replication_group="orders", role="replica"), "1x20") for name in names),
        (series("elasticache_cloudwatch_window_lowest", **dims, metric=lag), "45x20"),
        (series("elasticache_cloudwatch_datapoint_timestamp_seconds", **dims, metric=lag), "0+60x20"),
        (series("elasticache_cloudwatch_window_lowest", **{**dims, "dimension_CacheClusterId": "other-001"}, metric=lag), "45x20"),
        (series("elasticache_cloudwatch_datapoint_timestamp_seconds", **{**dims, "dimension_CacheClusterId": "other-001"}, metric=lag), "0+60x20"),
    ]
    firing = 'count by (dimension_CacheClusterId) (ALERTS{alertname="ElastiCacheReplicationLag", alertstate="firing"})'
    test = {
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in inputs],
        "promql_expr_test": [
            {
                "expr": firing,
                "eval_time": "6m",
                "exp_samples": [{"labels": f'{{dimension_CacheClusterId="{name}"}}', "value": 1} for name in ("orders-002", "other-001")],
            }
        ],
    }
    rules = tmp_path / "rules.yml"
    rules.write_text(_without_annotations(RULES.read_text()))
    test_file = tmp_path / "names.test.yml"
    document = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": with_served_freshness([test])}
    test_file.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr


def test_a_node_scraped_and_polled_saturates_in_one_alert_from_one_source(tmp_path):
    """Engine CPU and network served from INFO and from CloudWatch for the same node: the alerts read INFO's figure where
    the exporter reads the node, else CloudWatch's: one alert each, never one per source."""
    both, polled = {"instance": "a", "node_type": "cache.r6g.large"}, {"instance": "p", "node_type": "cache.r6g.large"}
    cpu, net = "elasticache_engine_cpu_utilization_percent", "elasticache_network_bytes_per_second"
    inputs = [
        *((series(cpu, **both, source=source), "95x20") for source in ("info", "cloudwatch")),
        (series(cpu, **polled, source="cloudwatch"), "95x20"),
        *((series(net, **both, direction="out", source=source), "90000000x20") for source in ("info", "cloudwatch")),
        (series("elasticache_baseline_network_bytes_per_second", node_type="cache.r6g.large", level="100", source="published"), "93750000x20"),
        (series("redis_up", instance="a"), "1x20"),
    ]
    page = {"severity": "critical", **OURS}
    checks = [
        {
            "eval_time": "10m",
            "alertname": "ElastiCacheEngineCPUSaturated",
            "exp_alerts": [{"exp_labels": {**both, "source": "info", **page}}, {"exp_labels": {**polled, "source": "cloudwatch", **page}}],
        },
        {
            "eval_time": "10m",
            "alertname": "ElastiCacheNetworkOutAtBaseline",
            "exp_alerts": [
                {
                    "exp_labels": {
                        **both,
                        "direction": "out",
                        "source": "info",
                        "baseline": "published",
                        "suggested_node_type": R6G["suggested_node_type"],
                        **page,
                    }
                }
            ],
        },
    ]
    _promtool_test(tmp_path, inputs, checks)


def test_one_promotion_is_one_failover_alert_though_the_node_restarted_before_it(tmp_path):
    """A replica restarts at minute 25 (its series stale, then back at 27) and is promoted at 30: RedisFailover fires
    from 30 for as long as a replica sample is within its 10 minutes, without a gap; a node that was always a master,
    or a replica that restarted and stayed one, never fires."""
    promoted = "1x24 stale _ 1x2 _x90"
    inputs = [
        (series("redis_instance_role", instance="a", role="slave"), promoted),
        (series("redis_instance_role", instance="a", role="master"), "_x30 1x89"),
        (series("redis_instance_role", instance="q", role="master"), "1x120"),
        (series("redis_instance_role", instance="r", role="slave"), "1x24 stale _ 1x93"),
        *((series("redis_up", instance=name), up) for name, up in (("a", "1x24 0x2 1x93"), ("q", "1x120"), ("r", "1x24 0x2 1x93"))),
    ]
    firing = {minute: [{"instance": "a", "role": "master", "severity": "warning", **OURS}] for minute in range(30, 39)}
    _promtool_test(tmp_path, inputs, _every("RedisFailover", range(0, 61), firing))


def test_the_exporter_leaving_service_discovery_pages_and_a_rollout_does_not(tmp_path):
    """Three hours: a rollout at 1h replaces the exporter's pod (the old one's series ends, the new one's starts 2 minutes
    later under another instance): nothing; at 2h the exporter leaves service discovery: absent 5 minutes later
    (staleness), paging 10 minutes after that. An exporter scraped under another job is not ours."""
    old = series("elasticache_exporter_build_info", job="elasticache-exporter", instance="10.0.0.1:9769", version="1")
    new = series("elasticache_exporter_build_info", job="elasticache-exporter", instance="10.0.0.2:9769", version="1")
    other = series("elasticache_exporter_build_info", job="redis", instance="10.0.0.9:9769", version="1")
    inputs = [(old, "1x59"), (new, "_x61 1x58"), (other, "1x180")]
    absent = {"severity": "critical", **OURS}
    firing = {minute: [absent] for minute in range(135, 181, 5)}
    _promtool_test(tmp_path, inputs, _every("ElastiCacheExporterAbsent", range(0, 181, 5), firing))


@pytest.mark.unit
def test_no_critical_alert_fires_on_one_evaluation():
    """A critical alert waits its `for`, or declares the `window` its expression's condition must already have held (a
    series the exporter computes over minutes, named in the catalog, never guessed from the expression)."""
    from exporter.alerts.catalog import duration_seconds

    at_once = []
    for alert in load_catalog():
        if alert.severity != "critical" or not (alert.expr or alert.baseline):
            continue
        held = duration_seconds(alert.duration) + (duration_seconds(alert.window) if alert.window else 0)
        if duration_seconds(alert.duration) == 0 and (alert.window is None or duration_seconds(alert.window) < 300):
            at_once.append(alert.name)
        assert held >= 60, alert.name
    assert at_once == []
    windowed = {alert.name: alert.window for alert in load_catalog() if alert.severity == "critical" and alert.window}
    assert windowed == {
        "ElastiCacheNetworkOutAtAWSBaseline": "15m",
        "ElastiCacheNetworkOutOverAWSBaseline": "15m",
        "ElastiCacheNetworkInAtAWSBaseline": "15m",
        "ElastiCacheNetworkInOverAWSBaseline": "15m",
        "ElastiCacheDurabilityLagNearRejection": "5m",
        "ElastiCacheServerlessThrottled": "5m",
        "ElastiCacheBandwidthOutAllowanceExceeded": "5m",
        "ElastiCacheBandwidthInAllowanceExceeded": "5m",
        "ElastiCacheConntrackAllowanceExceeded": "5m",
    }


def test_command_p99_is_recorded_from_native_histograms_as_from_classic_buckets(tmp_path):
    """Prometheus 3 with scrape_native_histograms keeps redis_commands_latencies_usec as one native histogram and no
    _bucket series: the recording rule the latency alerts read takes either. 100 SETs a minute between 65.5 and 131 ms,
    as native buckets (schema 0, bucket 17) on one node and as classic ones on another: a p99 in that bucket on both."""
    native_minute = "{{schema:0 count:100 sum:10000000 offset:17 buckets:[100]}}"
    inputs = [
        (series("redis_commands_latencies_usec", instance="native", cmd="set"), f"{{{{schema:0 count:0 sum:0}}}}+{native_minute}x40"),
        (series(BUCKET, instance="classic", cmd="set", le="65536"), "0+0x40"),
        (series(BUCKET, instance="classic", cmd="set", le="131072"), "0+100x40"),
        (series(BUCKET, instance="classic", cmd="set", le="+Inf"), "0+100x40"),
    ]
    rules = tmp_path / "rules.yml"
    rules.write_text(_without_annotations(RULES.read_text()))
    in_bucket = 'count by (command_class) (elasticache:command_p99_seconds{cmd="set"} > 0.0655 < 0.1311)'
    test = {
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in inputs],
        "promql_expr_test": [
            {"expr": in_bucket, "eval_time": "20m", "exp_samples": [{"labels": '{command_class="write"}', "value": 2}]},
            {"expr": 'count(elasticache:command_p99_seconds{instance="native"})', "eval_time": "20m", "exp_samples": [{"labels": "{}", "value": 1}]},
        ],
    }
    test_file = tmp_path / "native.test.yml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [test]}, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
