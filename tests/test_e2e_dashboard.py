"""The shipped Grafana dashboard, without Grafana: every panel query runs in a real Prometheus that scrapes a real
exporter over a Redis-only setup (a primary with a replica, a node that is down, node types for the baselines, no AWS)
with the rendered recording rules loaded. Every panel outside the AWS rows must return data; the AWS rows stay empty."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse
from pathlib import Path

from servers import free_port, start_exporter, start_prometheus, start_redis, wait_until
from test_e2e_prometheus import api

ROOT = Path(__file__).parent.parent


def panels_by_row() -> list[tuple[str, dict]]:
    dashboard = json.loads((ROOT / "dashboards" / "elasticache-exporter.json").read_text())
    row, out = "", []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
        else:
            out.append((row, panel))
    return out


VARIABLES = ("$instance", "$account", "$region", "$replication_group")


def as_prometheus_query(expr: str, **chosen: str) -> str:
    """Grafana's variables as Grafana would fill them (All: ``.*``, or the values ``chosen``) for a 1 s scrape interval."""
    for variable in VARIABLES:
        expr = expr.replace(variable, chosen.get(variable[1:], ".*"))
    return expr.replace("$__rate_interval", "15s")


def variable_values(query: str, regex: str | None, series) -> list[str]:
    """A query variable's values as Grafana's Prometheus data source finds them: ``label_values(selector, label)`` is the
    label's values among the selector's series, ``query_result(expr)`` the result lines, each through the regex."""
    import re

    if query.startswith("label_values("):
        selector, _, label = query[len("label_values(") : -1].rpartition(",")
        values = {item["metric"].get(label.strip()) for item in series(selector)}
    else:
        assert query.startswith("query_result("), query
        lines = [item["metric"] for item in series(query[len("query_result(") : -1])]
        text = ["{" + ",".join(f'{key}="{value}"' for key, value in sorted(metric.items())) + "}" for metric in lines]
        values = {match.group(1) for line in text if (match := re.search(regex.strip("/"), line))} if regex else set(text)
    return sorted(value for value in values if value)


def _seed(client) -> None:
    """Keys read and written, a queue, and a stream with a consumer group that has pending entries."""
    for i in range(50):
        client.set(f"key:{i}", "v")
        client.get(f"key:{i}")
    client.rpush("queue:default", *[f"job{i}" for i in range(30)])
    for i in range(20):
        client.xadd("events", {"n": str(i)})
    client.xgroup_create("events", "billing", id="0")
    client.xreadgroup("billing", "worker-1", {"events": ">"}, count=5)


def _redis_panels_without_data(series) -> list[str]:
    """The titles of the panels outside the AWS rows whose queries all return nothing."""
    return [
        panel["title"]
        for row, panel in panels_by_row()
        if not row.startswith("AWS") and not any(series(target["expr"]) for target in panel["targets"])
    ]


def test_every_panel_has_data_without_aws(tmp_path):
    primary = start_redis("--maxmemory", "64mb")
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    exporter = prometheus = None
    try:
        wait_until(lambda: replica.info().get("master_link_status") == "up", what="replica link up")
        _seed(primary.client())
        config = tmp_path / "exporter.yml"
        config.write_text(
            f"targets:\n  - name: primary\n    addr: {primary.addr}\n    node_type: cache.r6g.large\n"
            "    keys: {check_single_keys: queue:default, count_keys: 'key:*', check_single_streams: events, queues: {queue:default: 10}}\n"
            f"  - name: replica\n    addr: {replica.addr}\n    node_type: cache.r6g.large\n"
            f"  - name: gone\n    addr: 127.0.0.1:{free_port()}\n    node_type: cache.r6g.large\n"
            "heartbeat:\n  write: true\n  interval: 200ms\nbaselines:\n  window: 5s\n"
            "clients:\n  enabled: true\n  interval: 5s\nkeyspace:\n  enabled: true\n  interval: 10s\n"
        )
        exporter = start_exporter("--config.file", str(config))
        rendered = subprocess.run(
            [sys.executable, "-m", "exporter", "render", "prometheus"], capture_output=True, text=True, check=True, timeout=60
        ).stdout
        rules = tmp_path / "rules.yml"
        rules.write_text(rendered)
        job = {"job_name": "elasticache", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]}
        prometheus = start_prometheus(tmp_path, rules, [job])
        port = prometheus.port

        def series(expr: str) -> list[dict]:
            try:
                return api(port, "/api/v1/query?query=" + urllib.parse.quote(as_prometheus_query(expr)))["data"]["result"]
            except OSError:
                return []

        wait_until(lambda: len(series("redis_up == 1")) == 2, timeout=60, interval=0.5, what="Prometheus scraping both nodes")
        # rate() windows of 15 s need a few samples, the exporter's rates a 5 s window: wait until every panel has them
        wait_until(lambda: not _redis_panels_without_data(series), timeout=60, interval=1.0, what="data in every Redis panel")
        variables = {
            variable["name"]: variable
            for variable in json.loads((ROOT / "dashboards" / "elasticache-exporter.json").read_text())["templating"]["list"]
            if variable["type"] == "query"
        }
        assert list(variables) == ["account", "region", "replication_group", "instance"]
        found = {name: variable_values(as_prometheus_query(v["query"]), v.get("regex"), series) for name, v in variables.items()}
        # without AWS: no account, region or replication group (All), every Redis target an instance to choose
        assert found == {"account": [], "region": [], "replication_group": [], "instance": ["primary", "replica"]}
        assert all(v["multi"] and v["includeAll"] and v["allValue"] == ".*" for v in variables.values())
        # one instance chosen: every Redis panel shows that instance only
        for _, panel in panels_by_row()[:6]:
            for target in panel["targets"]:
                chosen = series(as_prometheus_query(target["expr"], instance="replica"))
                assert {item["metric"].get("instance") for item in chosen} <= {"replica", None}, panel["title"]
        empty = _redis_panels_without_data(series)
        assert empty == [], f"panels without data in a Redis-only setup: {empty}"
        overview = {panel["title"]: panel for row, panel in panels_by_row() if row == "Overview"}
        down, up = (series(target["expr"]) for target in overview["Nodes down now"]["targets"])
        assert (down[0]["value"][1], up[0]["value"][1]) == ("1", "2")  # one number each, however many nodes
        (listed,) = (series(target["expr"]) for target in overview["Nodes down, with the last error"]["targets"])
        assert [(item["metric"]["instance"], item["metric"]["kind"]) for item in listed] == [("gone", "refused")]
        dashboard = json.loads((ROOT / "dashboards" / "elasticache-exporter.json").read_text())
        for annotation in dashboard["annotations"]["list"]:  # valid PromQL, empty without AWS
            reply = api(port, "/api/v1/query?query=" + urllib.parse.quote(as_prometheus_query(annotation["expr"])))
            assert reply["status"] == "success", annotation["name"]
            assert reply["data"]["result"] == [], annotation["name"]
        assert sum(row.startswith("AWS") for row, _ in panels_by_row()) >= 2
        assert len(panels_by_row()) >= 18
    finally:
        if prometheus is not None:
            prometheus.stop()
        if exporter is not None:
            exporter.stop()
        replica.stop()
        primary.stop()
