"""CloudWatch polling cost: calls per cycle, cycle time and the monthly bill, against moto in process.

    python bench/cloudwatch_bench.py [--nodes 120] [--metrics 16] [--runs 3]

Seeds --nodes cache clusters and one datapoint per (node, metric) into moto, then runs
discovery and one GetMetricData poll per run, counting the calls; for comparison it
times one GetMetricStatistics request per series, the way exporters without batching poll.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from datetime import timedelta

import boto3
from moto import mock_aws

from exporter.aws.cloudwatch import DEFAULT_METRICS, MetricSpec, estimate_cost, window
from exporter.aws.monitor import AwsMonitor
from exporter.config import build_config

REGION = "eu-west-1"


def seed(nodes: int, metric_names: list[str]) -> list[str]:
    elasticache = boto3.client("elasticache", region_name=REGION)
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    _, end = window(time.time(), 60, 120, 5)
    ids = []
    for i in range(nodes):
        cluster_id = f"bench-{i:04d}-001"
        elasticache.create_cache_cluster(CacheClusterId=cluster_id, CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1)
        ids.append(cluster_id)
        data = [
            {
                "MetricName": name,
                "Timestamp": end - timedelta(minutes=1),
                "Value": float(i),
                "Dimensions": [{"Name": "CacheClusterId", "Value": cluster_id}, {"Name": "CacheNodeId", "Value": "0001"}],
            }
            for name in metric_names
        ]
        for start in range(0, len(data), 20):
            cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data[start : start + 20])
    return ids


def get_metric_statistics_per_series(ids: list[str], metric_names: list[str]) -> tuple[int, float]:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    start, end = window(time.time(), 60, 120, 5)
    started = time.perf_counter()
    requests = 0
    for cluster_id in ids:
        for name in metric_names:
            cloudwatch.get_metric_statistics(
                Namespace="AWS/ElastiCache",
                MetricName=name,
                Dimensions=[{"Name": "CacheClusterId", "Value": cluster_id}, {"Name": "CacheNodeId", "Value": "0001"}],
                StartTime=start,
                EndTime=end,
                Period=60,
                Statistics=["Average"],
            )
            requests += 1
    return requests, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=120)
    parser.add_argument("--metrics", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": REGION})
    os.environ.pop("AWS_ENDPOINT_URL", None)
    metric_names = [spec.name for spec in DEFAULT_METRICS][: args.metrics]
    specs = [{"name": name, "statistics": ["Average"]} for name in metric_names]
    with mock_aws():
        ids = seed(args.nodes, metric_names)
        config = build_config({"redis": {"addr": ""}, "aws": {"regions": [REGION], "cloudwatch": {"metrics": specs}}}, environ={})
        cycle_times, calls = [], []
        for _ in range(args.runs):
            monitor = AwsMonitor(config.aws)
            monitor.discover_once()
            started = time.perf_counter()
            monitor.poll_once()
            cycle_times.append(time.perf_counter() - started)
            api = next(iter(monitor.apis.values()))
            calls.append(api.stats.snapshot()[0].get("get_metric_data", 0))
            served = len(monitor.cache())
        gms_requests, gms_seconds = get_metric_statistics_per_series(ids, metric_names)
    queries = args.nodes * len(metric_names)
    print(f"{args.nodes} nodes x {len(metric_names)} metrics x 1 statistic = {queries} queries; {args.runs} runs, medians")
    print(f"GetMetricData calls per cycle:         {statistics.median(calls):.0f} (minimum ceil({queries}/500) = {math.ceil(queries / 500)})")
    print(f"series served after a cycle:           {served}")
    print(f"cycle time (discovery excluded):       {statistics.median(cycle_times) * 1000:.0f} ms")
    print(f"GetMetricStatistics, one per series:   {gms_requests} requests, {gms_seconds * 1000:.0f} ms")
    specs_objects = [MetricSpec(name, ("Average",)) for name in metric_names]
    for interval in (60, 300):
        cost = estimate_cost(args.nodes, specs_objects, interval)
        print(
            f"at {interval:>3} s: {cost.calls_per_cycle} calls/cycle, {cost.metrics_per_month:,.0f} metrics/month, "
            f"USD {cost.usd_per_month:,.2f}/month (GetMetricStatistics: {gms_requests * cost.cycles_per_month:,.0f} requests, "
            f"USD {gms_requests * cost.cycles_per_month / 1000 * 0.01:,.2f})"
        )


if __name__ == "__main__":
    main()
