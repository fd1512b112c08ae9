"""A Valkey node's CloudWatch minutes through CloudWatch's PromQL API: the same minutes in moto (for GetMetricData) and,
in the shape of ElastiCache's OpenTelemetry metrics (UTF-8 names and labels, cumulative counters, a loopback interface
and minor faults that must not count), in a real Prometheus 3 behind a front that checks the SigV4 signature as AWS
does. A monitor reading each Valkey node through the PromQL API serves what a monitor reading GetMetricData alone
serves, value by value; a refused, cut or unreachable API, a metric without its series and a node upgraded from Redis
OSS mid-run lose no minute and count none twice."""

from __future__ import annotations

import datetime
import logging
import math
import random
import re
import time

import boto3
import pytest
from helpers import parse_samples
from moto import mock_aws
from promql_front import PromQLFront, start_backfilled_prometheus

from exporter.aws.monitor import AwsMonitor
from exporter.aws.otel_metrics import NODE_LABEL, POLLED, as_results, samples_per_minute, with_nodes
from exporter.baselines.table import load_table
from exporter.common.exposition import encode_text
from exporter.common.records import record
from exporter.config import build_config
from exporter.service.collectors.aws import AwsCollector

REGION = "eu-west-1"
VALKEY = ("shop-0001-001", "shop-0001-002")
REDIS = "legacy-0001-001"
MINUTES = 50
COUNTERS = {
    "NetworkBytesOut": ('"system.network.io"', {"network.io.direction": "transmit", "network.interface.name": "eth0"}),
    "NetworkBytesIn": ('"system.network.io"', {"network.io.direction": "receive", "network.interface.name": "eth0"}),
    "MajorPageFaults": ('"process.paging.faults"', {"process.paging.fault_type": "major"}),
    "Evictions": ('"valkey.keys.evicted"', {}),
    "RejectedConnections": ('"valkey.connections.rejected"', {}),
}
ALLOWANCES = ("NetworkBandwidthOutAllowanceExceeded", "NetworkBandwidthInAllowanceExceeded", "NetworkPacketsPerSecondAllowanceExceeded")
GAUGES = {
    "TrafficManagementActive": ('"valkey.throttling.active"', {}),
    "FreeableMemory": ('"system.memory.usage"', {"system.memory.state": "free"}),
    "SwapUsage": ('"system.paging.usage"', {"system.paging.state": "used"}),
    "CurrConnections": ('"valkey.clients.connected"', {}),
}
MEMORY_MAX = 13e9
JITTERED = "shop-0001-002"  # emits at 20 to 40 s into each minute, and skips one minute of its gauges
GAP = 12  # that minute
WITHOUT_REJECTED = "shop-0001-001"  # has no valkey.connections.rejected series: asked of GetMetricData


@record(frozen=True)
class Store:
    minutes: dict[str, dict[str, list[float | None]]]
    front: PromQLFront
    first: float  # the first minute's start: 40 minutes before the store was made, so its minutes reach 10 minutes past


def _minutes(node: str) -> dict[str, list[float | None]]:
    """Each polled metric's CloudWatch value of each minute: counters' sums, allowance counts that rise now and then,
    gauges (one minute missing for the jittered node, in both sources), the memory percentage, the engine CPU."""
    rng = random.Random(node)
    values: dict[str, list[float | None]] = {name: [float(rng.randint(0, 5_000_000)) for _ in range(MINUTES)] for name in COUNTERS}
    for name in ALLOWANCES:
        count, counts = float(rng.randint(0, 100)), []
        for _ in range(MINUTES):
            count += rng.choice([0, 0, 0, 7])
            counts.append(count)
        values[name] = list(counts)
    values["TrafficManagementActive"] = [float(rng.random() < 0.2) for _ in range(MINUTES)]
    values["FreeableMemory"] = [float(rng.randint(1, 8) * 1_000_000_000) for _ in range(MINUTES)]
    values["SwapUsage"] = [float(rng.randint(0, 300) * 1_000_000) for _ in range(MINUTES)]
    values["CurrConnections"] = [float(rng.randint(10, 900)) for _ in range(MINUTES)]
    values["DatabaseMemoryUsagePercentage"] = [rng.randint(100, 9_900) / 100 for _ in range(MINUTES)]
    values["EngineCPUUtilization"] = [rng.randint(0, 9_000) / 100 for _ in range(MINUTES)]
    if node == JITTERED:
        for name in (*GAUGES, "DatabaseMemoryUsagePercentage"):
            values[name][GAP] = None
    return values


def _quoted(name: str) -> str:
    return f'"{name}"'


def _series(name: str, node: str, labels: dict[str, str]) -> str:
    pairs = [name, f'"{NODE_LABEL}"="{node}"', '"valkey.role"="primary"', *(f'"{key}"="{value}"' for key, value in sorted(labels.items()))]
    return "{" + ",".join(pairs) + "}"  # OpenMetrics: no space after a comma


def _openmetrics(nodes: dict[str, dict[str, list[float | None]]], first: float) -> str:
    """The nodes' minutes as ElastiCache's vended metrics would be scraped: each minute's sample within it or at its end
    (the jittered node's 20 to 40 s in); a counter cumulative (its rise over the minute is the minute's Sum), the engine
    CPU as seconds of the main thread, a loopback interface and minor faults that the expressions leave out."""
    lines = []
    for node, values in nodes.items():
        rng = random.Random(f"{node}-offsets")
        cumulative = dict.fromkeys((*COUNTERS, "cpu", "lo", "minor"), 0.0)
        for minute in range(-1, MINUTES):
            at = first + 60 * minute + (rng.randint(20, 40) if node == JITTERED else 60)
            if minute >= 0:
                for name in COUNTERS:
                    cumulative[name] += values[name][minute] or 0.0
                cumulative["cpu"] += (values["EngineCPUUtilization"][minute] or 0.0) / 100 * 60
                cumulative["lo"] += 123_456_789
                cumulative["minor"] += 99_999
            for name, (metric, labels) in COUNTERS.items():
                if not (name == "RejectedConnections" and node == WITHOUT_REJECTED):
                    lines.append(f"{_series(metric, node, labels)} {cumulative[name]!r} {at}")
            loopback = {"network.io.direction": "transmit", "network.interface.name": "lo"}
            lines.append(f"{_series(_quoted('system.network.io'), node, loopback)} {cumulative['lo']!r} {at}")
            lines.append(f"{_series(_quoted('process.paging.faults'), node, {'process.paging.fault_type': 'minor'})} {cumulative['minor']!r} {at}")
            lines.append(f"{_series(_quoted('process.cpu.time'), node, {'thread.type': 'main'})} {cumulative['cpu']!r} {at}")
            lines.append(f"{_series(_quoted('valkey.memory.max'), node, {})} {MEMORY_MAX!r} {at}")
            if minute < 0:
                continue
            for name, (metric, labels) in GAUGES.items():
                if values[name][minute] is not None:
                    lines.append(f"{_series(metric, node, labels)} {values[name][minute]!r} {at}")
            percentage = values["DatabaseMemoryUsagePercentage"][minute]
            if percentage is not None:
                lines.append(f"{_series(_quoted('valkey.memory.used'), node, {})} {percentage / 100 * MEMORY_MAX!r} {at}")
    return "\n".join(_by_series(lines)) + "\n# EOF\n"


def _by_series(lines: list[str]) -> list[str]:
    """OpenMetrics wants each metric's series together, each series' samples in time order."""
    grouped: dict[str, list[str]] = {}
    for line in lines:
        grouped.setdefault(line.rsplit(" ", 2)[0], []).append(line)
    return [line for series in sorted(grouped, key=lambda series: series.split(",", 1)[0]) for line in grouped[series]]


def _put(store: Store) -> None:
    """The same minutes in moto, as ElastiCache publishes them: each stamped with its minute's start."""
    data = []
    for node, values in store.minutes.items():
        dimensions = [{"Name": "CacheClusterId", "Value": node}, {"Name": "CacheNodeId", "Value": "0001"}]
        for name, minutes in values.items():
            for minute, value in enumerate(minutes):
                if value is not None:
                    stamp = datetime.datetime.fromtimestamp(store.first + 60 * minute, tz=datetime.timezone.utc)
                    data.append({"MetricName": name, "Timestamp": stamp, "Value": value, "Dimensions": dimensions})
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    for first in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data[first : first + 500])


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _clocks(store: Store) -> tuple[_Clock, _Clock]:
    """The wall clock at minute 20 and a half of the store (its newest complete minute: 18), and a monotonic one."""
    return _Clock(store.first + 20 * 60 + 150), _Clock(1000.0)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The nodes' minutes in a real Prometheus behind the SigV4 front."""
    first = math.floor(time.time() / 60) * 60 - 40 * 60
    nodes = {node: _minutes(node) for node in (*VALKEY, REDIS)}
    prometheus = start_backfilled_prometheus(tmp_path_factory.mktemp("otel"), _openmetrics(nodes, first))
    front = PromQLFront(prometheus.port, REGION, "FOOBARKEY", "FOOBARSECRET", "testing")  # as moto's mock gives them
    try:
        yield Store(nodes, front, first)
    finally:
        front.stop()
        prometheus.stop()


def _monitor(promql: str, endpoint: str, wall: _Clock, monotonic: _Clock) -> AwsMonitor:
    cloudwatch = {"promql": promql, "promql_endpoint": endpoint, "info_first": False}
    config = build_config({"aws": {"regions": [REGION], "events": False, "cloudwatch": cloudwatch}, "redis": {"addr": ""}}, environ={})
    monitor = AwsMonitor(config.aws, clock=wall, monotonic=monotonic)
    monitor.discover_once()
    return monitor


def _fleet(store: Store, endpoint: str, wall: _Clock, monotonic: _Clock) -> tuple[AwsMonitor, AwsMonitor]:
    """In moto: the two Valkey nodes and the Redis OSS one with the store's minutes; a monitor reading the PromQL API at
    ``endpoint`` where it serves, and one reading GetMetricData alone."""
    _create({**dict.fromkeys(VALKEY, "valkey"), REDIS: "redis"})
    _put(store)
    return _monitor("auto", endpoint, wall, monotonic), _monitor("off", endpoint, wall, monotonic)


def _create(engine_of: dict[str, str]) -> None:
    elasticache = boto3.client("elasticache", region_name=REGION)
    for node, engine in engine_of.items():
        elasticache.create_cache_cluster(CacheClusterId=node, CacheNodeType="cache.r6g.large", Engine=engine, NumCacheNodes=1)


def _served(monitor: AwsMonitor) -> dict:
    """What the monitor serves of the nodes (its own counters left out: the two sources are billed differently)."""
    samples = parse_samples(encode_text(AwsCollector(monitor, load_table()).collect()).decode())
    return {key: value for key, value in samples.items() if not key[0].startswith("elasticache_exporter_")}


def _polls(monitors: list[AwsMonitor], wall: _Clock, monotonic: _Clock, count: int, between=None) -> list[list[dict]]:
    """``count`` polls of every monitor at the same moments, 5 minutes apart; what each served after each."""
    served: list[list[dict]] = [[] for _ in monitors]
    for poll in range(count):
        if between is not None:
            between(poll)
        for index, monitor in enumerate(monitors):
            monitor.poll_once(monitor.due_tiers())
            served[index].append(_served(monitor))
        wall.now += 300
        monotonic.now += 300
    return served


def _same(left: dict, right: dict) -> None:
    assert left.keys() == right.keys(), sorted(set(left) ^ set(right))[:10]
    different = {key: (left[key], right[key]) for key in left if left[key] != pytest.approx(right[key], rel=1e-9, abs=1e-6)}
    shown = [f"{key[0]} {dict(key[1]).get('dimension_CacheClusterId')} {dict(key[1]).get('metric', '')}: {pair}" for key, pair in different.items()]
    assert not different, "\n".join(shown[:12])


def test_the_promql_api_serves_a_valkey_node_what_getmetricdata_does_value_by_value(store, aws_credentials):
    """Two Valkey nodes, one emitting at the end of each minute, one 20 to 40 s into it and missing a minute of its
    gauges, one of them without a rejected-connections series (asked of GetMetricData, said once, not asked of the API
    again within the hour); a Redis OSS node never asked of the API."""
    front = store.front
    wall, monotonic = _clocks(store)
    asked_before = len(front.queries)
    with mock_aws():
        through_api, alone = _fleet(store, front.url, wall, monotonic)
        served = _polls([through_api, alone], wall, monotonic, 5)
    for ours, theirs in zip(*served, strict=True):
        _same(ours, theirs)
    assert front.refused == []
    ranges = front.queries[asked_before:]
    assert any("idelta(" in query for query in ranges)
    assert not any(REDIS in query for query in ranges)  # the Redis OSS node is never asked of the PromQL API
    rejected = [query for query in ranges if "valkey.connections.rejected" in query]
    assert WITHOUT_REJECTED in rejected[0]
    assert not any(WITHOUT_REJECTED in query for query in rejected[1:])  # lacking: GetMetricData's for the hour
    # the Valkey nodes' metric-statistics the API serves came from it: GetMetricData asked only the rest
    stats_api, stats_alone = through_api.api_stats()[0], alone.api_stats()[0]
    paging = 7  # of POLLED's pairs, those asked at every poll: engine CPU, network in and out, memory, freeable, swap, traffic
    assert stats_alone.metrics_requested - stats_api.metrics_requested >= paging * len(VALKEY) * 5
    assert stats_api.promql_samples > 0
    assert stats_alone.promql_samples == 0
    assert stats_api.calls.get("PromQLQueryRange", 0) > 0


@pytest.mark.unit
def test_a_range_answer_becomes_each_nodes_minutes_stamped_by_their_start():
    answer = [({NODE_LABEL: "a"}, [(1200.0, 5.0), (1260.0, 6.0)]), ({NODE_LABEL: "stranger"}, [(1200.0, 1.0)]), ({NODE_LABEL: "b"}, [])]
    results = as_results(answer, {"a": ["q1", "q3"], "b": ["q2"]})
    got = [(r["Id"], [t.timestamp() for t in r["Timestamps"]], r["Values"]) for r in results]
    assert got == [("q1", [1140.0, 1200.0], [5.0, 6.0]), ("q3", [1140.0, 1200.0], [5.0, 6.0])]
    expression = with_nodes(POLLED[("Evictions", "Sum")], ["b", "a"])
    assert '"@resource.aws.elasticache.node.id"=~"a|b"' in expression
    assert "{nodes}" not in expression
    assert samples_per_minute("Evictions", "Sum") == 5
    assert samples_per_minute("SwapUsage", "Maximum") == 1
    assert samples_per_minute("DatabaseMemoryUsagePercentage", "Maximum") == 2


@pytest.mark.parametrize("answer", [422, 429, "truncated"])
def test_a_query_past_the_limits_or_cut_leaves_its_minutes_to_getmetricdata_and_says_so_once(store, aws_credentials, caplog, answer):
    front = store.front
    wall, monotonic = _clocks(store)
    with mock_aws():
        through_api, alone = _fleet(store, front.url, wall, monotonic)
        caplog.set_level(logging.WARNING, logger="exporter.aws.otel_poll")

        def refuse(poll: int) -> None:
            front.answers[:] = [answer] * 3 if poll in (1, 2) else []

        served = _polls([through_api, alone], wall, monotonic, 4, refuse)
    front.answers.clear()
    for ours, theirs in zip(*served, strict=True):
        _same(ours, theirs)
    # the detection (the nodes found before kept) and the range queries of two polls refused: each cause said once an
    # episode, with the kind of the refusal, and the API answering again said once
    said = [record.getMessage() for record in caplog.records if record.name == "exporter.aws.otel_poll" and "series of" not in record.getMessage()]
    kind = "truncated" if answer == "truncated" else {422: "throttling", 429: "concurrency"}[answer]
    refused = [line for line in said if "answers again" not in line]
    assert 1 <= len(refused) <= 2, said
    assert all(f"({kind}:" in line for line in refused), said
    assert len({line.split("(")[0] for line in refused}) == len(refused), said


def test_a_region_without_the_api_is_polled_with_getmetricdata_and_said_once(store, aws_credentials, caplog):
    from servers import free_port

    wall, monotonic = _clocks(store)
    with mock_aws():
        caplog.set_level(logging.WARNING, logger="exporter.aws.otel_poll")
        through_api, alone = _fleet(store, f"http://127.0.0.1:{free_port()}", wall, monotonic)
        served = _polls([through_api, alone], wall, monotonic, 3)
    for ours, theirs in zip(*served, strict=True):
        _same(ours, theirs)
    said = [record.getMessage() for record in caplog.records if record.name == "exporter.aws.otel_poll"]
    assert len(said) == 1, said
    assert "cannot be asked (connection" in said[0]
    assert through_api.api_stats()[0].metrics_requested == alone.api_stats()[0].metrics_requested


def test_a_node_upgraded_from_redis_oss_to_valkey_mid_run_loses_no_minute_and_counts_none_twice(store, aws_credentials):
    """The Redis OSS node becomes a Valkey one (ElastiCache's in-place upgrade keeps its ids) after two polls: from the
    next discovery it is read through the PromQL API; its windows and rising counts are what GetMetricData alone gives."""
    front = store.front
    wall, monotonic = _clocks(store)
    with mock_aws():
        through_api, alone = _fleet(store, front.url, wall, monotonic)

        def upgrade(poll: int) -> None:
            if poll == 2:
                # moto has no engine upgrade (ModifyReplicationGroup's Engine): its record of the cluster is changed
                from moto.core import DEFAULT_ACCOUNT_ID
                from moto.elasticache.models import elasticache_backends

                cluster = elasticache_backends[DEFAULT_ACCOUNT_ID][REGION].cache_clusters[REDIS]
                cluster.engine, cluster.engine_version = "valkey", "8.1"
                through_api.discover_once()
                alone.discover_once()

        asked_before = len(front.queries)
        served = _polls([through_api, alone], wall, monotonic, 5, upgrade)
    for ours, theirs in zip(*served, strict=True):
        _same(ours, theirs)
    assert any(REDIS in query and "idelta(" in query for query in front.queries[asked_before:])


def test_cost_prices_each_source_and_a_running_poller_serves_the_same_bill(store, aws_credentials, tmp_path, capsys):
    """`cost` splits the polling between GetMetricData and the PromQL API; a poller of the same fleet, once its poll
    found which nodes the API serves, serves the same month's bill to the cent."""
    import yaml

    from exporter.cli.main import main

    front = store.front
    raw = {"aws": {"regions": [REGION], "events": False, "cloudwatch": {"promql_endpoint": front.url}}}
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(raw))
    with mock_aws():
        _create({**dict.fromkeys(VALKEY, "valkey"), REDIS: "redis"})
        _put(store)
        assert main(["cost", "--config.file", str(config), "--alarms", "none"]) == 0
        printed = capsys.readouterr().out
        monitor = AwsMonitor(build_config({**raw, "redis": {"addr": ""}}, environ={}).aws, log_failures=False)
        monitor.discover_once()
        before = monitor.budget_plan.usd_per_month
        monitor.poll_once()
    polling = re.search(r"^polling\s+([\d.]+)\s+([\d.]+)$", printed, re.MULTILINE)
    api = re.search(r"^PromQL API\s+([\d.]+)\s+([\d.]+)", printed, re.MULTILINE)
    assert polling is not None, printed
    assert api is not None, printed
    assert f"CloudWatch's PromQL API serves {len(VALKEY)} Valkey node(s)" in printed
    assert float(api.group(2)) > 0
    assert round(monitor.budget_plan.usd_per_month, 2) == float(polling.group(2))
    assert monitor.budget_plan.usd_per_month < before  # before its poll asked the API, every pair was GetMetricData's
    assert f"Polling alone: USD {float(polling.group(1)):.4f} a node" in printed


def test_costs_probe_at_any_second_finds_the_series_a_poll_finds(store, aws_credentials):
    """`cost` asks which series each node has at one moment, a poll over its minutes: at every 10 s of three minutes
    around the jittered node's skipped minute (its gauges stamped 20 to 40 s in, so a minute's window can hold none of
    them), the probe prices what a poll then finds."""
    front = store.front
    with mock_aws():
        _create({**dict.fromkeys(VALKEY, "valkey"), REDIS: "redis"})
        _put(store)
        wall, monotonic = _clocks(store)
        poller = _monitor("auto", front.url, wall, monotonic)
        poller.poll_once()
        polled = poller.budget_plan.usd_per_month
        bills = {}
        for at in range(int(store.first) + (GAP + 1) * 60, int(store.first) + (GAP + 4) * 60, 10):
            prober = _monitor("auto", front.url, _Clock(at), _Clock(1000.0))
            prober.detect_otel(probe=True)
            bills[at - int(store.first)] = prober.budget_plan.usd_per_month
    assert {second: bill for second, bill in bills.items() if bill != pytest.approx(polled)} == {}


def test_a_detection_refused_keeps_the_nodes_found_before_on_the_api(store, aws_credentials):
    """The detection of the second poll is refused (422): the nodes found at the first stay on the PromQL API, whose
    range queries of that poll answer; nothing differs from GetMetricData's minutes."""
    front = store.front
    wall, monotonic = _clocks(store)
    with mock_aws():
        through_api, alone = _fleet(store, front.url, wall, monotonic)
        asked: list[int] = []

        def refuse_detection(poll: int) -> None:
            asked.append(len(front.queries))
            front.answers[:] = [422] if poll == 1 else []

        served = _polls([through_api, alone], wall, monotonic, 3, refuse_detection)
    for ours, theirs in zip(*served, strict=True):
        _same(ours, theirs)
    second_poll = front.queries[asked[1] : asked[2]]
    assert any("idelta(" in query and VALKEY[0] in query for query in second_poll)
