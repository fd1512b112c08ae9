"""A multi-account, multi-region fleet in moto: the same CacheClusterId in two accounts and two regions, a Valkey
group, accounts reached by assuming a role each. Nothing lost, nothing duplicated, every series says where it is."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import pytest
from helpers import call, make_app, parse_samples, sample
from moto import mock_aws
from moto_serverless import serverless_in_moto
from servers import wait_until

from exporter.aws.cloudwatch import DEFAULT_METRICS, SERVERLESS_METRICS, polled_metrics, window
from exporter.aws.discovery import build_serverless, instance_names
from exporter.aws.monitor import AwsMonitor
from exporter.common.exposition import encode_text
from exporter.config import build_config
from exporter.service.collectors.aws import AwsCollector

DEV, PROD = "111111111111", "222222222222"
EU, US = "eu-west-1", "us-east-1"
# (account, region, replication group, member cluster ids, node type, engine)
FLEET = [
    (DEV, EU, "sessions", ["sessions-001", "sessions-002"], "cache.r6g.large", "redis"),
    (DEV, US, "sessions", ["sessions-001"], "cache.m6g.large", "redis"),
    (DEV, US, "flags", ["flags-001"], "cache.r7g.large", "valkey"),
    (PROD, EU, "sessions", ["sessions-001", "sessions-002"], "cache.r6g.xlarge", "redis"),
]

# (account, region, name, engine, ECPU/s maximum, storage maximum in GB, ECPU/s used, GB stored) of serverless caches;
# "carts" is in two accounts, and the third cache of a region is on moto's second page
SERVERLESS = [
    (DEV, US, "carts", "valkey", 5000, 10, 1000, 2.5),
    (DEV, US, "search", "redis", None, None, 50, 1.0),
    (DEV, US, "ranking", "redis", 20000, 100, 19000, 10.0),
    (PROD, EU, "carts", "valkey", 10000, 20, 4000, 15.0),
]


def role(account: str) -> str:
    return f"arn:aws:iam::{account}:role/elasticache-exporter"


def session(account: str) -> boto3.session.Session:
    credentials = boto3.client("sts", region_name=EU).assume_role(RoleArn=role(account), RoleSessionName="seed")["Credentials"]
    return boto3.session.Session(
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )


def cpu_value(account: str, region: str, cluster_id: str) -> float:
    """A value unique to each node, so a node's series read from another account's node shows."""
    return float(int(account[0]) * 10 + (1 if region == EU else 2)) + int(cluster_id[-1]) / 10


def seed_fleet() -> None:
    _, end = window(time.time(), 60, 120, 5)
    for account, region, group, members, node_type, engine in FLEET:
        aws = session(account)
        elasticache = aws.client("elasticache", region_name=region)
        elasticache.create_replication_group(
            ReplicationGroupId=group, ReplicationGroupDescription="fleet", Engine=engine, CacheNodeType=node_type, NumCacheClusters=1
        )
        cloudwatch = aws.client("cloudwatch", region_name=region)
        for cluster_id in members:
            elasticache.create_cache_cluster(
                CacheClusterId=cluster_id, ReplicationGroupId=group, CacheNodeType=node_type, Engine=engine, NumCacheNodes=1
            )
            dimensions = [{"Name": "CacheClusterId", "Value": cluster_id}, {"Name": "CacheNodeId", "Value": "0001"}]
            data = []
            for minutes_ago in range(1, 6):
                stamp = end - datetime.timedelta(minutes=minutes_ago)
                data.append(
                    {"MetricName": "CPUUtilization", "Timestamp": stamp, "Value": cpu_value(account, region, cluster_id), "Dimensions": dimensions}
                )
                data.append({"MetricName": "NetworkBytesOut", "Timestamp": stamp, "Value": 60 * 1_000_000.0, "Dimensions": dimensions})
            cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data)
    for account, region, name, engine, ecpu_max, storage_max, ecpu_used, stored_gb in SERVERLESS:
        aws = session(account)
        limits = {"DataStorage": {"Maximum": storage_max, "Unit": "GB"}, "ECPUPerSecond": {"Maximum": ecpu_max}} if ecpu_max else {}
        aws.client("elasticache", region_name=region).create_serverless_cache(ServerlessCacheName=name, Engine=engine, CacheUsageLimits=limits)
        dimensions = [{"Name": "clusterId", "Value": name}]
        data = []
        for minutes_ago in range(1, 6):
            stamp = end - datetime.timedelta(minutes=minutes_ago)
            data.append({"MetricName": "ElastiCacheProcessingUnits", "Timestamp": stamp, "Value": ecpu_used * 60.0, "Dimensions": dimensions})
            data.append({"MetricName": "BytesUsedForCache", "Timestamp": stamp, "Value": stored_gb * 1e9, "Dimensions": dimensions})
            data.append(
                {
                    "MetricName": "ThrottledCmds",
                    "Timestamp": stamp,
                    "Value": 3.0 if ecpu_used > 0.9 * (ecpu_max or 1e9) else 0.0,
                    "Dimensions": dimensions,
                }
            )
        aws.client("cloudwatch", region_name=region).put_metric_data(Namespace="AWS/ElastiCache", MetricData=data)
    # a cache being deleted is no longer served
    session(DEV).client("elasticache", region_name=EU).create_serverless_cache(ServerlessCacheName="old", Engine="redis")
    session(DEV).client("elasticache", region_name=EU).delete_serverless_cache(ServerlessCacheName="old")


@contextmanager
def moto_fleet() -> Iterator[None]:
    with mock_aws(), serverless_in_moto():
        seed_fleet()
        yield


def fleet_config(**extra) -> dict:
    accounts = [{"role_arn": role(DEV), "regions": [EU, US]}, {"role_arn": role(PROD), "regions": [EU]}]
    return {"redis": {"addr": ""}, "aws": {"accounts": accounts, **extra}}


def polled_fleet() -> tuple[AwsMonitor, dict]:
    """The fleet discovered and polled once, and what the AWS collector serves of it."""
    with moto_fleet():
        monitor = AwsMonitor(build_config(fleet_config(), environ={}).aws)
        assert monitor.discover_once() == []
        monitor.poll_once()
        return monitor, parse_samples(encode_text(AwsCollector(monitor).collect()).decode())


def test_the_same_cluster_id_in_two_accounts_and_two_regions_loses_nothing(aws_credentials):
    _, samples = polled_fleet()
    expected_nodes = {(account, region, cluster_id) for account, region, _, members, _, _ in FLEET for cluster_id in members}
    info = {
        (dict(labels)["account_id"], dict(labels)["region"], dict(labels)["dimension_CacheClusterId"]): dict(labels)
        for name, labels in samples
        if name == "elasticache_node_info"
    }
    assert set(info) == expected_nodes
    assert len([n for n, _ in samples if n == "elasticache_node_info"]) == len(expected_nodes)
    # instance: the CacheClusterId where unique in the fleet, qualified where another account or region has it too, but
    # for the cluster created first (seeded first: dev in eu-west-1)
    assert info[(DEV, EU, "sessions-001")]["instance"] == "sessions-001"
    assert info[(DEV, US, "sessions-001")]["instance"] == f"{DEV}/{US}/sessions-001"
    assert info[(PROD, EU, "sessions-001")]["instance"] == f"{PROD}/{EU}/sessions-001"
    assert info[(PROD, EU, "sessions-002")]["instance"] == f"{PROD}/{EU}/sessions-002"
    assert info[(DEV, US, "flags-001")]["instance"] == "flags-001"
    assert len({labels["instance"] for labels in info.values()}) == len(expected_nodes)
    assert info[(DEV, US, "flags-001")]["engine"] == "valkey"
    assert info[(PROD, EU, "sessions-001")]["node_type"] == "cache.r6g.xlarge"
    for account, region, cluster_id in expected_nodes:
        labels = {"account_id": account, "region": region, "dimension_CacheClusterId": cluster_id, "dimension_CacheNodeId": "0001"}
        assert sample(samples, "aws_elasticache_cpuutilization_average", **labels) == cpu_value(account, region, cluster_id)
    # one GetMetricData call per account-region with nodes (each well under 500 queries)
    queries_per_node = sum(len(spec.statistics) for spec in polled_metrics(DEFAULT_METRICS))
    assert sample(samples, "elasticache_exporter_aws_api_calls_total", api="get_metric_data") == 3
    queries_per_cache = sum(len(spec.statistics) for spec in SERVERLESS_METRICS)
    assert sample(samples, "elasticache_exporter_cloudwatch_metrics_requested_total") == (
        len(expected_nodes) * queries_per_node + len(SERVERLESS) * queries_per_cache
    )
    assert sample(samples, "elasticache_exporter_aws_api_calls_total", api="assume_role") == 2  # once per account
    assert sample(samples, "elasticache_exporter_discovered_nodes", account_id=DEV, region=US) == 2


def test_serverless_caches_are_polled_by_cluster_id_and_set_against_their_own_limits(aws_credentials):
    monitor, samples = polled_fleet()
    # every live cache, read across moto's pages; "carts" once per account; the cache being deleted left out
    info = {
        (dict(labels)["account_id"], dict(labels)["region"], dict(labels)["cache"]): dict(labels)
        for name, labels in samples
        if name == "elasticache_serverless_cache_info"
    }
    assert set(info) == {(account, region, name) for account, region, name, *_ in SERVERLESS}
    assert info[(PROD, EU, "carts")]["engine"] == "valkey"
    for account, region, name, _, ecpu_max, storage_max, ecpu_used, stored_gb in SERVERLESS:
        where = {"account_id": account, "region": region, "cache": name}
        dimensions = {"account_id": account, "region": region, "dimension_clusterId": name}
        # YACE's names and labels: the serverless dimension is clusterId
        assert sample(samples, "aws_elasticache_elasti_cache_processing_units_sum", **dimensions) == ecpu_used * 60
        assert sample(samples, "aws_elasticache_bytes_used_for_cache_maximum", **dimensions) == stored_gb * 1e9
        if ecpu_max is None:
            assert not [
                labels
                for name_, labels in samples
                if name_.startswith("elasticache_serverless_") and dict(labels).get("cache") == name and name_ != "elasticache_serverless_cache_info"
            ]
            continue
        assert sample(samples, "elasticache_serverless_ecpu_per_second_limit", **where) == ecpu_max
        assert sample(samples, "elasticache_serverless_data_storage_limit_bytes", **where) == storage_max * 1e9
        assert sample(samples, "elasticache_serverless_ecpu_utilization_ratio", **where) == pytest.approx(ecpu_used / ecpu_max)
        assert sample(samples, "elasticache_serverless_data_storage_utilization_ratio", **where) == pytest.approx(stored_gb / storage_max)
    # a serverless cache's series never carry the node dimensions, and no node's series carries clusterId
    for name, labels in samples:
        keys = set(dict(labels))
        assert not ({"dimension_clusterId", "dimension_CacheClusterId"} <= keys), (name, labels)
    # once its datapoints are older than the exporter trusts, a ratio is gone; the limits stay (they come from discovery)
    monitor.fresh_seconds = lambda tier="paging": 60.0  # the datapoints are 3 to 7 minutes old
    stale = parse_samples(encode_text(AwsCollector(monitor).collect()).decode())
    assert not [name for name, _ in stale if name.endswith("_utilization_ratio")]
    assert sample(stale, "elasticache_serverless_ecpu_per_second_limit", account_id=PROD, region=EU, cache="carts") == 10000


def test_serverless_metrics_can_be_chosen_or_switched_off(aws_credentials):
    with moto_fleet():
        chosen = AwsMonitor(build_config(fleet_config(cloudwatch={"serverless_metrics": ["ThrottledCmds"]}), environ={}).aws)
        chosen.discover_once()
        chosen.poll_once()
        off = AwsMonitor(build_config(fleet_config(cloudwatch={"serverless_metrics": []}), environ={}).aws)
        off.discover_once()
        off.poll_once()
    serverless = {key[4:] for key in chosen.cache() if key[3] == ""}
    assert serverless == {("ThrottledCmds", "Average")}
    queries_per_node = sum(len(spec.statistics) for spec in polled_metrics(DEFAULT_METRICS))
    assert chosen.last_queries == 6 * queries_per_node + len(SERVERLESS)
    assert off.last_queries == 6 * queries_per_node
    assert not [key for key in off.cache() if key[3] == ""]


def test_discovery_is_served_by_default_and_every_discovered_node_gets_utilization(aws_credentials):
    with moto_fleet():
        app = make_app(fleet_config(discovery_interval="1h", cloudwatch={"interval": "1h"}))
        try:
            monitor = app.aws_monitor
            wait_until(lambda: monitor.polls >= 1, timeout=30, what="discovery and a CloudWatch poll")
            groups = json.loads(call(app, "/discovery").text)
            samples = call(app, "/metrics").samples()
            named = monitor.named_nodes()
        finally:
            app.close()
    assert len(named) == 6
    # every node with an endpoint (moto gives one to a group's first member only) and every live serverless cache, by
    # default; "carts" is in two accounts, so both are qualified
    serverless_names = {f"{DEV}/{US}/carts", f"{PROD}/{EU}/carts", "search", "ranking"}
    node_names = [name for name, node in named if node.address]
    assert sorted(group["labels"]["__meta_elasticache_node"] for group in groups) == sorted([*node_names, *serverless_names])
    assert len(groups) == 4 + len(SERVERLESS)
    by_node = {group["labels"]["__meta_elasticache_node"]: group for group in groups}
    carts = by_node[f"{PROD}/{EU}/carts"]
    assert carts["targets"][0].startswith("rediss://carts-")
    assert carts["labels"]["__meta_elasticache_account_id"] == PROD
    assert carts["labels"]["__meta_elasticache_node_type"] == "serverless"
    assert carts["labels"]["__meta_elasticache_engine"] == "valkey"
    dev_eu = by_node["sessions-001"]["labels"]
    assert dev_eu["__meta_elasticache_account_id"] == DEV
    assert dev_eu["__meta_elasticache_region"] == EU
    assert dev_eu["__meta_elasticache_cluster"] == "sessions-001"
    assert dev_eu["__meta_elasticache_replication_group"] == "sessions"
    assert dev_eu["__meta_elasticache_node_type"] == "cache.r6g.large"
    assert by_node["flags-001"]["labels"]["__meta_elasticache_engine"] == "valkey"
    for group in groups:
        assert len(group["targets"]) == 1
        assert group["targets"][0].startswith(("redis://", "rediss://"))
    # the baseline series of every discovered node, from CloudWatch alone: 1 MB/s out against its node type's baseline
    ratios = {
        dict(labels)["instance"]: value
        for (name, labels), value in samples.items()
        if name == "elasticache_network_utilization_ratio" and dict(labels)["source"] == "cloudwatch"
    }
    assert set(ratios) == {name for name, _ in named}
    baselines = {
        dict(labels)["node_type"]: value
        for (name, labels), value in samples.items()
        if name == "elasticache_baseline_network_bytes_per_second" and dict(labels)["level"] == "100"
    }
    node_type = dev_eu["__meta_elasticache_node_type"]
    assert ratios["sessions-001"] == pytest.approx(1_000_000 / baselines[node_type])
    prod_type = by_node[f"{PROD}/{EU}/sessions-001"]["labels"]["__meta_elasticache_node_type"]
    assert ratios[f"{PROD}/{EU}/sessions-001"] == pytest.approx(1_000_000 / baselines[prod_type])
    assert baselines[node_type] != baselines[prod_type]


@pytest.mark.unit
def test_instance_names_are_unique_and_stable_for_unique_ids():
    from exporter.aws.discovery import Node
    from exporter.common.records import replace

    def node(account, region, cluster_id):
        return Node(
            region=region, cluster_id=cluster_id, node_id="0001", node_type="cache.t3.micro", engine="redis", engine_version="7.1", account_id=account
        )

    nodes = [node(DEV, EU, "a"), node(PROD, EU, "a"), node(DEV, EU, "b"), node(DEV, US, "c")]
    names = instance_names(nodes)
    assert names == {
        (DEV, EU, "a", "0001"): f"{DEV}/{EU}/a",
        (PROD, EU, "a", "0001"): f"{PROD}/{EU}/a",
        (DEV, EU, "b", "0001"): "b",
        (DEV, US, "c", "0001"): "c",
    }
    # a cluster of the same id created later in another account: the one created first keeps its name, the newcomer is
    # qualified, whichever exporter (a shard, a restarted one) names them
    older = [replace(n, created=1000.0) for n in nodes]
    later = instance_names([*older, replace(node(PROD, US, "b"), created=2000.0)])
    assert later[(DEV, EU, "b", "0001")] == "b"
    assert later[(PROD, US, "b", "0001")] == f"{PROD}/{US}/b"
    assert instance_names(reversed([*older, replace(node(PROD, US, "b"), created=2000.0)])) == later
    assert instance_names([replace(node(PROD, US, "b"), created=2000.0)]) == {(PROD, US, "b", "0001"): "b"}  # alone again
    # creation times that do not tell one oldest (equal, or none given): every node sharing the id is qualified
    assert instance_names([*older, replace(node(PROD, US, "b"), created=1000.0)])[(DEV, EU, "b", "0001")] == f"{DEV}/{EU}/b"
    assert instance_names([node(DEV, EU, "b"), node(PROD, US, "b")])[(DEV, EU, "b", "0001")] == f"{DEV}/{EU}/b"
    # a newcomer whose creation time is not given yet (being created) does not rename the one that was there
    assert instance_names([*older, node(PROD, US, "b")])[(DEV, EU, "b", "0001")] == "b"


@pytest.mark.unit
def test_serverless_caches_are_read_with_their_limits():
    reply = [
        {
            "ServerlessCacheName": "carts",
            "Engine": "valkey",
            "FullEngineVersion": "8.0",
            "Status": "available",
            "ARN": f"arn:aws:elasticache:{EU}:{PROD}:serverlesscache:carts",
            "Endpoint": {"Address": "carts-abc.serverless.euw1.cache.amazonaws.com", "Port": 6379},
            "CacheUsageLimits": {"DataStorage": {"Maximum": 10, "Unit": "GB"}, "ECPUPerSecond": {"Maximum": 5000}},
        },
        {"ServerlessCacheName": "memo", "Engine": "memcached", "Status": "available"},
        {"ServerlessCacheName": "old", "Engine": "redis", "Status": "deleting"},
    ]
    (cache,) = build_serverless(EU, reply)
    assert (cache.name, cache.engine, cache.account_id) == ("carts", "valkey", PROD)
    assert cache.ecpu_per_second_max == 5000
    assert cache.data_storage_max_bytes == 10e9


def test_cost_is_given_per_account_and_region(aws_credentials, capsys, tmp_path):
    import yaml

    from exporter.cli.main import main

    config = tmp_path / "fleet.yml"
    config.write_text(yaml.safe_dump(fleet_config()))
    with moto_fleet():
        assert main(["cost", "--config.file", str(config)]) == 0
    out = capsys.readouterr().out
    per_node = sum(len(spec.statistics) for spec in polled_metrics(DEFAULT_METRICS))
    rows = {tuple(line.split()[:3]) for line in out.splitlines()}
    assert (DEV, EU, "2") in rows
    assert (DEV, US, "2") in rows
    assert (PROD, EU, "2") in rows
    per_cache = sum(len(spec.statistics) for spec in SERVERLESS_METRICS)
    dev_us = next(line.split() for line in out.splitlines() if line.startswith(f"{DEV} {US}".replace(" ", " " * (15 - len(DEV)))))
    assert dev_us[2:5] == ["2", "3", f"{2 * per_node + 3 * per_cache}"]
    # the fleet's calls are each place's: 3 places of under 500 queries make a call each, not ceil(all queries / 500)
    total = next(line.split() for line in out.splitlines() if line.startswith("total "))
    assert total[1] == f"{6 * per_node + 4 * per_cache}"
    assert [line.split()[5] for line in out.splitlines() if line.startswith((DEV, PROD))] == ["1", "1", "1"]
    assert "nodes discovered: 6, serverless caches: 4" in out
    assert [line.split()[4] for line in out.splitlines() if line.startswith((DEV, PROD)) and line.split()[3] == "0"] == [f"{2 * per_node}"]


def test_an_assumed_role_is_renewed_before_it_expires_and_outlives_a_failing_sts(aws_credentials, monkeypatch):
    """Credentials are renewed 5 minutes before they expire; while STS fails, the ones in hand serve until they expire."""
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    from exporter.aws.api import RENEW_BEFORE_EXPIRY, RENEW_RETRY_SECONDS, AwsApi, AwsCallError, Backoff

    now = [time.time()]
    api = AwsApi(role_arn=role(PROD), clock=lambda: now[0], backoff=Backoff(base=0.001, cap=0.001, attempts=2), sleep=lambda _: None)
    real = BaseClient._make_api_call
    sts_down = [False]
    keys: list[str] = []

    def calls(self, operation, params):
        if operation == "AssumeRole" and sts_down[0]:
            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "down"}, "ResponseMetadata": {"HTTPStatusCode": 503}}, operation)
        if operation == "DescribeCacheClusters":
            keys.append(self._request_signer._credentials.access_key)
        return real(self, operation, params)

    def assumed() -> int:
        return api.stats.snapshot()[0].get("assume_role", 0)

    def describe() -> list:
        return api.call(api.client("elasticache", EU), "describe_cache_clusters")["CacheClusters"]

    with moto_fleet():
        monkeypatch.setattr(BaseClient, "_make_api_call", calls)
        assert len(describe()) == 2
        first = api.client("elasticache", EU)
        expires = api._session_expires
        assert expires > now[0] + 3000  # moto's default: an hour
        now[0] = expires - RENEW_BEFORE_EXPIRY - 1
        describe()
        assert assumed() == 1
        assert api.client("elasticache", EU) is first
        now[0] = expires - RENEW_BEFORE_EXPIRY + 1
        assert len(describe()) == 2
        assert assumed() == 2  # renewed, with new keys, by a new client
        assert api.client("elasticache", EU) is not first
        assert keys[-1] != keys[0]
        # STS down near the new expiry: the credentials in hand keep working, and STS is not asked again at every call
        renewed = api._session_expires
        sts_down[0] = True
        now[0] = renewed - 100
        assert len(describe()) == 2
        failed = api.stats.snapshot()[1].get(("assume_role", "server"), 0)
        assert failed == 2  # both attempts of one renewal
        describe()
        assert api.stats.snapshot()[1].get(("assume_role", "server"), 0) == failed
        now[0] += RENEW_RETRY_SECONDS + 1
        describe()
        assert api.stats.snapshot()[1].get(("assume_role", "server"), 0) == 2 * failed
        # past expiry with STS still down: the call fails, named and classified, instead of using dead credentials
        now[0] = renewed + 1
        with pytest.raises(AwsCallError) as caught:
            describe()
        assert caught.value.api == "assume_role"
        assert caught.value.kind == "server"
        sts_down[0] = False
        assert len(describe()) == 2


def test_capacity_projects_each_node_of_a_shared_id_from_its_own_history(aws_credentials, capsys, tmp_path):
    """sessions-001 is in two regions of one account and in a second account: each report reads its own node's data."""
    import yaml

    from exporter.cli.main import main

    config = tmp_path / "fleet.yml"
    config.write_text(yaml.safe_dump(fleet_config()))
    with moto_fleet():
        # three times the traffic on the US node: two more 60 MB per minute on top of the seeded one (Sum adds them)
        _, end = window(time.time(), 60, 120, 5)
        dimensions = [{"Name": "CacheClusterId", "Value": "sessions-001"}, {"Name": "CacheNodeId", "Value": "0001"}]
        data = [
            {"MetricName": "NetworkBytesOut", "Timestamp": end - datetime.timedelta(minutes=minutes), "Value": 60e6, "Dimensions": dimensions}
            for minutes in range(1, 6)
            for _ in range(2)
        ]
        session(DEV).client("cloudwatch", region_name=US).put_metric_data(Namespace="AWS/ElastiCache", MetricData=data)
        assert main(["capacity", "--config.file", str(config), "--days", "1", "--period", "60s", "--format", "json"]) == 0
    reports = {report["node"]: report for report in json.loads(capsys.readouterr().out)}
    assert len(reports) == 6
    assert reports[f"{DEV}/{US}/sessions-001"]["network_out_p90_bytes_per_second"] == pytest.approx(3e6)
    assert reports[f"{DEV}/{US}/sessions-001"]["cluster_id"] == "sessions-001"
    for other in ("sessions-001", f"{PROD}/{EU}/sessions-001", "flags-001"):
        assert reports[other]["network_out_p90_bytes_per_second"] == pytest.approx(1e6), other


def test_an_account_whose_role_cannot_be_assumed_costs_only_its_own_data(aws_credentials, monkeypatch):
    """PROD's role is refused (a typo in its trust policy, say): DEV is still discovered and polled, in every cycle."""
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    real = BaseClient._make_api_call

    def refusing(self, operation, params):
        if operation == "AssumeRole" and params["RoleArn"] == role(PROD):
            raise ClientError(
                {"Error": {"Code": "AccessDenied", "Message": "not authorized"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, operation
            )
        return real(self, operation, params)

    with moto_fleet():
        monitor = AwsMonitor(build_config(fleet_config(), environ={}).aws, log_failures=False)
        monitor.discover_once()  # PROD discovered while its role still worked
        monkeypatch.setattr(BaseClient, "_make_api_call", refusing)
        for api in monitor.apis.values():
            api._session_expires = 0.0  # every role to be assumed again, as after an hour
        failures = monitor.discover_once()
        monitor.poll_once()
        samples = parse_samples(encode_text(AwsCollector(monitor).collect()).decode())
    assert [place for place, _ in failures] == [f"{EU} of account {PROD}"]
    assert {err.kind for _, err in failures} == {"access_denied"}
    polled = {(dict(labels)["account_id"], dict(labels)["region"]) for name, labels in samples if name == "aws_elasticache_cpuutilization_average"}
    assert polled == {(DEV, EU), (DEV, US)}
    assert sample(samples, "elasticache_exporter_aws_api_errors_total", api="assume_role", kind="access_denied") >= 1
    # PROD's nodes stay known from the last good discovery (their alarms and names do not flap), only their data is missing
    assert sample(samples, "elasticache_exporter_discovered_nodes", account_id=PROD, region=EU) == 2
