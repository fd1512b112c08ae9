"""What the CloudWatch alarms cost, counted one way: `cost`, `alarms plan` and the CloudFormation fleet make and price the
same alarms for the same nodes, and one alarm a node notifies INSUFFICIENT_DATA."""

from __future__ import annotations

import re
import subprocess

import boto3
import pytest
import yaml
from helpers import cfn_lint
from moto import mock_aws
from promql_front import PromQLFront, otel_presence, start_otel_prometheus
from servers import wait_until
from test_alarm_twins import _CfnLoader

from exporter.alerts.alarms import apply, desired_alarms, plan
from exporter.alerts.catalog import load_catalog
from exporter.aws.api import AwsApi
from exporter.aws.discovery import Node
from exporter.aws.pricing import HIGH_RESOLUTION_ALARM, METRIC_MATH_ALARM, STANDARD_ALARM, alarm_lines, alarm_price
from exporter.baselines.table import load_table
from exporter.cli.main import main

REGION = "eu-west-1"
TOPIC = "arn:aws:sns:eu-west-1:123456789012:pages"
# types with a baseline, one with CPU credits, one with data tiering, and an old burstable type the table lacks
FLEET = {"cache.r6g.large": 4, "cache.t3.medium": 3, "cache.m6g.large": 3, "cache.r6gd.xlarge": 2, "cache.t2.micro": 2}


def _stat(period: int = 60) -> dict:
    metric = {"Namespace": "AWS/ElastiCache", "MetricName": "Evictions", "Dimensions": []}
    return {"Metric": metric, "Period": period, "Stat": "Sum"}


@pytest.mark.unit
def test_an_alarm_is_priced_per_metric_it_reads():
    plain = {"MetricName": "EngineCPUUtilization", "Period": 60}
    increase = {"Metrics": [{"Id": "m1", "MetricStat": _stat()}, {"Id": "e1", "Expression": "DIFF(m1)"}]}
    two = {"Metrics": [{"Id": "m1", "MetricStat": _stat()}, {"Id": "m2", "MetricStat": _stat()}, {"Id": "e1", "Expression": "m1+m2"}]}
    fast = {"MetricName": "EngineCPUUtilization", "Period": 10}
    assert alarm_price(plain) == (STANDARD_ALARM, 1)
    assert alarm_price(increase) == (METRIC_MATH_ALARM, 1)  # DIFF of one metric reads one metric
    assert alarm_price(two) == (METRIC_MATH_ALARM, 2)
    assert alarm_price(fast) == (HIGH_RESOLUTION_ALARM, 1)
    lines = alarm_lines([plain, increase, two, plain, fast])
    assert [(line.price.kind, line.alarms, line.metrics) for line in lines] == [("standard", 2, 2), ("metric math", 2, 3), ("high resolution", 1, 1)]
    assert sum(line.usd_per_month for line in lines) == pytest.approx(2 * 0.10 + 3 * 0.10 + 0.30)


@pytest.mark.unit
def test_one_alarm_a_node_notifies_insufficient_data_and_every_node_gets_it():
    """A node replaced or gone leaves every alarm of it without data: one notice a node, not one per alarm."""
    nodes = [
        Node(region=REGION, cluster_id=f"{node_type.split('.')[1]}-001", node_id="0001", node_type=node_type, engine="valkey", engine_version="8.0")
        for node_type in FLEET
    ]
    desired, _ = desired_alarms(nodes, load_catalog(), load_table(), TOPIC)
    for node in nodes:
        mine = [alarm for _, alarm in desired if alarm["AlarmName"].startswith(node.cluster_id + "-")]
        assert len(mine) > 10
        telling = [alarm["AlarmName"] for alarm in mine if alarm["InsufficientDataActions"]]
        assert telling == [f"{node.cluster_id}-ElastiCacheEngineCPUSaturated"], node.node_type
        assert all(alarm["AlarmActions"] == [TOPIC] and alarm["OKActions"] == [TOPIC] for alarm in mine)


def _seed() -> list[tuple[str, str, str]]:
    elasticache = boto3.client("elasticache", region_name=REGION)
    made = []
    for node_type, count in FLEET.items():
        for index in range(count):
            cluster_id = f"{node_type.split('.')[1]}-{index:03d}"
            engine = "valkey" if node_type.startswith(("cache.r6g.", "cache.m6g.")) else "redis"  # Valkey emits OpenTelemetry
            elasticache.create_cache_cluster(CacheClusterId=cluster_id, CacheNodeType=node_type, Engine=engine, NumCacheNodes=1)
            made.append((cluster_id, node_type, engine))
    return made


def _alarm_total(printed: str) -> tuple[int, int, float, float]:
    """`cost`'s alarm total: alarms, alarm metrics, USD a node and a month."""
    section = printed[printed.index("Alarms, ") :]
    found = re.search(r"^total\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)$", section, re.MULTILINE)
    assert found is not None, printed
    return int(found.group(1).replace(",", "")), int(found.group(2).replace(",", "")), float(found.group(3)), float(found.group(4))


VALKEY = [f"{node_type.split('.')[1]}-{index:03d}" for node_type in ("cache.r6g.large", "cache.m6g.large") for index in range(FLEET[node_type])]


@pytest.fixture(scope="module")
def promql(tmp_path_factory):
    """CloudWatch's PromQL API for moto's credentials, holding the vended metrics of the fleet's Valkey nodes."""
    prometheus, exposition = start_otel_prometheus(tmp_path_factory.mktemp("otel"), otel_presence(VALKEY))
    front = PromQLFront(prometheus.port, REGION, "testing", "testing", "testing")  # moto's: set again inside mock_aws
    try:
        yield front, exposition
    finally:
        front.stop()
        exposition.stop()
        prometheus.stop()


def _trust_moto_credentials(front: PromQLFront) -> None:
    """The front checks signatures made with the credentials moto gives its clients inside mock_aws."""
    frozen = boto3.session.Session().get_credentials().get_frozen_credentials()
    front.credentials = (frozen.access_key, frozen.secret_key, frozen.token)


@pytest.mark.parametrize(("style", "network"), [("per-node", "percentage"), ("per-node", "bytes"), ("fleet", "percentage"), ("fleet", "bytes")])
def test_cost_alarms_plan_and_the_cloudformation_fleet_count_the_same_alarms(aws_credentials, tmp_path, capsys, promql, style, network):
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"aws": {"regions": [REGION]}}))
    options = ["--config.file", str(config), "--network-alarms", network, "--alarms", style, "--promql-endpoint", promql[0].url]
    with mock_aws():
        _trust_moto_credentials(promql[0])
        made = _seed()
        assert main(["cost", *options]) == 0
        priced = capsys.readouterr().out
        assert main(["alarms", "plan", *options]) == 0
        planned = capsys.readouterr().out
    assert "fleet alarms:" not in priced + planned  # every Valkey node found with its metrics
    alarms, metrics, usd_node, usd_month = _alarm_total(priced)
    to_create = re.search(r"^(\d+) to create, 0 to update, 0 to delete, 0 unchanged$", planned, re.MULTILINE)
    assert to_create is not None, planned
    assert alarms == int(to_create.group(1)) == planned.count("+ create ")
    assert metrics == alarms  # every alarm of the catalog reads one metric (an increase is DIFF of one); a PromQL alarm is one
    assert usd_month == pytest.approx(alarms * 0.10, abs=0.005)
    assert ("PromQL " in priced) == (style == "fleet")
    assert ("(PromQL)" in planned) == (style == "fleet")
    assert usd_node == pytest.approx(usd_month / len(made), abs=0.0001)
    polling = float(re.search(r"^total\s+[\d,]+\s+([\d.]+)\s+[\d.]+$", priced, re.MULTILINE).group(1))  # type: ignore[union-attr]
    together = re.search(r"^Polling and alarms together: USD ([\d.]+) a node", priced, re.MULTILINE)
    assert together is not None
    assert float(together.group(1)) == pytest.approx(polling + usd_node, abs=0.0002)
    # the burstable type the table lacks still gets its CPU credits alarm, and no baseline alarm
    assert "+ create eu-west-1 t2-000-ElastiCacheBurstCreditsLow " in planned
    assert "+ create eu-west-1 t2-000-ElastiCacheNetworkOutAtBaseline " not in planned
    if network != "percentage":
        return  # the stacks' network family is a parameter of theirs, percentage by default
    fleet = tmp_path / "fleet.yml"
    listed = [{"cluster_id": cluster_id, "node_type": node_type, "engine": engine} for cluster_id, node_type, engine in made]
    fleet.write_text(yaml.safe_dump({"nodes": listed}))
    stacks = tmp_path / "stacks"
    assert main(["render", "cloudformation", "--fleet", str(fleet), "--out", str(stacks), "--alarms", style]) == 0
    rendered = capsys.readouterr().err
    created = re.search(r"(\d+) alarm\(s\) created at NetworkAlarms' default", rendered)
    assert created is not None, rendered
    assert int(created.group(1)) == alarms == _created_by_the_stacks(stacks)
    assert (stacks / "elasticache-alarms-fleet.yaml").exists() == (style == "fleet")
    lint = subprocess.run([cfn_lint(), *map(str, sorted(stacks.glob("*.yaml")))], capture_output=True, text=True, timeout=300, check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def _created_by_the_stacks(directory) -> int:
    """The alarms the rendered stacks create with their parameters at the defaults: per stack its nodes times its alarm
    resources whose condition holds (a network family's: the NetworkAlarms parameter's default)."""
    count = 0
    for path in sorted(directory.glob("*.yaml")):
        template = yaml.load(path.read_text(), Loader=_CfnLoader)  # noqa: S506
        default = template["Parameters"]["NetworkAlarms"]["Default"]
        holds = {name: name == f"NetworkAlarmsBy{default.capitalize()}" for name in template.get("Conditions", {})}
        resources = template["Resources"]
        if "Fn::ForEach::NodeAlarms" in resources:
            _, ids, alarms = resources["Fn::ForEach::NodeAlarms"]
        else:  # the fleet's PromQL alarms: each once
            ids, alarms = [""], {name: r for name, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
        count += len(ids) * sum(1 for alarm in alarms.values() if holds.get(alarm.get("Condition", ""), "Condition" not in alarm))
    return count


def test_a_catalog_that_stops_notifying_insufficient_data_plans_updates_and_a_second_apply_changes_nothing(aws_credentials):
    """Alarms made when every alarm notified INSUFFICIENT_DATA: the plan updates each but the node's one that still
    does; after apply, nothing differs."""
    nodes = [Node(region=REGION, cluster_id="orders-001", node_id="0001", node_type="cache.r6g.large", engine="valkey", engine_version="8.0")]
    desired, _ = desired_alarms(nodes, load_catalog(), load_table(), TOPIC)
    with mock_aws():
        api = AwsApi()
        cloudwatch = api.client("cloudwatch", REGION)
        for _, alarm in desired:
            api.call(cloudwatch, "put_metric_alarm", **{**alarm, "InsufficientDataActions": [TOPIC]})
        changes = plan(api, desired, (REGION,))
        assert {(c.name, c.action, c.differences) for c in changes if c.action != "update"} == {
            ("orders-001-ElastiCacheEngineCPUSaturated", "unchanged", ())
        }
        assert {c.differences for c in changes if c.action == "update"} == {("InsufficientDataActions",)}
        assert apply(api, changes) == len(desired) - 1
        assert {c.action for c in plan(api, desired, (REGION,))} == {"unchanged"}


def test_cost_without_alarms_prices_the_polling_alone(aws_credentials, tmp_path, capsys):
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"aws": {"regions": [REGION]}}))
    with mock_aws():
        _seed()
        assert main(["cost", "--config.file", str(config), "--alarms", "none"]) == 0
    printed = capsys.readouterr().out
    assert "Alarms: none priced (--alarms none)." in printed
    assert "as `alarms plan" not in printed


def test_a_valkey_node_without_opentelemetry_metrics_keeps_its_own_alarms_and_is_named(aws_credentials, tmp_path, capsys, promql):
    front, exposition = promql
    exposition.text = otel_presence([node for node in VALKEY if node != "r6g-003"])
    try:
        config = tmp_path / "config.yml"
        config.write_text(yaml.safe_dump({"aws": {"regions": [REGION]}}))
        options = ["--config.file", str(config), "--alarms", "fleet", "--promql-endpoint", front.url]
        with mock_aws():
            _trust_moto_credentials(front)
            _seed()

            def planned() -> str:
                assert main(["alarms", "plan", *options]) == 0
                return capsys.readouterr().out

            wait_until(lambda: "metrics (r6g-003)" in planned(), timeout=30, interval=0.5, what="the node's series gone from the engine")
            text = planned()
            failing = [*options[:-1], "http://127.0.0.1:9"]  # nothing answers: the region cannot be asked
            assert main(["alarms", "plan", *failing]) == 0
            unreachable = capsys.readouterr().out
    finally:
        exposition.text = otel_presence(VALKEY)
    assert "! fleet alarms: eu-west-1: 1 Valkey node(s) without OpenTelemetry metrics (r6g-003) keep their own alarms" in text
    assert "+ create eu-west-1 r6g-003-ElastiCacheEvictions " in text
    assert "+ create eu-west-1 r6g-002-ElastiCacheEvictions " not in text  # in the fleet alarm
    assert "! fleet alarms: eu-west-1: CloudWatch's PromQL API refused (connection: " in unreachable
    assert "its 7 Valkey node(s) keep their own alarms" in unreachable
    assert "(PromQL)" not in unreachable
