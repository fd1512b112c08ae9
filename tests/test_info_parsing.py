"""INFO text → fields → samples, with no server involved."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import client_exposition, client_samples, exact_samples, sample
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from exporter.common.families import FamilySet
from exporter.common.labels import instance_labels
from exporter.redis.info import parse_info, parse_number, parse_percent, parse_subfields, parse_value
from exporter.redis.info_fields import KNOWN_FIELDS
from exporter.redis.info_metrics import add_info_metrics
from exporter.redis.node_metrics import add_start_time

pytestmark = pytest.mark.unit

DATA = Path(__file__).parent / "data"
READ_TIME = 1_795_000_000.5  # when the reply arrived, for fields relative to now


def exposition(info_text: str, target: str = "t") -> dict[tuple[str, tuple], float]:
    """Samples as {(name, sorted labels): value}, through the real encoder and parser."""
    out = FamilySet()
    info = parse_info(info_text)
    add_info_metrics(info, instance_labels(target), out)
    add_start_time(info, READ_TIME, {"instance": target}, out)
    return client_samples(client_exposition(out))


def value(samples, name, **labels):
    return sample(samples, name, **{"instance": "t", **labels})


def test_sections_are_split_and_lower_cased():
    info = parse_info((DATA / "info_redis_7_0.txt").read_text())
    assert {"server", "clients", "memory", "persistence", "stats", "replication", "cpu", "commandstats", "latencystats"} <= set(info.sections)
    assert info.sections["server"]["redis_version"] == "7.0.15"
    assert info.malformed_lines == 0


def test_malformed_lines_are_counted_and_skipped():
    info = parse_info("# Server\nredis_version:7.0\ngarbage without colon\n:novalue\nuptime_in_seconds:5\n")
    assert info.malformed_lines == 2
    assert info.sections["server"] == {"redis_version": "7.0", "uptime_in_seconds": "5"}


def test_value_parsers():
    assert parse_number("12") == 12.0
    assert parse_number("-1") == -1.0
    assert parse_number("nan") is None
    assert parse_number("inf") is None
    assert parse_number("1.2M") is None
    assert parse_value("ok") == 1.0
    assert parse_value("err") == 0.0
    assert parse_value("up") == 1.0
    assert parse_percent("99.58%") == 0.9958
    assert parse_subfields("keys=1,expires=0,avg_ttl=0") == {"keys": "1", "expires": "0", "avg_ttl": "0"}


def test_known_fields_get_their_names_types_and_units():
    samples = exposition((DATA / "info_redis_7_0.txt").read_text())
    assert value(samples, "redis_memory_used_bytes") == 941048
    assert value(samples, "redis_connections_received_total") == 2
    assert value(samples, "redis_max_clients") == 10000
    assert value(samples, "redis_memory_used_peak_ratio") == 1.002
    assert value(samples, "redis_rdb_last_bgsave_status") == 1
    assert value(samples, "redis_rdb_last_bgsave_duration_sec") == -1
    assert value(samples, "redis_cpu_user_seconds_total") == 0.003969
    assert value(samples, "redis_latest_fork_seconds") == 0
    assert value(samples, "redis_server_time_seconds") == 1795364104.28457
    assert value(samples, "redis_start_time_seconds") == 1795364104.28457 - 1  # the server's clock, not the reply's


def test_start_time_without_the_servers_clock_uses_the_time_of_the_reply():
    samples = exposition("# Server\r\nredis_version:4.0.14\r\nuptime_in_seconds:100\r\n")
    assert samples[("redis_start_time_seconds", (("instance", "t"),))] == READ_TIME - 100


def test_unknown_numeric_fields_are_exported_generically():
    samples = exposition("# Server\nuptime_in_seconds:3\nsome_future_counter:42\nsome_future_text:abc\n")
    assert value(samples, "redis_some_future_counter") == 42
    assert not any(name == "redis_some_future_text" for name, _ in samples)


def test_identifier_fields_are_not_numbers():
    samples = exposition("# Server\nredis_git_sha1:00000000\nrun_id:123\ntcp_port:6379\n# Replication\nmaster_replid2:000\n")
    names = {name for name, _ in samples}
    assert not names & {"redis_redis_git_sha1", "redis_run_id", "redis_tcp_port", "redis_master_replid2"}


def test_instance_info_has_redis_exporter_labels():
    samples = exposition((DATA / "info_redis_7_0.txt").read_text())
    (labels,) = [dict(labels) for name, labels in samples if name == "redis_instance_info"]
    assert labels["redis_version"] == "7.0.15"
    assert labels["role"] == "master"  # upstream rules count masters with redis_instance_info{role="master"}
    assert labels["process_id"] == "3365"
    assert set(labels) >= {
        "role",
        "redis_version",
        "redis_build_id",
        "redis_mode",
        "os",
        "maxmemory_policy",
        "tcp_port",
        "run_id",
        "process_id",
        "master_replid",
    }
    assert value(samples, "redis_instance_role", role="master") == 1


def test_keyspace_commandstats_errorstats_latencystats():
    text = (
        "# Commandstats\ncmdstat_get:calls=10,usec=50,usec_per_call=5.00,rejected_calls=1,failed_calls=2\n"
        "cmdstat_config|get:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\n"
        "# Errorstats\nerrorstat_ERR:count=3\nerrorstat_WRONGTYPE:count=1\n"
        "# Latencystats\nlatency_percentiles_usec_get:p50=1.003,p99=2.007,p99.9=10.047\n"
        "# Keyspace\ndb0:keys=5,expires=2,avg_ttl=1500\ndb3:keys=1,expires=0,avg_ttl=0\n"
    )
    samples = exposition(text)
    assert value(samples, "redis_commands_total", cmd="get") == 10
    assert value(samples, "redis_commands_duration_seconds_total", cmd="get") == 50e-6
    assert value(samples, "redis_commands_rejected_calls_total", cmd="get") == 1
    assert value(samples, "redis_commands_failed_calls_total", cmd="get") == 2
    assert value(samples, "redis_commands_total", cmd="config|get") == 3
    assert value(samples, "redis_errors_total", err="ERR") == 3
    assert value(samples, "redis_latency_percentiles_usec", cmd="get", quantile="99.9") == 10.047
    assert value(samples, "redis_latency_percentiles_usec", cmd="get", quantile="50") == 1.003
    assert value(samples, "redis_latency_percentiles_usec_count", cmd="get") == 10
    assert value(samples, "redis_latency_percentiles_usec_sum", cmd="get") == 50
    assert value(samples, "redis_db_keys", db="db0") == 5
    assert value(samples, "redis_db_keys_expiring", db="db0") == 2
    assert value(samples, "redis_db_avg_ttl_seconds", db="db0") == 1.5
    assert value(samples, "redis_db_keys", db="db3") == 1


def test_redis_2_6_replica_and_primary_from_elasticache():
    replica = exposition((DATA / "info_redis_2_6_replica.txt").read_text())
    master = "xxxxx.xxx.0001.internal.apne1.cache.amazonaws.com"
    assert value(replica, "redis_master_link_up", master_host=master, master_port="6379") == 1
    assert value(replica, "redis_master_last_io_seconds_ago", master_host=master, master_port="6379") == 1
    assert value(replica, "redis_instance_role", role="slave") == 1
    primary = exposition((DATA / "info_redis_2_6_primary.txt").read_text())
    assert value(primary, "redis_connected_slaves") == 5
    replicas = [dict(labels) for name, labels in primary if name == "redis_instance_role"]
    assert replicas == [{"role": "master", "instance": "t"}]
    # the old comma-separated replica lines carry no offset, so no offset series, but no error either
    assert not any(name == "redis_connected_slave_offset_bytes" for name, _ in primary)


def test_modern_replica_lines_become_labelled_series():
    samples = exposition("# Replication\nrole:master\nslave0:ip=10.0.0.2,port=6380,state=online,offset=1234,lag=1\n")
    labels = {"slave_ip": "10.0.0.2", "slave_port": "6380", "slave_state": "online"}
    assert value(samples, "redis_connected_slave_offset_bytes", **labels) == 1234
    assert value(samples, "redis_connected_slave_lag_seconds", **labels) == 1


def test_every_known_field_name_is_documented():
    doc = (Path(__file__).parent.parent / "docs" / "metrics.md").read_text()
    missing = [spec.name for spec in KNOWN_FIELDS.values() if f"`{spec.name}`" not in doc]
    assert not missing, f"docs/metrics.md lacks {missing}"


info_lines = st.one_of(
    st.text(max_size=60),
    st.builds(lambda k, v: f"{k}:{v}", st.text(max_size=20), st.text(max_size=30)),
    st.builds(lambda k, v: f"cmdstat_{k}:{v}", st.text(max_size=10), st.text(max_size=40)),
    st.builds(lambda k, v: f"db{k}:{v}", st.integers(-5, 20), st.text(max_size=40)),
    st.builds(lambda k, v: f"slave{k}:{v}", st.integers(0, 3), st.text(max_size=40)),
    st.builds(lambda v: f"latency_percentiles_usec_get:{v}", st.text(max_size=40)),
    st.sampled_from(["# Server", "# Keyspace", "# Commandstats", "# Replication", "# Latencystats", "# Errorstats", "#", "# "]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(info_lines, max_size=40))
def test_garbage_never_raises_and_always_encodes(lines):
    text = "\r\n".join(lines)
    out = FamilySet()
    info = parse_info(text)
    add_info_metrics(info, instance_labels("t"), out)
    encoded = client_exposition(out)
    list(text_string_to_metric_families(encoded))


def test_generated_metrics_tables_are_current():
    from exporter.service.metrics_doc import replace_tables

    path = Path(__file__).parent.parent / "docs" / "metrics.md"
    document = path.read_text()
    assert replace_tables(document) == document, "run: python -m exporter.service.metrics_doc docs/metrics.md"


def test_the_text_encoder_agrees_with_prometheus_client():
    from exporter.common.exposition import encode_text

    out = FamilySet()
    add_info_metrics(parse_info((DATA / "info_redis_7_0.txt").read_text()), instance_labels('we"ird\\tar\nget'), out)
    ours = exact_samples(encode_text(out.families()).decode())
    assert ours == exact_samples(client_exposition(out))
    assert ("redis_total_error_replies", (("instance", 'we"ird\\tar\nget'),)) in ours  # a counter named as redis_exporter names it
    assert len(ours) > 150


def test_the_text_encoder_never_reuses_labels_of_a_freed_dict():
    """Collectors hand over transient family sets: a labels dict freed after its family is encoded may have its
    id taken by a dict of the next family. Each sample must still carry its own labels."""
    from exporter.common.exposition import encode_text

    def families():
        for i in range(200):
            out = FamilySet()
            out.add(f"m{i}", "gauge", "h", {"target": f"t{i}"}, float(i))
            yield from out.families()  # the set, and its dict, are dropped before the next one is made

    samples = client_samples(encode_text(families()).decode())
    assert samples == {(f"m{i}", (("target", f"t{i}"),)): float(i) for i in range(200)}


@settings(max_examples=300, deadline=None)
@given(st.lists(info_lines, max_size=30), st.lists(info_lines, max_size=30), st.data())
def test_a_reply_parsed_after_another_reuses_only_sections_that_stood_still(first, second, data):
    """The same node's next reply reuses the sections whose text did not change: it must parse to what it parses to
    alone, and parsing it must leave the first reply as it was (its sections are shared, never changed)."""
    earlier_text = "\r\n".join(first)
    # the second reply: some of the first's lines again (whole sections stand still), with others mixed in
    later_text = "\r\n".join(data.draw(st.permutations(first + second)) if data.draw(st.booleans()) else first + second)
    earlier = parse_info(earlier_text, parse_info(earlier_text))  # read twice: its sections kept for the next
    before = {name: dict(fields) for name, fields in earlier.sections.items()}
    for text in (earlier_text, later_text, (DATA / "info_redis_7_0.txt").read_text()):
        alone, after = parse_info(text), parse_info(text, earlier)
        assert (after.sections, after.malformed_lines) == (alone.sections, alone.malformed_lines)
        assert list(after.sections) == list(alone.sections)
        assert {name: dict(fields) for name, fields in earlier.sections.items()} == before
        assert (parse_info(text, after.kept()).sections, parse_info(text, after).malformed_lines) == (alone.sections, alone.malformed_lines)


def test_sections_of_a_reply_that_stood_still_are_reused():
    """A section's fields are kept for the next reply once its text stood still from one reply to the next; a section
    that changes at every scrape is parsed each time and never kept (it would only cost memory)."""
    text = (DATA / "info_redis_7_0.txt").read_text()
    first = parse_info(text)
    assert first.kept().sections == {}
    assert all(fields is None for _, _, fields, _ in first.kept().chunks.values())  # nothing stood still yet
    second = parse_info(text, first.kept())
    assert second.sections["memory"] is not first.sections["memory"]
    assert second.chunks["memory"][2] is second.sections["memory"]  # it stood still once: kept from now on
    changed = text.replace("connected_clients:", "connected_clients:9", 1)
    third = parse_info(changed, second.kept())
    assert third.sections["memory"] is second.sections["memory"]
    assert third.sections["clients"] is not second.sections["clients"]
    assert third.chunks["clients"][2] is None  # it changed: parsed, and not kept
    assert third.get("connected_clients") == "9" + first.get("connected_clients")
    assert parse_info(changed, third.kept()).sections["clients"] is not third.sections["clients"]
    assert parse_info(text, third.kept()).sections == first.sections


def test_a_section_met_twice_never_changes_the_reply_it_was_reused_from():
    earlier = parse_info("# Server\r\na:1\r\n# Clients\r\nx:1\r\n", parse_info("# Server\r\na:1\r\n# Clients\r\nx:1\r\n"))
    later = parse_info("# Server\r\na:1\r\n# Server\r\nb:2\r\n#\r\nc:3\r\n", earlier)
    assert later.sections == {"server": {"a": "1", "b": "2", "c": "3"}}
    assert later.malformed_lines == 1
    assert earlier.sections == {"server": {"a": "1"}, "clients": {"x": "1"}}
    reused = parse_info("# Server\r\na:1\r\n# Clients\r\nx:2\r\n", earlier)
    assert reused.sections["server"] is earlier.sections["server"]


def test_a_line_without_a_colon_is_malformed_even_when_it_names_a_known_field():
    parse_info("# Clients\r\nconnected_clients:1\r\n")  # the name is now one seen valid
    reply = parse_info("# Clients\r\nconnected_clients\r\n")
    assert reply.sections.get("clients", {}) == {}
    assert reply.malformed_lines == 1


# INFO values as servers write them and as a hostile one might: integers (with a leading zero, past 10^15, in other
# scripts' digits), floats, percentages, statuses, sizes written for people
field_values = st.one_of(
    st.integers(0, 10**20).map(str),
    st.integers(-(10**6), 0).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["0", "007", "00", "1e308", "-1e308", "1.7976931348623157e308", "ok", "err", "980.34K", "12.5%", "٣٤", "²", "+5", " 5", ""]),
    # the integers at the edge of the ones written without a float: 15 digits, 16, past 2^53, 2^53 + 1
    st.sampled_from(["999999999999999", "9999999999999999", "1" * 16, "9007199254740993", "100000000000000"]),
    st.text(max_size=12),
)
field_names = st.sampled_from(
    ["connected_clients", "used_memory", "server_time_usec", "latest_fork_usec", "total_active_defrag_time", "used_memory_peak_perc",
     "rdb_last_bgsave_status", "mem_fragmentation_ratio", "used_memory_human", "made_up_field", "other_made_up"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(field_names, field_values, max_size=11))
def test_a_fleet_targets_fields_render_as_each_field_alone(fields):
    """A target without a memo adds a section's numbers in one call (exporter.redis.info_metrics._add_fields): in text
    and in protobuf, the same bytes as each field rendered alone, in the fields' order."""
    from exporter.common.exposition import TextFamilySet
    from exporter.common.labels import LabelSet
    from exporter.common.protobuf import ProtobufFamilySet
    from exporter.redis.info_metrics import _add_field, _add_fields, _plan

    for make in (TextFamilySet, ProtobufFamilySet):
        gathered, alone = make(), make()
        _add_fields("stats", fields, {}, LabelSet({"instance": "t"}), gathered)
        for name, raw in fields.items():
            _add_field("stats", name, raw, _plan("stats", name), LabelSet({"instance": "t"}), alone)
        assert gathered.encode() == alone.encode()


@pytest.mark.parametrize("name", ["info_redis_7_0.txt", "info_redis_2_6_primary.txt", "info_redis_2_6_replica.txt"])
def test_a_reply_renders_alike_with_a_memo_without_one_and_sample_by_sample(name):
    """A fleet's targets without a memo take their own paths for plain fields, commandstats and latencystats; what
    they serve is, byte for byte, what a target with a memo serves (twice: rendered, then replayed) and what the
    sample-by-sample set encodes."""
    from helpers import rendered_three_ways

    by_sample, fresh, *served = rendered_three_ways(parse_info((DATA / name).read_text()))
    assert fresh == by_sample == served[0] == served[1]
    if name == "info_redis_7_0.txt":
        assert b"redis_commands_total{" in served[0]
        assert b'quantile="99.9"' in served[0]
