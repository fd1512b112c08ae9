"""The backtest: alerting rules evaluated over a Prometheus' history as Prometheus evaluates them, then Alertmanager's
inhibit rules and grouping. Proven against promtool (the same series, every alert's firing minute by minute) over a real
Prometheus 3 whose storage is backfilled with those series."""

from __future__ import annotations

import json
import math
import re
import time

import pytest
from fleetsim.replay import firing_alerts
from promql_front import start_backfilled_prometheus

from exporter.alerts.backtest import MAX_POINTS, AlertRule, chunks, evaluate, inline, load_rules, selectors
from exporter.alerts.notify import notifications
from exporter.cli.main import main

MINUTES = 240
START = math.floor(time.time() / 3600) * 3600 - 6 * 3600  # within the server's retention, minute-aligned


def _rule(hold: float = 0, keep: float = 0) -> AlertRule:
    return AlertRule("A", "x", hold, keep, (("severity", "critical"),), 60.0, "g")


def _fired(rule: AlertRule, minutes_present: list[int], minutes: int = 20) -> list[int]:
    steps = [60.0 * m for m in range(minutes)]
    labels = (("alertname", "A"),)
    present = {60.0 * m: {labels} for m in minutes_present}
    return [int(at // 60) for at in evaluate(rule, steps, present).get(labels, [])]


@pytest.mark.unit
def test_an_alert_fires_once_active_for_its_for_and_keeps_firing_for_its_keep_firing_for():
    assert _fired(_rule(), [3, 4, 5]) == [3, 4, 5]  # for 0: firing at its first evaluation
    assert _fired(_rule(hold=120), [3, 4, 5, 6]) == [5, 6]  # active at 3, firing at 5
    assert _fired(_rule(hold=120), [3, 4, 6, 7, 8]) == [8]  # a gap resets the pending alert
    assert _fired(_rule(keep=180), [3, 4]) == [3, 4, 5, 6, 7]  # kept firing 3 minutes after it left (5, 6, 7)
    assert _fired(_rule(keep=180), [3, 4, 6]) == [3, 4, 5, 6, 7, 8, 9]  # back within keep: the keep starts again
    assert _fired(_rule(hold=120, keep=180), [3, 4]) == []  # never fired: nothing to keep


@pytest.mark.unit
def test_recorded_series_are_inlined_with_their_labels_and_a_name_with_matchers_is_left():
    recorded = {"job:up:sum": [("sum(up)", {"team": "a"}), ("vector(1)", {"team": "b"})]}
    got = inline('job:up:sum > 0 and on() job:up:sum{team="a"} and "job:up:sum"', recorded)
    assert got.startswith('(label_replace((sum(up)), "team", "a", "", "") or label_replace((vector(1)), "team", "b", "", "")) > 0')
    assert 'job:up:sum{team="a"}' in got
    assert got.endswith('"job:up:sum"')
    assert selectors('sum by (instance) (rate(redis_commands_total{cmd="get"}[5m])) / on(instance) redis_up') == {"redis_commands_total", "redis_up"}


@pytest.mark.unit
def test_no_range_query_passes_prometheus_points_limit_and_none_leaves_a_step_out():
    made = chunks(0.0, 60.0 * 30_000, 60.0)
    assert all((end - start) / 60 + 1 <= MAX_POINTS for start, end in made)
    steps = [start + 60 * k for start, end in made for k in range(int((end - start) / 60) + 1)]
    assert steps == [60.0 * k for k in range(30_001)]


@pytest.mark.unit
def test_grouping_waits_updates_repeats_and_resolves_as_alertmanager_does():
    config = {
        "route": {"group_by": ["alertname"], "group_wait": "30s", "group_interval": "5m", "repeat_interval": "1h"},
        "inhibit_rules": [{"source_matchers": ['alertname="Down"'], "target_matchers": ['alertname="Lag"'], "equal": ["instance"]}],
    }
    down = {"alertname": "Down", "instance": "a", "severity": "critical"}
    moments = [(60.0 * m, [down] if 10 <= m < 100 else []) for m in range(200)]
    sent = notifications(moments, config, 200 * 60.0)
    # a repeat due at a flush goes at the next one: Alertmanager wants the last strictly before now - repeat_interval
    assert [(n.kind, n.at) for n in sent][:2] == [("first", 630.0), ("repeat", 630.0 + 3600 + 300)]
    assert sent[-1].kind == "resolved"
    lag = {"alertname": "Lag", "instance": "a", "severity": "warning"}
    other = {"alertname": "Lag", "instance": "b", "severity": "warning"}
    silenced = notifications([(0.0, [down, lag, other])], config, 600.0)
    assert {dict(a)["instance"] for n in silenced if dict(n.alerts[0])["alertname"] == "Lag" for a in n.alerts} == {"b"}


@pytest.mark.unit
def test_routes_are_walked_as_alertmanager_walks_them():
    """match and match_re as matchers, nested routes, continue, group_by '...', a child's own timers, unquoted values."""
    from exporter.alerts.notify import route_tree, routes_of

    tree = route_tree(
        {
            "route": {
                "receiver": "default",
                "group_by": ["alertname"],
                "routes": [
                    {"receiver": "pager", "match": {"severity": "critical"}, "group_wait": "10s"},
                    {
                        "receiver": "team-a",
                        "match_re": {"team": "a|b"},
                        "continue": True,
                        "routes": [{"receiver": "team-a-db", "matchers": ["service=db"], "group_by": ["..."]}],
                    },
                    {"receiver": "audit", "matchers": ['team="a"']},
                ],
            }
        }
    )
    assert [r.receiver for r in routes_of(tree, {"severity": "warning", "team": "c"})] == ["default"]
    assert [r.receiver for r in routes_of(tree, {"severity": "critical", "team": "a"})] == ["pager"]
    db = routes_of(tree, {"severity": "warning", "team": "a", "service": "db"})
    assert [r.receiver for r in db] == ["team-a-db", "audit"]
    assert db[0].group_by == ("...",)
    assert routes_of(tree, {"severity": "critical"})[0].group_wait == 10.0


@pytest.mark.unit
def test_a_receiver_without_resolved_notifications_is_told_only_of_new_alerts():
    """send_resolved off (email's and Slack's default): a group that shrinks sends nothing, and a group that resolves
    sends no resolution; a webhook (on by default) is told both."""
    one = {"alertname": "Lag", "instance": "a", "severity": "warning"}
    two = {"alertname": "Lag", "instance": "b", "severity": "warning"}
    moments = [(60.0 * m, [one, two] if m < 10 else ([one] if m < 20 else [])) for m in range(40)]
    route = {"receiver": "r", "group_by": ["alertname"], "group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}
    quiet = notifications(moments, {"route": route, "receivers": [{"name": "r", "slack_configs": [{"channel": "#x"}]}]}, 2400.0)
    assert [n.kind for n in quiet] == ["first"]
    told = notifications(moments, {"route": route, "receivers": [{"name": "r", "webhook_configs": [{"url": "http://x"}]}]}, 2400.0)
    assert [n.kind for n in told] == ["first", "update", "resolved"]


@pytest.mark.unit
def test_inhibition_in_both_forms_and_never_by_a_source_that_is_also_a_target():
    from exporter.alerts.notify import inhibited

    old_form = inhibited(
        {"inhibit_rules": [{"source_match": {"severity": "critical"}, "target_match": {"severity": "warning"}, "equal": ["instance"]}]}
    )
    critical = {"alertname": "Down", "severity": "critical", "instance": "a"}
    warning = {"alertname": "Lag", "severity": "warning", "instance": "a"}
    other = {"alertname": "Lag", "severity": "warning", "instance": "b"}
    assert old_form([critical, warning, other]) == [critical, other]
    # a rule whose sources are targets too: two such alerts never silence each other
    both = inhibited({"inhibit_rules": [{"source_matchers": ['alertname=~"A|B"'], "target_matchers": ['alertname=~"A|B"'], "equal": ["instance"]}]})
    a, b = {"alertname": "A", "instance": "x"}, {"alertname": "B", "instance": "x"}
    assert both([a, b]) == [a, b]


@pytest.mark.unit
def test_a_failing_alert_is_marked_and_the_others_go_on_and_too_many_samples_is_asked_in_halves():
    from exporter.alerts.backtest import BacktestError, RuleSet, backtest

    rules = RuleSet(
        "r",
        (
            AlertRule("Broken", "bad(", 0, 0, (), 60.0, "g"),
            AlertRule("Heavy", "heavy", 0, 0, (("node", "{{ $labels.instance }}"),), 60.0, "g"),
            AlertRule("Ends", "x @ end()", 0, 0, (), 60.0, "g"),
            AlertRule("Dup", "heavy", 0, 0, (("severity", "warning"),), 60.0, "g"),
            AlertRule("Dup", "heavy", 0, 0, (("severity", "critical"),), 60.0, "g"),
        ),
    )
    asked: list[tuple[str, float, float]] = []

    def query(expr: str, start: float, end: float, step: float):
        asked.append((expr, start, end))
        if expr == "bad(":
            raise BacktestError("http://p: bad_data: parse error")
        if end - start > 4 * 3600:
            raise BacktestError("http://p: execution: query processing would load too many samples into memory")
        return [({"instance": "a"}, [(at, 1.0) for at in range(int(start), int(end) + 1, 60)])], []

    histories = backtest(rules, query, 0.0, 12 * 3600.0)
    by_name = {(h.rule.name, h.rule.labels): h for h in histories}
    assert "parse error" in by_name[("Broken", ())].error
    heavy = by_name[("Heavy", (("node", "{{ $labels.instance }}"),))]
    assert [dict(labels)["node"] for labels in heavy.firing] == ["a"]  # the template expanded
    assert len(next(iter(heavy.firing.values()))) == 12 * 60 + 1  # every minute, from the halves
    assert "range query" in by_name[("Ends", ())].error
    from exporter.alerts.backtest import outcome, summary

    report = summary(outcome(rules, histories, {"route": {"group_by": ["alertname"]}}, 0.0, 12 * 3600.0))
    assert {"Dup [warning]", "Dup [critical]"} <= set(report["alerts"])
    assert report["alerts"]["Dup [warning]"]["firings"] == 1


def _series() -> dict[tuple[str, tuple[tuple[str, str], ...]], list[float | None]]:
    """Three nodes as redis_exporter serves them: one down for 70 minutes, one replica's link down for 40, one at its
    maxmemory and evicting for an hour."""
    series: dict[tuple[str, tuple[tuple[str, str], ...]], list[float | None]] = {}
    for node, role in (("n1:6379", "master"), ("n2:6379", "slave"), ("n3:6379", "master")):
        labels = (("instance", node), ("job", "redis"))
        series[("redis_up", labels)] = [0.0 if node == "n1:6379" and 60 <= m < 130 else 1.0 for m in range(MINUTES)]
        series[("redis_instance_info", (*labels, ("role", role)))] = [1.0] * MINUTES
        full = node == "n3:6379"
        series[("redis_memory_max_bytes", labels)] = [1e9] * MINUTES
        series[("redis_memory_used_bytes", labels)] = [1e9 if full and 150 <= m < 210 else 4e8 for m in range(MINUTES)]
        evicted, counts = 0.0, []
        for m in range(MINUTES):
            evicted += 500.0 if full and 150 <= m < 210 else 0.0
            counts.append(evicted)
        series[("redis_evicted_keys_total", labels)] = counts
        if role == "slave":
            series[("redis_master_link_up", labels)] = [0.0 if 100 <= m < 140 else 1.0 for m in range(MINUTES)]
    return series


def _openmetrics(series) -> str:
    lines = []
    for (name, labels), values in sorted(series.items()):
        text = ",".join(f'{k}="{v}"' for k, v in labels)
        lines += [f"{name}{{{text}}} {value!r} {START + 60 * m}" for m, value in enumerate(values) if value is not None]
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    series = _series()
    prometheus = start_backfilled_prometheus(tmp_path_factory.mktemp("history"), _openmetrics(series))
    try:
        yield series, f"http://127.0.0.1:{prometheus.port}"
    finally:
        prometheus.stop()


def test_the_backtest_fires_every_alert_on_the_minutes_promtool_does(history, tmp_path, capsys):
    series, url = history
    end = START + 60 * (MINUTES - 1)
    assert main(["backtest", "--prometheus", url, "--start", str(START), "--end", str(end), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    ours = report["rule_sets"][0]
    # the same rules through promtool, over the same series
    rules = tmp_path / "rules.yml"
    from exporter.cli.backtest import _default_rules

    rules.write_text(_default_rules()[0])
    # the backtest evaluates from the longest for and keep_firing_for before its start: promtool too, over no data
    loaded = load_rules("rules", rules.read_text(), 60.0).alerts
    warm = math.ceil(max(rule.hold + rule.keep_firing for rule in loaded) / 60)
    padded = {key: [None] * warm + values for key, values in series.items()}
    expected = firing_alerts(padded, warm + MINUTES, START - 60 * warm, tmp_path, rules)
    got = _firing_by_minute(rules.read_text(), url, end)
    wanted = {(m - warm, tuple(sorted(a.items()))) for m, alerts in expected.items() for a in alerts if m >= warm}
    assert got == wanted, (sorted(got - wanted)[:5], sorted(wanted - got)[:5])
    names = {alert for _, labels in wanted for key, alert in labels if key == "alertname"}
    assert {"RedisDown", "RedisMasterLinkDown", "RedisOutOfConfiguredMaxmemory"} <= names, names
    assert ours["pages"] >= 2
    assert ours["alerts"]["RedisDown"]["pages"] == 1
    assert "ElastiCacheNetworkOutAtBaseline" in ours["not_evaluable"]  # no elasticache_* series in a redis_exporter history


def _firing_by_minute(rules_text: str, url: str, end: float, start: float = START) -> set[tuple[int, tuple[tuple[str, str], ...]]]:
    from exporter.alerts.backtest import backtest
    from exporter.alerts.history import Access, PrometheusHistory

    histories = backtest(load_rules("rules", rules_text, 60.0), PrometheusHistory(Access(url)).query_range, start, end)
    return {(int((at - START) // 60), labels) for h in histories for labels, times in h.firing.items() for at in times}


def test_a_range_that_starts_mid_incident_fires_from_its_start_as_the_whole_history_does(history):
    """The range starts 30 minutes into a node's 70-minute outage and 10 minutes before a replica's link goes down: each
    alert firing then fires from the range's first minute (its ``for`` passed before), as over the whole history."""
    from exporter.cli.backtest import _default_rules

    _, url = history
    end = START + 60 * (MINUTES - 1)
    rules = _default_rules()[0]
    whole = _firing_by_minute(rules, url, end)
    late = _firing_by_minute(rules, url, end, start=START + 90 * 60)
    assert late == {(minute, labels) for minute, labels in whole if minute >= 90}
    assert any(minute == 90 and ("alertname", "RedisDown") in labels for minute, labels in late), sorted(late)[:5]


def test_compare_reports_the_community_rules_beside_ours(history, capsys):
    """The community's Redis alerts (tests/data/community-redis-rules.yml) side by side with ours: each set's pages, and
    the alerts whose series this history lacks listed as not evaluable, with what they need."""
    from pathlib import Path

    _, url = history
    community = Path(__file__).resolve().parent / "data" / "community-redis-rules.yml"
    end = START + 60 * (MINUTES - 1)
    assert main(["backtest", "--prometheus", url, "--start", str(START), "--end", str(end), "--compare", str(community), "--format", "json"]) == 0
    ours, theirs = json.loads(capsys.readouterr().out)["rule_sets"]
    assert theirs["alerts"]["RedisDown"]["pages"] == 1
    assert theirs["alerts"]["RedisOutOfConfiguredMaxmemory"]["warnings_sent"] == 1
    assert "RedisNotEnoughConnections" in theirs["not_evaluable"]  # no redis_connected_clients in this history
    assert theirs["alerts"]["RedisNotEnoughConnections"]["missing"] == ["redis_connected_clients"]
    assert ours["alerts"]["RedisDown"]["pages"] == 1
    assert main(["backtest", "--prometheus", url, "--start", str(START), "--end", str(end), "--compare", str(community)]) == 0
    printed = capsys.readouterr().out
    assert "the rendered rules" in printed
    assert str(community)[-40:] in printed


def test_a_server_that_cannot_be_reached_is_one_line_and_exit_1(tmp_path, capsys):
    from servers import free_port

    assert main(["backtest", "--prometheus", f"http://127.0.0.1:{free_port()}", "--range", "1h"]) == 1
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1
    assert "cannot reach" in said[0]


class _Webhook:
    """A webhook receiver recording each notification Alertmanager sends: (seconds since ``zero``, status, alertnames)."""

    def __init__(self) -> None:
        import http.server
        import threading

        from servers import free_port

        self.received: list[tuple[float, str, tuple[str, ...]]] = []
        self.zero = time.monotonic()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                firing = tuple(sorted(a["labels"]["alertname"] for a in body["alerts"] if a["status"] == "firing"))
                hook.received.append((time.monotonic() - hook.zero, body["status"], firing))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# each scenario: its route's timers (in seconds), its inhibit rules, and who fires each second
REPLAYS = {
    # A for 0-9 s, B 3-26 s with a gap at 14-16 s, A again 20-23 s; state changes half a second from any flush
    "groups": (
        {"group_by": ["alertname"], "group_wait": "2500ms", "group_interval": "4s", "repeat_interval": "10s"},
        [],
        [({"A"} if s < 10 or 20 <= s < 24 else set()) | ({"B"} if 3 <= s < 27 and not 14 <= s < 17 else set()) for s in range(36)],
    ),
    # T paged, then muted by S for 9 s: it is still the notified alert when S ends, so it does not page again
    "inhibited": (
        {"group_by": ["alertname"], "group_wait": "1500ms", "group_interval": "3s", "repeat_interval": "1h"},
        [{"source_matchers": ['alertname="S"'], "target_matchers": ['alertname="T"'], "equal": ["instance"]}],
        [{"T"} | ({"S"} if 8 <= s < 17 else set()) for s in range(30)],
    ),
    # B fires and resolves between two flushes of a group that told of A: the next flush tells of its resolution
    "between flushes": (
        {"group_by": ["instance"], "group_wait": "1500ms", "group_interval": "3s", "repeat_interval": "1h"},
        [],
        [{"A"} | ({"B"} if s == 5 else set()) for s in range(14)],
    ),
    # repeat_interval a multiple of group_interval: a repeat due at a flush goes at the next one
    "repeat at a flush": (
        {"group_by": ["instance"], "group_wait": "1s", "group_interval": "2s", "repeat_interval": "4s"},
        [],
        [{"A"} for _ in range(20)],
    ),
}


@pytest.mark.parametrize("scenario", sorted(REPLAYS))
def test_the_notifications_counted_are_a_real_alertmanagers_with_its_timers_shortened(tmp_path, scenario):
    """Alerts replayed into a real Alertmanager a second at a time, its timers in seconds: it sends the notifications
    the model counts, of each kind, when it says (grouping, inhibition, a resolution between flushes, repeats)."""
    import yaml
    from servers import start_alertmanager, wait_until

    timers, inhibit, plan = REPLAYS[scenario]
    hook = _Webhook()
    route = {"receiver": "hook", **timers}
    receivers = [{"name": "hook", "webhook_configs": [{"url": f"http://127.0.0.1:{hook.port}/", "send_resolved": True}]}]
    config = {"route": route, "inhibit_rules": inhibit, "receivers": receivers}
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    manager = start_alertmanager(path)
    try:
        hook.zero = time.monotonic()
        for second, firing in enumerate(plan):
            wait_until(lambda second=second: time.monotonic() - hook.zero >= second, timeout=5, interval=0.01, what="the next second")
            now = datetime_now()
            alerts = [{"labels": {"alertname": name, "instance": "a"}, "startsAt": now, "endsAt": later(now, 60)} for name in sorted(firing)]
            # as Prometheus does, an alert that stops firing is sent once resolved; one that never fired is never sent
            stopped = plan[second - 1] - firing if second > 0 else set()
            alerts += [{"labels": {"alertname": name, "instance": "a"}, "startsAt": now, "endsAt": now} for name in sorted(stopped)]
            manager.api("/alerts", alerts)
        wait_until(lambda: time.monotonic() - hook.zero >= len(plan) + 1, timeout=10, interval=0.1, what="the last flush")
    finally:
        manager.stop()
        hook.stop()
    moments = [(float(s), [{"alertname": name, "instance": "a"} for name in sorted(firing)]) for s, firing in enumerate(plan)]
    modelled = notifications(moments, {"route": route, "inhibit_rules": inhibit, "receivers": receivers}, float(len(plan)))
    got = sorted((status, firing) for _, status, firing in hook.received)
    wanted = sorted(("resolved" if n.kind == "resolved" else "firing", tuple(sorted(dict(a)["alertname"] for a in n.alerts))) for n in modelled)
    assert got == wanted, (hook.received, [(n.at, n.kind) for n in modelled])
    # and at the moments the model says, within the replay's jitter
    assert all(abs(at - n.at) < 0.4 for (at, _, _), n in zip(sorted(hook.received), modelled, strict=True)), hook.received


@pytest.mark.unit
def test_each_rule_holds_its_alerts_between_its_own_evaluations():
    """A 5-minute group's alert fires for an hour beside a 1-minute group's: the first stays firing between its own
    evaluations (as Alertmanager holds it), so each pages once."""
    from exporter.alerts.backtest import AlertHistory, moments

    slow = AlertRule("Slow", "x", 0, 0, (("severity", "critical"),), 300.0, "slow")
    fast = AlertRule("Fast", "y", 0, 0, (("severity", "critical"),), 60.0, "fast")
    histories = [
        AlertHistory(slow, {(("alertname", "Slow"), ("severity", "critical")): [300.0 * k for k in range(1, 13)]}),
        AlertHistory(fast, {(("alertname", "Fast"), ("severity", "critical")): [60.0 * k for k in range(10, 70)]}),
    ]
    sent = notifications(moments(histories), {"route": {"group_by": ["alertname"]}}, 7200.0)
    assert sorted(dict(n.alerts[0])["alertname"] for n in sent if n.kind == "first") == ["Fast", "Slow"]


def datetime_now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def later(stamp: str, seconds: float) -> str:
    import datetime

    return (datetime.datetime.fromisoformat(stamp) + datetime.timedelta(seconds=seconds)).isoformat()


def test_a_history_behind_sigv4_with_a_partial_answer_marks_the_alerts_it_touched(history, monkeypatch, capsys):
    """CloudWatch's PromQL API (SigV4 for monitoring) in front of the history: every request signed as AWS checks it, and
    an answer that came with a warning marks its alert as read from partial data, never quiet."""
    from promql_front import PromQLFront

    _, url = history
    for name, value in {"AWS_ACCESS_KEY_ID": "AKIDBACKTEST", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}.items():
        monkeypatch.setenv(name, value)
    front = PromQLFront(int(url.rsplit(":", 1)[1]), "eu-west-1", "AKIDBACKTEST", "secret", "token")
    front.answers = ["truncated"]
    try:
        end = START + 60 * (MINUTES - 1)
        argv = [
            "backtest",
            "--prometheus",
            front.url,
            "--sigv4",
            "monitoring",
            "--sigv4-region",
            "eu-west-1",
            "--start",
            str(START),
            "--end",
            str(end),
        ]
        assert main([*argv, "--format", "json"]) == 0
    finally:
        front.stop()
    report = json.loads(capsys.readouterr().out)["rule_sets"][0]
    assert front.refused == []
    assert front.queries
    partial = [name for name, entry in report["alerts"].items() if entry.get("warnings")]
    assert len(partial) == 1, partial
    assert report["alerts"]["RedisDown"]["pages"] == 1


def test_the_html_report_plots_pages_a_day_beside_the_alerts_table(history, capsys):
    from html.parser import HTMLParser

    _, url = history
    end = START + 60 * (MINUTES - 1)
    assert main(["backtest", "--prometheus", url, "--start", str(START), "--end", str(end), "--format", "html"]) == 0
    page = capsys.readouterr().out

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []
            self.titles: list[str] = []

        def handle_starttag(self, tag: str, attrs: list) -> None:
            self.seen.append(tag)

        def handle_data(self, data: str) -> None:
            if "pages" in data:
                self.titles.append(data)

    parsed = Tags()
    parsed.feed(page)
    assert "svg" in parsed.seen
    assert parsed.seen.count("rect") >= 2
    assert any(": 1 pages" in title or ": 2 pages" in title or ": 3 pages" in title for title in parsed.titles), parsed.titles
    assert "RedisDown" in page
    down = page[page.index("<td>RedisDown</td>") :].split("</tr>", 1)[0]  # its row: a bar a day, the page on its day
    day = time.strftime("%Y-%m-%d", time.gmtime(START + 60 * 60))
    assert re.search(rf"<title>{day}: [12] notifications, 1 pages, 0 warnings</title>", down), down


def _serve(handler: type) -> int:
    import http.server
    import threading

    from servers import free_port

    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return port


@pytest.mark.unit
def test_a_redirect_to_another_host_carries_no_credential_and_a_cut_answer_fails_one_alert():
    import http.server

    from exporter.alerts.backtest import RuleSet, backtest
    from exporter.alerts.history import Access, PrometheusHistory

    seen: list[str | None] = []

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            body = json.dumps({"status": "success", "data": ["up"]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    other = _serve(Elsewhere)

    class Redirecting(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{other}{self.path}")  # another host: a name, not the address
            self.end_headers()

        def do_POST(self) -> None:  # an answer cut short: 1,000 bytes said, 15 sent
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"status":"succ')

        def log_message(self, *args: object) -> None:
            pass

    first = _serve(Redirecting)
    assert PrometheusHistory(Access(f"http://127.0.0.1:{first}", bearer_token="SECRET")).metric_names(0, 60) == {"up"}
    assert PrometheusHistory(Access(f"http://user:hunter2@127.0.0.1:{first}")).metric_names(0, 60) == {"up"}
    assert seen == [None, None]
    rules = RuleSet("r", (AlertRule("A", "up == 0", 0, 0, (), 60.0, "g"), AlertRule("B", "up == 2", 0, 0, (), 60.0, "g")))
    histories = backtest(rules, PrometheusHistory(Access(f"http://127.0.0.1:{first}")).query_range, 0.0, 3600.0)
    assert [("broken response" in h.error, h.evaluable) for h in histories] == [(True, False), (True, False)]


@pytest.mark.unit
def test_an_expression_is_asked_once_a_chunk_by_parallel_alerts_and_by_both_rule_sets():
    import threading

    from exporter.alerts.backtest import Cache, RuleSet, backtest, warm_up

    asked: list[tuple[str, float]] = []
    lock = threading.Lock()

    def query(expr: str, start: float, end: float, step: float):
        with lock:
            asked.append((expr, start))
        time.sleep(0.05)  # long enough for the other alerts of the expression to arrive meanwhile
        return [({"instance": "a"}, [(start, 1.0)])], []

    ours = RuleSet("ours", tuple(AlertRule(f"A{i}", "shared", 300 * i, 0, (), 60.0, "g") for i in range(4)))
    theirs = RuleSet("theirs", (AlertRule("B", "shared", 0, 0, (), 60.0, "g"),))
    cache, warm = Cache(), warm_up(ours, theirs)
    for rules in (ours, theirs):
        backtest(rules, query, 7200.0, 10_800.0, None, cache, 4, warm)
    assert asked == [("shared", 7200.0 - 900)]


@pytest.mark.unit
def test_literals_are_no_series_and_for_0_is_a_duration_and_labels_that_collide_fail_as_in_prometheus():
    from exporter.alerts.backtest import RuleSet, backtest

    assert selectors("x > -Inf and y < NaN") == {"x", "y"}
    rules = load_rules("r", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    for: 0\n", 60.0)
    assert rules.alerts[0].hold == 0

    def query(expr: str, start: float, end: float, step: float):  # two names, one label set once __name__ is dropped
        return [({"__name__": name, "instance": "a"}, [(start, 1.0)]) for name in ("m1", "m2")], []

    collide = RuleSet("r", (AlertRule("Collide", '{__name__=~"m1|m2"} > 0', 0, 0, (), 60.0, "g"),))
    history = backtest(collide, query, 0.0, 600.0)[0]
    assert not history.evaluable
    assert "same labelset" in history.error
