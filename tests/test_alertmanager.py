"""Alertmanager routing and inhibitions from the catalog, checked with the real amtool and a real Alertmanager: the
committed fragment and operator object are a fresh render; amtool accepts the fragment merged into a minimal config;
every catalog alert routes to its severity's receiver; every inhibit rule silences its targets where the equal labels
match, and nothing where they differ or are missing."""

from __future__ import annotations

import datetime
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from servers import start_alertmanager, wait_until
from tools import amtool

from exporter.alerts.alertmanager import (
    inhibit_rules,
    inhibitions_table,
    render_alertmanager,
    render_alertmanager_config,
    routed_alerts,
    routing,
)
from exporter.alerts.catalog import DEFAULT_SOURCE, SEVERITIES, SOURCE_LABEL, RenderError, load_catalog
from exporter.alerts.inhibitions import Inhibition, resolve
from exporter.alerts.prometheus import expression
from exporter.common.records import replace

ROOT = Path(__file__).parent.parent
FRAGMENT = ROOT / "rules" / "alertmanager" / "elasticache-exporter.alertmanager.yml"
OPERATOR = ROOT / "rules" / "prometheus-operator" / "elasticache-exporter.alertmanagerconfig.yaml"
WHERE = {"account_id": "111111111111", "region": "eu-west-1", "replication_group": "orders", "instance": "orders-001"}
OURS = {SOURCE_LABEL: DEFAULT_SOURCE}  # the label every rendered rule sets


def merged(fragment: dict, receivers: dict[str, dict] | None = None) -> dict:
    """A minimal alertmanager.yml with the fragment merged in as its README says: its route first under the root."""
    given = receivers or {}
    return {
        "route": {"receiver": "default", "routes": [fragment["route"]]},
        "receivers": [{"name": "default"}, *(given.get(r["name"], r) for r in fragment["receivers"])],
        "inhibit_rules": fragment["inhibit_rules"],
    }


@pytest.mark.unit
def test_the_committed_fragment_and_operator_object_are_a_fresh_render():
    alerts = load_catalog()
    assert render_alertmanager(alerts) == render_alertmanager(load_catalog()) == FRAGMENT.read_text(), (
        "stale: run elasticache-exporter render alertmanager --out rules/alertmanager"
    )
    assert render_alertmanager_config(alerts) == OPERATOR.read_text(), (
        "stale: run elasticache-exporter render prometheus-operator --out rules/prometheus-operator"
    )


def _from_operator(matchers: list[dict]) -> list[str]:
    return [f'{m["name"]}{m["matchType"]}"{m["value"]}"' for m in matchers]


@pytest.mark.unit
def test_the_operator_object_holds_the_fragment_s_routes_and_inhibitions():
    fragment = yaml.safe_load(FRAGMENT.read_text())
    operator_object = yaml.safe_load(OPERATOR.read_text())
    assert (operator_object["apiVersion"], operator_object["kind"]) == ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig")
    spec = operator_object["spec"]
    assert spec["receivers"] == fragment["receivers"]
    route = spec["route"]
    assert _from_operator(route["matchers"]) == fragment["route"]["matchers"]
    assert (route["receiver"], route["groupBy"], route["groupWait"], route["groupInterval"], route["repeatInterval"]) == (
        fragment["route"]["receiver"],
        fragment["route"]["group_by"],
        fragment["route"]["group_wait"],
        fragment["route"]["group_interval"],
        fragment["route"]["repeat_interval"],
    )
    assert [(r["receiver"], _from_operator(r["matchers"])) for r in route["routes"]] == [
        (r["receiver"], r["matchers"]) for r in fragment["route"]["routes"]
    ]
    assert [(_from_operator(r["sourceMatch"]), _from_operator(r["targetMatch"]), r["equal"]) for r in spec["inhibitRules"]] == [
        (r["source_matchers"], r["target_matchers"], r["equal"]) for r in fragment["inhibit_rules"]
    ]


@pytest.mark.unit
def test_every_inhibition_the_issue_names_is_in_the_catalog():
    by_source: dict[str, list] = {}
    for rule in inhibit_rules(load_catalog()):
        by_source.setdefault(rule.source, []).append(rule)
    down = {rule.equal: set(rule.targets) for rule in by_source["RedisDown"]}
    assert {"RedisMasterLinkDown", "RedisOutOfSystemMemory", "RedisEvictions"} <= down[("instance",)]
    # computed from CloudWatch (or from either source), which keeps answering while the node does not: never silenced
    assert not {"ElastiCacheNetworkOutAtBaseline", "ElastiCacheNetworkOutAtAWSBaseline", "ElastiCacheEngineCPUSaturated"} & down[("instance",)]
    assert "RedisAllocatorFragmentation" not in down[("instance",)]
    assert {"RedisMissingMaster", "RedisMasterLinkDown"} <= down[("replication_group", "shard")] == down[("shard",)]
    # AWS's events (info) silence nothing: the symptoms they explain page as they are, the event beside them
    for cause in ("ElastiCacheFailover", "ElastiCacheNodeReplaced", "ElastiCacheGlobalFailover", "ElastiCacheMaintenanceUnderWay"):
        assert cause not in by_source
    (discovery,) = by_source["ElastiCacheDiscoveryFailing"]
    assert {"ElastiCacheServiceUpdateDue", "ElastiCacheEngineOnExtendedSupport", "ElastiCacheFailover"} <= set(discovery.targets)
    assert all(rule.source not in rule.targets for rules in by_source.values() for rule in rules)


# the data each series an alert reads is computed from, by its family's name (the first prefix that matches); None: a
# threshold or a table (the same for every node), no source of a failure
SERIES_DATA: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("elasticache_exporter_discovery_", frozenset({"aws"})),
    ("elasticache_exporter_cloudwatch_", frozenset({"cloudwatch"})),
    ("elasticache_exporter_queue_length_limit", None),
    ("elasticache_exporter_", frozenset({"exporter"})),
    ("elasticache:baseline_", None),
    ("elasticache:hit_ratio_min", None),
    ("elasticache:miss_rate_min", None),
    ("elasticache:host_cpu_threshold_percent", None),
    ("elasticache:command_p99_seconds", frozenset({"redis"})),
    ("aws_elasticache_", frozenset({"cloudwatch"})),
    ("elasticache_cloudwatch_", frozenset({"cloudwatch"})),
    ("elasticache_network_aws_baseline_", frozenset({"cloudwatch"})),
    ("elasticache_serverless_", frozenset({"cloudwatch"})),
    # served from INFO or from CloudWatch, told apart by their source label: both
    ("elasticache_network_bytes_per_second", frozenset({"redis", "cloudwatch"})),
    ("elasticache_engine_cpu_utilization_", frozenset({"redis", "cloudwatch"})),
    ("elasticache_event", frozenset({"aws"})),
    ("elasticache_service_update_", frozenset({"aws"})),
    ("elasticache_maintenance_window_", frozenset({"aws"})),
    ("elasticache_global_datastore_", frozenset({"aws"})),
    ("elasticache_engine_support_", frozenset({"aws"})),
    ("elasticache_node_info", frozenset({"aws"})),
    ("elasticache_replication_", frozenset({"redis"})),
    ("elasticache_shard_member_info", frozenset({"redis"})),
    ("elasticache_cluster_", frozenset({"redis"})),
    ("elasticache_keyspace_", frozenset({"redis"})),
    ("elasticache_clients_", frozenset({"redis"})),
    ("elasticache_commandlog_", frozenset({"redis"})),
    ("redis_", frozenset({"redis"})),
    ("up", frozenset({"prometheus"})),
)
SERIES = re.compile(r"\b(?:redis_[a-z0-9_]+|aws_elasticache_[a-z0-9_]+|elasticache_[a-z0-9_]+|elasticache:[a-z0-9_:]+|up)\b")

# `group by (...) (series)` is 1 wherever the series is: its labels are read (a node's type), not its values
LABEL_LOOKUP = re.compile(r"\bgroup by \([^)]*\) \([a-z_:]+(?:\{[^}]*\})?\)")


def data_of(alert) -> set[str]:
    """The sources of the series an alert's expression (with its freshness guard, before any join) reads."""
    expr = expression(alert)
    assert expr, alert.name
    expr = LABEL_LOOKUP.sub("", expr)
    found: set[str] = set()
    for name in SERIES.findall(expr):
        data = next((data for prefix, data in SERIES_DATA if name == prefix or (prefix != "up" and name.startswith(prefix))), "unknown")
        assert data != "unknown", f"{alert.name} reads {name}: add its family to SERIES_DATA"
        found |= data or set()
    return found


def keeps_instance(alert) -> bool:
    """Whether every aggregation of the alert's expression keeps the instance label."""
    return all("instance" in clause for clause in re.findall(r"\bby \(([^)]*)\)", expression(alert) or ""))


def in_its_shard(alert) -> bool:
    """Whether the alert carries its shard: joined (`join: [shard]`), or counted by shard."""
    return "shard" in alert.join or bool(re.search(r"\bby \(replication_group, shard\)", expression(alert) or ""))


@pytest.mark.unit
def test_every_inhibit_rule_holds_by_its_reason():
    """Every inhibit rule, listed with its reason, against the principles: its source and targets share the node, the
    shard or the exporter (and carry its labels), are computed from the same data (an alert from CloudWatch or AWS is
    never silenced by one from the node's own answers, which may be its effect), and no target outranks its source."""
    catalog = {alert.name: alert for alert in load_catalog()}
    listed = []
    for rule in inhibit_rules(list(catalog.values())):
        source, why = catalog[rule.source], rule.inhibition
        listed.append((rule.source, rule.equal, rule.source_labels, why.data, why.why))
        assert why.why.strip()
        assert why.data in ("redis", "cloudwatch", "aws", "exporter", "one-source")
        # the table's baseline alerts read INFO where the exporter reads the node, else CloudWatch; AWS's own baseline
        # alerts, which they silence as echoes of one saturation, read CloudWatch
        data = {"redis", "cloudwatch"} if why.data == "one-source" else {why.data}
        if why.scope == "shard":
            assert (rule.equal, rule.source_labels) in {
                (("replication_group", "shard"), ()),
                (("shard",), (("shard_source", "cluster|replication"),)),
            }, rule
        else:
            assert (rule.equal, rule.source_labels) == (("instance",), ()), rule
        assert data_of(source) == data, (rule.source, data_of(source))
        for name in rule.targets:
            target = catalog[name]
            computed = data_of(target)
            assert computed == data or (why.data == "one-source" and computed <= data), (
                f"{rule.source} silences {name}, computed from {sorted(computed)}"
            )
            assert SEVERITIES.index(target.severity) >= SEVERITIES.index(source.severity), f"{rule.source} silences the higher {name}"
            if why.scope == "shard":
                assert in_its_shard(target), f"{name} does not carry its shard"
            else:
                assert keeps_instance(target), f"{name} has no instance to match"
        assert keeps_instance(source) if why.scope != "shard" else in_its_shard(source)
    assert [(source, equal) for source, equal, *_ in listed] == [
        ("RedisDown", ("instance",)),
        ("RedisDown", ("replication_group", "shard")),
        ("RedisDown", ("shard",)),
        ("RedisMasterLinkDown", ("replication_group", "shard")),
        ("RedisMasterLinkDown", ("shard",)),
        ("ElastiCacheDiscoveryFailing", ("instance",)),
        ("ElastiCacheNetworkOutAtBaseline", ("instance",)),
        ("ElastiCacheNetworkInAtBaseline", ("instance",)),
        ("ElastiCacheNetworkOutAtAWSBaseline", ("instance",)),
        ("ElastiCacheNetworkOutOverAWSBaseline", ("instance",)),
        ("ElastiCacheNetworkInAtAWSBaseline", ("instance",)),
        ("ElastiCacheNetworkInOverAWSBaseline", ("instance",)),
    ]


@pytest.mark.unit
def test_one_saturation_of_a_signal_is_told_by_the_alert_that_fires_first():
    """Derived from the catalog's structure (each alert's baseline signal, level, severity and wait), never listed in it:
    of the network alerts on one direction and baseline, the higher level silences the lower (the table's 90 % its 80 %,
    AWS's 100 % its 90 and 80 %, AWS's 90 % its 80 %). No two silence each other; AWS's alerts are silent by their
    expression where the table's alert of their severity fired in the last 20 minutes."""
    ladder = [
        rule
        for rule in inhibit_rules(load_catalog())
        if rule.inhibition.data in ("one-source", "cloudwatch") and rule.source.startswith("ElastiCacheNetwork")
    ]
    pairs = {(rule.source, target) for rule in ladder for target in rule.targets}
    expected = set()
    for way in ("Out", "In"):
        table = {level: f"ElastiCacheNetwork{way}{level}Baseline" for level in ("Near", "At")}
        aws = {level: f"ElastiCacheNetwork{way}{level}AWSBaseline" for level in ("Near", "At", "Over")}
        expected |= {(table["At"], table["Near"]), (aws["At"], aws["Near"]), (aws["Over"], aws["At"]), (aws["Over"], aws["Near"])}
    assert pairs == expected
    assert not {(b, a) for a, b in pairs} & pairs
    assert all(rule.equal == ("instance",) for rule in ladder)
    catalog = {alert.name: alert for alert in load_catalog()}
    aws = [alert for alert in catalog.values() if alert.signal_level is not None and alert.baseline is None]
    assert aws
    assert all("unless on (instance, direction) max_over_time(ALERTS{alertname=" in (alert.expr or "") for alert in aws)


@pytest.mark.unit
def test_a_lower_severity_silencing_a_higher_one_is_refused_in_one_line():
    catalog = load_catalog()
    failover = next(alert for alert in catalog if alert.name == "ElastiCacheFailover")
    widened = Inhibition(("RedisMasterLinkDown",), "shard", "redis", "a failover explains a lost link")
    broken = [replace(failover, inhibits=(widened,)) if alert is failover else alert for alert in catalog]
    with pytest.raises(RenderError) as caught:
        inhibit_rules(broken)
    assert str(caught.value) == "catalog: ElastiCacheFailover.inhibits[0]: a info alert may not silence the higher RedisMasterLinkDown"


@pytest.mark.unit
def test_the_runbooks_list_every_inhibition_with_its_reason():
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    block = runbooks.split("<!-- BEGIN GENERATED: inhibitions -->\n", 1)[1].split("<!-- END GENERATED -->", 1)[0]
    assert block == inhibitions_table(load_catalog()), "stale: paste alertmanager.inhibitions_table(load_catalog()) into docs/runbooks.md"


@pytest.mark.unit
def test_an_inhibition_that_names_nothing_is_refused_in_one_line():
    typo = Inhibition(("RedisDwon*",), "node", "redis", "the node's own alerts")
    with pytest.raises(RenderError) as caught:
        resolve("RedisDown", typo, ["RedisDown", "RedisFailover"], "catalog.yml: alerts[3].inhibits[0]", RenderError)
    assert str(caught.value) == "catalog.yml: alerts[3].inhibits[0]: 'RedisDwon*' names no other alert of the catalog"


def check_config(tmp_path: Path, document: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return subprocess.run([amtool(), "check-config", str(path)], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("tags", [(), ("tag_team", "tag_env")])
def test_amtool_accepts_the_fragment_merged_into_a_minimal_config(tmp_path, tags):
    fragment = yaml.safe_load(render_alertmanager(load_catalog(), tags))
    result = check_config(tmp_path, merged(fragment))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    assert f" - {len(fragment['inhibit_rules'])} inhibit rules" in result.stdout
    assert fragment["route"]["group_by"][-len(tags) or None :] == list(tags or fragment["route"]["group_by"])


def routes_to(config: Path, labels: dict[str, str]) -> str:
    """The receiver amtool routes an alert of these labels to (one: every route here stops at its first match)."""
    matchers = [f"{k}={v}" for k, v in labels.items()]
    result = subprocess.run(
        [amtool(), "config", "routes", "test", f"--config.file={config}", *matchers], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, (labels, result.stdout + result.stderr)
    return result.stdout.strip()


def test_every_catalog_alert_routes_to_its_severity_s_receiver(tmp_path):
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(merged(routing(load_catalog()))))
    cases = [
        ({"alertname": alert.name, "severity": alert.severity, **OURS, **WHERE}, f"elasticache-{alert.severity}")
        for alert in routed_alerts(load_catalog())
    ]
    # not ours, whatever its name: the root's receiver
    cases.append(({"alertname": "SomeoneElsesAlert", "severity": "critical", **WHERE}, "default"))
    cases.append(({"alertname": "RedisDown", "severity": "critical", **WHERE}, "default"))
    cases.append(({"alertname": "RedisDown", "severity": "critical", SOURCE_LABEL: "redis-mixin", **WHERE}, "default"))
    for labels, receiver in cases:
        assert routes_to(path, labels) == receiver
    assert len(cases) > 80


def _severity(name: str) -> str:
    return next(alert.severity for alert in load_catalog() if alert.name == name)


def test_each_inhibit_rule_silences_its_targets_only_where_its_labels_match(tmp_path):
    """One real Alertmanager; per rule its source, every target with the same equal labels (silenced), the first
    target with one of them different (not silenced), and a source and target that both lack them (not silenced:
    Alertmanager would count missing labels as equal)."""
    config = tmp_path / "alertmanager.yml"
    config.write_text(yaml.safe_dump(merged(routing(load_catalog()))))
    manager = start_alertmanager(config)
    try:
        now = datetime.datetime.now(datetime.timezone.utc)
        window = {"startsAt": now.isoformat(), "endsAt": (now + datetime.timedelta(hours=1)).isoformat()}
        posted, expected = [], {}
        for index, rule in enumerate(inhibit_rules(load_catalog())):
            equal = {label: f"{label}-{index}" for label in rule.equal}
            only = {label: pattern.split("|")[0] for label, pattern in rule.source_labels}
            source = {"alertname": rule.source, "severity": _severity(rule.source), **OURS, **equal, **only, "case": f"{index}"}
            posted.append({"labels": source, **window})
            for target in rule.targets:
                labels = {"alertname": target, "severity": _severity(target), **OURS, **equal, "case": f"{index}-same"}
                posted.append({"labels": labels, **window})
                expected[tuple(sorted(labels.items()))] = "suppressed"
            other = {
                "alertname": rule.targets[0],
                "severity": _severity(rule.targets[0]),
                **OURS,
                **equal,
                rule.equal[0]: f"other-{index}",  # an "other" of one rule is never the source of another
                "case": f"{index}-other",
            }
            posted.append({"labels": other, **window})
            expected[tuple(sorted(other.items()))] = "active"
            bare_source = {"alertname": rule.source, "severity": _severity(rule.source), **OURS, "case": f"{index}-bare"}
            bare_target = {"alertname": rule.targets[0], "severity": _severity(rule.targets[0]), **OURS, "case": f"{index}-bare"}
            posted += [{"labels": bare_source, **window}, {"labels": bare_target, **window}]
            expected[tuple(sorted(bare_target.items()))] = "active"
        manager.api("/alerts", posted)

        def states() -> dict:
            return {tuple(sorted(alert["labels"].items())): alert["status"]["state"] for alert in manager.api("/alerts")}  # type: ignore[union-attr]

        wait_until(lambda: len(states()) == len(posted), timeout=30, what="every posted alert listed")
        wait_until(lambda: {key: states().get(key) for key in expected} == expected, timeout=30, what="the inhibitions applied")
        sources = {tuple(sorted(p["labels"].items())) for p in posted if not p["labels"]["case"].endswith(("same", "other", "bare"))}
        assert all(states()[key] == "active" for key in sources)  # no source silences another rule's source
    finally:
        manager.stop()


def test_the_readme_s_team_route_goes_in_front_of_the_fragment_and_both_route(tmp_path):
    """docs/operations.md's example, with the fragment's route after its own: a payments page reaches payments-oncall,
    the rest of the catalog its severity's receiver, as amtool routes them."""
    marker = "<!-- alertmanager example: begin -->"  # docs/operations.md, or the README before it moved there
    page = next(
        text for text in (path.read_text() for path in (ROOT / "docs" / "operations.md", ROOT / "README.md") if path.exists()) if marker in text
    )
    block = page.split(marker, 1)[1].split("<!-- alertmanager example: end -->", 1)[0]
    example = yaml.safe_load(block.split("```yaml", 1)[1].split("```", 1)[0])
    fragment = routing(load_catalog(), ("tag_team",))
    example["route"]["routes"].append(fragment["route"])
    example["receivers"] += fragment["receivers"]
    example["inhibit_rules"] = fragment["inhibit_rules"]
    result = check_config(tmp_path, example)
    assert result.returncode == 0, result.stdout + result.stderr
    path = tmp_path / "alertmanager.yml"
    assert routes_to(path, {"alertname": "RedisDown", "severity": "critical", **OURS, "tag_team": "payments"}) == "payments-oncall"
    assert routes_to(path, {"alertname": "RedisDown", "severity": "critical", **OURS, "tag_team": "search"}) == "elasticache-critical"
    assert routes_to(path, {"alertname": "RedisEvictions", "severity": "warning", **OURS, "tag_team": "payments"}) == "elasticache-warning"


def test_alerts_of_the_same_names_from_another_rule_set_are_neither_routed_nor_silenced_by_ours(tmp_path):
    """A real Alertmanager with the fragment merged in, our rules rendered with --alert-source, and a second rule set
    (redis_exporter's mixin, awesome-prometheus-alerts) raising RedisDown and RedisMasterLinkDown without our label:
    theirs reach the root's receiver, are not silenced by our RedisDown, and do not silence our alerts; ours route and
    inhibit as before."""
    source = "team-cache"
    ours = {SOURCE_LABEL: source}
    config = tmp_path / "alertmanager.yml"
    config.write_text(yaml.safe_dump(merged(routing(load_catalog(), source=source))))
    manager = start_alertmanager(config)
    try:
        now = datetime.datetime.now(datetime.timezone.utc)
        window = {"startsAt": now.isoformat(), "endsAt": (now + datetime.timedelta(hours=1)).isoformat()}
        # node a: our RedisDown beside their RedisMasterLinkDown and ours; node b: their RedisDown beside ours
        cases = {
            "our-down-a": {"alertname": "RedisDown", "severity": "critical", "instance": "a", **ours},
            "our-link-a": {"alertname": "RedisMasterLinkDown", "severity": "critical", "instance": "a", **ours},
            "their-link-a": {"alertname": "RedisMasterLinkDown", "severity": "critical", "instance": "a"},
            "their-down-b": {"alertname": "RedisDown", "severity": "critical", "instance": "b"},
            "our-link-b": {"alertname": "RedisMasterLinkDown", "severity": "critical", "instance": "b", **ours},
            "default-source-down-c": {"alertname": "RedisDown", "severity": "critical", "instance": "c", **OURS},
            "our-evictions-c": {"alertname": "RedisEvictions", "severity": "warning", "instance": "c", **ours},
        }
        manager.api("/alerts", [{"labels": {**labels, "case": case}, **window} for case, labels in cases.items()])

        def seen() -> dict[str, tuple[str, list[str]]]:
            alerts = manager.api("/alerts")
            return {a["labels"]["case"]: (a["status"]["state"], sorted(r["name"] for r in a["receivers"])) for a in alerts}  # type: ignore[union-attr]

        expected = {
            "our-down-a": ("active", ["elasticache-critical"]),
            "our-link-a": ("suppressed", ["elasticache-critical"]),
            "their-link-a": ("active", ["default"]),
            "their-down-b": ("active", ["default"]),
            "our-link-b": ("active", ["elasticache-critical"]),
            # rendered for another value, the default one is someone else's too
            "default-source-down-c": ("active", ["default"]),
            "our-evictions-c": ("active", ["elasticache-warning"]),
        }
        wait_until(lambda: seen() == expected, timeout=30, what="each alert routed and inhibited by its rule set")
    finally:
        manager.stop()


def test_a_shard_named_by_its_slots_is_matched_within_its_group_only(tmp_path):
    """Slot ranges name a shard in every cluster (0-5460): a node down in one cluster silences its own shard's echoes,
    never those of the shard of the same slots in another cluster; a primary's node id is unique and matched alone."""
    from servers import post_firing, start_rendered_alertmanager

    def alert(name: str, group: str, shard: str, source: str) -> dict[str, str]:
        shard_labels = {"replication_group": group, "shard": shard, "shard_source": source}
        return {"alertname": name, "severity": _severity(name), **OURS, "instance": f"{group}-n1", **shard_labels}

    node_id = "7c2f" * 10
    posted = [
        alert("RedisDown", "orders", "0-5460", "slots"),
        alert("RedisMissingMaster", "orders", "0-5460", "slots"),  # the same cluster's shard: silenced
        alert("RedisMissingMaster", "payments", "0-5460", "slots"),  # another cluster's shard of the same slots
        alert("RedisDown", "", node_id, "cluster"),
        alert("RedisMissingMaster", "elsewhere", node_id, "cluster"),  # a node id names one shard anywhere
    ]
    manager = start_rendered_alertmanager(tmp_path, routing(load_catalog()))
    try:
        post_firing(manager, posted)

        def states() -> dict[tuple[str, str], str]:
            listed = manager.api("/alerts")
            return {(a["labels"]["alertname"], a["labels"].get("replication_group", "")): a["status"]["state"] for a in listed}  # type: ignore[union-attr]

        wait_until(lambda: len(states()) == len(posted) and "unprocessed" not in states().values(), timeout=30, what="the alerts listed")
        wait_until(lambda: states()[("RedisMissingMaster", "orders")] == "suppressed", timeout=10, interval=0.2, what="the inhibitions applied")
        assert states() == {
            ("RedisDown", "orders"): "active",
            ("RedisMissingMaster", "orders"): "suppressed",
            ("RedisMissingMaster", "payments"): "active",
            ("RedisDown", ""): "active",
            ("RedisMissingMaster", "elsewhere"): "suppressed",
        }
    finally:
        manager.stop()
