"""The shipped Grafana dashboard read as a user reads it: every panel says what it shows (a description), every query is
drawn on an axis of the unit its series is in, and the overview's thresholds sit at the levels of the alerts they name.
Its queries run in a real Prometheus in test_e2e_dashboard.py; the series they read are checked in test_deploy.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parent.parent
DASHBOARD = json.loads((ROOT / "dashboards" / "elasticache-exporter.json").read_text())
PANELS = [panel for panel in DASHBOARD["panels"] if panel["type"] != "row"]

# the Grafana units each kind of value may be drawn in
ACCEPTED = {
    "bytes": {"bytes", "decbytes"},
    "bytes_per_second": {"Bps", "binBps"},
    "seconds": {"s"},
    "microseconds": {"µs"},
    "ratio": {"percentunit"},
    "percent": {"percent"},
    "count": {"short", "none"},
    "per_second": {"ops", "reqps", "cps", "rps", "wps"},
    "boolean": {"bool", "bool_yes_no", "bool_on_off"},
    "label_only": {"none"},  # an info-style series (always 1): the panel shows its labels
    "usd": {"currencyUSD"},
}
# what a series is in, by its name: first match wins; a name none matches fails the test, so a new series gets a decision
SERIES_KINDS = [
    (r"_timestamp_seconds$", "timestamp"),
    (r"_bytes_per_second$", "bytes_per_second"),
    (r"_bytes_total$", "bytes_counter"),
    (r"_total$|^redis_slowlog_last_id$|^elasticache_commandlog_last_id$", "counter"),  # a log's last id grows by one an entry
    (r"_bytes$", "bytes"),
    (r"_seconds(_ago)?$", "seconds"),
    (r"_usec_bucket$", "microseconds"),
    (r"_ratio$", "ratio"),
    (r"_percent$", "percent"),
    (r"_usd_per_month_estimate$", "usd"),
    (r"^aws_elasticache_.*_percentage_(average|maximum)$", "percent"),
    (r"^aws_elasticache_cache_hit_rate_average$", "percent"),
    (r"^aws_elasticache_.*_latency_p\d+$", "microseconds"),  # Successful{Read,Write}RequestLatency: microseconds
    (r"^aws_elasticache_.*replication_lag_maximum$", "seconds"),
    (r"^aws_elasticache_network_bytes_(in|out)_sum$", "bytes"),  # a minute's bytes
    (r"^aws_elasticache_.*_count_sum$", "count_per_minute"),
    (r"^aws_elasticache_.*_allowance_exceeded_maximum$", "count"),
    (r"^redis_up$|_complete$|_link_up$", "boolean"),
    (r"_last_error$|_info$", "label_only"),
    (r"^ALERTS$", "boolean"),
    (r"_minutes$", "count"),  # how many CloudWatch minutes
    (
        r"_(clients|connected_clients|blocked_clients|connected_slaves|keys|keys_count|key_size|length_limit|group_lag"
        r"|messages_pending|connected|connected_by_source|idle|expiring_keys|keys_without_ttl)$",
        "count",
    ),
]
# a series turned into another kind by a constant: each conversion named, so an unexplained factor fails
SCALES = {
    ("percent", "/ 100"): "ratio",
    ("count_per_minute", "/ 60"): "per_second",
    ("per_second", "* 30 * 86400 * 0.01 / 1000"): "usd",  # metric-statistics a second, over a 30-day month, USD 0.01 per 1,000
}
RATED = {"counter": "per_second", "bytes_counter": "bytes_per_second"}
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "sum", "min", "max", "avg", "count",
    "rate", "irate", "increase", "time", "topk", "bottomk", "vector", "histogram_quantile", "changes", "max_over_time",
}  # fmt: skip


def series_kind(name: str) -> str:
    for pattern, kind in SERIES_KINDS:
        if re.search(pattern, name):
            return kind
    raise AssertionError(f"{name}: no unit known for this series; add its name pattern to SERIES_KINDS")


def expression_kind(expr: str) -> str:
    """What a panel query's values are in, from the series it reads and what the query does to them."""
    text = re.sub(r'"[^"]*"|\{[^}]*\}|\[[^\]]*\]', "", expr)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    # a set operation or a join on an info series filters or labels its left side: the values are the left side's
    text = re.split(r"\s(?:and|unless|or)\s|\*\s+elasticache_node_info\b", text)[0]
    text = re.sub(r"\s*(?:>|<|==|!=|>=|<=)\s*[-+]?(?:\d[\d.e+]*|Inf)\s*\)*\s*$", "", text)  # a comparison filter at the end
    if text.lstrip().startswith("count("):
        return "count"
    if m := re.fullmatch(r"\s*time\(\)\s*-\s*(.*)", text):
        names = metric_names(m.group(1))
        assert [series_kind(name) for name in names] == ["timestamp"], f"time() minus {names}: not a timestamp"
        return "seconds"
    names = metric_names(text)
    assert names, f"no series in {expr!r}"
    kinds = {series_kind(name) for name in names}
    denominator = text.partition("/")[2]
    if metric_names(denominator):  # one series over another: a share, of series of one kind
        assert len(kinds) == 1, f"{expr!r}: a ratio of unlike series {names}"
        return "ratio"
    (kind,) = kinds
    if "histogram_quantile(" in text:
        return kind
    if re.search(r"\b(?:rate|irate)\(", text):
        assert kind in RATED, f"{expr!r}: a rate of {names}, which are not counters"
        kind = RATED[kind]
    scale = " ".join(re.findall(r"[*/]\s*[\d.]+", re.sub(r"^.*\)", "", text))).replace("  ", " ")
    if scale:
        scale = re.sub(r"([*/])\s*", r"\1 ", scale)
        assert (kind, scale) in SCALES, f"{expr!r}: {kind} scaled by {scale!r}, a conversion SCALES does not name"
        kind = SCALES[(kind, scale)]
    return kind


def metric_names(text: str) -> list[str]:
    words = re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text)
    return sorted({w for w in words if w not in PROMQL_WORDS and ("_" in w or ":" in w or w == "ALERTS")})


def unit_of(panel: dict, ref_id: str) -> str | None:
    """The unit Grafana draws a query in: an override of its refId, else the panel's default."""
    for override in panel["fieldConfig"].get("overrides", []):
        if override["matcher"] == {"id": "byFrameRefID", "options": ref_id}:
            for prop in override["properties"]:
                if prop["id"] == "unit":
                    return prop["value"]
    return panel["fieldConfig"]["defaults"].get("unit")


@pytest.mark.parametrize("panel", PANELS, ids=[panel["title"] for panel in PANELS])
def test_every_query_is_drawn_in_the_unit_of_its_series(panel):
    assert panel.get("description", "").strip(), "a panel without a description"
    for target in panel["targets"]:
        kind = expression_kind(target["expr"])
        unit = unit_of(panel, target["refId"])
        assert unit is not None, f"{target['refId']}: no unit"
        assert unit in ACCEPTED[kind], f"{target['refId']} ({target['expr']}) is {kind}, drawn as {unit!r}"


@pytest.mark.parametrize(
    ("expr", "kind"),
    [
        ('sum by (instance) (rate(redis_commands_processed_total{instance=~"$instance"}[$__rate_interval]))', "per_second"),
        ("rate(redis_net_input_bytes_total[1m])", "bytes_per_second"),
        ("redis_memory_used_bytes / (redis_memory_max_bytes > 0)", "ratio"),
        ("max by (instance) (elasticache_engine_cpu_utilization_percent) / 100", "ratio"),
        ("time() - elasticache_exporter_cloudwatch_last_success_timestamp_seconds", "seconds"),
        ("count(redis_up == 0) or vector(0)", "count"),
        ("aws_elasticache_total_cmds_count_sum / 60", "per_second"),
        ("sum(rate(elasticache_exporter_cloudwatch_metrics_requested_total[1h])) * 30 * 86400 * 0.01 / 1000", "usd"),
        ("histogram_quantile(0.99, sum by (le) (rate(redis_commands_latencies_usec_bucket[1m])))", "microseconds"),
        ("aws_elasticache_network_baseline_usage_in_percentage_average * on (region) group_left (instance) elasticache_node_info", "percent"),
    ],
)
def test_the_kind_of_a_query(expr, kind):
    assert expression_kind(expr) == kind


@pytest.mark.parametrize(
    "expr",
    [
        "redis_memory_used_bytes / redis_connected_clients",  # unlike series
        "rate(redis_memory_used_bytes[1m])",  # a gauge's rate
        "elasticache_engine_cpu_utilization_percent * 3",  # an unnamed conversion
        "redis_mystery_gauge",  # a series of no known unit
    ],
)
def test_a_query_of_no_clear_unit_fails(expr):
    with pytest.raises(AssertionError):
        expression_kind(expr)


def test_a_wrong_or_missing_unit_fails():
    panel = {
        "title": "t",
        "description": "d",
        "fieldConfig": {"defaults": {"unit": "s"}, "overrides": []},
        "targets": [{"refId": "A", "expr": "redis_up"}],
    }
    with pytest.raises(AssertionError, match="boolean"):
        test_every_query_is_drawn_in_the_unit_of_its_series(panel)
    del panel["fieldConfig"]["defaults"]["unit"]
    with pytest.raises(AssertionError, match="no unit"):
        test_every_query_is_drawn_in_the_unit_of_its_series(panel)
    panel["description"] = ""
    with pytest.raises(AssertionError, match="description"):
        test_every_query_is_drawn_in_the_unit_of_its_series(panel)


# the overview and AWS-baseline panels whose thresholds are alert levels: the alerts, and the factor from the level as
# the catalog writes it to the panel's unit
THRESHOLD_ALERTS = {
    "Top 10 nodes: network against the node type's baseline": (
        (
            "ElastiCacheNetworkOutNearBaseline",
            "ElastiCacheNetworkOutAtBaseline",
            "ElastiCacheNetworkInNearBaseline",
            "ElastiCacheNetworkInAtBaseline",
        ),
        0.01,
    ),
    "Network utilization against the node type's baseline": (("ElastiCacheNetworkOutNearBaseline", "ElastiCacheNetworkOutAtBaseline"), 0.01),
    "Top 10 nodes: engine CPU (of one core)": (("ElastiCacheEngineCPUSaturated",), 1),
    "Top 10 nodes: memory used of maxmemory": (("RedisOutOfConfiguredMaxmemory",), 1),
    "Top 10 nodes: replication lag (heartbeat)": (("RedisReplicationHeartbeatLag",), 1),
    "Share of AWS's baseline per node (minute average)": (
        ("ElastiCacheNetworkOutNearAWSBaseline", "ElastiCacheNetworkOutAtAWSBaseline", "ElastiCacheNetworkOutOverAWSBaseline"),
        1,
    ),
    "Top 10 nodes: share of AWS's baseline (minute average, as CloudWatch polled it)": (
        ("ElastiCacheNetworkInNearAWSBaseline", "ElastiCacheNetworkInAtAWSBaseline", "ElastiCacheNetworkInOverAWSBaseline"),
        100,
    ),
    "Microbursts: minutes of the last 10 whose busiest second passed AWS's baseline": (("ElastiCacheNetworkMicrobursts",), 1),
}


def alert_level(alert: dict) -> float:
    """The level an alert fires at: a baseline alert's percent, else the first comparison with a number in its expression
    that is not a filter inside parentheses (``(redis_memory_max_bytes > 0)``)."""
    if "baseline" in alert:
        return alert["baseline"]["level"]
    match = re.search(r"(?:>=?|<=?)\s*([\d.]+)(?![\d.]|\s*\))", alert["prometheus"]["expr"])
    assert match, alert["name"]
    return float(match.group(1))


def test_thresholds_sit_at_the_levels_of_the_alerts_they_name():
    catalog = {alert["name"]: alert for alert in yaml.safe_load((ROOT / "rules" / "catalog.yml").read_text())["alerts"]}
    by_title = {panel["title"]: panel for panel in PANELS}
    for title, (alerts, factor) in THRESHOLD_ALERTS.items():
        panel = by_title[title]
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        drawn = {step["value"] for step in steps if step["value"] is not None}
        levels = {round(alert_level(catalog[name]) * factor, 6) for name in alerts}
        assert drawn == levels, f"{title}: thresholds {sorted(drawn)}, alert levels {sorted(levels)}"
        named = [name for name in alerts if name in panel["description"] or _family(name) in panel["description"]]
        assert named == list(alerts), f"{title}: its description names the alerts"


def _family(name: str) -> str:
    """ElastiCacheNetworkOutNearBaseline and its In twin as a description names both: ElastiCacheNetwork{In,Out}NearBaseline."""
    return re.sub(r"Network(In|Out)", "Network{In,Out}", name)


def test_no_panel_draws_a_line_a_node_for_up():
    """200 nodes are 200 lines: whether targets are up is a count and a table of the down ones."""
    for panel in PANELS:
        for target in panel["targets"]:
            if "redis_up" in target["expr"]:
                assert panel["type"] in ("stat", "table"), panel["title"]
                assert "== 0" in target["expr"] or "count(" in target["expr"], target["expr"]


def test_firing_alerts_are_ours_only():
    """On a Prometheus shared with other rule sets, the overview counts the alerts our rules raise: each ALERTS query
    matches the alert_source label they carry, through a variable whose default is the render's default."""
    from exporter.alerts.catalog import DEFAULT_SOURCE, SOURCE_LABEL

    variable = next(item for item in DASHBOARD["templating"]["list"] if item["name"] == "alert_source")
    assert variable["query"] == variable["current"]["value"] == DEFAULT_SOURCE
    queries = [target["expr"] for panel in PANELS for target in panel["targets"] if "ALERTS" in target["expr"]]
    assert queries
    assert all(f'{SOURCE_LABEL}="$alert_source"' in expr for expr in queries), queries
