"""One outage, one page, for as long as it lasts: what the live exporter serves over a primary and its replica (one
shard of group "orders", configured), before and after the primary stops, replayed through the shipped rules by
promtool for more than two hours of outage; the alerts that fire then go through the rendered inhibit rules of a real
Alertmanager, and only RedisDown is left to notify."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families
from servers import post_firing, start_exporter, start_redis, start_rendered_alertmanager, wait_until
from tools import promtool

from exporter.alerts.alertmanager import routing
from exporter.alerts.catalog import DEFAULT_SOURCE, SOURCE_LABEL, load_catalog

ROOT = Path(__file__).parent.parent
RULES = ROOT / "rules" / "prometheus" / "elasticache-exporter.rules.yml"
EXPORTER = {"job": "elasticache", "instance": "exporter:9769"}  # what Prometheus adds to the exporter's own series
BEFORE_MINUTES, OUTAGE_MINUTES = 10, 130
SHARD = {"replication_group": "orders", "shard": "0001"}

Sample = tuple[str, tuple[tuple[str, str], ...]]


def exposition(text: str) -> dict[Sample, float]:
    """The samples of one /metrics, as Prometheus would store them from a job with honor_labels."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not math.isfinite(sample.value):
                continue
            labels = {k: v for k, v in sample.labels.items() if v}  # an empty label is no label
            labels = {**EXPORTER, **labels}
            samples[(sample.name, tuple(sorted(labels.items())))] = sample.value
    return samples


def series_name(sample: Sample) -> str:
    name, labels = sample
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


def input_series(before: dict[Sample, float], during: dict[Sample, float]) -> list[dict[str, str]]:
    """One sample a minute: ``before`` for BEFORE_MINUTES, then ``during``; a series that ends gets a staleness marker,
    as Prometheus writes one when a scrape no longer has it."""
    inputs = []
    for sample in sorted(before.keys() | during.keys()):
        values = [repr(before[sample]) if sample in before else "_"] * BEFORE_MINUTES
        if sample in during:
            values += [repr(during[sample])] * OUTAGE_MINUTES
        else:
            values.append("stale")
        inputs.append({"series": series_name(sample), "values": " ".join(values)})
    return inputs


def metrics(exporter) -> dict[Sample, float]:
    status, body = exporter.get("/metrics")
    assert status == 200
    return exposition(body)


def value(samples: dict[Sample, float], name: str, **labels: str) -> float | None:
    for (sample_name, sample_labels), sample_value in samples.items():
        if sample_name == name and labels.items() <= dict(sample_labels).items():
            return sample_value
    return None


def capture_an_outage(tmp_path: Path) -> tuple[dict[Sample, float], dict[Sample, float]]:
    primary = start_redis()
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    exporter = None
    try:
        wait_until(lambda: replica.info().get("master_link_status") == "up", what="replica link")
        config = tmp_path / "exporter.yml"
        targets = [{"name": name, "addr": node.addr, **SHARD} for name, node in (("orders-001", primary), ("orders-002", replica))]
        config.write_text(yaml.safe_dump({"targets": targets}))
        exporter = start_exporter("--config.file", str(config))

        def both_up() -> dict[Sample, float] | None:
            samples = metrics(exporter)
            up = [value(samples, "redis_up", instance=name) for name in ("orders-001", "orders-002")]
            return samples if up == [1.0, 1.0] and value(samples, "redis_master_link_up", instance="orders-002") == 1.0 else None

        before = wait_until(both_up, timeout=30, what="both nodes up and linked")
        primary.stop()

        def primary_down() -> dict[Sample, float] | None:
            samples = metrics(exporter)
            down = value(samples, "redis_up", instance="orders-001") == 0.0
            return samples if down and value(samples, "redis_master_link_up", instance="orders-002") == 0.0 else None

        during = wait_until(primary_down, timeout=30, what="the primary down and the replica's link lost")
        return before, during
    finally:
        if exporter is not None:
            exporter.stop()
        replica.stop()
        primary.stop()


def _labels(sample: Sample) -> dict[str, str]:
    return dict(sample[1])


def expected_alerts(during: dict[Sample, float]) -> list[dict[str, str]]:
    """What fires through the outage: the primary's RedisDown with its shard, and the two echoes of it in the shard
    (the replica's lost link, the shard without a master), each with the labels the live series give it."""
    (down,) = [_labels(s) for s, v in during.items() if s[0] == "redis_up" and v == 0.0]
    (link,) = [_labels(s) for s, v in during.items() if s[0] == "redis_master_link_up" and v == 0.0]
    severity = {alert.name: alert.severity for alert in load_catalog()}
    ours = {SOURCE_LABEL: DEFAULT_SOURCE}
    return [
        {"alertname": "RedisDown", **down, **SHARD, "shard_source": "config", "severity": severity["RedisDown"], **ours},
        {"alertname": "RedisMasterLinkDown", **link, **SHARD, "shard_source": "config", "severity": severity["RedisMasterLinkDown"], **ours},
        {"alertname": "RedisMissingMaster", **SHARD, "severity": severity["RedisMissingMaster"], **ours},
    ]


def promtool_test(tmp_path: Path, inputs: list[dict[str, str]], alerts: list[dict[str, str]]) -> subprocess.CompletedProcess:
    """ALERTS at every minute: nothing before the outage; from its third minute to its end, exactly ``alerts``."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    firing = [
        {"labels": "ALERTS{" + ",".join(f'{k}="{v}"' for k, v in sorted({**a, "alertstate": "firing"}.items())) + "}", "value": 1} for a in alerts
    ]
    checks = [{"expr": 'ALERTS{alertstate="firing"}', "eval_time": f"{minute}m", "exp_samples": []} for minute in range(1, BEFORE_MINUTES)]
    checks += [
        {"expr": 'ALERTS{alertstate="firing"}', "eval_time": f"{minute}m", "exp_samples": firing}
        for minute in range(BEFORE_MINUTES + 3, BEFORE_MINUTES + OUTAGE_MINUTES)
    ]
    document = {
        "rule_files": [str(tmp_path / "rules.yml")],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": inputs, "promql_expr_test": checks}],
    }
    test_file = tmp_path / "outage.test.yml"
    test_file.write_text(yaml.safe_dump(document, sort_keys=False, width=1_000_000))
    return subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=300, check=False)


def notified_after_inhibitions(tmp_path: Path, alerts: list[dict[str, str]]) -> dict[str, str]:
    """Each alert's state in a real Alertmanager configured with the rendered routing and inhibit rules."""
    manager = start_rendered_alertmanager(tmp_path, routing(load_catalog()))
    try:
        post_firing(manager, alerts)

        def states() -> dict[str, str]:
            return {alert["labels"]["alertname"]: alert["status"]["state"] for alert in manager.api("/alerts")}  # type: ignore[union-attr]

        wait_until(lambda: len(states()) == len(alerts) and "unprocessed" not in states().values(), timeout=30, what="the alerts listed")
        wait_until(lambda: states()["RedisMasterLinkDown"] == "suppressed", timeout=10, interval=0.2, what="the inhibitions applied")
        return states()
    finally:
        manager.stop()


def test_a_primary_down_for_two_hours_pages_once_with_one_label_set(tmp_path):
    before, during = capture_an_outage(tmp_path)
    # the down primary keeps the shard it is configured in, with no role: it is not answering as anything
    membership = [_labels(s) for s in during if s[0] == "elasticache_shard_member_info" and _labels(s)["instance"] == "orders-001"]
    assert membership == [{**EXPORTER, "instance": "orders-001", **SHARD, "shard_source": "config"}]  # role="" is no label
    alerts = expected_alerts(during)
    result = promtool_test(tmp_path, input_series(before, during), alerts)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert notified_after_inhibitions(tmp_path, alerts) == {
        "RedisDown": "active",
        "RedisMasterLinkDown": "suppressed",
        "RedisMissingMaster": "suppressed",
    }


def test_a_node_down_stays_in_the_shard_it_last_answered_in(tmp_path):
    """Without a configured shard, a node's shard is its replication id, learnt from the node: the exporter keeps serving
    it, without a role, while the node is down (the recording rule's 10-minute fallback only bridges a restart)."""
    primary = start_redis()
    exporter = None
    try:
        config = tmp_path / "exporter.yml"
        config.write_text(yaml.safe_dump({"targets": [{"name": "solo", "addr": primary.addr}]}))
        exporter = start_exporter("--config.file", str(config))

        def member() -> dict[str, str] | None:
            found = [_labels(s) for s in metrics(exporter) if s[0] == "elasticache_shard_member_info"]
            return found[0] if found else None

        answering = wait_until(member, timeout=30, what="the node's membership")
        assert (answering["shard_source"], answering["role"]) == ("replication", "master")
        primary.stop()
        wait_until(lambda: value(metrics(exporter), "redis_up", instance="solo") == 0.0, timeout=30, what="the node down")
        assert member() == {k: v for k, v in answering.items() if k != "role"}  # role="": no label
    finally:
        if exporter is not None:
            exporter.stop()
        primary.stop()
