"""Byte-exact output of the text encoder (exporter.common.exposition), as client_python's own exposition tests pin
generate_latest: escaping, special values, counters without _total and the instance label on /scrape."""

from __future__ import annotations

import sys

import pytest
from helpers import parse_samples
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from exporter.common.exposition import TextFamilySet, encode_text
from exporter.common.families import COUNTER, FamilySet

pytestmark = pytest.mark.unit


def encode(out: FamilySet, **options) -> str:
    return encode_text(out.families(), **options).decode()


def test_help_text_escapes_backslash_and_newline_but_not_quotes():
    out = FamilySet()
    out.add("a_gauge", "gauge", 'Back\\slash, "quoted"\nsecond line.', {}, 1.0)
    assert encode(out) == '# HELP a_gauge Back\\\\slash, "quoted"\\nsecond line.\n# TYPE a_gauge gauge\na_gauge 1.0\n'


def test_label_values_escape_quote_backslash_and_newline():
    out = FamilySet()
    out.add("a_gauge", "gauge", "Help.", {"instance": "n1", "key": 'say "hi"\\ there\nnow'}, 2.5)
    assert encode(out) == ('# HELP a_gauge Help.\n# TYPE a_gauge gauge\na_gauge{instance="n1",key="say \\"hi\\"\\\\ there\\nnow"} 2.5\n')
    (family,) = text_string_to_metric_families(encode(out))
    assert family.samples[0].labels["key"] == 'say "hi"\\ there\nnow'  # the real parser reads back the original


def test_special_values_and_integers():
    out = FamilySet()
    for name, value in (("nan", float("nan")), ("pos", float("inf")), ("neg", float("-inf")), ("int", 3), ("small", 1e-07)):
        out.add("v", "gauge", "Values.", {"v": name}, value)
    assert encode(out).splitlines()[2:] == ['v{v="nan"} NaN', 'v{v="pos"} +Inf', 'v{v="neg"} -Inf', 'v{v="int"} 3.0', 'v{v="small"} 1e-07']


def test_counter_names_are_served_as_made():
    out = FamilySet()
    out.add("redis_commands_processed_total", COUNTER, "With _total.", {}, 5.0)
    out.add("redis_rejected_connections", COUNTER, "Without _total, as redis_exporter serves it.", {}, 7.0)
    assert encode(out) == (
        "# HELP redis_commands_processed_total With _total.\n# TYPE redis_commands_processed_total counter\n"
        "redis_commands_processed_total 5.0\n"
        "# HELP redis_rejected_connections Without _total, as redis_exporter serves it.\n# TYPE redis_rejected_connections counter\n"
        "redis_rejected_connections 7.0\n"
    )


def test_prometheus_client_counters_get_their_total_suffix():
    counter = CounterMetricFamily("requests", "Requests.", labels=["code"])
    counter.add_metric(["200"], 4)
    gauge = GaugeMetricFamily("temperature", "Temperature.")
    gauge.add_metric([], 21.5)
    assert encode_text([counter, gauge]).decode() == (
        "# HELP requests_total Requests.\n# TYPE requests_total counter\n"
        'requests_total{code="200"} 4.0\n'
        "# HELP temperature Temperature.\n# TYPE temperature gauge\ntemperature 21.5\n"
    )


def test_instance_is_dropped_on_scrape_and_nothing_else():
    out = FamilySet()
    labels = {"instance": "orders-001", "db": "db0"}
    out.add("redis_db_keys", "gauge", "Keys.", labels, 10.0)
    out.add("redis_up", "gauge", "Up.", {"instance": "orders-001"}, 1.0)
    assert encode(out, drop_instance=True) == (
        '# HELP redis_db_keys Keys.\n# TYPE redis_db_keys gauge\nredis_db_keys{db="db0"} 10.0\n'
        "# HELP redis_up Up.\n# TYPE redis_up gauge\nredis_up 1.0\n"
    )
    assert 'redis_db_keys{instance="orders-001",db="db0"} 10.0\n' in encode(out)


def test_histogram_and_summary_samples_in_order():
    out = FamilySet()
    out.add_histogram("lat_usec", "Latency.", {"cmd": "get"}, [("8", 1.0), ("16", 3.0)], 4.0, 40.0)
    out.add_summary("pct_usec", "Percentiles.", {"cmd": "get"}, [("50", 9.0)], 4.0, 40.0)
    assert encode(out).splitlines() == [
        "# HELP lat_usec Latency.",
        "# TYPE lat_usec histogram",
        'lat_usec_bucket{cmd="get",le="8"} 1.0',
        'lat_usec_bucket{cmd="get",le="16"} 3.0',
        'lat_usec_bucket{cmd="get",le="+Inf"} 4.0',
        'lat_usec_sum{cmd="get"} 40.0',
        'lat_usec_count{cmd="get"} 4.0',
        "# HELP pct_usec Percentiles.",
        "# TYPE pct_usec summary",
        'pct_usec{cmd="get",quantile="50"} 9.0',
        'pct_usec_sum{cmd="get"} 40.0',
        'pct_usec_count{cmd="get"} 4.0',
    ]


def test_process_metrics_agree_with_prometheus_client():
    from prometheus_client import CollectorRegistry, ProcessCollector

    from exporter.service.collectors.process import ProcessMetrics

    theirs = {s.name: s.value for m in ProcessCollector(registry=CollectorRegistry()).collect() for s in m.samples}
    ours = {name: value for family in ProcessMetrics().build().families() for name, _, value in family.samples}
    assert set(ours) == {n for n in theirs if not n.endswith("_created")} - {"process_cpu_seconds"} | {"process_cpu_seconds_total"}
    assert abs(ours["process_cpu_seconds_total"] - theirs["process_cpu_seconds_total"]) < 0.05
    assert abs(ours["process_start_time_seconds"] - theirs["process_start_time_seconds"]) < 0.02
    assert abs(ours["process_resident_memory_bytes"] - theirs["process_resident_memory_bytes"]) < 4 * 2**20
    assert abs(ours["process_virtual_memory_bytes"] - theirs["process_virtual_memory_bytes"]) < 16 * 2**20
    assert ours["process_max_fds"] == theirs["process_max_fds"]
    assert abs(ours["process_open_fds"] - theirs["process_open_fds"]) <= 1


def test_kept_label_sets_are_shared_frozen_and_rendered_once_per_form():
    import pytest

    from exporter.common.exposition import TargetRendering
    from exporter.common.labels import with_label

    base = TargetRendering("node-a").labels  # a target's root set, kept with the target
    cmd = with_label(base, "cmd", "get")
    assert cmd is base.with_label("cmd", "get")
    assert cmd == {"instance": "node-a", "cmd": "get"}
    with pytest.raises(TypeError):
        cmd["cmd"] = "set"
    assert with_label({"instance": "x"}, "db", "db0") == {"instance": "x", "db": "db0"}
    out = FamilySet()
    out.add_histogram("h", "A histogram.", cmd, [("8", 1.0)], 2.0, 3.0)
    out.add("g", "gauge", "A gauge.", {"instance": "node-a", "cmd": "get"}, 1.0)  # a plain dict: the same text
    assert encode(out).splitlines()[2:4] == [
        'h_bucket{instance="node-a",cmd="get",le="8"} 1.0',
        'h_bucket{instance="node-a",cmd="get",le="+Inf"} 2.0',
    ]
    assert 'g{instance="node-a",cmd="get"} 1.0' in encode(out)
    assert 'h_bucket{cmd="get",le="8"} 1.0' in encode(out, drop_instance=True)
    assert 'h_bucket{instance="node-a",cmd="get",le="8"} 1.0' in encode(out)  # each form kept apart


def test_kept_label_sets_are_let_go_at_their_bound(monkeypatch):
    from exporter.common import labels

    monkeypatch.setattr(labels, "MAX_CHILDREN", 10)
    base = labels.instance_labels("churning")
    first = base.with_label("run_id", "0")
    assert base.with_label("run_id", "0") is first
    for run_id in range(50):  # a label that never repeats cannot grow what is kept past the bound
        base.with_label("run_id", str(run_id))
        assert len(base._children) <= 10
    assert base.with_label("run_id", "0") is not first  # let go once the bound was reached


def fill_every_kind(out: FamilySet) -> None:
    """Families of each kind the exporter serves, label names in order (client_python's OpenMetrics encoder sorts them)."""
    out.add("a_gauge", "gauge", 'Back\\slash, "quoted"\nsecond line.', {"instance": "n1", "key": 'say "hi"\\ there\nnow'}, 2.5)
    for name, value in (("nan", float("nan")), ("pos", float("inf")), ("neg", float("-inf")), ("int", 3), ("small", 1e-07)):
        out.add("v", "gauge", "Values.", {"v": name}, value)
    out.add("redis_commands_processed_total", COUNTER, "With _total.", {"instance": "n1"}, 5.0)
    out.add("redis_rejected_connections", COUNTER, "Without _total, as redis_exporter serves it.", {}, 7.0)
    out.add("redis_something", "untyped", "Untyped.", {}, 1.0)
    out.add_histogram("lat_usec", "Latency.", {"cmd": "get"}, [("8", 1.0), ("16", 3.0)], 4.0, 40.0)
    out.add_summary("pct", "Quantiles.", {"cmd": "get"}, [("0.5", 9.0)], 4.0, 40.0)


def test_openmetrics_is_what_prometheus_client_writes_byte_for_byte():
    from prometheus_client.openmetrics.exposition import ALLOWUTF8, generate_latest

    theirs = FamilySet()
    fill_every_kind(theirs)

    class Registry:
        def collect(self):
            return iter(theirs)

    ours = TextFamilySet()
    fill_every_kind(ours)
    assert ours.encode_openmetrics() == generate_latest(Registry(), escaping=ALLOWUTF8)


def test_openmetrics_reads_back_the_samples_of_the_text_format():
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

    out = TextFamilySet()
    fill_every_kind(out)
    strict = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in parse_openmetrics(out.encode_openmetrics().decode()) for s in f.samples}
    text = parse_samples(out.encode().decode())  # as written (client_python's text parser adds _total to a counter)
    assert {key: repr(value) for key, value in strict.items()} == {key: repr(value) for key, value in text.items()}
    assert out.encode_openmetrics().endswith(b"# EOF\n")


@pytest.mark.unit
@pytest.mark.parametrize("openmetrics", [False, True])
@pytest.mark.parametrize("fleet", [False, True])
def test_the_body_an_answer_sends_is_the_encoding_and_lets_the_lines_go(openmetrics, fleet, monkeypatch):
    """A node's body in one join; a fleet's (past RELEASE_LINES) family by family as their lines are let go."""
    from exporter.common import exposition

    if fleet:
        monkeypatch.setattr(exposition, "RELEASE_LINES", 0)
    kept, released = TextFamilySet(), TextFamilySet()
    fill_every_kind(kept)
    fill_every_kind(released)
    body = released.body(openmetrics=openmetrics)
    assert bytes(body) == (kept.encode_openmetrics() if openmetrics else kept.encode())
    assert released.names() == set()
    assert released.encode() == b""


def fill_target(out: FamilySet, number: int) -> None:
    """One target's families, as a fleet's /metrics renders them one target after the other."""
    instance = {"instance": f"node{number}:6379" if number % 49 else f"nœud-日本-🙂{number}:6379"}  # one in 49 not ASCII
    out.add("redis_up", "gauge", "Up.", instance, 1.0)
    for db in range(3):
        out.add("redis_db_keys", "gauge", "Keys.", {**instance, "db": f"db{db}"}, float(number * db))
    out.add("redis_commands_processed_total", COUNTER, "Commands.", instance, float(number))
    out.add_histogram("lat_usec", "Latency.", {**instance, "cmd": "get"}, [("8", 1.0), ("16", float(number + 1))], number + 1.0, 40.0)
    out.add_summary("pct", "Quantiles.", {**instance, "cmd": "get"}, [("0.5", 9.0)], 4.0, 40.0)


@pytest.mark.unit
@pytest.mark.parametrize("way", ["text", "openmetrics", "protobuf"])
def test_a_fleets_entries_joined_between_targets_write_the_same_body(way):
    """compact() joins what each family gathered (a fleet's many small lines would fill the allocator's small-object
    arenas): the body is byte for byte the one of the entries as added, and no block holds more than a run of loose
    entries beside its joined ones."""
    from exporter.common.exposition import COMPACT_ENTRIES
    from exporter.common.protobuf import ProtobufFamilySet

    def new_set() -> TextFamilySet:
        return ProtobufFamilySet(native=frozenset({"lat_usec"})) if way == "protobuf" else TextFamilySet()

    compacted, plain = new_set(), new_set()
    targets = 500
    for number in range(targets):
        fill_target(compacted, number)
        fill_target(plain, number)
        compacted.compact()
    most = 5  # entries a target adds to one block at most: a text histogram's two buckets, +Inf, _sum and _count
    assert max(len(block) for block in plain._blocks.values()) > 3 * targets
    assert max(len(block) for block in compacted._blocks.values()) <= 1 + most * targets // COMPACT_ENTRIES + COMPACT_ENTRIES + most

    def held(out: TextFamilySet) -> int:
        return sum(sys.getsizeof(entry) for block in out._blocks.values() for entry in block)

    assert held(compacted) < held(plain)  # a run of lines with a wide character among them is no wider for it
    if way != "protobuf":
        assert compacted.encode() == plain.encode()
        assert compacted.encode_openmetrics() == plain.encode_openmetrics()
    assert bytes(compacted.body(openmetrics=way == "openmetrics")) == bytes(plain.body(openmetrics=way == "openmetrics"))
    assert compacted._compacted == {}  # the body lets the joined runs go with the rest


def test_settings_a_fleet_shares_are_written_as_each_target_renders_them():
    """A target without a memo writes the settings' lines from the text every target with the same settings shares:
    byte for byte what rendering them for that target gives, whatever its name holds, with and without its instance,
    for each of several settings kept at once; a node with a thousand databases renders its own."""
    from exporter.common.exposition import SHARED
    from exporter.common.labels import LabelSet
    from exporter.redis.command import Scraped
    from exporter.redis.config_get import add_settings
    from exporter.redis.info import parse_info

    info = parse_info("# Keyspace\r\ndb0:keys=3,expires=0,avg_ttl=0\r\ndb5:keys=1,expires=1,avg_ttl=9\r\n")
    limits = [b"client-output-buffer-limit", b"normal 0 0 0 replica 268435456 67108864 60 pubsub 33554432 8388608 60"]
    settings = {
        databases: [[b"io-threads", b"4"], [b"repl-backlog-size", b"1048576"], limits, [b"databases", databases.encode()]]
        for databases in ("16", "4", "1024")
    }
    names = ["node-1", "node-2", 'we"ird\\tar\nget', "ノード", "nul\x00name"]
    SHARED.turn()
    SHARED.turn()
    for _ in range(2):  # the first of each renders with the stand-in and keeps it, the others write from it
        for databases, replies in settings.items():
            for drop_instance in (False, True):
                for name in names:
                    one = TextFamilySet(drop_instance=drop_instance)
                    add_settings(replies, Scraped(info, {}, {}, LabelSet({"instance": name}), 0.0), one)
                    alone = FamilySet()
                    add_settings(replies, Scraped(info, {}, {}, LabelSet({"instance": name}), 0.0), alone)
                    written = one.encode()
                    assert written == encode_text(alone.families(), drop_instance=drop_instance)
                    assert written.count(b"\nredis_db_keys{") == _empty_databases(databases)
    kept = {(key[2], key[1][0][3][1]): len(lines) for key, lines in SHARED.young.items()}
    expected = {databases: 0 if databases == "1024" else 11 + 2 * _empty_databases(databases) for databases in settings}
    assert kept == {(drop, databases): lines for drop in (False, True) for databases, lines in expected.items()}


def _empty_databases(databases: str) -> int:
    """The databases below the count that hold no keys (db0 and db5 do)."""
    return len([index for index in range(int(databases)) if index not in (0, 5)])


@pytest.mark.unit
def test_numbers_added_while_recording_replay_as_they_were_written():
    """add_numbers (a fleet target's INFO fields) inside a recording keeps its lines like add does, in every encoding."""
    from exporter.common.labels import LabelSet
    from exporter.common.protobuf import ProtobufFamilySet

    for make in (TextFamilySet, ProtobufFamilySet):
        memo: dict = {}
        written = make()
        with written.recording(memo, "server", "the section's text"):
            written.add_numbers(LabelSet({"instance": "n1"}), [("a_total", COUNTER, "A.", "1.0"), ("b", "gauge", "B.", "2.5")])
        replayed = make()
        assert replayed.replay(memo, "server", "the section's text") is not None
        assert replayed.encode() == written.encode()
        assert b"n1" in written.encode()
