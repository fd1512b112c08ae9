"""The Prometheus scrape configs shipped in deploy/prometheus/, each run as it is written in a real Prometheus against
real exporter processes (discovery from a moto server whose nodes are real redis-servers, a primary and its replica):
every node's Redis series carry the instance of its elasticache_node_info, so the rules' joins on instance match."""

from __future__ import annotations

import contextlib
import json
import os
import re
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import yaml
from servers import ExporterProcess, RedisProcess, start_cluster, start_exporter, start_prometheus, start_redis, wait_until

from exporter.alerts.inhibitions import JOINED_LABELS
from exporter.alerts.prometheus import with_joins

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "deploy" / "prometheus"
ACCOUNT = "123456789012"  # moto's account for the default credentials
REGION = "eu-west-1"
NODES = ("orders-001", "orders-002")  # the discovered nodes' names: their cache cluster ids
AWS = {"regions": [REGION], "discovery_interval": "1s", "cloudwatch": {"enabled": False}}
SHARD = "elasticache-exporter-{}.elasticache-exporter:9769"

# each example: the exporters it scrapes, by the host:port the file names them with, and what each one's config adds
# to the common part (every exporter may reach the test's servers through scrape.allow, as the examples' replicas do)
SETUPS: dict[str, dict[str, dict]] = {
    "metrics-scrape.yml": {"exporter-host:9769": {"aws": {**AWS, "scrape_discovered": True}}},
    "discovery-scrape.yml": {"exporter-host:9769": {"aws": AWS}},
    "multi-target-scrape.yml": {"exporter-host:9769": {"aws": AWS}},
    "sharded-scrape.yml": {SHARD.format(0): {"aws": AWS}, SHARD.format(1): {}, SHARD.format(2): {}},
}

# the join the rules make to give a node's alert its node labels (a "node" join of an alert on Redis series)
NODE_JOIN = with_joins("redis_up", "redis", ("node",), ())


@pytest.mark.unit
def test_every_example_is_run_here():
    assert sorted(path.name for path in EXAMPLES.glob("*.yml")) == sorted(SETUPS)
    assert f"group_left ({', '.join(label for label in JOINED_LABELS['node'])})" in NODE_JOIN


FENCED_YAML = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def documented_jobs() -> list[tuple[str, dict]]:
    """Every scrape job a yaml block of the README or of docs/ shows, with the page it is on."""
    jobs = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in FENCED_YAML.findall(page.read_text()):
            document = yaml.safe_load(block)
            if isinstance(document, dict) and "scrape_configs" in document:
                jobs += [(page.name, job) for job in document["scrape_configs"]]
    return jobs


@pytest.mark.unit
def test_every_documented_scrape_job_is_one_of_the_examples():
    shipped = [job for path in EXAMPLES.glob("*.yml") for job in yaml.safe_load(path.read_text())["scrape_configs"]]
    jobs = documented_jobs()
    assert {page for page, _ in jobs} >= {"README.md", "aws.md", "operations.md"}
    for page, job in jobs:
        assert job in shipped, f"{page}: the scrape job {job['job_name']} is none of deploy/prometheus/*.yml's (which a test runs)"


def query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?query={urllib.parse.quote(expr)}"
    with urllib.request.urlopen(url, timeout=5) as reply:
        answer = json.loads(reply.read())
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def active_targets(port: int) -> list[dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets", timeout=5) as reply:
            return json.loads(reply.read())["data"]["activeTargets"]
    except OSError:
        return []


def discovered(exporter: ExporterProcess) -> list[str]:
    code, body = exporter.get("/discovery")
    assert code == 200, body
    return sorted(group["labels"]["__meta_elasticache_node"] for group in json.loads(body))


def localized(text: str, addresses: dict[str, str]) -> list[dict]:
    """The example's scrape configs with each exporter's host:port replaced by where the test runs it; every one it
    names must be among them."""
    for named, local in addresses.items():
        assert named in text, f"the example no longer names {named}"
        text = text.replace(named, local)
    return yaml.safe_load(text)["scrape_configs"]


@pytest.fixture
def fleet(moto_server, aws_credentials, monkeypatch) -> Iterator[dict[str, str]]:
    """A replication group "orders" in moto whose two nodes are real redis-servers, a primary and its replica; yields
    the environment an exporter needs to discover it."""
    from moto.elasticache.models import elasticache_backends

    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    servers: list[RedisProcess] = []
    try:
        primary, replica = start_redis(), start_redis()
        servers += [primary, replica]
        replica.client().replicaof("127.0.0.1", primary.port)
        elasticache = boto3.client("elasticache", region_name=REGION)
        elasticache.create_replication_group(
            ReplicationGroupId="orders", ReplicationGroupDescription="test", Engine="redis", CacheNodeType="cache.r6g.large", NumCacheClusters=1
        )
        (node_group,) = elasticache_backends[ACCOUNT][REGION].replication_groups["orders"].node_groups  # moto's endpoints: the test's servers
        node_group["node_group_members"] = [
            {"cache_cluster_id": name, "cache_node_id": "0001", "current_role": role, "read_endpoint": {"address": "127.0.0.1", "port": server.port}}
            for name, role, server in zip(NODES, ("primary", "replica"), servers, strict=True)
        ]
        for name in NODES:
            elasticache.create_cache_cluster(CacheClusterId=name, ReplicationGroupId="orders", CacheNodeType="cache.r6g.large", Engine="redis")
        yield {k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL")}
    finally:
        for server in servers:
            server.stop()


@contextlib.contextmanager
def running(example: str, setups: dict[str, dict], env: dict[str, str], tmp_path: Path, listed: int) -> Iterator[int]:
    """The exporters of ``setups`` and a Prometheus with ``example``'s scrape configs, once every target is scraped;
    yields Prometheus' port. ``listed``: how many targets an exporter with aws: lists on /discovery before Prometheus
    starts (it reads /discovery at start, then once a minute)."""
    exporters: dict[str, ExporterProcess] = {}
    prometheus = None
    try:
        for named, config in setups.items():
            path = tmp_path / f"exporter-{len(exporters)}.yml"
            path.write_text(yaml.safe_dump({"redis": {"addr": ""}, "scrape": {"allow": [{"hosts": ["127.0.0.1"]}]}, **config}))
            exporter = exporters[named] = start_exporter("--config.file", str(path), env=env)
            if "aws" in config:
                wait_until(lambda e=exporter: len(discovered(e)) == listed, timeout=30, interval=0.2, what="the fleet discovered")
        scrape_configs = localized((EXAMPLES / example).read_text(), {named: f"127.0.0.1:{e.port}" for named, e in exporters.items()})
        rules = tmp_path / "rules.yml"
        rules.write_text("groups: []\n")
        prometheus = start_prometheus(tmp_path, rules, scrape_configs)
        port = prometheus.port

        every_target_up(port, len(exporters), example)
        yield port
    finally:
        if prometheus is not None:
            prometheus.stop()
        for exporter in exporters.values():
            exporter.stop()


def every_target_up(port: int, at_least: int, example: str) -> list[dict]:
    """Prometheus' active targets once there are ``at_least`` and each has been scraped, up."""

    def scraped() -> list[dict]:
        targets = active_targets(port)
        return len(targets) >= at_least and all(t["health"] == "up" for t in targets) and targets

    try:
        return wait_until(scraped, timeout=60, interval=0.5, what=f"Prometheus scraping every target of {example}")
    except AssertionError as err:
        seen = [(t["labels"], t["health"], t["lastError"]) for t in active_targets(port)]
        raise AssertionError(f"{err}: {seen}") from None


def joined_nodes(port: int, example: str) -> dict[str, dict]:
    """The result of the rules' node join once it has each discovered node's labels, by instance."""

    def joined() -> list[dict]:
        result = query(port, NODE_JOIN)
        return sum("account_id" in series["metric"] for series in result) == len(NODES) and result

    result = wait_until(joined, timeout=60, interval=0.5, what=f"redis_up of each node joined with its elasticache_node_info ({example})")
    return {series["metric"]["instance"]: series for series in result}


@pytest.mark.parametrize("example", sorted(SETUPS))
def test_the_nodes_of_each_example_join_their_node_info(example, fleet, tmp_path):
    with running(example, SETUPS[example], fleet, tmp_path, len(NODES)) as port:
        by_instance = joined_nodes(port, example)
        targets = every_target_up(port, len(SETUPS[example]), example)
        # each node's scrape (if the example has a /scrape job) is labelled with its name before a sample is taken
        scraped = [target["labels"]["instance"] for target in targets if target["scrapeUrl"].split("?")[0].endswith("/scrape")]
        assert sorted(scraped) == (sorted(NODES) if example != "metrics-scrape.yml" else [])
        assert sorted(by_instance) == sorted(NODES)  # each node once: scraped by one job of one exporter
        for series in by_instance.values():
            assert series["value"][1] == "1"
            assert (series["metric"]["account_id"], series["metric"]["region"], series["metric"]["replication_group"]) == (ACCOUNT, REGION, "orders")
        simple = query(port, "redis_up * on (instance) group_left () elasticache_node_info")
        assert sorted(series["metric"]["instance"] for series in simple) == sorted(NODES)


def test_a_cluster_found_from_a_configured_endpoint_is_scraped_once_beside_the_discovered_nodes(fleet, tmp_path):
    """/discovery lists a configured cluster's nodes too, which /metrics serves already: the /discovery job of
    discovery-scrape.yml leaves them to /metrics, so each node has one redis_up."""
    cluster = start_cluster("redis-7.0", replicas=0)
    try:
        seed = {"targets": [{"name": "sessions", "addr": cluster[0].addr, "discover": "cluster"}], "aws": AWS}
        with running("discovery-scrape.yml", {"exporter-host:9769": seed}, fleet, tmp_path, len(NODES) + len(cluster)) as port:
            by_instance = joined_nodes(port, "discovery-scrape.yml")
            every_target_up(port, 1 + len(NODES), "discovery-scrape.yml")
            members = [name for name in by_instance if name not in NODES]
            assert len(members) == len(cluster)
            ups = query(port, "count by (instance) (redis_up)")
            assert {series["metric"]["instance"]: series["value"][1] for series in ups} == dict.fromkeys(by_instance, "1")
            assert all("account_id" not in by_instance[name]["metric"] for name in members)  # no elasticache_node_info: none joined
    finally:
        for node in cluster:
            node.stop()
