"""The files shipped for deployment: Dockerfile, Kubernetes manifests, Prometheus configs, the dashboard."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).parent.parent
PROMQL_WORD = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
PROMQL_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
    "sum", "min", "max", "avg", "count", "rate", "increase", "time", "label_values", "irate", "delta", "changes", "histogram_quantile",
}  # fmt: skip


def hadolint() -> str:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.exists() else (shutil.which("hadolint") or "hadolint")


def test_dockerfile_passes_hadolint():
    result = subprocess.run([hadolint(), str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_structure():
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    assert len(stages) >= 2, "multi-stage"
    assert all(re.search(r":\d+\.\d+\.\d+-slim", image) for image in stages), "pinned slim base images"
    assert re.search(r"^USER\s+\d+:\d+$", text, re.MULTILINE), "numeric non-root user"
    assert re.search(r'^ENTRYPOINT \["', text, re.MULTILINE), "exec-form entrypoint"
    assert "HEALTHCHECK" in text
    assert "/-/healthy" in text
    assert "EXPOSE 9769" in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".git" in ignored
    assert "tests" in ignored


def test_kubernetes_manifests():
    documents = {}
    for path in (ROOT / "deploy" / "kubernetes").glob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text()):
            documents[document["kind"]] = document
    assert set(documents) >= {"Deployment", "Service", "ConfigMap", "ServiceMonitor"}
    pod = documents["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["readinessProbe"]["httpGet"]["path"] == "/-/healthy"
    assert container["ports"][0]["containerPort"] == 9769
    from exporter.config import build_config

    config = yaml.safe_load(documents["ConfigMap"]["data"]["config.yml"])
    config["aws"]["discovered"].pop("password_file")  # the secret exists only in the cluster
    assert build_config(config, environ={}).aws.scrape_discovered


def test_sharded_statefulset_gives_each_pod_its_own_shard():
    documents = list(yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "sharded-statefulset.yaml").read_text()))
    statefulset = next(d for d in documents if d["kind"] == "StatefulSet")
    service = next(d for d in documents if d["kind"] == "Service")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == statefulset["spec"]["selector"]["matchLabels"]
    replicas = statefulset["spec"]["replicas"]
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item for item in container["env"]}
    assert env["POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']"
    from exporter.cli.main import build_parser
    from exporter.common.sharding import parse_shard

    shards = []
    for ordinal in range(replicas):
        argv = [arg.replace("$(POD_INDEX)", str(ordinal)) for arg in container["args"]]  # as the kubelet expands it
        shards.append(parse_shard(getattr(build_parser().parse_args(argv), "scrape.shard")))
    assert [(shard.index, shard.count) for shard in shards] == [(i, replicas) for i in range(replicas)]
    names = [f"sessions-{i:03d}-001" for i in range(300)]
    assert sorted(name for shard in shards for name in names if shard.owns(name)) == sorted(names)


def test_sharded_scrape_config_is_valid_prometheus(tmp_path):
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    config = tmp_path / "prometheus.yml"
    config.write_text((ROOT / "deploy" / "prometheus" / "sharded-scrape.yml").read_text())
    result = subprocess.run([promtool, "check", "config", "--syntax-only", str(config)], capture_output=True, text=True,
                            timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def served_metric_names() -> set[str]:
    metrics_doc = (ROOT / "docs" / "metrics.md").read_text()
    documented = set(re.findall(r"`((?:redis|elasticache|aws_elasticache)_[a-z0-9_]+|process_[a-z_]+)[`{]", metrics_doc))
    recorded = set(re.findall(r"record: (\S+)", (ROOT / "rules" / "prometheus" / "elasticache-exporter.rules.yml").read_text()))
    return documented | recorded


def test_every_dashboard_query_names_a_metric_the_exporter_serves(plain_redis):
    from helpers import call, make_app

    dashboard = json.loads((ROOT / "dashboards" / "elasticache-exporter.json").read_text())
    known = served_metric_names()
    app = make_app({"redis": {"addr": plain_redis.addr, "node_type": "cache.t3.micro"}})
    try:
        live = {name for name, _ in call(app, "/metrics").samples()}
    finally:
        app.close()
    assert "redis_up" in live
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    annotations = [annotation["expr"] for annotation in dashboard.get("annotations", {}).get("list", [])]
    assert any("elasticache_event_last_timestamp_seconds" in expr for expr in annotations)  # AWS's events on the panels
    expressions += annotations
    assert len(expressions) >= 15
    for expr in expressions:
        without_strings = re.sub(r'"[^"]*"', "", re.sub(r"\[[^\]]*\]", "", expr))
        words = {w for w in PROMQL_WORD.findall(without_strings) if w not in PROMQL_KEYWORDS and not w.startswith("$")}
        labels = set(re.findall(r"(\w+)\s*=~?", expr)) | set(re.findall(r"by \(([^)]*)\)", expr))
        metrics = {w for w in words if ("_" in w or ":" in w) and w not in labels and not any(w in group for group in labels)}
        assert metrics, expr
        for metric in metrics:
            family = re.sub(r"_(sum|count|bucket)$", "", metric) if metric not in known else metric
            assert metric in known or family in known or metric in live, f"{metric} in {expr!r} is not served"
