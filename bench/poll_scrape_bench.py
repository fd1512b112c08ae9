"""/metrics latency while CloudWatch polls of a large fleet run: does a poll slow a scrape?

    python bench/poll_scrape_bench.py [--nodes 1000] [--targets 2] [--rounds 4] [--scrapes 15] [--seconds 900] [--profile]

An exporter app in process (tests/helpers.py make_app) scrapes --targets real redis-servers (one pipeline of traffic
reaches each before every scrape, bench/traffic.py) and discovers --nodes cache clusters of mixed node types from moto.
GetMetricData does not go to moto (it scans every stored datapoint per query and would take minutes a poll): the
monitor's API answers each query at once with every minute of the window asked, values varying by query and minute,
encoded as AWS's CBOR reply and decoded by the parser botocore's endpoint makes for the exporter's client, so the
poll thread does what it does against AWS except the network. Every poll asks every tier (the heaviest poll there is).

Rounds alternate (a) /metrics with no poll running and (b) /metrics while polls run back to back in a background
thread; the order within a round swaps each round. Every loop is bounded in count and the whole run in --seconds.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent / "tests")]

import boto3  # noqa: E402
from helpers import call, make_app  # noqa: E402
from moto import mock_aws  # noqa: E402
from servers import start_redis  # noqa: E402
from traffic import Traffic  # noqa: E402

from exporter.aws import monitor as monitor_module  # noqa: E402
from exporter.aws.api import AwsApi  # noqa: E402

REGION = "eu-west-1"
POLLER = "bench-polls"  # the background polls' thread
# the mix of tests/test_aws_tiers.py, scaled: burstable, general purpose, memory optimized and data tiering nodes
MIX = {"cache.r6g.large": 0.4, "cache.t3.medium": 0.3, "cache.m6g.large": 0.2, "cache.r6gd.xlarge": 0.1}


# --- CloudWatch's reply, as it comes over the wire -----------------------------------------------------------------


def _cbor_head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for extra, size in ((24, "B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(size)):
            return bytes([major << 5 | extra]) + struct.pack(size, n)
    raise ValueError(n)


def cbor(value: Any) -> bytes:
    """The few CBOR types a GetMetricData reply holds (RFC 8949): maps, arrays, text, doubles, epoch timestamps."""
    if isinstance(value, dict):
        return _cbor_head(5, len(value)) + b"".join(cbor(k) + cbor(v) for k, v in value.items())
    if isinstance(value, list):
        return _cbor_head(4, len(value)) + b"".join(cbor(item) for item in value)
    if isinstance(value, str):
        encoded = value.encode()
        return _cbor_head(3, len(encoded)) + encoded
    if isinstance(value, _StandIn):
        return _stand_in(value)
    if isinstance(value, float):
        return b"\xfb" + struct.pack(">d", value)
    raise TypeError(type(value))


class InstantCloudWatch(AwsApi):
    """Discovery goes to moto as any call; GetMetricData is answered at once: every minute of the window asked, newest
    first as ScanBy=TimestampDescending asks, decoded from CBOR by the parser the client's endpoint makes for AWS's reply. Encoding is
    AWS's work, not the exporter's: each batch's reply is encoded once per window length with stand-in timestamps, and
    each call puts the window's minutes in their place (bytes.replace, in C, while the GIL is free for the scrape)."""

    def __init__(self) -> None:
        super().__init__()
        self._templates: dict[tuple[str, str, int, int], bytes] = {}

    def call(self, client: Any, api: str, *, deadline: float | None = None, **kwargs: Any) -> dict[str, Any]:
        if api != "get_metric_data":
            return super().call(client, api, deadline=deadline, **kwargs)
        self.stats.count_call(api)
        queries, start, end = kwargs["MetricDataQueries"], kwargs["StartTime"], kwargs["EndTime"]
        minutes = list(range(int(end.timestamp()) - 60, int(start.timestamp()) - 1, -60))
        key = (queries[0]["Id"], queries[-1]["Id"], len(queries), len(minutes))
        body = self._templates.get(key)
        if body is None:
            body = self._templates[key] = cbor(_reply(queries, len(minutes)))
        for index, minute in enumerate(minutes):
            body = body.replace(_stand_in(index), _timestamp(minute))
        shape = client.meta.service_model.operation_model("GetMetricData").output_shape
        # the parser botocore's endpoint would make for this reply, with the defaults the exporter's session gives it
        parser = client._endpoint._response_parser_factory.create_parser(client.meta.service_model.protocol)
        return parser.parse({"body": body, "headers": {"smithy-protocol": "rpc-v2-cbor"}, "status_code": 200}, shape)


def _stand_in(index: int) -> bytes:
    return _timestamp(-1.0 - index)  # no real minute is negative


def _timestamp(seconds: float) -> bytes:
    return b"\xc1\xfb" + struct.pack(">d", float(seconds))


def _reply(queries: list[dict[str, Any]], minutes: int) -> dict[str, Any]:
    results = []
    for query in queries:
        seed = int(query["Id"][1:])
        results.append(
            {
                "Id": query["Id"],
                "Label": query["MetricStat"]["Metric"]["MetricName"],
                "Timestamps": [_StandIn(index) for index in range(minutes)],
                "Values": [float((seed * 7919 + index * 104729) % 1000) / 10 for index in range(minutes)],
                "StatusCode": "Complete",
            }
        )
    return {"MetricDataResults": results, "Messages": []}


class _StandIn(int):
    """The index-th minute of a window, newest first, encoded as a stand-in timestamp."""


class BenchMonitor(monitor_module.AwsMonitor):
    """The exporter's monitor on the instant API, on a clock that moves 5 minutes (the paging tier's interval) a poll,
    so each poll brings new minutes as in production; its own loops stay off, the bench drives discovery and polls."""

    def __init__(self, config: Any, **kwargs: Any) -> None:
        self.now = math.floor(time.time() / 60) * 60 - 3 * 3600.0  # in the past for the polls a run makes
        kwargs["apis"] = {account: InstantCloudWatch() for account in config.accounts}
        super().__init__(config, clock=lambda: self.now, **kwargs)
        self._lock = TimedLock()  # type: ignore[assignment]

    rests = True  # --no-rest: polls that do not rest between batches

    def poll_once(self, tiers: tuple[str, ...] | None = None, *, rest: bool = True) -> None:
        self.now += 300
        super().poll_once(tiers, rest=rest and self.rests)  # as the background poller asks, unless --no-rest

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


class TimedLock:
    """The monitor's lock, recording how long each thread waited for it and held it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._acquired = 0.0
        self.waits: dict[str, list[float]] = {}
        self.holds: dict[str, list[float]] = {}

    def __enter__(self) -> None:
        began = time.perf_counter()
        self._lock.acquire()
        self._acquired = time.perf_counter()
        self.waits.setdefault(threading.current_thread().name, []).append(self._acquired - began)

    def __exit__(self, *_: object) -> None:
        self.holds.setdefault(threading.current_thread().name, []).append(time.perf_counter() - self._acquired)
        self._lock.release()


# --- the run --------------------------------------------------------------------------------------------------------


def seed(nodes: int) -> None:
    elasticache = boto3.client("elasticache", region_name=REGION)
    made = 0
    for node_type, share in MIX.items():
        count = nodes - made if node_type == list(MIX)[-1] else round(nodes * share)
        for index in range(count):
            cluster_id = f"{node_type.split('.')[1]}-{index:04d}"
            elasticache.create_cache_cluster(CacheClusterId=cluster_id, CacheNodeType=node_type, Engine="redis", NumCacheNodes=1)
        made += count


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Figures:
    idle: list[float] = field(default_factory=list)  # /metrics seconds, no poll running
    polling: list[float] = field(default_factory=list)  # /metrics seconds, polls running
    lock_waits: list[float] = field(default_factory=list)  # a scrape's seconds waiting for the monitor's lock, polls running
    poll_seconds: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)


def measure(monitor: Any, scrape: Callable[[], tuple[float, int, float]], rounds: int, scrapes: int, deadline: float) -> Figures:
    """Rounds of (a) scrapes alone and (b) scrapes while polls run back to back, the order swapping each round."""
    figures = Figures()
    for round_number in range(rounds):
        for kind in ("idle", "polling") if round_number % 2 == 0 else ("polling", "idle"):
            stop = threading.Event()
            poller = None
            if kind == "polling":

                def polls(stop: threading.Event = stop) -> None:
                    for _ in range(100):  # bounded; stopped by the event long before
                        if stop.is_set() or time.monotonic() > deadline:
                            return
                        monitor.poll_once()
                        figures.poll_seconds.append(monitor.last_poll_duration)

                poller = threading.Thread(target=polls, name=POLLER, daemon=True)
                poller.start()
                time.sleep(0.2)  # the poll under way before the first scrape
            for _ in range(scrapes):
                if time.monotonic() > deadline:
                    break
                took, size, waited = scrape()
                (figures.idle if kind == "idle" else figures.polling).append(took)
                if kind == "polling":
                    figures.lock_waits.append(waited)
                figures.sizes.append(size)
            stop.set()
            if poller is not None:
                poller.join(timeout=max(1.0, deadline - time.monotonic() + 120))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--targets", type=int, default=2, help="redis-servers the exporter scrapes")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--scrapes", type=int, default=15, help="scrapes of each kind per round")
    parser.add_argument("--seconds", type=float, default=900.0, help="the whole run's bound")
    parser.add_argument("--profile", action="store_true", help="profile one poll and one scrape instead, alone")
    parser.add_argument("--no-rest", action="store_true", help="polls that do not rest between batches (POLL_CPU_SHARE)")
    args = parser.parse_args()
    BenchMonitor.rests = not args.no_rest
    deadline = time.monotonic() + args.seconds
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": REGION})
    os.environ.pop("AWS_ENDPOINT_URL", None)
    monitor_module.AwsMonitor = BenchMonitor  # type: ignore[misc]  # what ExporterApp builds
    servers = [start_redis() for _ in range(args.targets)]
    traffic = [Traffic(server.port, seed=i) for i, server in enumerate(servers)]
    app = None
    try:
        with mock_aws():
            began = time.perf_counter()
            seed(args.nodes)
            targets = [{"name": f"node-{i}", "addr": server.addr} for i, server in enumerate(servers)]
            app = make_app({"targets": targets, "aws": {"regions": [REGION], "events": False}})
            monitor = app.aws_monitor
            lock: TimedLock = monitor._lock
            monitor.discover_once()
            assert len(monitor.nodes()) == args.nodes, len(monitor.nodes())
            print(f"{args.nodes} nodes seeded in moto and discovered in {time.perf_counter() - began:.1f} s, {args.targets} redis-server targets")
            for _ in range(2):  # the first poll fills the cache; the second makes the replies of a poll's window
                monitor.poll_once()
            api = next(iter(monitor.apis.values()))
            print(f"a poll of every tier: {monitor.last_queries} queries in {api.stats.snapshot()[0]['get_metric_data'] // 2} GetMetricData calls")

            def scrape() -> tuple[float, int, float]:
                for client in traffic:
                    client.send()
                waited = sum(sum(waits) for name, waits in lock.waits.items() if name != POLLER)
                began = time.perf_counter()
                response = call(app, "/metrics")
                took = time.perf_counter() - began
                assert response.code == 200, response.code
                return took, len(response.body), sum(sum(waits) for name, waits in lock.waits.items() if name != POLLER) - waited

            for _ in range(3):  # warm: the first scrapes build what later ones reuse
                scrape()
            if args.profile:
                profile(monitor, scrape)
                return
            figures = measure(monitor, scrape, args.rounds, args.scrapes, deadline)
            served = sum(1 for line in call(app, "/metrics").text.splitlines() if line and not line.startswith("#"))
    finally:
        if app is not None:
            app.close()
        for client in traffic:
            client.close()
        for server in servers:
            server.stop()
    report(figures, served, lock.holds.get(POLLER, [0.0]))


def report(figures: Figures, served: int, holds: list[float]) -> None:
    idle, polling, polls = figures.idle, figures.polling, figures.poll_seconds
    p50_idle, p99_idle = statistics.median(idle), percentile(idle, 0.99)
    p50_poll, p99_poll = statistics.median(polling), percentile(polling, 0.99)
    print(f"polls run during (b): {len(polls)}, median {statistics.median(polls):.2f} s, max {max(polls):.2f} s")
    print(f"the poll thread's holds of the monitor's lock: longest {max(holds) * 1000:.0f} ms, {sum(holds) / max(1, len(polls)):.2f} s a poll")
    waits = figures.lock_waits
    print(f"a scrape's wait for that lock during polls: p50 {statistics.median(waits) * 1000:.0f} ms, max {max(waits) * 1000:.0f} ms")
    print(f"/metrics: {statistics.median(figures.sizes) / 1e6:.1f} MB, {served} samples; {len(idle)} scrapes idle, {len(polling)} during polls")
    print(f"(a) no poll:     p50 {p50_idle * 1000:7.1f} ms  p99 {p99_idle * 1000:7.1f} ms  max {max(idle) * 1000:7.1f} ms")
    print(f"(b) during poll: p50 {p50_poll * 1000:7.1f} ms  p99 {p99_poll * 1000:7.1f} ms  max {max(polling) * 1000:7.1f} ms")
    print(f"ratio (b)/(a):   p50 {p50_poll / p50_idle:.2f}x  p99 {p99_poll / p99_idle:.2f}x")


def profile(monitor: Any, scrape: Any) -> None:
    """Where one poll's and one scrape's time goes, each alone (cProfile, by own time)."""
    import cProfile
    import pstats

    for what, work in (("poll", monitor.poll_once), ("scrape", scrape)):
        profiler = cProfile.Profile()
        profiler.runcall(work)
        print(f"--- one {what}, alone")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
