"""A simulated fleet-day judged as on-call judges it (tests/fleetsim): 50 Redis nodes and 6 CloudWatch-polled nodes,
every incident class once, through the rendered rules (promtool) and the rendered Alertmanager inhibitions and grouping.
An incident that should page pages once, within its runbook's promise; none that should not pages; nothing pages
without an incident. A rule change that adds a false page or loses a page fails here. The week is a bench
(bench/fleet_week_bench.py)."""

from __future__ import annotations

import contextlib

import pytest
import yaml
from fleetsim import simulate
from fleetsim.oncall import ALERTMANAGER, Report, judge, notifications, notified
from fleetsim.plan import CLASSES, Incident, Plan
from fleetsim.replay import expanded, parse_promtool
from servers import post_firing, start_rendered_alertmanager, wait_until


@pytest.mark.timeout(900)
def test_a_simulated_fleet_day_pages_once_per_incident_and_on_time(tmp_path, aws_credentials):
    report = simulate(tmp_path, days=1)
    table = report.table()
    print(table)
    for verdict in report.verdicts:
        cls = CLASSES[verdict.incident.kind]
        pages = len(verdict.pages)
        assert pages == (1 if cls.expect == "page" else 0), f"{verdict.incident}: {pages} pages\n{table}"
        assert len(verdict.warnings) == cls.warnings, f"{verdict.incident}: {len(verdict.warnings)} warnings\n{table}"
    assert not report.unexplained, table
    assert not report.late(), table
    assert (report.precision, report.recall) == (1.0, 1.0), table
    # the inhibitions the verdict applied are a real Alertmanager's, at the minute they silenced the most alerts
    minute = max(report.firing, key=lambda m: (len(report.firing[m]) - len(notified({m: report.firing[m]})[m]), len(report.firing[m])))
    assert len(notified({minute: report.firing[minute]})[minute]) < len(report.firing[minute]), "no inhibition applied all day"
    assert alertmanager_states(tmp_path, report.firing[minute]) == _without_empty(expected_states(report.firing[minute]))


def expected_states(alerts: list[dict[str, str]]) -> dict[tuple, str]:
    (left,) = notified({0: alerts}).values()
    return {tuple(sorted(a.items())): "active" if any(a is kept for kept in left) else "suppressed" for a in alerts}


def alertmanager_states(tmp_path, alerts: list[dict[str, str]]) -> dict[tuple, str]:
    """Each alert's state in a real Alertmanager running the rendered configuration, once it shows what the verdict
    expects (or after 15 s: the comparison shows what differs)."""
    manager = start_rendered_alertmanager(tmp_path, yaml.safe_load(ALERTMANAGER.read_text()))
    try:
        post_firing(manager, alerts)
        want = _without_empty(expected_states(alerts))

        def listed() -> dict[tuple, str]:
            alerts = manager.api("/alerts")
            assert isinstance(alerts, list)
            return {tuple(sorted(a["labels"].items())): a["status"]["state"] for a in alerts}

        with contextlib.suppress(AssertionError):
            wait_until(lambda: listed() == want, timeout=15, interval=0.2, what="the inhibitions applied")
        return listed()
    finally:
        manager.stop()


def _without_empty(states: dict[tuple, str]) -> dict[tuple, str]:
    return {tuple((k, v) for k, v in labels if v): state for labels, state in states.items()}


def _alert(name: str, severity: str = "critical", **labels: str) -> dict[str, str]:
    return {"alertname": name, "severity": severity, "alert_source": "elasticache-exporter", "account_id": "", "region": "", **labels}


@pytest.mark.unit
def test_the_verdict_counts_a_second_alert_of_one_failure_as_a_false_page():
    """One incident on shop-01 that two alerts of different names report (two groups: two pages); an alert on a node
    with no incident; a page for a class that expects none."""
    the_plan = Plan(
        120, ["shop-01", "shop-02"], ["cache-00"], [Incident("primary down 70 min", 10, "shop-01"), Incident("one shaped minute", 30, "cache-00")]
    )
    firing = {m: [_alert("RedisDown", instance="shop-01-001", replication_group="shop-01")] for m in range(12, 80)}
    for m in range(20, 80):
        firing[m].append(_alert("RedisMissingMaster", replication_group="shop-01"))  # not inhibited: no shard label
    for m in range(40, 50):
        firing.setdefault(m, []).append(_alert("RedisDown", instance="shop-02-002", replication_group="shop-02"))
        firing[m].append(_alert("ElastiCacheBandwidthOutAllowanceExceeded", instance="cache-00", dimension_CacheClusterId="cache-00"))
    sent = notifications(notified(firing), the_plan.minutes)
    verdicts, unexplained = judge(the_plan, sent)
    report = Report(verdicts, unexplained, {})
    down, shaped = verdicts
    assert [n.minute for n in down.pages] == [12, 20]
    assert down.minutes_to_page == 2
    assert [n.minute for n in shaped.pages] == [40]
    assert [dict(n.alerts[0])["instance"] for n in unexplained] == ["shop-02-002"]
    rows = {row["class"]: row for row in report.rows()}
    assert rows["primary down 70 min"]["false_pages"] == 1
    assert rows["one shaped minute"]["false_pages"] == 1
    assert report.precision == 1 / 4
    assert report.recall == 1.0


@pytest.mark.unit
def test_the_rendered_inhibitions_silence_a_replicas_lost_link_while_its_primary_is_down():
    shard = {"replication_group": "shop-01", "shard": "0001", "shard_source": "config"}
    down = _alert("RedisDown", instance="shop-01-001", **shard)
    link = _alert("RedisMasterLinkDown", instance="shop-01-002", **shard)
    other = _alert("RedisMasterLinkDown", instance="shop-02-002", replication_group="shop-02", shard="0001", shard_source="config")
    assert notified({5: [down, link, other]}) == {5: [down, other]}
    assert notified({5: [link]}) == {5: [link]}  # no source firing: nothing inhibited


@pytest.mark.unit
def test_an_alert_matching_both_sides_of_a_rule_is_silenced_only_by_a_source_that_is_no_target():
    """As Alertmanager: with A|B on both sides, A and B firing together silence neither; C (a source only) silences
    both."""
    both = {"source_matchers": ['alertname=~"A|B|C"'], "target_matchers": ['alertname=~"A|B"'], "equal": ["instance"]}
    config = {"inhibit_rules": [both]}
    a, b, c = ({"alertname": name, "instance": "x"} for name in "ABC")
    assert notified({0: [a, b]}, config) == {0: [a, b]}
    assert notified({0: [a, b, c]}, config) == {0: [c]}


@pytest.mark.unit
def test_a_group_notifies_once_while_it_stays_active_and_again_after_it_resolved():
    alert = _alert("RedisDown", instance="a", replication_group="g")
    other = _alert("RedisDown", instance="b", replication_group="g")  # same group: an update, not a page
    firing = {0: [alert], 1: [alert, other], 2: [other], 4: [alert]}
    assert [n.minute for n in notifications(firing, 6)] == [0, 4]


@pytest.mark.unit
def test_promtools_report_of_unexpected_alerts_is_read_minute_by_minute():
    output = """  FAILED:
    expr: "ALERTS{alertstate=\\"firing\\"}", time: 1h2m,
        exp: nil
        got: {__name__="ALERTS", alertname="RedisDown", alertstate="firing", instance="shop-01-001", severity="critical"} 1E+00, \
{__name__="ALERTS", alertname="RedisMissingMaster", alertstate="firing", replication_group="a\\"b}", severity="warning"} 1E+00
    expr: "ALERTS{alertstate=\\"firing\\"}", time: 7m,
        exp: nil
        got: {__name__="ALERTS", alertname="RedisDown", alertstate="firing", instance="x", severity="critical"} 1E+00
"""
    firing = parse_promtool(output + output.replace("time: 1h2m,", "time: 1d1h,").replace("time: 7m,", "time: 1w,"))
    assert sorted(firing) == [7, 62, 1500, 10080]
    assert [a["alertname"] for a in firing[62]] == ["RedisDown", "RedisMissingMaster"]
    assert firing[62][1]["replication_group"] == 'a"b}'
    assert "alertstate" not in firing[62][0]
    with pytest.raises(AssertionError, match="promtool failed"):
        parse_promtool("  FAILED:\n    1:1: parse error")


@pytest.mark.unit
def test_series_values_are_written_in_promtools_expanding_notation():
    assert expanded([1.0, 1.0, 1.0, None, None, 5.0, 7.0, 9.0, 4.0]) == "1.0+0.0x2 stale _ 5.0+2.0x2 4.0"
    assert expanded([None, 3.0, 1.0]) == "_ 3.0-2.0x1"
