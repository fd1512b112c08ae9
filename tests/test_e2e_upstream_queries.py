"""Queries written the way redis_exporter users write them, run by a real Prometheus over a primary, its replica and
an unrelated node, in both modes: one exporter's /metrics for all nodes (honor_labels: true, as the README's job
has it) and /scrape?target= per node (the usual relabelling). Each must give the per-node answer."""

from __future__ import annotations

import math
import urllib.parse

import pytest
from servers import start_exporter, start_prometheus, start_redis, wait_until
from test_e2e_prometheus import api

MODES = ("metrics", "scrape")


def query(port: int, expr: str) -> list[dict]:
    return api(port, "/api/v1/query?query=" + urllib.parse.quote(expr))["data"]["result"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    directory = tmp_path_factory.mktemp("upstream-queries")
    primary = start_redis("--maxmemory", "100mb")
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    unrelated = start_redis()
    nodes = {"primary": primary, "replica": replica, "unrelated": unrelated}
    exporters = []
    prometheus = None
    try:
        wait_until(lambda: replica.info().get("master_link_status") == "up", what="replica link up")
        config = directory / "targets.yml"
        config.write_text("targets:\n" + "".join(f"  - name: {name}\n    addr: {node.addr}\n" for name, node in nodes.items()))
        all_nodes = start_exporter("--config.file", str(config))
        allow = directory / "allow.yml"
        allow.write_text("scrape:\n  allow:\n    - hosts: ['127.0.0.1']\n")
        per_node = start_exporter("--redis.addr", "", "--config.file", str(allow))
        exporters += [all_nodes, per_node]
        scrape_configs = [
            {"job_name": "metrics", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{all_nodes.port}"]}]},
            {
                "job_name": "scrape",
                "metrics_path": "/scrape",
                "static_configs": [{"targets": [node.addr for node in nodes.values()]}],
                "relabel_configs": [
                    {"source_labels": ["__address__"], "target_label": "__param_target"},
                    {"source_labels": ["__param_target"], "target_label": "instance"},
                    {"target_label": "__address__", "replacement": f"127.0.0.1:{per_node.port}"},
                ],
            },
        ]
        rules = directory / "none.rules.yml"
        rules.write_text("groups: []\n")
        prometheus = start_prometheus(directory, rules, scrape_configs)

        def both_modes_scraped() -> bool:
            try:
                counts = {mode: query(prometheus.port, f'count(redis_up{{job="{mode}"}} == 1)') for mode in MODES}
            except OSError:
                return False
            return all(result and result[0]["value"][1] == "3" for result in counts.values())

        wait_until(both_modes_scraped, timeout=60, interval=0.5, what="both jobs scraping three nodes")
        identity = {
            "metrics": {name: name for name in nodes},  # the target names of the config
            "scrape": {name: node.addr for name, node in nodes.items()},  # what the relabelling put in instance
        }
        yield prometheus.port, identity
    finally:
        if prometheus is not None:
            prometheus.stop()
        for exporter in exporters:
            exporter.stop()
        for node in nodes.values():
            node.stop()


def by_instance(result: list[dict]) -> dict[str, float]:
    values = {}
    for sample in result:
        instance = sample["metric"]["instance"]
        assert instance not in values, f"two series for {instance}: {result}"
        values[instance] = float(sample["value"][1])
    return values


@pytest.mark.parametrize("mode", MODES)
def test_upstream_style_queries_give_per_node_answers(stack, mode):
    port, identity = stack
    node = identity[mode]
    job = f'job="{mode}"'

    # masters and replicas counted from redis_instance_info's role label
    assert query(port, f'count(redis_instance_info{{{job}, role="master"}})')[0]["value"][1] == "2"
    assert query(port, f'count(redis_instance_info{{{job}, role="slave"}})')[0]["value"][1] == "1"

    # one series per node when grouping by instance
    assert by_instance(query(port, f"count by (instance) (redis_up{{{job}}})")) == dict.fromkeys(node.values(), 1.0)

    # an arithmetic join on(instance): one-to-one, one answer per node (it fails outright when instance is shared)
    ratio = by_instance(query(port, f"redis_memory_used_bytes{{{job}}} / on(instance) redis_memory_max_bytes{{{job}}}"))
    assert set(ratio) == set(node.values())
    assert 0 < ratio[node["primary"]] < 1
    assert math.isinf(ratio[node["unrelated"]])

    # a guard with and on(instance): only the node that has a limit, never +Inf borrowed from another node
    guarded = by_instance(
        query(
            port,
            f"(redis_memory_used_bytes{{{job}}} / on(instance) redis_memory_max_bytes{{{job}}}) "
            f"and on(instance) (redis_memory_max_bytes{{{job}}} > 0)",
        )
    )
    assert set(guarded) == {node["primary"]}
    assert 0 < guarded[node["primary"]] < 1

    # group_left of the role onto a per-node number
    replicas = query(port, f"redis_connected_slaves{{{job}}} * on(instance) group_left(role) redis_instance_info{{{job}}}")
    assert {(s["metric"]["instance"], s["metric"]["role"], s["value"][1]) for s in replicas} == {
        (node["primary"], "master", "1"),
        (node["replica"], "slave", "0"),
        (node["unrelated"], "master", "0"),
    }

    # the replica, named by redis_slave_info with its primary's port
    slaves = query(port, f"redis_slave_info{{{job}}}")
    assert [(s["metric"]["instance"], s["metric"]["read_only"]) for s in slaves] == [(node["replica"], "1")]

    # a fleet total as upstream rules write it: no label of this exporter's keeps the nodes apart
    total = query(port, f"sum without (instance, job) (redis_connected_clients{{{job}}})")
    assert len(total) == 1
