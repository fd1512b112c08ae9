"""End to end on a real cluster-mode set (3 shards x 1 replica) with a real Prometheus and the rendered rules:
nothing fires while it is healthy; stopping one master fires exactly the alerts of that node and its shard."""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
import time
import urllib.request

import pytest
from servers import start_exporter, start_prometheus, start_redis, wait_until
from test_e2e_prometheus import api, shorten
from test_outage_alerts import notified_after_inhibitions


def firing_alerts(port: int) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """(alertname, the labels that name the node or shard) of every firing alert."""
    keep = ("instance", "replication_group", "shard")
    result = set()
    for alert in api(port, "/api/v1/alerts")["data"]["alerts"]:
        if alert["state"] == "firing":
            labels = alert["labels"]
            result.add((labels["alertname"], tuple((k, labels[k]) for k in keep if k in labels)))
    return result


FOR_SECONDS = 5  # every alert's `for` in the shortened rules


def _evaluated_at(group: dict) -> float:
    """A rule group's last evaluation, as a Unix time (Prometheus writes RFC 3339 with nanoseconds)."""
    text = re.sub(r"(\.\d{6})\d*", r"\1", group["lastEvaluation"]).replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(text).timestamp()


def wait_for_evaluations(port: int, since: float, seconds: float) -> None:
    """Until Prometheus has evaluated every rule group ``seconds`` after ``since``: its evaluations counted, not the
    wall clock hoped for (a busy machine delays them)."""

    def evaluated() -> bool:
        groups = api(port, "/api/v1/rules")["data"]["groups"]
        return bool(groups) and all(_evaluated_at(group) >= since + seconds for group in groups)

    wait_until(evaluated, timeout=60, interval=0.5, what=f"every rule group evaluated {seconds} s on")


@pytest.fixture
def cluster_stack(tmp_path):
    # a long node timeout: no failover and no pfail while the test looks, so the expected alerts are exact
    nodes = [start_redis("--cluster-enabled", "yes", "--cluster-node-timeout", "120000") for _ in range(6)]
    prometheus = exporter = None
    try:
        subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes), "--cluster-replicas", "1", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        for node in nodes:
            wait_until(lambda node=node: b"cluster_state:ok" in node.client().execute_command("CLUSTER", "INFO"), timeout=30, what="cluster state ok")
            if node.info().get("role") == "slave":
                wait_until(lambda node=node: node.info().get("master_link_status") == "up", timeout=30, what="replica link")
        config = tmp_path / "exporter.yml"
        config.write_text("targets:\n" + "".join(f"  - name: n{i}\n    addr: {n.addr}\n" for i, n in enumerate(nodes)))
        exporter = start_exporter("--config.file", str(config))
        rendered = subprocess.run(
            [sys.executable, "-m", "exporter", "render", "prometheus"], capture_output=True, text=True, check=True, timeout=60
        ).stdout
        rules = tmp_path / "rules.yml"
        rules.write_text(shorten(rendered))
        prometheus = start_prometheus(
            tmp_path, rules, [{"job_name": "elasticache", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]}]
        )
        port = prometheus.port

        def scraped() -> bool:
            try:
                result = api(port, "/api/v1/query?query=" + urllib.request.quote("count(elasticache_shard_member_info)"))["data"]["result"]
            except OSError:
                return False
            return bool(result) and result[0]["value"][1] == "6"

        wait_until(scraped, timeout=60, interval=0.5, what="Prometheus seeing the six shard members")
        yield {"nodes": nodes, "prometheus": port}
    finally:
        if prometheus is not None:
            prometheus.stop()
        if exporter is not None:
            exporter.stop()
        for node in nodes:
            node.stop()


def test_a_healthy_cluster_fires_nothing_and_a_lost_master_fires_exactly_its_alerts(cluster_stack, tmp_path):
    port, nodes = cluster_stack["prometheus"], cluster_stack["nodes"]
    members = 'count by (shard, role) (elasticache_shard_member_info{shard_source="cluster"})'
    shards = api(port, "/api/v1/query?query=" + urllib.request.quote(members))
    counts = sorted((sample["metric"]["role"], sample["value"][1]) for sample in shards["data"]["result"])
    assert counts == [("master", "1")] * 3 + [("slave", "1")] * 3  # three shards, one master and one replica each

    # every rule evaluated past the shortened `for` (5 s) and a scrape or two more: anything wrong would fire now
    wait_for_evaluations(port, since=time.time(), seconds=FOR_SECONDS + 3)
    assert firing_alerts(port) == set()

    master_index = next(i for i, node in enumerate(nodes) if node.info()["role"] == "master")
    master = nodes[master_index]
    shard = master.client().execute_command("CLUSTER", "MYID").decode()
    replica_index = next(i for i, node in enumerate(nodes) if node.info().get("master_port") == master.port)
    master.stop()
    expected = {  # the node alerts carry the shard too (joined, for Alertmanager's inhibitions); an empty group is no label
        ("RedisDown", (("instance", f"n{master_index}"), ("shard", shard))),
        ("RedisMissingMaster", (("shard", shard),)),
        ("RedisMasterLinkDown", (("instance", f"n{replica_index}"), ("shard", shard))),
    }
    wait_until(lambda: expected <= firing_alerts(port), timeout=60, interval=0.5, what=f"{expected} firing")
    wait_for_evaluations(port, since=time.time(), seconds=FOR_SECONDS + 1)  # room for anything else to fire
    assert firing_alerts(port) == expected
    # no replication_group is configured: the shard's name, its primary's node id, is unique, and the rendered inhibit
    # rules match it alone, so RedisDown is the one alert left to notify
    firing = [alert["labels"] for alert in api(port, "/api/v1/alerts")["data"]["alerts"] if alert["state"] == "firing"]
    assert all("replication_group" not in labels for labels in firing)
    assert notified_after_inhibitions(tmp_path, firing) == {
        "RedisDown": "active",
        "RedisMasterLinkDown": "suppressed",
        "RedisMissingMaster": "suppressed",
    }
