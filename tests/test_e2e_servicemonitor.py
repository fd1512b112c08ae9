"""The Helm chart's ServiceMonitor against a real Prometheus 3: each endpoint of the rendered object becomes the scrape
config the Prometheus Operator generates from it (its Kubernetes discovery replaced by the exporter's loopback address),
and Prometheus 3 scrapes the exporter with it. The default endpoint (/metrics, honorLabels) keeps each node's instance
label and, with ``serviceMonitor.nativeHistograms``, stores the latency histograms as native ones only; a multi-target
endpoint (/scrape?target=) stores the node's series under its name as instance."""

from __future__ import annotations

import subprocess

import yaml
from servers import start_exporter, start_prometheus, start_redis, wait_until
from test_e2e_scrape_examples import active_targets, query
from test_helm import CHART, OPERATOR_V1, objects
from tools import helm

LATENCY = "redis_commands_latencies_usec"
# the endpoint and spec fields this translation knows; a chart that sets another must teach it here first
ENDPOINT_FIELDS = {"port", "path", "params", "interval", "scrapeTimeout", "scheme", "honorLabels", "relabelings"}
SPEC_FIELDS = {"selector", "namespaceSelector", "endpoints", "scrapeNativeHistograms", "scrapeClassicHistograms"}
RELABEL_FIELDS = {
    "sourceLabels": "source_labels",
    "separator": "separator",
    "targetLabel": "target_label",
    "regex": "regex",
    "replacement": "replacement",
    "action": "action",
}


def rendered(release: str, *values: str) -> dict[str, list[dict]]:
    done = subprocess.run(
        [helm(), "template", release, str(CHART), "--namespace", "monitoring", *OPERATOR_V1, *values],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return objects(done.stdout)


def scrape_configs(by_kind: dict[str, list[dict]], address: str) -> list[dict]:
    """What the Prometheus Operator makes of the release's ServiceMonitor: a job per endpoint, named as the operator
    names it, the job label the Service's name, the endpoint's path, params, interval, timeout, scheme, honorLabels
    and relabelings, and the spec's histogram settings."""
    (monitor,) = by_kind["ServiceMonitor"]
    (service,) = by_kind["Service"]
    spec = monitor["spec"]
    assert set(spec) <= SPEC_FIELDS, set(spec) - SPEC_FIELDS
    configs = []
    for index, endpoint in enumerate(spec["endpoints"]):
        assert set(endpoint) <= ENDPOINT_FIELDS, set(endpoint) - ENDPOINT_FIELDS
        assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
        config = {
            "job_name": f"serviceMonitor/{monitor['metadata']['namespace']}/{monitor['metadata']['name']}/{index}",
            "static_configs": [{"targets": [address]}],
            "metrics_path": endpoint.get("path", "/metrics"),
            "honor_labels": endpoint.get("honorLabels", False),
            "scrape_interval": endpoint["interval"],
            "scrape_timeout": endpoint["scrapeTimeout"],
            "scheme": endpoint["scheme"],
            "relabel_configs": [
                {"target_label": "job", "replacement": service["metadata"]["name"]},
                *({RELABEL_FIELDS[key]: value for key, value in relabeling.items()} for relabeling in endpoint.get("relabelings", [])),
            ],
        }
        if "params" in endpoint:
            config["params"] = endpoint["params"]
        if "scrapeNativeHistograms" in spec:
            config["scrape_native_histograms"] = spec["scrapeNativeHistograms"]
        if "scrapeClassicHistograms" in spec:
            config["always_scrape_classic_histograms"] = spec["scrapeClassicHistograms"]
        configs.append(config)
    return configs


def test_the_charts_service_monitor_as_prometheus_3_scrapes_with_it(tmp_path):
    redis = start_redis()
    fast = ["--set", "serviceMonitor.interval=1s", "--set", "serviceMonitor.scrapeTimeout=900ms"]
    native = rendered("native", *fast, "--set", "serviceMonitor.nativeHistograms=true")
    multi = rendered("multi", *fast, "-f", str(CHART / "ci" / "one-target-values.yaml"))
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"targets": [{"name": "sessions", "addr": redis.addr}]}))
    one_node = start_exporter("--redis.addr", redis.addr)
    named = start_exporter("--config.file", str(config))
    rules = tmp_path / "rules.yml"
    rules.write_text("groups: []\n")
    jobs = scrape_configs(native, f"127.0.0.1:{one_node.port}") + scrape_configs(multi, f"127.0.0.1:{named.port}")
    assert [job["metrics_path"] for job in jobs] == ["/metrics", "/scrape"]
    prometheus = start_prometheus(tmp_path, rules, jobs)
    try:
        client = redis.client()
        for i in range(200):
            client.set(f"key:{i}", "v" * i)
        wait_until(
            lambda: len(active_targets(prometheus.port)) == 2 and all(t["health"] == "up" for t in active_targets(prometheus.port)),
            timeout=60,
            what="Prometheus 3 scraping both endpoints",
        )
        native_job, multi_job = (objects_["Service"][0]["metadata"]["name"] for objects_ in (native, multi))

        def instances(expr: str) -> set[str]:
            return {result["metric"].get("instance", "") for result in query(prometheus.port, expr)}

        wait_until(
            lambda: query(prometheus.port, f'histogram_count({LATENCY}{{job="{native_job}",cmd="set"}})'), timeout=60, what="a native SET histogram"
        )
        # honorLabels: the node's own instance label, not the exporter's address
        assert (
            instances(f'redis_up{{job="{native_job}"}} == 1')
            == instances(f'{LATENCY}{{job="{native_job}",cmd="set"}}')
            != {f"127.0.0.1:{one_node.port}"}
        )
        assert query(prometheus.port, f'{LATENCY}_bucket{{job="{native_job}"}}') == []  # native only: no classic bucket series
        wait_until(lambda: query(prometheus.port, f'{LATENCY}_bucket{{job="{multi_job}",cmd="set"}}'), timeout=60, what="classic SET buckets")
        assert instances(f'redis_up{{job="{multi_job}"}} == 1') == {"sessions"}  # the relabeling names the node
        assert instances(f'{{job="{multi_job}",__name__=~"redis_.+"}}') == {"sessions"}
    finally:
        prometheus.stop()
        named.stop()
        one_node.stop()
        redis.stop()
