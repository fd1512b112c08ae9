"""End to end: a real Prometheus scrapes the exporter (single- and multi-target), loads the rendered rules,
and the bandwidth and heartbeat-lag alerts fire under a real load or stall and resolve after it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml
from proxy import StallableProxy
from servers import start_exporter, start_prometheus, start_redis, wait_until
from test_replication import ElastiCacheHeartbeat
from tools import require

TEST_TABLE = """
format: elasticache-exporter-baselines
version: 1
basis: measured
node_types:
  cache.test.small:
    vcpus: 2
    memory_gib: 1
    measured:
      bytes_per_second: {'100': 2000000, '90': 1800000, '80': 1600000}
      method: a figure a local redis-benchmark load exceeds
"""


def api(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return json.loads(response.read())


def firing(port: int, name: str, **labels: str) -> bool:
    wanted = {"alertname": name, **labels}
    return any(
        alert["state"] == "firing" and all(alert["labels"].get(k) == v for k, v in wanted.items())
        for alert in api(port, "/api/v1/alerts")["data"]["alerts"]
    )


DURATION = r"(?:\d+(?:ms|[smhdwy]))+"
WINDOW = re.compile(rf"\[({DURATION})(?::({DURATION})?)?\]|\boffset\s+({DURATION})")
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(duration: str) -> float:
    return sum(float(number) * UNITS[unit] for number, unit in re.findall(r"(\d+)(ms|[smhdwy])", duration))


def scaled(duration: str, factor: float) -> str:
    return f"{round(seconds(duration) * factor * 1000)}ms"


def shorten(rules_text: str, keep_firing_for: str | None = None, *, minute: str | None = None) -> str:
    """The rendered rules with every `for` at 5 s, so a test sees firing and resolving quickly; a keep_firing_for at
    ``keep_firing_for``, or none. With ``minute``, time itself runs faster instead: every duration of the rules (each
    `for` and `keep_firing_for`, and every window and offset of every expression, the recording rules' too) scaled so
    that a minute lasts ``minute``: one setting, and the rules keep their proportions (a 10 m window outlasts a 2 m
    keep_firing_for as it does in production)."""
    document = yaml.safe_load(rules_text)
    factor = seconds(minute) / 60 if minute else None

    def window(match: re.Match) -> str:
        assert factor is not None
        text = match.group(0)
        if match.group(3):
            return f"offset {scaled(match.group(3), factor)}"
        step = f":{scaled(match.group(2), factor)}" if match.group(2) else (":" if ":" in text else "")
        return f"[{scaled(match.group(1), factor)}{step}]"

    for group in document["groups"]:
        for rule in group["rules"]:
            if factor is not None:
                rule["expr"] = WINDOW.sub(window, rule["expr"])
                for key in ("for", "keep_firing_for"):
                    if key in rule:
                        rule[key] = scaled(rule[key], factor)
            elif "alert" in rule:
                rule["for"] = "5s"
                if keep_firing_for and "keep_firing_for" in rule:
                    rule["keep_firing_for"] = keep_firing_for
                else:
                    rule.pop("keep_firing_for", None)
    return yaml.safe_dump(document, sort_keys=False)


@pytest.fixture
def stack(tmp_path):
    primary = start_redis()
    proxy = StallableProxy(primary.port)
    replica = start_redis("--replicaof", "127.0.0.1", str(proxy.port))
    wait_until(lambda: replica.info().get("master_link_status") == "up", what="replica link")
    table = tmp_path / "baselines.yml"
    table.write_text(TEST_TABLE)
    config = tmp_path / "exporter.yml"
    config.write_text(
        f"targets:\n  - name: primary\n    addr: {primary.addr}\n    node_type: cache.test.small\n"
        f"  - name: replica\n    addr: {replica.addr}\n    node_type: cache.test.small\n"
        f"baselines:\n  file: {table}\n  window: 4s\n"
    )
    exporter = start_exporter("--config.file", str(config))
    rendered = subprocess.run(
        [sys.executable, "-m", "exporter", "render", "prometheus", "--baselines", str(table)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    rules = tmp_path / "rules.yml"
    rules.write_text(shorten(rendered))
    prometheus = start_prometheus(
        tmp_path,
        rules,
        [
            {"job_name": "elasticache", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]},
            {
                "job_name": "elasticache-nodes",
                "metrics_path": "/scrape",
                "static_configs": [{"targets": [replica.addr]}],
                "relabel_configs": [
                    {"source_labels": ["__address__"], "target_label": "__param_target"},
                    {"source_labels": ["__param_target"], "target_label": "instance"},
                    {"target_label": "__address__", "replacement": f"127.0.0.1:{exporter.port}"},
                ],
            },
        ],
    )
    prometheus_port = prometheus.port

    def targets_up() -> bool:
        try:
            targets = api(prometheus_port, "/api/v1/targets")["data"]["activeTargets"]
        except OSError:
            return False
        return len(targets) == 2 and all(t["health"] == "up" for t in targets)

    try:
        wait_until(targets_up, timeout=60, what="Prometheus scraping both jobs")
        yield {"primary": primary, "replica": replica, "proxy": proxy, "prometheus": prometheus_port}
    finally:
        prometheus.stop()
        exporter.stop()
        proxy.resume()
        replica.stop()
        proxy.close()
        primary.stop()


def test_bandwidth_and_heartbeat_alerts_fire_and_resolve(stack):
    port = stack["prometheus"]
    query = api(port, "/api/v1/query?query=" + urllib.request.quote('redis_up{job="elasticache-nodes"}'))
    assert query["data"]["result"][0]["value"][1] == "1"  # the multi-target job scrapes through /scrape
    rules = api(port, "/api/v1/rules")["data"]["groups"]
    assert {group["name"] for group in rules} == {"elasticache-baselines", "elasticache-commands", "elasticache-membership", "elasticache-alerts"}

    stack["primary"].client().set("key:__rand_int__", "x" * 1000)  # what redis-benchmark's GET reads
    benchmark = require("redis-benchmark")
    load = subprocess.Popen(
        [benchmark, "-p", str(stack["primary"].port), "-t", "get", "-d", "1000", "-n", "100000000", "-c", "10", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: firing(port, "ElastiCacheNetworkOutAtBaseline", instance="primary"), timeout=60, interval=0.5, what="the bandwidth alert firing"
        )
        assert firing(port, "ElastiCacheNetworkOutNearBaseline", instance="primary", severity="warning")
    finally:
        load.terminate()
        load.wait(timeout=10)
    wait_until(
        lambda: not firing(port, "ElastiCacheNetworkOutAtBaseline", instance="primary"),
        timeout=60,
        interval=0.5,
        what="the bandwidth alert resolving",
    )

    with ElastiCacheHeartbeat(stack["primary"].client()):
        time.sleep(2)
        assert not firing(port, "RedisReplicationHeartbeatLag")
        stack["proxy"].stall()
        try:
            wait_until(
                lambda: firing(port, "RedisReplicationHeartbeatLag", instance="replica"),
                timeout=60,
                interval=0.5,
                what="the heartbeat lag alert firing",
            )
        finally:
            stack["proxy"].resume()
        wait_until(
            lambda: not firing(port, "RedisReplicationHeartbeatLag", instance="replica"),
            timeout=60,
            interval=0.5,
            what="the heartbeat lag alert resolving",
        )
