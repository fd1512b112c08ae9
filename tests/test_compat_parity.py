"""The INFO fields redis_exporter 1.90 serves for Valkey 9.0/9.1 and Redis 8.10, from INFO texts with no server
involved: the fields and values of redis_exporter's own tests (exporter/valkey_info_test.go, info_test.go,
scripting_engines_test.go, metrics_test.go) and of the engines' INFO documentation. Each family must be served with
redis_exporter's name, type, labels and value, and be one of the families tests/data/redis_exporter_families.tsv
lists for it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import exact_samples, exposition_types, sample

from exporter.common.exposition import TextFamilySet
from exporter.common.labels import instance_labels
from exporter.redis.cluster import add_cluster_info
from exporter.redis.compat import OURS_ONLY
from exporter.redis.info import parse_info
from exporter.redis.info_metrics import _CERTIFICATE, _ENGINE, _IO_THREAD, _PLANS, add_info_metrics

pytestmark = pytest.mark.unit

UPSTREAM = Path(__file__).parent / "data" / "redis_exporter_families.tsv"

# a Valkey 9.1 primary: the server section of its INFO documentation, the new fields with the values redis_exporter's
# tests give them, and INFO ALL's copy of CLUSTER INFO (Valkey 9.1 in cluster mode)
VALKEY_9_1 = """# Server
redis_version:7.2.4
server_name:valkey
valkey_version:9.1.2
valkey_release_stage:ga
redis_git_sha1:00000000
redis_git_dirty:0
redis_build_id:1cadaf78f6168f2d
server_mode:cluster
os:Linux 6.1.0-18-amd64 x86_64
process_id:982599
run_id:e0abe2248cad0c6d9cb2445d8e6b73448f567f74
tcp_port:6379
uptime_in_seconds:94798
io_threads_active:1

# Memory
used_memory:4757704
mem_replicas_repl_buffer:41

# Stats
expired_keys:0
expired_fields:42
expired_keys_with_volatile_items_stale_perc:12.5
acl_access_denied_tls_cert:43
acl_access_denied_db:44

# Replication
role:master
connected_slaves:0
replicas_waiting_psync:2
master_replid:488d931b7e08f8e091f674ea64480165971a25f1

# CPU
used_cpu_sys:68.476389
used_active_time_main_thread:12.5
used_active_time_io_thread_1:2.5
used_active_time_io_thread_2:3.5
used_active_time_io_thread_foo:4.5

# TLS
tls_server_cert_serial:01A2
tls_server_cert_expires_in_seconds:47
tls_client_cert_serial:02B3
tls_client_cert_expires_in_seconds:48
tls_ca_cert_serial:03C4
tls_ca_cert_expires_in_seconds:49

# Scripting Engines
engines_count:2
engines_total_used_memory:50
engines_total_memory_overhead:51
engine_0:name=LUA,module=built-in,abi_version=1,used_memory=20,memory_overhead=21
engine_1:memory_overhead=31,used_memory=30,abi_version=2,module=example,name=JS

# Cluster
cluster_enabled:1

# Cluster Info
cluster_state:ok
cluster_slots_assigned:16384
cluster_known_nodes:6

# Keyspace
db0:keys=17,expires=5,avg_ttl=2500,keys_with_volatile_items=3
""".replace("\n", "\r\n")

# a Valkey 9.1 replica without TLS: serials "none", countdowns 0 (Valkey's tests of INFO tls with TLS off)
VALKEY_9_1_REPLICA = """# Replication
role:slave
master_host:10.0.0.1
master_port:6379
master_link_status:up
replicas_repl_buffer_size:45
replicas_repl_buffer_peak:46

# TLS
tls_server_cert_serial:none
tls_server_cert_expires_in_seconds:0
tls_client_cert_serial:none
tls_client_cert_expires_in_seconds:0
tls_ca_cert_serial:none
tls_ca_cert_expires_in_seconds:0
tls_ca_cert_count:0
""".replace("\n", "\r\n")

# the fields Redis 8.10 adds (its INFO documentation: compact hash templates, BACKUP), and 8.x's keyspace line
REDIS_8_10 = """# Server
redis_version:8.10.2
redis_mode:standalone

# Memory
used_memory:1048576
used_memory_hash_templates:4096

# Persistence
backup_in_progress:0

# Stats
keyspace_hits:3
hash_templates:2
hash_template_keys:1000
acl_access_denied_tls_cert:0

# Keyspace
db0:keys=25714011,expires=25091314,avg_ttl=685620459,subexpiry=7
""".replace("\n", "\r\n")


def served(info_text: str) -> tuple[dict[tuple[str, tuple], float], dict[str, str], dict[str, str]]:
    """(samples exactly as served, {family: TYPE}, {family: HELP}) of one INFO reply of target "t"."""
    out = TextFamilySet()
    add_info_metrics(parse_info(info_text), instance_labels("t"), out)
    text = out.encode().decode()
    helps = {line.split()[2]: line.split(" ", 3)[3] for line in text.splitlines() if line.startswith("# HELP ")}
    return exact_samples(text), exposition_types(text), helps


def value(samples, name, **labels):
    return sample(samples, name, **{"instance": "t", **labels})


def upstream_families() -> dict[str, tuple[str, set[str]]]:
    families = {}
    for line in UPSTREAM.read_text().splitlines():
        if line and not line.startswith("#"):
            name, kind, labels = line.split("\t")
            families[name] = (kind, set(filter(None, labels.split(","))))
    return families


def test_valkey_9_1_fields_get_redis_exporters_names_types_and_values():
    samples, types, _ = served(VALKEY_9_1)
    counters = {
        "redis_expired_fields_total": 42,
        "redis_acl_access_denied_tls_cert_total": 43,
        "redis_acl_access_denied_db_total": 44,
        "redis_active_time_main_thread_seconds_total": 12.5,
    }
    gauges = {
        "redis_mem_replicas_repl_buffer_bytes": 41,
        "redis_expired_keys_with_volatile_items_stale_percentage": 12.5,  # a percentage, as the server writes it
        "redis_replicas_waiting_psync": 2,
        "redis_tls_server_cert_expires_in_seconds": 47,
        "redis_tls_client_cert_expires_in_seconds": 48,
        "redis_tls_ca_cert_expires_in_seconds": 49,
        "redis_scripting_engines_count": 2,
        "redis_scripting_engines_memory_used_bytes": 50,
        "redis_scripting_engines_memory_overhead_bytes": 51,
    }
    for name, expected in counters.items():
        assert types[name] == "counter", name
        assert value(samples, name) == expected, name
    for name, expected in gauges.items():
        assert types[name] == "gauge", name
        assert value(samples, name) == expected, name


def test_io_threads_active_time_is_one_counter_labelled_by_thread():
    samples, types, _ = served(VALKEY_9_1)
    assert types["redis_active_time_io_thread_seconds_total"] == "counter"
    threads = {dict(labels)["thread"]: v for (name, labels), v in samples.items() if name == "redis_active_time_io_thread_seconds_total"}
    assert threads == {"1": 2.5, "2": 3.5}  # a field without a thread number is no thread (it is the generic rule's)


def test_tls_certificates_are_labelled_by_certificate_and_serial():
    samples, types, _ = served(VALKEY_9_1)
    assert types["redis_tls_certificate_info"] == "gauge"
    certificates = {
        (labels["certificate"], labels["serial"]): v
        for name, pairs in samples
        if name == "redis_tls_certificate_info"
        for labels in [dict(pairs)]
        for v in [samples[(name, pairs)]]
    }
    assert certificates == {("server", "01A2"): 1, ("client", "02B3"): 1, ("ca", "03C4"): 1}
    assert not any(name.endswith("_cert_serial") for name, _ in samples)  # a serial is a label, never a number


def test_without_tls_the_serials_are_none_and_the_countdowns_0():
    samples, _, _ = served(VALKEY_9_1_REPLICA)
    for certificate in ("server", "client", "ca"):
        assert value(samples, "redis_tls_certificate_info", certificate=certificate, serial="none") == 1
        assert value(samples, f"redis_tls_{certificate}_cert_expires_in_seconds") == 0
    assert value(samples, "redis_replicas_repl_buffer_size_bytes") == 45
    assert value(samples, "redis_replicas_repl_buffer_peak_bytes") == 46


def test_a_serial_outside_the_tls_section_is_not_served():
    samples, _, _ = served("# Server\r\ntls_server_cert_serial:0123\r\n")
    assert not any("serial" in name or name == "redis_tls_certificate_info" for name, _ in samples)


def test_scripting_engines_are_labelled_by_engine_module_and_abi_version():
    samples, types, _ = served(VALKEY_9_1)
    expected = {
        "redis_scripting_engine_info": {("LUA", "built-in", "1"): 1, ("JS", "example", "2"): 1},
        "redis_scripting_engine_memory_used_bytes": {("LUA", "built-in", "1"): 20, ("JS", "example", "2"): 30},
        "redis_scripting_engine_memory_overhead_bytes": {("LUA", "built-in", "1"): 21, ("JS", "example", "2"): 31},
    }
    for family, engines in expected.items():
        assert types[family] == "gauge"
        found = {}
        for (name, pairs), v in samples.items():
            if name == family:
                labels = dict(pairs)
                assert set(labels) == {"instance", "engine", "module", "abi_version"}
                found[(labels["engine"], labels["module"], labels["abi_version"])] = v
        assert found == engines, family


@pytest.mark.parametrize(
    "line",
    [
        "name=LUA,module=built-in,abi_version=1,used_memory=-1,memory_overhead=2",  # redis_exporter's invalid ones
        "name=LUA,module=built-in,abi_version=1,used_memory=1",
        "name=LUA,module",
        "module=lua,abi_version=4,used_memory=1,memory_overhead=2",
        "name=LUA,module=lua,abi_version=4,used_memory=1,memory_overhead=-2",
        "name=LUA,module=lua,abi_version=4,used_memory=1.5,memory_overhead=2",
    ],
)
def test_an_engine_line_redis_exporter_refuses_is_left_out(line):
    samples, _, _ = served(f"# Scripting Engines\r\nengines_count:1\r\nengine_0:{line}\r\n")
    assert not any(name.startswith("redis_scripting_engine_") for name, _ in samples)
    assert value(samples, "redis_scripting_engines_count") == 1


def test_valkey_9_1_cluster_info_section_is_not_served_twice():
    """INFO ALL's copy of CLUSTER INFO is skipped; CLUSTER INFO itself serves each field once."""
    out = TextFamilySet()
    base = instance_labels("t")
    add_info_metrics(parse_info(VALKEY_9_1), base, out)
    add_cluster_info([b"cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_known_nodes:6\r\n"], SimpleNamespace(base=base), out)
    samples = exact_samples(out.encode().decode())  # no series twice
    assert value(samples, "redis_cluster_state") == 1
    assert value(samples, "redis_cluster_slots_assigned") == 16384
    assert value(samples, "redis_cluster_enabled") == 1
    alone, _, _ = served(VALKEY_9_1)
    assert not any(name in ("redis_cluster_state", "redis_cluster_slots_assigned", "redis_cluster_known_nodes") for name, _ in alone)


def test_redis_8_10_fields_get_redis_exporters_names_and_types():
    samples, types, _ = served(REDIS_8_10)
    expected = {
        "redis_memory_used_hash_templates_bytes": ("gauge", 4096),
        "redis_backup_in_progress": ("gauge", 0),
        "redis_hash_templates": ("gauge", 2),
        "redis_hash_template_keys": ("gauge", 1000),
        "redis_acl_access_denied_tls_cert_total": ("counter", 0),
    }
    for name, (kind, expected_value) in expected.items():
        assert types[name] == kind, name
        assert value(samples, name) == expected_value, name


@pytest.mark.parametrize(
    ("line", "expected"),
    [  # redis_exporter's TestKeyspaceStringParser
        ("keys=1,expires=0,avg_ttl=2000", {"redis_db_keys": 1, "redis_db_keys_expiring": 0, "redis_db_avg_ttl_seconds": 2}),
        (
            "subexpiry=7,avg_ttl=685620459,expires=25091314,keys=25714011",
            {
                "redis_db_keys": 25714011,
                "redis_db_keys_expiring": 25091314,
                "redis_db_avg_ttl_seconds": 685620.459,
                "redis_db_keys_with_expiring_items": 7,
            },
        ),
        (
            "keys=17,expires=5,avg_ttl=2500,keys_with_volatile_items=3",
            {"redis_db_keys": 17, "redis_db_keys_expiring": 5, "redis_db_avg_ttl_seconds": 2.5, "redis_db_keys_with_expiring_items": 3},
        ),
        (
            "keys=1,expires=0,avg_ttl=0,cached_keys=4",
            {"redis_db_keys": 1, "redis_db_keys_expiring": 0, "redis_db_avg_ttl_seconds": 0, "redis_db_keys_cached": 4},
        ),
        (  # both names at once: the one count, Redis' name first
            "keys=2,expires=0,avg_ttl=0,subexpiry=1,keys_with_volatile_items=9",
            {"redis_db_keys": 2, "redis_db_keys_expiring": 0, "redis_db_avg_ttl_seconds": 0, "redis_db_keys_with_expiring_items": 1},
        ),
    ],
)
def test_keyspace_fields_are_read_by_name(line, expected):
    samples, types, _ = served(f"# Keyspace\r\ndb0:{line}\r\n")
    got = {name: v for (name, labels), v in samples.items() if dict(labels) == {"instance": "t", "db": "db0"}}
    assert got == expected
    assert all(types[name] == "gauge" for name in got)


def test_every_family_of_these_replies_is_redis_exporters_alike():
    """Each family but this exporter's own and those of the generic rule (a field redis_exporter does not serve:
    `exported as found`) is in redis_exporter's family list, with its type and labels."""
    upstream = upstream_families()
    checked = set()
    for text in (VALKEY_9_1, VALKEY_9_1_REPLICA, REDIS_8_10):
        samples, types, helps = served(text)
        for name, kind in types.items():
            if helps[name].endswith("exported as found.") or name in OURS_ONLY:
                continue
            assert name in upstream, f"{name} is not redis_exporter's"
            labels = {key for (sample_name, pairs) in samples if sample_name == name for key, _ in pairs} - {"instance"}
            assert kind == upstream[name][0], name
            assert labels <= upstream[name][1], name
            checked.add(name)
    assert len(checked) > 35


def test_a_reply_with_the_new_families_renders_alike_with_and_without_a_memo():
    """A target with a memo replays the labelled families' lines as it renders them."""
    from helpers import rendered_three_ways

    by_sample, fresh, first, replayed = rendered_three_ways(parse_info(VALKEY_9_1))
    assert fresh == by_sample == first == replayed


def test_the_new_fields_are_planned_once():
    """What to do with each field is worked out once per section and name, then looked up."""
    served(VALKEY_9_1)
    assert _PLANS["cpu"]["used_active_time_io_thread_1"] == (_IO_THREAD, "1")
    assert _PLANS["tls"]["tls_ca_cert_serial"] == (_CERTIFICATE, "ca")
    assert _PLANS["scripting engines"]["engine_1"] == (_ENGINE,)
    assert "cluster info" not in _PLANS
