"""End to end, as shipped: a real Prometheus scrapes the exporter over a primary and its replica (one shard of group
"orders"), evaluates the rendered rules and sends its alerts to a real Alertmanager configured with the rendered
fragment, whose receivers post to a webhook in this test. Stopping the primary notifies RedisDown alone, and nothing
else for longer than the rules' 10-minute windows (the shard membership's among them): the replica's lost link and the
shard's missing master fire in Prometheus and stay silenced by the inhibit rules. Restarting it notifies RedisDown
resolved. Time runs 15 times faster for the rules (a minute lasts 4 s: every `for`, `keep_firing_for`, window and
offset scaled by one setting) and the fragment's group timings are 1 s, so the test takes a minute and a half, not
hours; the expressions, labels, routes and inhibit rules are the rendered ones."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from servers import start_alertmanager, start_exporter, start_prometheus, start_redis, wait_until
from test_e2e_prometheus import api, firing, seconds, shorten

MINUTE = "4s"  # how long a minute of the rules lasts here


class Webhook:
    """Alertmanager's webhook receiver: every notification it posts, kept in order."""

    def __init__(self) -> None:
        received: list[dict] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append({"receiver": self.path.strip("/"), **json.loads(body)})
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def notified(self) -> list[tuple[str, str, str, str]]:
        """(receiver, status, alertname, instance) of every alert of every notification."""
        return [
            (note["receiver"], alert["status"], alert["labels"]["alertname"], alert["labels"].get("instance", ""))
            for note in list(self.received)
            for alert in note["alerts"]
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def render(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "exporter", "render", *args], capture_output=True, text=True, check=True, timeout=60).stdout


def alertmanager_config(fragment: dict, webhook_port: int) -> dict:
    """The fragment merged as docs/operations.md says, each receiver a webhook to this test, its group timings shortened."""
    route = {**fragment["route"], "group_wait": "1s", "group_interval": "1s"}
    receivers = [
        {"name": receiver["name"], "webhook_configs": [{"url": f"http://127.0.0.1:{webhook_port}/{receiver['name']}", "send_resolved": True}]}
        for receiver in fragment["receivers"]
    ]
    return {
        "route": {"receiver": "default", "routes": [route]},
        "receivers": [{"name": "default", "webhook_configs": [{"url": f"http://127.0.0.1:{webhook_port}/default"}]}, *receivers],
        "inhibit_rules": fragment["inhibit_rules"],
    }


@pytest.fixture
def stack(tmp_path):
    primary = start_redis()
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    wait_until(lambda: replica.info().get("master_link_status") == "up", what="replica link")
    config = tmp_path / "exporter.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "targets": [
                    {"name": "orders-001", "addr": primary.addr, "replication_group": "orders", "shard": "0001"},
                    {"name": "orders-002", "addr": replica.addr, "replication_group": "orders", "shard": "0001"},
                ]
            }
        )
    )
    exporter = start_exporter("--config.file", str(config))
    webhook = Webhook()
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(alertmanager_config(yaml.safe_load(render("alertmanager")), webhook.port)))
    manager = start_alertmanager(tmp_path / "alertmanager.yml")
    rules = tmp_path / "rules.yml"
    rules.write_text(shorten(render("prometheus"), minute=MINUTE))
    scrape = [{"job_name": "elasticache", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]}]
    prometheus = start_prometheus(tmp_path, rules, scrape, alertmanager_port=manager.port)
    try:
        wait_until(lambda: _scraped(prometheus.port), timeout=60, what="Prometheus scraping both nodes")
        yield {"primary": primary, "prometheus": prometheus.port, "manager": manager, "webhook": webhook}
    finally:
        prometheus.stop()
        manager.stop()
        webhook.close()
        exporter.stop()
        replica.stop()
        primary.stop()


def _scraped(port: int) -> bool:
    try:
        result = api(port, "/api/v1/query?query=" + urllib.request.quote("sum(redis_up)"))["data"]["result"]
    except OSError:
        return False
    return bool(result) and result[0]["value"][1] == "2"


def _evaluated_since(port: int, moment: float) -> bool:
    """Whether every rule group was evaluated after ``moment`` (a Unix time)."""
    groups = api(port, "/api/v1/rules")["data"]["groups"]
    stamps = [group["lastEvaluation"] for group in groups]
    return bool(stamps) and all(_unix(stamp) > moment for stamp in stamps)


def _unix(stamp: str) -> float:
    """An RFC 3339 time of Prometheus' API (UTC, nanoseconds) as a Unix time."""
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?", stamp)
    assert match, stamp
    return datetime.datetime.fromisoformat(match[1] + "+00:00").timestamp() + float("0" + (match[2] or "")[:7])


def test_a_node_down_notifies_its_down_alert_alone_and_then_its_resolution(stack):
    port, manager, webhook = stack["prometheus"], stack["manager"], stack["webhook"]
    wait_until(lambda: api(port, "/api/v1/query?query=elasticache%3Ashard_membership")["data"]["result"], what="the shard membership recorded")
    assert webhook.notified() == []  # nothing fires while both nodes are up and in sync

    stack["primary"].stop()
    wait_until(lambda: firing(port, "RedisDown", instance="orders-001", replication_group="orders", shard="0001"), timeout=60, what="RedisDown")
    # the echoes fire in Prometheus and reach Alertmanager, which silences them
    link_down = {"instance": "orders-002", "replication_group": "orders", "shard": "0001"}
    wait_until(lambda: firing(port, "RedisMasterLinkDown", **link_down), timeout=60, what="link down")
    wait_until(lambda: firing(port, "RedisMissingMaster", replication_group="orders", shard="0001"), timeout=60, what="missing master")

    def suppressed() -> set[str]:
        return {alert["labels"]["alertname"] for alert in manager.api("/alerts") if alert["status"]["state"] == "suppressed"}

    wait_until(lambda: {"RedisMasterLinkDown", "RedisMissingMaster"} <= suppressed(), timeout=30, what="the echoes silenced")
    wait_until(webhook.notified, timeout=30, what="a notification")
    assert webhook.notified() == [("elasticache-critical", "firing", "RedisDown", "orders-001")]
    (down,) = [alert for alert in api(port, "/api/v1/alerts")["data"]["alerts"] if alert["labels"]["alertname"] == "RedisDown"]

    # the outage outlasts the membership's 10-minute window: no sample of the primary answering is left in it
    window = f"{round(10 * seconds(MINUTE))}s"
    answered = f'count(last_over_time(elasticache_shard_member_info{{instance="orders-001",role="master"}}[{window}]))'
    wait_until(
        lambda: not api(port, "/api/v1/query?query=" + urllib.request.quote(answered))["data"]["result"],
        timeout=90,
        interval=0.5,
        what="the window passed",
    )
    since = time.time()
    wait_until(lambda: _evaluated_since(port, since + 3 * seconds(MINUTE)), timeout=30, interval=0.5, what="three more minutes evaluated")
    (still,) = [alert for alert in api(port, "/api/v1/alerts")["data"]["alerts"] if alert["labels"]["alertname"] == "RedisDown"]
    assert (still["labels"], still["activeAt"], still["state"]) == (down["labels"], down["activeAt"], "firing")
    assert {"RedisMasterLinkDown", "RedisMissingMaster"} <= suppressed()
    assert webhook.notified() == [("elasticache-critical", "firing", "RedisDown", "orders-001")]

    stack["primary"].start()
    wait_until(lambda: ("elasticache-critical", "resolved", "RedisDown", "orders-001") in webhook.notified(), timeout=90, what="RedisDown resolved")
    # the echoes cleared while RedisDown kept firing: none of them was ever notified
    assert not firing(port, "RedisMasterLinkDown")
    assert not firing(port, "RedisMissingMaster")
    echoes = {"RedisMasterLinkDown", "RedisMissingMaster"}
    listed = "/alerts?active=true&silenced=true&inhibited=true"
    wait_until(lambda: not echoes & {alert["labels"]["alertname"] for alert in manager.api(listed)}, what="echoes gone")
    # the whole outage and recovery, at 1 s group intervals, was the quiet period: nothing else was notified
    assert webhook.notified() == [
        ("elasticache-critical", "firing", "RedisDown", "orders-001"),
        ("elasticache-critical", "resolved", "RedisDown", "orders-001"),
    ]
