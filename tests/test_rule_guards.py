"""Alerts read their inputs as they are: each part of an alert is silent on its own stale input and speaks when its own
input is fresh, whatever the other parts read; each CloudWatch minute counts once, however often it is polled. promtool
over the shipped rules."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml
from helpers import with_served_freshness
from test_rules import RULES, _without_annotations, series
from tools import promtool

from exporter.alerts.catalog import DEFAULT_SOURCE, SOURCE_LABEL, RenderError, load_catalog
from exporter.alerts.prometheus import expression
from exporter.aws.minutes import BurstMinutes

CW = {"account_id": "111111111111", "dimension_CacheClusterId": "rg-001", "dimension_CacheNodeId": "0001", "region": "eu-west-1"}
READ_P99, WRITE_P99 = "aws_elasticache_successful_read_request_latency_p99", "aws_elasticache_successful_write_request_latency_p99"
CREDITS, CPU_AVG = "aws_elasticache_cpucredit_balance_minimum", "aws_elasticache_cpuutilization_average"
STAMP = "elasticache_cloudwatch_datapoint_timestamp_seconds"
# promtool's time() is the evaluation time: a datapoint of now, or one always old (past the 20 minutes of the alerting tier)
FRESH, STALE = "0+60x40", "-2000+0x40"


def stamp(metric: str, when: str, **dims: str) -> tuple[str, str]:
    return series(STAMP, **{**CW, **dims}, metric=metric), when


def run_promtool(tmp_path, tests: list[dict]) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(_without_annotations(RULES.read_text()))
    test_file = tmp_path / "guards.test.yml"
    document = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": with_served_freshness(tests)}
    test_file.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]


def one_test(inputs: list[tuple[str, str]], alert: str, at: str, expected: list[dict[str, str]]) -> dict:
    return {
        "interval": "1m",
        "input_series": [{"series": name, "values": values} for name, values in inputs],
        "alert_rule_test": [
            {"eval_time": at, "alertname": alert, "exp_alerts": [{"exp_labels": {**labels, SOURCE_LABEL: DEFAULT_SOURCE}} for labels in expected]}
        ],
    }


def test_request_latency_guards_each_operation_with_its_own_datapoints(tmp_path):
    alert = "ElastiCacheRequestLatencyHigh"
    write_only = {**CW, "dimension_CacheClusterId": "writer-001"}
    stale_write = {**CW, "dimension_CacheClusterId": "stale-001"}
    run_promtool(
        tmp_path,
        [
            # a write-only primary: its writes are slow and fresh, it serves no read latency at all
            one_test(
                [(series(WRITE_P99, **write_only), "3000+0x20"), stamp(WRITE_P99, FRESH, **write_only)],
                alert,
                "11m",
                [{**write_only, "operation": "write", "severity": "warning"}],
            ),
            # the write p99 is an old value kept after its datapoints stopped, while the reads are fresh (and fast)
            one_test(
                [
                    (series(WRITE_P99, **stale_write), "3000+0x20"),
                    stamp(WRITE_P99, STALE, **stale_write),
                    (series(READ_P99, **stale_write), "400+0x20"),
                    stamp(READ_P99, FRESH, **stale_write),
                ],
                alert,
                "11m",
                [],
            ),
        ],
    )


def test_burst_credits_guards_the_cpu_it_reads(tmp_path):
    alert = "ElastiCacheBurstCreditsLow"
    node = {**CW, "dimension_CacheClusterId": "carts-001"}
    credits_low = [(series(CREDITS, **node), "3+0x20"), stamp(CREDITS, FRESH, **node), (series(CPU_AVG, **node), "35+0x20")]
    run_promtool(
        tmp_path,
        [
            one_test([*credits_low, stamp(CPU_AVG, FRESH, **node)], alert, "16m", [{**node, "severity": "warning"}]),
            # the CPU above 20 % is an old value: nothing says the node is busy now
            one_test([*credits_low, stamp(CPU_AVG, STALE, **node)], alert, "16m", []),
        ],
    )


def write_catalog(tmp_path, prometheus: dict) -> str:
    alert = {"name": "A", "severity": "warning", "for": "5m", "summary": "s", "description": "d", "runbook": "r", "prometheus": prometheus}
    path = tmp_path / "catalog.yml"
    path.write_text(yaml.safe_dump({"format": "elasticache-exporter-alerts", "alerts": [alert]}))
    return str(path)


@pytest.mark.unit
def test_each_arm_renders_with_its_own_series_freshness(tmp_path):
    alert = load_catalog(write_catalog(tmp_path, {"all": [{"redis": "redis_a", "when": "> 1"}, {"redis": "redis_b", "when": "< 2"}]}))[0]
    assert alert.guard == "redis"
    assert expression(alert) == (
        "((redis_a > 1) and on (instance) (redis_up == 1)) and on (instance) ((redis_b < 2) and on (instance) (redis_up == 1))"
    )
    alert = load_catalog(
        write_catalog(
            tmp_path,
            {"any": [{"cloudwatch": "aws_elasticache_a", "when": ">= 3", "labels": {"op": "a"}}, {"cloudwatch": "aws_elasticache_b", "when": "> 4"}]},
        )
    )[0]
    rendered = expression(alert)
    assert rendered is not None
    assert rendered.count(" or ") == 1
    cloudwatch_node = "account_id, region, dimension_CacheClusterId, dimension_CacheNodeId, dimension_clusterId"
    assert f"label_replace((aws_elasticache_a >= 3) and on ({cloudwatch_node})" in rendered
    # each arm younger than the limit the exporter serves for its own series
    served = 'on (metric) group_left () max by (metric) (elasticache_cloudwatch_fresh_seconds{{metric="{0}"}})'
    assert '{metric="aws_elasticache_a"} < ' + served.format("aws_elasticache_a") + '), "op", "a", "", "")' in rendered
    assert f"(aws_elasticache_b > 4) and on ({cloudwatch_node})" in rendered
    assert '{metric="aws_elasticache_b"} < ' + served.format("aws_elasticache_b") + ")" in rendered


@pytest.mark.unit
@pytest.mark.parametrize(
    ("prometheus", "error"),
    [
        ({"expr": "aws_elasticache_a > 1 and on (region) aws_elasticache_b > 2"}, "reads several CloudWatch series"),
        ({"all": [{"cloudwatch": "aws_elasticache_a", "when": "> 1"}, {"redis": "redis_b", "when": "> 1"}]}, "every arm reads the same source"),
        ({"any": [{"cloudwatch": "aws_elasticache_a", "when": "> 1"}]}, "at least two arms"),
        ({"any": [{"cloudwatch": "aws_elasticache_a", "when": "rate"}, {"cloudwatch": "b", "when": "> 1"}]}, "any[0].when: must be a comparison"),
        ({"any": [{"cloudwatch": "a{x='1'}", "when": "> 1"}, {"cloudwatch": "b", "when": "> 1"}]}, "needs one series name"),
        ({"expr": "x > 1", "all": [{"redis": "a", "when": "> 1"}, {"redis": "b", "when": "> 1"}]}, "give one of expr, any and all"),
    ],
)
def test_an_expression_whose_parts_would_share_one_guard_is_refused(tmp_path, prometheus, error):
    with pytest.raises(RenderError, match=re.escape(error)):
        load_catalog(write_catalog(tmp_path, prometheus))


def served_bursts(minutes: dict[int, tuple[float, float]], poll_every: int, scrapes: int) -> tuple[str, str]:
    """What the exporter serves at each scrape of a minute (promtool values of burst_minutes and the window's highest
    average): CloudWatch's minutes (busiest second and average, percent, by minute) brought by a poll every
    ``poll_every`` minutes, each poll the 5 minutes that end 2 minutes before it, as the monitor's window asks."""
    kept, window = BurstMinutes(), None
    bursts, usage = [], []
    for now in range(scrapes):
        if now % poll_every == 0:
            polled = {minute: values for minute, values in minutes.items() if now - 7 <= minute < now - 2}
            if polled:
                window = kept.merge({60.0 * m: v[0] for m, v in polled.items()}, {60.0 * m: v[1] for m, v in polled.items()})
        bursts.append("_" if window is None else str(window.burst_minutes))
        usage.append("_" if window is None or window.max_usage_percent is None else f"{window.max_usage_percent / 100:g}")
    return " ".join(bursts), " ".join(usage)


def test_microbursts_count_each_cloudwatch_minute_once_however_often_it_is_polled(tmp_path):
    alert, labels = "ElastiCacheNetworkMicrobursts", {"instance": "rg-001", "node_type": "cache.r6g.large", "direction": "out"}
    calm = {minute: (50.0, 70.0) for minute in range(40)}
    one_burst = {**calm, 10: (130.0, 70.0)}
    five_bursts = {**calm, **{minute: (130.0, 70.0) for minute in (10, 11, 13, 15, 16)}}
    tests = []
    for minutes, poll_every, expected in ((one_burst, 5, []), (one_burst, 1, []), (five_bursts, 5, [labels]), (five_bursts, 1, [labels])):
        bursts, usage = served_bursts(minutes, poll_every, 40)
        inputs = [
            (series("elasticache_network_aws_baseline_burst_minutes", **labels), bursts),
            (series("elasticache_network_aws_baseline_window_max_usage_ratio", **labels), usage),
        ]
        # at minute 21 the polls have brought minute 16, the last burst, and the newest minute is at most 18: all five in the window
        tests.append(one_test(inputs, alert, "21m", [{**fired, "severity": "warning"} for fired in expected]))
    assert served_bursts(one_burst, 5, 40)[0].split().count("1") >= 5  # the one minute served for 5 scrapes and more
    run_promtool(tmp_path, tests)


@pytest.mark.unit
def test_every_recorded_series_an_alert_reads_is_listed_and_an_inert_alert_says_so_and_how_to_arm_it():
    from pathlib import Path

    from exporter.alerts.prometheus import RECORDED

    recorded = {one.name: one for one in RECORDED}
    shipped = yaml.safe_load(RULES.read_text())
    records = {rule["record"] for group in shipped["groups"] for rule in group["rules"] if "record" in rule}
    read = {name for group in shipped["groups"] for rule in group["rules"] for name in re.findall(r"\belasticache:[a-z0-9_]+", rule["expr"])}
    assert read <= set(recorded), f"series read by the rules but not in prometheus.RECORDED: {read - set(recorded)}"
    assert records <= set(recorded)
    runbooks = (Path(__file__).resolve().parent.parent / "docs" / "runbooks.md").read_text()
    catalog = {alert.name: alert for alert in load_catalog()}
    inert = set()
    for one in RECORDED:
        if one.name in records:
            assert not one.inert_without, one.name
            continue
        assert one.armed_by, f"{one.name} is not in the shipped rules: say how to record it"
        assert one.inert_without, f"{one.name} is not in the shipped rules: name the alerts inert without it"
        for name in one.inert_without:
            assert one.name in (catalog[name].expr or ""), (name, one.name)
            inert.add(name)
    assert inert == {"RedisCommandLatencyAboveBenchmark", "RedisCacheHitRateLow"}
    for name in inert:
        anchor = f'<a id="{catalog[name].runbook}"></a>'
        section = runbooks[runbooks.index(anchor) : runbooks.find("<a id=", runbooks.index(anchor) + len(anchor))]
        assert "Inert by default" in section, name
        assert "render prometheus" in section, name


def test_the_alerts_inert_by_default_fire_once_their_series_are_recorded(tmp_path):
    """The shipped rules record no benchmark p99 and no hit-ratio bounds: a slow GET and a poor hit ratio alert nothing.
    Rendered with a table that has benchmark latency and with --hit-ratio and --min-miss-rate, the same inputs fire."""
    from test_rules import _latency_histogram

    from exporter.alerts.prometheus import render_prometheus
    from exporter.baselines.latency import LatencyFigure
    from exporter.baselines.table import load_table
    from exporter.common.records import replace

    table = load_table()
    node = replace(table.node_types["cache.r6g.large"], latency=(LatencyFigure("GET", 100_000.0, p99_ms=0.8, data_size=100),))
    armed_table = replace(table, node_types={**table.node_types, "cache.r6g.large": node})
    armed = tmp_path / "armed.rules.yml"
    armed.write_text(_without_annotations(render_prometheus(load_catalog(), armed_table, hit_rate=(0.8, 10.0))))
    inputs = [
        *_latency_histogram("a", "get", slow=True),
        (series("elasticache_engine_cpu_utilization_percent", instance="a", source="info", node_type="cache.r6g.large"), "30+0x40"),
        (series("redis_keyspace_hits_total", instance="a"), "0+1200x40"),  # a hit ratio of 0.4, 30 misses a second
        (series("redis_keyspace_misses_total", instance="a"), "0+1800x40"),
        (series("redis_up", instance="a"), "1+0x40"),
    ]
    slow = {"instance": "a", "cmd": "get", "command_class": "read", "node_type": "cache.r6g.large", "severity": "warning"}
    tests = [one_test(inputs, "RedisCommandLatencyAboveBenchmark", "26m", []), one_test(inputs, "RedisCacheHitRateLow", "26m", [])]
    run_promtool(tmp_path, tests)  # the shipped rules: inert
    document = {
        "rule_files": [str(armed)],
        "evaluation_interval": "1m",
        "tests": [
            one_test(inputs, "RedisCommandLatencyAboveBenchmark", "26m", [slow]),
            one_test(inputs, "RedisCacheHitRateLow", "26m", [{"instance": "a", "severity": "warning"}]),
        ],
    }
    test_file = tmp_path / "armed.test.yml"
    test_file.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]


@pytest.mark.unit
def test_the_table_of_recorded_series_in_the_metrics_doc_is_up_to_date():
    from pathlib import Path

    from exporter.alerts.recorded_doc import replace_recorded

    document = (Path(__file__).resolve().parent.parent / "docs" / "metrics.md").read_text()
    assert "<!-- BEGIN GENERATED: recorded -->" in document
    assert replace_recorded(document) == document, "run: python -m exporter.alerts.recorded_doc docs/metrics.md"


@pytest.mark.unit
def test_utilization_is_read_from_one_source_per_node_in_instant_selectors_only():
    """INFO's figure, else CloudWatch's; a selector that names its source, a range, an offset and a label lookup stay as
    written (each still parses: promtool checks the shipped rules)."""
    from exporter.alerts.catalog import one_source

    cpu = "elasticache_engine_cpu_utilization_percent"
    assert one_source(f"{cpu} > 90") == f'({cpu}{{source="info"}} or on (instance, direction) {cpu}{{source="cloudwatch"}}) > 90'
    braces = 'instance=~"node-[0-9]{3}"'  # a quoted value with braces is one matcher
    assert one_source(f"{cpu}{{{braces}}} > 1") == (
        f'({cpu}{{{braces}, source="info"}} or on (instance, direction) {cpu}{{{braces}, source="cloudwatch"}}) > 1'
    )
    for kept in (
        f'{cpu}{{source="cloudwatch"}} > 90',
        'min_over_time(elasticache_network_utilization_ratio{direction="out"}[10m]) > 1',
        f"{cpu} offset 5m > 1",
        f"{cpu} OFFSET 5m > 1",
        f"{cpu} @ 100 > 1",
        f'x * on (instance) group_left (node_type) group by (instance, node_type) ({cpu}{{node_type!=""}})',
    ):
        assert one_source(kept) == kept
