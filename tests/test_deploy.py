"""The files shipped for deployment: Dockerfile, Prometheus configs, the dashboard (the Helm chart and the Kubernetes
manifests it renders: test_helm.py)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from tools import hadolint, promtool

ROOT = Path(__file__).parent.parent
PROMQL_WORD = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
PROMQL_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
    "sum", "min", "max", "avg", "count", "rate", "increase", "time", "label_values", "irate", "delta", "changes", "histogram_quantile",
}  # fmt: skip


def test_dockerfile_passes_hadolint():
    result = subprocess.run([hadolint(), str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.unit
def test_dockerfile_structure():
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    assert len(stages) >= 2, "multi-stage"
    assert all(re.search(r":\d+\.\d+\.\d+-slim", image) for image in stages), "pinned slim base images"
    assert re.search(r"^USER\s+\d+:\d+$", text, re.MULTILINE), "numeric non-root user"
    assert re.search(r'^ENTRYPOINT \["', text, re.MULTILINE), "exec-form entrypoint"
    assert "HEALTHCHECK" in text
    assert 'CMD ["/opt/elasticache-exporter/bin/elasticache-exporter", "healthcheck"]' in text, "the health check that reads the web config"
    assert "EXPOSE 9769" in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".git" in ignored
    assert "tests" in ignored


@pytest.mark.parametrize("example", sorted(path.name for path in (ROOT / "deploy" / "prometheus").glob("*.yml")))
def test_scrape_config_examples_are_valid_prometheus(tmp_path, example):
    config = tmp_path / "prometheus.yml"
    config.write_text((ROOT / "deploy" / "prometheus" / example).read_text())
    result = subprocess.run([promtool(), "check", "config", "--syntax-only", str(config)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


PROMETHEUS_SERIES = {"ALERTS"}  # Prometheus' own: the alerts its rules fire


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
        labels = set(re.findall(r"(\w+)\s*[=!]~?", expr)) | set(re.findall(r"(?:by|on|group_left|group_right) \(([^)]*)\)", expr))
        metrics = {
            w for w in words if ("_" in w or ":" in w or w in PROMETHEUS_SERIES) and w not in labels and not any(w in group for group in labels)
        }
        assert metrics, expr
        for metric in metrics:
            family = re.sub(r"_(sum|count|bucket)$", "", metric) if metric not in known else metric
            served = metric in known or family in known or metric in live or metric in PROMETHEUS_SERIES
            assert served, f"{metric} in {expr!r} is not served"
