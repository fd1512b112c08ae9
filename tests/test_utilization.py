"""Utilization against the node type's baseline, in the exporter, under a real redis-benchmark load."""

from __future__ import annotations

import subprocess

import pytest
from helpers import call, make_app, sample
from servers import wait_until
from tools import require

from exporter.service.collectors.baselines import window_rates


@pytest.mark.unit
def test_window_rates():
    counters = [(0.0, 0, 0, 0.0), (1.0, 1000, 100, 0.1), (2.0, 3000, 300, 0.3)]
    out, received, cpu = window_rates(counters, 10, 2.0)
    assert (out, received) == (1500, 150)
    assert abs(cpu - 15.0) < 1e-9
    assert window_rates(counters, 0.5, 2.0) is None  # one sample in the window
    assert window_rates([(0.0, 5000, 0, 0), (1.0, 10, 0, 0)], 10, 1.0) is None  # a restart reset the counters


def utilization(app, target: str) -> float:
    samples = call(app, "/metrics").samples()
    key = ("elasticache_network_utilization_ratio", (("direction", "out"), ("instance", target), ("node_type", "cache.t3.micro"), ("source", "info")))
    return samples.get(key, 0.0)


def test_utilization_rises_under_load_and_falls_after(fresh_redis):
    app = make_app({"targets": [{"name": "small", "addr": fresh_redis.addr, "node_type": "t3.micro"}], "baselines": {"window": "2s"}})
    benchmark = require("redis-benchmark")
    try:
        fresh_redis.client().set("key:__rand_int__", "x" * 1000)
        samples = call(app, "/metrics").samples()
        assert (
            sample(samples, "elasticache_baseline_network_bytes_per_second", node_type="cache.t3.micro", level="100", source="published") == 8_000_000
        )
        idle = utilization(app, "small")
        load = subprocess.Popen(
            [benchmark, "-p", str(fresh_redis.port), "-t", "get", "-d", "1000", "-n", "10000000", "-c", "20", "-P", "8", "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:  # 8 MB/s of a t3.micro is well below what a local GET load sends
            wait_until(lambda: utilization(app, "small") >= 1.0, timeout=8, interval=0.2, what="utilization at 100 %")
        finally:
            load.terminate()
            load.wait(timeout=10)
        # once the 2 s window holds only scrapes after the load, the rate falls back
        wait_until(lambda: utilization(app, "small") < 0.1, timeout=10, interval=0.3, what="utilization back under 10 %")
        assert idle < 0.1, idle
        samples = call(app, "/metrics").samples()
        headroom = sample(
            samples, "elasticache_network_headroom_bytes_per_second", instance="small", direction="out", source="info", node_type="cache.t3.micro"
        )
        assert headroom > 7_000_000
    finally:
        app.close()


def test_unknown_node_type_is_counted_not_fatal(plain_redis):
    app = make_app({"targets": [{"name": "odd", "addr": plain_redis.addr, "node_type": "cache.z9.huge"}]})
    try:
        call(app, "/metrics")
        samples = call(app, "/metrics").samples()
        assert sample(samples, "redis_up", instance="odd") == 1
        assert sample(samples, "elasticache_exporter_baseline_missing_total", instance="odd", node_type="cache.z9.huge") == 2
        assert not any(name == "elasticache_network_utilization_ratio" for name, _ in samples)
    finally:
        app.close()
