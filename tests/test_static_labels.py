"""A target's static labels (``targets[].labels``, ``redis.labels``, ``aws.discovered.labels``): on every series the
exporter serves about that target, in every format, on /metrics and /scrape, and anew after a reload; refused where
they would collide with a label the exporter serves."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

import pytest
from helpers import call, make_app
from protobuf_read import classic_samples, decode
from servers import start_redis

from exporter.common.errors import ConfigError
from exporter.common.exposition import LabelledTextFamilySet, TargetRendering, TextFamilySet
from exporter.common.labels import SERVED_LABELS, instance_labels
from exporter.config import build_config

PROTOBUF = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
OPENMETRICS = "application/openmetrics-text;version=1.0.0"
ODD = 'a "quoted" \\ value\nover two lines, ünïcode'  # escaped in text, as it is in protobuf

PRIMARY_LABELS = {"team": "payments", "env": "prod"}
REPLICA_LABELS = {"team": "search", "note": ODD}


_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def exact_samples(text: str) -> dict[tuple[str, tuple], float]:
    """The text format's samples by name and sorted labels, each label value unescaped as the format escapes it (a
    backslash, a double quote and a line feed; any other character as it is)."""
    samples: dict[tuple[str, tuple], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, brace, rest = line.partition("{")
        body, value = rest.rsplit("} ", 1) if brace else ("", name.split(" ", 1)[1])
        name = name.split(" ", 1)[0]
        labels = tuple(sorted((key, re.sub(r"\\.", lambda m: _ESCAPES[m.group(0)], raw)) for key, raw in _LABEL.findall(body)))
        assert (name, labels) not in samples, f"duplicate series {(name, labels)}"
        samples[(name, labels)] = float(value.split()[0])
    return samples


def _config(primary, replica, plain, primary_labels=PRIMARY_LABELS, replica_labels=REPLICA_LABELS) -> dict:
    group = {"node_type": "cache.r6g.large", "replication_group": "orders", "shard": "0001"}
    return {
        "targets": [
            {"name": "primary", "addr": primary.addr, "labels": primary_labels, **group},
            {"name": "replica", "addr": replica.addr, "labels": replica_labels, **group},
            {"name": "bare", "addr": plain.addr},
        ],
        "heartbeat": {"write": True},
        "clients": {"enabled": True, "interval": "5s"},
        "keyspace": {"enabled": True},
    }


@pytest.fixture(scope="module")
def servers(replicated_redis):
    plain = start_redis()
    plain.client().set("orders:1", "x")
    yield (*replicated_redis, plain)
    plain.stop()


@pytest.fixture(scope="module")
def app(servers):
    app = make_app(_config(*servers))
    app.client_profiler.visit_all()
    app.keyspace_profiler.visit_all()
    for _ in range(3):  # the heartbeat read back, traffic rates over two scrapes, the scrape's own commands settled
        call(app, "/metrics")
        time.sleep(0.6)
    yield app
    app.close()


def _by_instance(samples: dict) -> dict[str, list[tuple[str, dict[str, str]]]]:
    found: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for name, labels in samples:
        pairs = dict(labels)
        found.setdefault(pairs.get("instance", ""), []).append((name, pairs))
    return found


def _assert_labelled(samples: dict) -> None:
    """Every sample of a labelled instance carries its static labels; the unlabelled one's carry none."""
    by_instance = _by_instance(samples)
    for instance, static in (("primary", PRIMARY_LABELS), ("replica", REPLICA_LABELS)):
        assert len(by_instance[instance]) > 100, instance
        for name, labels in by_instance[instance]:
            assert {key: labels.get(key) for key in static} == static, (name, labels)
    for name, labels in by_instance["bare"] + by_instance[""]:
        assert not {"team", "env", "note"} & labels.keys(), (name, labels)


# families of every kind of source, each with the labels of the target it is about
EXPECTED = (
    "redis_up",  # INFO-derived, the target's root set
    "redis_commands_total",  # a child of the root, replayed from the memo
    "redis_latency_percentiles_usec",  # a summary
    "elasticache_exporter_target_scrape_duration_seconds",  # the exporter's own of the target
    "elasticache_shard_member_info",  # shard membership
    "elasticache_network_bytes_per_second",  # baselines
    "elasticache_clients_connected",  # the CLIENT LIST profiler
    "elasticache_exporter_heartbeat_",  # the heartbeats read (and written, on the primary)
)


def _families(samples: dict, instance: str) -> set[str]:
    return {name for name, labels in samples if ("instance", instance) in labels}


def test_every_series_of_a_target_carries_its_labels_in_text(app):
    for accept in (None, OPENMETRICS):
        response = call(app, "/metrics", headers={"Accept": accept} if accept else None)
        samples = exact_samples(response.text)
        _assert_labelled(samples)
        for instance in ("primary", "replica"):
            missing = [name for name in EXPECTED if not any(served.startswith(name) for served in _families(samples, instance))]
            assert not missing, (instance, missing)
        assert any(name.startswith("elasticache_replication_") for name in _families(samples, "replica"))
        assert "elasticache_exporter_heartbeat_writes_total" in _families(samples, "primary")
        assert any(name.startswith("elasticache_keyspace_") for name in _families(samples, "bare"))
        # a group's keyspace is sampled on one of its nodes (a replica, where it has one)
        assert any(name.startswith("elasticache_keyspace_") for name in _families(samples, "primary") | _families(samples, "replica"))


def test_every_series_of_a_target_carries_its_labels_in_protobuf(app):
    response = call(app, "/metrics", headers={"Accept": PROTOBUF})
    assert response.headers["Content-Type"].startswith("application/vnd.google.protobuf")
    samples = classic_samples(decode(response.body))
    _assert_labelled(samples)
    text = exact_samples(call(app, "/metrics").text)
    # the same series in both formats (but those of the scrape's own commands, which may gain a bucket between calls)
    steady = lambda keys: {key for key in keys if not key[0].startswith("redis_commands_latencies_usec")}  # noqa: E731
    assert steady(samples) == steady(text)


def test_a_scrape_of_one_target_carries_its_labels(app, servers):
    metrics = exact_samples(call(app, "/metrics").text)
    without_instance = {name for name, labels in metrics if not any(key == "instance" for key, _ in labels)}
    for name, static in (("primary", PRIMARY_LABELS), ("replica", REPLICA_LABELS)):
        for headers in (None, {"Accept": PROTOBUF}):
            response = call(app, "/scrape", f"target={name}", headers=headers)
            samples = classic_samples(decode(response.body)) if headers else exact_samples(response.text)
            about = [(sample, dict(labels)) for sample, labels in samples if sample not in without_instance]
            assert len(about) > 100
            for sample, labels in about:
                assert "instance" not in labels
                assert {key: labels.get(key) for key in static} == static, (sample, labels)
    # by address: the same target, the same labels
    samples = exact_samples(call(app, "/scrape", f"target={servers[0].addr}").text)
    assert ("redis_up", tuple(sorted(PRIMARY_LABELS.items()))) in samples
    samples = exact_samples(call(app, "/scrape", "target=bare").text)
    assert ("redis_up", ()) in samples


def test_a_reload_serves_the_new_labels(servers):
    from exporter.cli.serve import _reloader
    from exporter.service.collectors.exporter import ConfigReloads
    from exporter.service.server import ExporterApp

    before = {**_config(*servers), "clients": {}, "keyspace": {}}
    after = _config(*servers, primary_labels={"team": "billing"}, replica_labels={})
    after = {**after, "clients": {}, "keyspace": {}}
    reloads = ConfigReloads(0.0)
    server = SimpleNamespace(app=ExporterApp(build_config(before, environ={}), reloads=reloads))
    try:
        for _ in range(2):  # the memo of each target filled, then replayed
            samples = exact_samples(call(server.app, "/metrics").text)
        assert ("redis_up", (("env", "prod"), ("instance", "primary"), ("team", "payments"))) in samples
        _reloader(server, lambda: build_config(after, environ={}), reloads)()
        assert reloads.state()[0]
        server.app.http = None  # the reload hands the new app the HTTP server: none here
        for _ in range(2):
            samples = exact_samples(call(server.app, "/metrics").text)
            assert ("redis_up", (("instance", "primary"), ("team", "billing"))) in samples
            assert ("redis_up", (("instance", "replica"),)) in samples
            assert not [key for key in samples if any(label in ("env", "note", "team") for label, _ in key[1]) and "primary" not in str(key)]
            assert not [key for key in samples if ("team", "payments") in key[1] or ("env", "prod") in key[1]]
            scraped = exact_samples(call(server.app, "/scrape", "target=primary").text)
            assert ("redis_up", (("team", "billing"),)) in scraped
    finally:
        server.app.close()


def test_the_single_target_of_redis_takes_labels(servers):
    app = make_app({"redis": {"addr": servers[2].addr, "labels": {"team": "payments"}}})
    try:
        samples = exact_samples(call(app, "/metrics").text)
        instance = next(dict(labels)["instance"] for name, labels in samples if name == "redis_up")
        assert ("redis_up", (("instance", instance), ("team", "payments"))) in samples
    finally:
        app.close()


# --- the family sets, without servers


STATIC = {"node": {"env": "prod", "note": ODD}}
ROOT = TargetRendering("node", static=sorted(STATIC["node"].items())).labels


def _fill(out, labels_of) -> None:
    out.add("a", "gauge", "A.", labels_of({"instance": "node", "db": "db0"}), 1.0)
    out.add("b", "gauge", "B.", labels_of({"instance": "node"}), 2.0)
    out.add_histogram("h", "H.", labels_of({"instance": "node", "cmd": "get"}), [("1", 1.0), ("2", 3.0)], 4.0, 5.5)
    out.add_summary("s", "S.", labels_of({"instance": "node"}), [("50", 1.0)], 2.0, 3.0)
    out.add_numbers(labels_of({"instance": "node"}), [("n", "gauge", "N.", "7")])
    out.add("other", "gauge", "O.", {"instance": "elsewhere"}, 1.0)
    out.add("none", "gauge", "X.", {}, 1.0)


def _set(protobuf: bool, labelled: bool, drop_instance: bool):
    if protobuf:
        from exporter.common.protobuf import LabelledProtobufFamilySet, ProtobufFamilySet

        return LabelledProtobufFamilySet(STATIC, drop_instance=drop_instance) if labelled else ProtobufFamilySet(drop_instance=drop_instance)
    return LabelledTextFamilySet(STATIC, drop_instance=drop_instance) if labelled else TextFamilySet(drop_instance=drop_instance)


def _children(base, labels):
    for key, value in labels.items():
        if key != "instance":
            base = base.with_label(key, value)
    return base


def _from_root(labels):
    """As a target's node metrics are added: children of its root set."""
    return _children(ROOT, labels) if labels.get("instance") == "node" else labels


def _one_use(labels):
    """As the profilers' collectors add theirs: children of instance_labels(name), made for the one page."""
    return _children(instance_labels(labels["instance"]), labels) if "instance" in labels else labels


@pytest.mark.unit
@pytest.mark.parametrize("protobuf", [False, True])
@pytest.mark.parametrize("drop_instance", [False, True])
def test_a_labelled_set_renders_as_the_target_root_does(protobuf, drop_instance):
    """A sample added with a plain dict, or a set made for one use (a profiler's), comes out as if its labels were
    the root's children: the static labels after the instance, in the same order, escaped alike."""
    expected = _set(protobuf, False, drop_instance)
    _fill(expected, _from_root)
    for labels_of in (dict, _one_use, _from_root):
        out = _set(protobuf, True, drop_instance)
        _fill(out, labels_of)
        assert out.encode() == expected.encode(), labels_of


@pytest.mark.unit
def test_a_labelled_target_is_rendered_beside_the_shared_lines():
    """add_shared's shared lines hold the instance alone: a labelled target's root renders its own, an unlabelled
    one's still come from the shared lines."""

    def render(base, out):
        out.add("shared", "gauge", "S.", base, 1.0)
        out.add("shared_child", "gauge", "C.", base.with_label("k", "v"), 2.0)

    labelled = TargetRendering("a", static=[("team", "x")]).labels
    plain = TargetRendering("b").labels
    out = LabelledTextFamilySet({"a": {"team": "x"}})
    for _ in range(2):  # the second time from the cache of shared lines
        out.add_shared("part", ("source",), labelled, render)
        out.add_shared("part", ("source",), plain, render)
    text = out.encode().decode()
    assert text.count('shared{instance="a",team="x"} 1.0') == 2
    assert text.count('shared_child{instance="a",team="x",k="v"} 2.0') == 2
    assert text.count('shared{instance="b"} 1.0') == 2
    assert text.count('shared_child{instance="b",k="v"} 2.0') == 2


# --- the configuration


def _error(raw: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        build_config(raw, environ={})
    return str(caught.value)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("labels", "key", "said"),
    [
        ({"instance": "x"}, "targets[0].labels.instance", "serves itself"),
        ({"job": "x"}, "targets[0].labels.job", "serves itself"),
        ({"db": "x"}, "targets[0].labels.db", "serves itself"),
        ({"cmd": "x"}, "targets[0].labels.cmd", "serves itself"),
        ({"role": "x"}, "targets[0].labels.role", "serves itself"),
        ({"replication_group": "x"}, "targets[0].labels.replication_group", "serves itself"),
        ({"shard": "x"}, "targets[0].labels.shard", "serves itself"),
        ({"shard_source": "x"}, "targets[0].labels.shard_source", "serves itself"),
        ({"node_type": "x"}, "targets[0].labels.node_type", "serves itself"),
        ({"cluster": "x"}, "targets[0].labels.cluster", "serves itself"),
        ({"prefix": "x"}, "targets[0].labels.prefix", "serves itself"),
        ({"__meta": "x"}, "targets[0].labels.__meta", "reserved by Prometheus"),
        ({"tag_Team": "x"}, "targets[0].labels.tag_Team", "the prefix tag_"),
        ({"dimension_x": "x"}, "targets[0].labels.dimension_x", "the prefix dimension_"),
        ({"1team": "x"}, "targets[0].labels.1team", "not a Prometheus label name"),
        ({"team-name": "x"}, "targets[0].labels.team-name", "not a Prometheus label name"),
        ({"team": ""}, "targets[0].labels.team", "non-empty"),
        ({"team": None}, "targets[0].labels.team", "non-empty"),
        ({"team": True}, "targets[0].labels.team", "must be a string"),
        ({"team": ["a"]}, "targets[0].labels.team", "must be a string"),
        (["team"], "targets[0].labels", "must be a mapping"),
        ("team=x", "targets[0].labels", "must be a mapping"),
    ],
)
def test_refused_labels_name_their_key(labels, key, said):
    message = _error({"targets": [{"addr": "redis://a:6379", "labels": labels}]})
    assert key in message, message
    assert said in message, message
    assert "\n" not in message.strip()


@pytest.mark.unit
def test_labels_are_read_in_name_order_from_every_place_that_takes_them():
    config = build_config(
        {
            "redis": {"addr": "redis://one:6379", "labels": {"team": "a", "env": 1}},
            "targets": [{"name": "two", "addr": "redis://two:6379", "labels": {"zone": "b", "app": "c"}}, "redis://three:6379"],
            "aws": {"region": "eu-west-1", "discovered": {"labels": {"fleet": "eu"}}},
        },
        environ={},
    )
    assert [target.labels for target in config.targets] == [(("env", "1"), ("team", "a")), (("app", "c"), ("zone", "b")), ()]
    assert config.discovered_labels == (("fleet", "eu"),)
    assert "aws.discovered.labels.instance" in _error({"aws": {"region": "eu-west-1", "discovered": {"labels": {"instance": "x"}}}})
    assert "redis.labels.db" in _error({"redis": {"addr": "redis://one:6379", "labels": {"db": "x"}}})


@pytest.mark.unit
def test_the_refused_names_hold_every_label_the_families_serve():
    from exporter.service.metrics_doc import all_docs, label_names

    served = set().union(*(label_names(doc) for doc in all_docs()))
    assert served - SERVED_LABELS - {name for name in served if name.startswith(("tag_", "dimension_"))} == set()
