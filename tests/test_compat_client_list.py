"""Per-connection families side by side with redis_exporter's --export-client-list --export-client-port: the CLIENT LIST
a real server gave (every kind of connection it tells apart, on Redis 7.0, Valkey 8.1 and Redis 8.2) is replayed to this
exporter's client profiler, and every redis_connected_client_* sample redis_exporter served for the same reply
(tests/data/upstream_values/client_list_*, written by bench/redis_exporter_client_list.py) must be served here with the
same name and labels, and the same value: a timestamp (the read's time less an age) within the time between the reads."""

from __future__ import annotations

import pytest
from helpers import call, exact_samples, make_app
from servers import wait_until
from test_compat_values import DATA, replay

TIMESTAMPS = ("redis_connected_client_created_at_timestamp", "redis_connected_client_idle_since_timestamp")


@pytest.mark.parametrize("engine", ["redis_7_0", "valkey_8_1", "redis_8_2"])
def test_every_connection_is_served_as_redis_exporter_serves_it(engine):
    recorded = (DATA / f"client_list_{engine}.prom").read_text()
    first, _, body = recorded.partition("\n")
    theirs_before, theirs_after = (float(part) for part in first.split()[2:4])
    theirs = exact_samples(body)
    node = replay(f"client_list_{engine}")
    app = make_app({"targets": [{"name": "node", "addr": node.addr}], "clients": {"per_connection": True, "include_port": True}})
    try:
        wait_until(lambda: app.client_profiler.snapshot()[0].get("node") is not None, timeout=20, what="a CLIENT LIST read")
        read_at = app.client_profiler.snapshot()[0]["node"].read_at
        text = call(app, "/metrics").text
    finally:
        app.close()
        node.close()
    ours = {
        (name, tuple(item for item in labels if item[0] != "instance")): value
        for (name, labels), value in exact_samples(text).items()
        if name.startswith("redis_connected_client_")
    }
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        if key[0] in TIMESTAMPS:  # the same age subtracted from each exporter's clock, to whole seconds
            assert theirs_before - 1 <= value - ours[key] + int(read_at) <= theirs_after + 1, key
        else:
            assert ours[key] == value, key
    assert len({dict(labels)["id"] for _, labels in theirs}) >= 10


def test_without_the_port_and_with_a_cap():
    node = replay("client_list_redis_8_2")
    app = make_app({"targets": [{"name": "node", "addr": node.addr}], "clients": {"per_connection": True, "max_connections": 3}})
    try:
        wait_until(lambda: app.client_profiler.snapshot()[0].get("node") is not None, timeout=20, what="a CLIENT LIST read")
        samples = exact_samples(call(app, "/metrics").text)
    finally:
        app.close()
        node.close()
    infos = [dict(labels) for name, labels in samples if name == "redis_connected_client_info"]
    assert sorted(int(labels["id"]) for labels in infos) == [4, 5, 6]  # the lowest ids
    assert not [labels for labels in infos if "port" in labels]
    assert samples[("elasticache_clients_connected", (("client_name", "orders-api"), ("instance", "node")))] == 2  # every connection counted


@pytest.mark.unit
def test_redis_exporters_flags_and_environment_turn_it_on():
    from exporter.cli.config_flags import load_config
    from exporter.cli.main import build_parser

    by_flags = load_config(build_parser().parse_args(["serve", "--export-client-list", "--export-client-port"]), {})
    assert (by_flags.clients.enabled, by_flags.clients.per_connection, by_flags.clients.include_port) == (True, True, True)
    by_env = load_config(build_parser().parse_args(["serve"]), {"REDIS_EXPORTER_EXPORT_CLIENT_LIST": "true"})
    assert (by_env.clients.enabled, by_env.clients.per_connection, by_env.clients.include_port) == (True, True, False)
    default = load_config(build_parser().parse_args(["serve"]), {})
    assert (default.clients.enabled, default.clients.per_connection) == (False, False)
