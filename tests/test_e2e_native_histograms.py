"""End to end with Prometheus 3: one job scrapes the exporter with ``scrape_native_histograms: true`` (protobuf, the
latency histograms native), another as Prometheus does by default (OpenMetrics, classic buckets). The p99 of SET agrees
between the two within one bucket, the native job stores at least ten times fewer latency series, and both jobs hold
the same other series."""

from __future__ import annotations

import math

from servers import start_exporter, start_prometheus, start_redis, wait_until
from test_e2e_scrape_examples import active_targets, query

LATENCY = "redis_commands_latencies_usec"


def test_native_and_classic_latency_histograms_in_prometheus_3(tmp_path):
    redis = start_redis()
    exporter = start_exporter("--redis.addr", redis.addr)
    rules = tmp_path / "rules.yml"
    rules.write_text("groups: []\n")
    target = {"static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]}
    prometheus = start_prometheus(
        tmp_path,
        rules,
        [{"job_name": "native", "scrape_native_histograms": True, **target}, {"job_name": "classic", **target}],
    )
    try:
        client = redis.client()
        for size in range(23):  # SET and GET of 1 B to 4 MiB: their latencies spread over a dozen buckets and more
            pipe = client.pipeline(transaction=False)
            for i in range(40):
                pipe.set(f"key:{size}:{i}", b"v" * 2**size)
                pipe.get(f"key:{size}:{i}")
            pipe.execute()
        wait_until(
            lambda: len(active_targets(prometheus.port)) == 2 and all(t["health"] == "up" for t in active_targets(prometheus.port)),
            timeout=60,
            what="Prometheus scraping both jobs",
        )
        native = f'histogram_quantile(0.99, {LATENCY}{{job="native",cmd="set"}})'
        classic = f'histogram_quantile(0.99, {LATENCY}_bucket{{job="classic",cmd="set"}})'
        wait_until(lambda: query(prometheus.port, native) and query(prometheus.port, classic), timeout=60, what="both p99s")
        native_p99 = float(query(prometheus.port, native)[0]["value"][1])
        classic_p99 = float(query(prometheus.port, classic)[0]["value"][1])
        # within one bucket: native bounds are powers of two, the classic ones LATENCY HISTOGRAM's (up to 3.5 % above)
        assert abs(math.log2(native_p99) - math.log2(classic_p99)) <= 1.05, (native_p99, classic_p99)

        def count(expr: str) -> float:
            result = query(prometheus.port, f"count({expr})")
            return float(result[0]["value"][1]) if result else 0.0

        # the commands of the workload (the exporter's own few calls fill a bucket or two each)
        native_series = count(f'{{__name__=~"{LATENCY}.*",job="native",cmd=~"set|get"}}')
        classic_series = count(f'{{__name__=~"{LATENCY}.*",job="classic",cmd=~"set|get"}}')
        assert native_series == 2  # one series a command: no _bucket, _sum or _count
        assert classic_series >= 10 * native_series, (classic_series, native_series)
        wait_until(  # every command's histogram native in one job, classic in the other (the set grows in the first scrapes)
            # SET, GET, the heartbeat's MGET and TYPE at least (the exporter's own monitoring reads have none)
            lambda: count(f'{LATENCY}{{job="native"}}') == count(f'{LATENCY}_count{{job="classic"}}') >= 4,
            timeout=30,
            what="the same commands' histograms in both jobs",
        )
        others = 'count by (__name__) ({{__name__=~"redis_.+",__name__!~"{latency}.*",job="{job}"}})'
        names = {
            job: {r["metric"]["__name__"] for r in query(prometheus.port, others.format(latency=LATENCY, job=job))} for job in ("native", "classic")
        }
        assert names["native"] == names["classic"]
    finally:
        prometheus.stop()
        exporter.stop()
        redis.stop()
