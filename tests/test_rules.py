"""The rendered rules and template: up to date, deterministic, and checked by promtool and cfn-lint.

Every alert of the catalog has a promtool unit test here: it fires at its threshold after its `for`,
is silent before that, and is silent below the threshold.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from exporter.alerts.render import load_catalog, render_cloudformation, render_prometheus
from exporter.baselines.table import load_table

ROOT = Path(__file__).parent.parent
RULES = ROOT / "rules" / "prometheus" / "elasticache-exporter.rules.yml"
TEMPLATE = ROOT / "rules" / "cloudformation" / "elasticache-alarms.yaml"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def test_committed_outputs_are_up_to_date_and_deterministic():
    alerts, table = load_catalog(), load_table()
    assert render_prometheus(alerts, table) == render_prometheus(load_catalog(), load_table()) == RULES.read_text(), (
        "stale: run elasticache-exporter render prometheus --out rules/prometheus"
    )
    assert render_cloudformation(alerts, table) == TEMPLATE.read_text(), (
        "stale: run elasticache-exporter render cloudformation --out rules/cloudformation"
    )


def test_promtool_check_rules():
    result = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def cfn_lint() -> str:
    beside = Path(sys.executable).parent / "cfn-lint"
    return str(beside) if beside.exists() else "cfn-lint"


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


def test_every_threshold_resolves_to_the_baseline_in_the_alarms_statistic_and_period():
    template = yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass for CloudFormation tags
    table = load_table()
    node_types = template["Parameters"]["CacheNodeType"]["AllowedValues"]
    mapping = template["Mappings"]["BaselineThresholds"]
    assert sorted(node_types) == sorted(mapping)
    assert len(node_types) > 50
    _, _, alarms = template["Resources"]["Fn::ForEach::NodeAlarms"]
    checked = 0
    for logical, alarm in alarms.items():
        properties = alarm["Properties"]
        threshold = properties["Threshold"]
        if not isinstance(threshold, dict):
            continue
        map_name, node_type_ref, key = threshold["FindInMap"]
        assert map_name == "BaselineThresholds"
        assert node_type_ref == {"Ref": "CacheNodeType"}
        for node_type in node_types:
            value = mapping[node_type][key]
            node = table.get(node_type)
            if key.startswith("NetworkBytesPerMinute"):
                level = int(key.removeprefix("NetworkBytesPerMinute"))
                assert properties["Statistic"] == "Sum"
                assert properties["Period"] == 60
                assert value == node.levels(table.basis)[level] * properties["Period"], (logical, node_type)
            elif key.startswith("EngineCpuPercent"):
                level = int(key.removeprefix("EngineCpuPercent"))
                assert properties["Statistic"] == "Average"
                engine = node.measured.engine_cpu_utilization_p90 if node.measured and node.measured.engine_cpu_utilization_p90 else 90.0
                assert value == pytest.approx(engine * level / 100, abs=0.01)
            else:
                assert key == "HostCpuPercent"
                assert value == pytest.approx(90 / node.vcpus, abs=0.01)
            checked += 1
    assert checked >= 7 * len(node_types)
    r6g = mapping["cache.r6g.large"]
    assert r6g["NetworkBytesPerMinute80"] == 75_000_000 * 60
    assert r6g["HostCpuPercent"] == 45.0


def test_every_alarm_notifies_on_alarm_ok_and_insufficient_data():
    template = yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)  # noqa: S506
    _, _, alarms = template["Resources"]["Fn::ForEach::NodeAlarms"]
    catalog = {alert.name for alert in load_catalog() if alert.cloudwatch}
    assert {alarm["Properties"]["AlarmName"]["Sub"].removeprefix("${NodeId}-") for alarm in alarms.values()} == catalog
    for alarm in alarms.values():
        for actions in ("AlarmActions", "OKActions", "InsufficientDataActions"):
            assert alarm["Properties"][actions]


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
    firing = f"{baseline * value_fraction:.0f}+0x20"
    below = f"{baseline * (value_fraction - 0.15):.0f}+0x20"
    return ([(series(signal_name, **labels), firing)], labels, [(series(signal_name, **{**labels, "target": "quiet"}), below)])


for alert, direction, fraction, node, baseline in (
    ("ElastiCacheNetworkOutNearBaseline", "out", 0.85, R6G, 93_750_000),
    ("ElastiCacheNetworkOutAtBaseline", "out", 0.95, T3, 8_000_000),
    ("ElastiCacheNetworkInNearBaseline", "in", 0.85, T3, 8_000_000),
    ("ElastiCacheNetworkInAtBaseline", "in", 0.95, R6G, 93_750_000),
):
    inputs, labels, silent = _baseline_case(
        alert, {"target": "a", "direction": direction, "source": "info"}, fraction, baseline, "elasticache_network_bytes_per_second", node
    )
    case(alert, inputs, "6m", "4m", {**labels, "suggested_node_type": node["suggested_node_type"]}, silent)
for alert, fraction in (("ElastiCacheEngineCPUNearBaseline", 0.85), ("ElastiCacheEngineCPUAtBaseline", 0.95)):
    inputs, labels, silent = _baseline_case(
        alert, {"target": "a", "source": "info"}, fraction, 90, "elasticache_engine_cpu_utilization_percent", R6G
    )
    case(alert, inputs, "11m", "9m", {**labels, "suggested_node_type": R6G["suggested_node_type"]}, silent)

CW = {"dimension_CacheClusterId": "rg-001", "dimension_CacheNodeId": "0001", "region": "eu-west-1"}
for alert, metric in (
    ("ElastiCacheBandwidthOutAllowanceExceeded", "aws_elasticache_network_bandwidth_out_allowance_exceeded_maximum"),
    ("ElastiCacheBandwidthInAllowanceExceeded", "aws_elasticache_network_bandwidth_in_allowance_exceeded_maximum"),
    ("ElastiCachePPSAllowanceExceeded", "aws_elasticache_network_packets_per_second_allowance_exceeded_maximum"),
):
    case(alert, [(series(metric, **CW), "0 0 0 5 10 15 20 25 30 35")], "5m", "3m", CW, [(series(metric, **{**CW, "dimension_CacheClusterId": "q"}), "7+0x10")])  # noqa: E501
case("ElastiCacheConntrackAllowanceExceeded",
     [(series("aws_elasticache_network_conntrack_allowance_exceeded_maximum", **CW), "0 0 3 3 3")], "3m", "1m", CW,
     [(series("aws_elasticache_network_conntrack_allowance_exceeded_maximum", **{**CW, "dimension_CacheClusterId": "q"}), "2+0x5")])  # fmt: skip

T = {"target": "a"}
case("RedisDown", [(series("redis_up", **T), "0+0x5")], "2m", "0m", T, [(series("redis_up", target="q"), "1+0x5")])
case("ElastiCacheExporterTargetDown", [(series("up", job="elasticache", instance="e:9769"), "0+0x10")], "6m", "4m",
     {"job": "elasticache", "instance": "e:9769"}, [(series("up", job="elasticache", instance="q:9769"), "1+0x10")])  # fmt: skip
case("RedisMissingMaster", [(series("redis_instance_role", target="a", role="slave"), "1+0x5")], "2m", "0m", {},
     [])  # fmt: skip
RG = {"replication_group": "orders"}
case(
    "RedisTooManyMasters",
    [
        (series("redis_instance_role", target="a", role="master"), "1+0x5"),
        (series("redis_instance_role", target="b", role="master"), "1+0x5"),
        (series("elasticache_node_info", target="a", replication_group="orders"), "1+0x5"),
        (series("elasticache_node_info", target="b", replication_group="orders"), "1+0x5"),
        (series("redis_instance_role", target="c", role="master"), "1+0x5"),
        (series("elasticache_node_info", target="c", replication_group="other"), "1+0x5"),
    ],
    "2m", "0m", RG, [],
)  # fmt: skip
case("RedisFailover", [(series("redis_instance_role", target="a", role="slave"), "1 1 1 1 1 1 _ _ _ _"),
                        (series("redis_instance_role", target="a", role="master"), "_ _ _ _ _ _ 1 1 1 1")],
     "7m", "5m", {"target": "a", "role": "master"}, [(series("redis_instance_role", target="q", role="master"), "1+0x10")])  # fmt: skip
case("ElastiCachePrimaryChanged", [(series("aws_elasticache_is_primary_maximum", **CW), "1 1 1 0 0 0")], "4m", "2m", CW,
     [(series("aws_elasticache_is_primary_maximum", **{**CW, "dimension_CacheClusterId": "q"}), "1+0x6")])  # fmt: skip
LINK = {"target": "a", "master_host": "10.0.0.1", "master_port": "6379"}
case("RedisMasterLinkDown", [(series("redis_master_link_up", **LINK), "0+0x5")], "3m", "1m", LINK,
     [(series("redis_master_link_up", **{**LINK, "target": "q"}), "1+0x5")])  # fmt: skip
case("RedisDisconnectedReplicas", [(series("redis_connected_slaves", **T), "2 2 1 1")], "2m", None, T,
     [(series("redis_connected_slaves", target="q"), "2+0x4")])  # fmt: skip
case("RedisReplicationFlapping", [(series("redis_connected_slaves", **T), "1 2 1 2 1 2 1 2 1 2")], "6m", "2m", T,
     [(series("redis_connected_slaves", target="q"), "2+0x10")])  # fmt: skip
case("RedisClusterStateNotOk", [(series("redis_cluster_state", **T), "0+0x10")], "6m", "4m", T,
     [(series("redis_cluster_state", target="q"), "1+0x10")])  # fmt: skip
case("RedisClusterSlotFail", [(series("redis_cluster_slots_fail", **T), "3+0x10")], "6m", "4m", T,
     [(series("redis_cluster_slots_fail", target="q"), "0+0x10")])  # fmt: skip
case("RedisClusterSlotPfail", [(series("redis_cluster_slots_pfail", **T), "3+0x10")], "6m", "4m", T,
     [(series("redis_cluster_slots_pfail", target="q"), "0+0x10")])  # fmt: skip
HB = {"target": "a", "source": "elasticache"}
case("RedisReplicationHeartbeatLag", [(series("elasticache_replication_heartbeat_lag_seconds", **HB), "15+0x5")], "3m", "1m", HB,
     [(series("elasticache_replication_heartbeat_lag_seconds", **{**HB, "target": "q"}), "5+0x5")])  # fmt: skip
case("RedisReplicationHeartbeatStale", [(series("elasticache_replication_heartbeat_age_seconds", **HB), "120+0x10")], "6m", "4m", HB,
     [(series("elasticache_replication_heartbeat_age_seconds", **{**HB, "target": "q"}), "1+0x10")])  # fmt: skip
BL = {"target": "a", "slave_ip": "10.0.0.2", "slave_port": "6379"}
case("RedisReplicationByteLag", [(series("elasticache_replication_lag_bytes", **BL), "20000000+0x10")], "6m", "4m", BL,
     [(series("elasticache_replication_lag_bytes", **{**BL, "target": "q"}), "1000+0x10")])  # fmt: skip
case("ElastiCacheReplicationLag", [(series("aws_elasticache_replication_lag_maximum", **CW), "45+0x10")], "6m", "4m", CW,
     [(series("aws_elasticache_replication_lag_maximum", **{**CW, "dimension_CacheClusterId": "q"}), "3+0x10")])  # fmt: skip
case("RedisOutOfConfiguredMaxmemory",
     [(series("redis_memory_used_bytes", **T), "95+0x5"), (series("redis_memory_max_bytes", **T), "100+0x5")], "3m", "1m", T,
     [(series("redis_memory_used_bytes", target="q"), "50+0x5"), (series("redis_memory_max_bytes", target="q"), "100+0x5"),
      (series("redis_memory_used_bytes", target="z"), "50+0x5"), (series("redis_memory_max_bytes", target="z"), "0+0x5")])  # fmt: skip
case("RedisOutOfSystemMemory",
     [(series("redis_memory_used_bytes", **T), "95+0x5"), (series("redis_total_system_memory_bytes", **T), "100+0x5")], "3m", "1m", T,
     [(series("redis_memory_used_bytes", target="q"), "50+0x5"), (series("redis_total_system_memory_bytes", target="q"), "100+0x5")])  # fmt: skip
case("ElastiCacheDatabaseMemoryHigh", [(series("aws_elasticache_database_memory_usage_percentage_maximum", **CW), "95+0x10")],
     "6m", "4m", CW,
     [(series("aws_elasticache_database_memory_usage_percentage_maximum", **{**CW, "dimension_CacheClusterId": "q"}), "50+0x10")])  # fmt: skip
case("ElastiCacheFreeableMemoryLow", [(series("aws_elasticache_freeable_memory_minimum", **CW), "50000000+0x10")], "6m", "4m", CW,
     [(series("aws_elasticache_freeable_memory_minimum", **{**CW, "dimension_CacheClusterId": "q"}), "500000000+0x10")])  # fmt: skip
case("ElastiCacheSwapUsageHigh", [(series("aws_elasticache_swap_usage_maximum", **CW), "60000000+0x10")], "6m", "4m", CW,
     [(series("aws_elasticache_swap_usage_maximum", **{**CW, "dimension_CacheClusterId": "q"}), "1000+0x10")])  # fmt: skip
case("RedisEvictions", [(series("redis_evicted_keys_total", **T), "0+60x15")], "7m", "4m", T,
     [(series("redis_evicted_keys_total", target="q"), "5+0x15")])  # fmt: skip
case("ElastiCacheEvictions", [(series("aws_elasticache_evictions_sum", **CW), "2000+0x10")], "6m", "4m", CW,
     [(series("aws_elasticache_evictions_sum", **{**CW, "dimension_CacheClusterId": "q"}), "10+0x10")])  # fmt: skip
case("RedisForkSlow", [(series("redis_latest_fork_seconds", **T), "2+0x3")], "1m", None, T,
     [(series("redis_latest_fork_seconds", target="q"), "0.1+0x3")])  # fmt: skip
case("RedisMissingBackup",
     [(series("redis_rdb_last_save_timestamp_seconds", **T), "-200000+0x5"), (series("redis_rdb_last_bgsave_status", **T), "0+0x5")],
     "2m", None, T,
     [(series("redis_rdb_last_save_timestamp_seconds", target="q"), "0+0x5"),
      (series("redis_rdb_last_bgsave_status", target="q"), "1+0x5")])  # fmt: skip
NODE = {**CW, "target": "rg-001", "node": "rg-001", "node_type": "cache.r6g.large", "replication_group": "rg", "shard": "0001",
        "role": "primary", "engine": "redis", "engine_version": "7.1", "az": "eu-west-1a"}  # fmt: skip
case("ElastiCacheHostCPUHigh",
     [(series("aws_elasticache_cpuutilization_average", **CW), "50+0x15"), (series("elasticache_node_info", **NODE), "1+0x15")],
     "11m", "9m", {**CW, "node_type": "cache.r6g.large"},
     [(series("aws_elasticache_cpuutilization_average", **{**CW, "dimension_CacheClusterId": "q"}), "40+0x15"),
      (series("elasticache_node_info", **{**NODE, "dimension_CacheClusterId": "q", "target": "q", "node": "q"}), "1+0x15")])  # fmt: skip
case("RedisTooManyConnections",
     [(series("redis_connected_clients", **T), "95+0x5"), (series("redis_config_maxclients", **T), "100+0x5")], "3m", "1m", T,
     [(series("redis_connected_clients", target="q"), "10+0x5"), (series("redis_config_maxclients", target="q"), "100+0x5")])  # fmt: skip
case("RedisNotEnoughConnections", [(series("redis_connected_clients", **T), "2+0x5")], "3m", "1m", T,
     [(series("redis_connected_clients", target="q"), "50+0x5")])  # fmt: skip
case("ElastiCacheEngineCPUHigh", [(series("aws_elasticache_engine_cpuutilization_average", **CW), "95+0x10")], "6m", "4m", CW,
     [(series("aws_elasticache_engine_cpuutilization_average", **{**CW, "dimension_CacheClusterId": "q"}), "20+0x10")])  # fmt: skip
case("ElastiCacheTooManyConnections", [(series("aws_elasticache_curr_connections_maximum", **CW), "60000+0x10")], "6m", "4m", CW,
     [(series("aws_elasticache_curr_connections_maximum", **{**CW, "dimension_CacheClusterId": "q"}), "100+0x10")])  # fmt: skip
case("RedisRejectedConnections", [(series("redis_rejected_connections_total", **T), "0 0 5 5")], "2m", None, T,
     [(series("redis_rejected_connections_total", target="q"), "3+0x4")])  # fmt: skip
STALE = {**CW, "metric": "aws_elasticache_cpuutilization_average"}
case("ElastiCacheCloudWatchDataStale", [(series("elasticache_cloudwatch_datapoint_timestamp_seconds", **STALE), "0+0x30")], "21m", "19m",
     STALE, [(series("elasticache_cloudwatch_datapoint_timestamp_seconds", **{**STALE, "metric": "q"}), "0+60x30")])  # fmt: skip
case("ElastiCacheCloudWatchPollFailing",
     [(series("elasticache_exporter_cloudwatch_last_success_timestamp_seconds", instance="e:9769", job="x"), "1+0x30")],
     "21m", "19m", {"instance": "e:9769", "job": "x"},
     [(series("elasticache_exporter_cloudwatch_last_success_timestamp_seconds", instance="q:9769", job="x"), "0+0x30")])  # fmt: skip
case("ElastiCacheBaselineMissing",
     [(series("elasticache_exporter_baseline_missing_total", target="a", node_type="cache.z9.huge"), "0+1x30")], "16m", "14m",
     {"target": "a", "node_type": "cache.z9.huge"},
     [(series("elasticache_exporter_baseline_missing_total", target="q", node_type="cache.z9.huge"), "5+0x30")])  # fmt: skip


def _without_annotations(rules_text: str) -> str:
    document = yaml.safe_load(rules_text)
    for group in document["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    return yaml.safe_dump(document, sort_keys=False)


def test_every_alert_has_a_unit_test():
    assert sorted(CASES) == sorted(alert.name for alert in load_catalog() if alert.baseline_signal or alert.expr)


def test_promtool_unit_tests_for_every_alert(tmp_path):
    """Annotations are checked by `promtool check rules` and below; here the expressions, `for` and labels."""
    rules = tmp_path / "rules.yml"
    rules.write_text(_without_annotations(RULES.read_text()))
    severities = {alert.name: alert.severity for alert in load_catalog()}
    tests = []
    for alert, (inputs, fire_at, quiet_at, labels, silent) in sorted(CASES.items()):
        expected = [{"exp_labels": {**labels, "severity": severities[alert]}}]
        checks = [{"eval_time": fire_at, "alertname": alert, "exp_alerts": expected}]
        if quiet_at:
            checks.append({"eval_time": quiet_at, "alertname": alert, "exp_alerts": []})
        tests.append({"interval": "1m", "input_series": [{"series": s, "values": v} for s, v in inputs], "alert_rule_test": checks})
        if silent:
            tests.append(
                {
                    "interval": "1m",
                    "input_series": [{"series": s, "values": v} for s, v in silent],
                    "alert_rule_test": [{"eval_time": fire_at, "alertname": alert, "exp_alerts": []}],
                }
            )
    test_file = tmp_path / "rules.test.yml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests}, sort_keys=False))
    result = subprocess.run([PROMTOOL, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]


def test_annotations_of_a_baseline_alert_render_with_value_node_type_and_suggestion(tmp_path):
    test_file = tmp_path / "annotations.test.yml"
    labels = {"target": "a", "direction": "out", "source": "info", "node_type": "cache.r6g.large"}
    test_file.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(RULES)],
                "evaluation_interval": "1m",
                "tests": [
                    {
                        "interval": "1m",
                        "input_series": [{"series": series("elasticache_network_bytes_per_second", **labels), "values": "85000000+0x10"}],
                        "alert_rule_test": [
                            {
                                "eval_time": "6m",
                                "alertname": "ElastiCacheNetworkOutAtBaseline",
                                "exp_alerts": [
                                    {
                                        "exp_labels": {**labels, "suggested_node_type": "cache.r6g.xlarge", "severity": "critical"},
                                        "exp_annotations": {
                                            "summary": "Network out of a node is above 90 % of its node type's baseline.",
                                            "description": "a (cache.r6g.large) sends 90.67% of the node type's baseline bandwidth (source "
                                            "info); it will be shaped soon. Suggested action: move to cache.r6g.xlarge now, or shed read "
                                            "traffic to replicas.",
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
    result = subprocess.run([PROMTOOL, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr


def test_runbooks_exist_for_every_alert():
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    for alert in load_catalog():
        assert f'<a id="{alert.runbook}"></a>' in runbooks, alert.runbook
