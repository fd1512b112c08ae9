"""The target set: one map of targets, each of a kind (configured, cluster member, discovered by AWS, ad hoc), that
resolving (/scrape), listing (/discovery), serving (/metrics) and closing all walk. Whatever /discovery lists, /scrape
answers: checked on the map itself and through a real exporter process in front of a real cluster (the AWS kind, whose
addresses come from moto, is checked the same way in test_aws.py)."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from helpers import parse_samples, sample
from servers import ENGINES, start_cluster, start_exporter, start_redis, wait_until
from tools import missing

from exporter.aws.discovery import Node
from exporter.config import build_config
from exporter.redis.cluster_members import Member
from exporter.service.targets import MAX_AD_HOC_NODES, MAX_ALIASES, Kind, TargetRefused, TargetSet


def _target_set(**extra: object) -> TargetSet:
    raw = {
        "targets": [
            {"name": "cache-a", "addr": "redis://10.1.0.1:6379"},
            {"name": "orders", "addr": "redis://10.2.0.1:6379", "discover": "cluster"},
        ],
        "scrape": {"allow": [{"hosts": ["10.9.0.0/16"]}]},
        **extra,
    }
    return TargetSet(build_config(raw, environ={}))


def _aws_node(name: str, address: str, role: str = "primary") -> Node:
    return Node(region="eu-west-1", cluster_id=name, node_id="0001", node_type="cache.r6g.large", engine="redis",
                engine_version="7.1", replication_group="carts", shard="0001", role=role, address=address, port=6379)  # fmt: skip


def _members(*hosts: str) -> list[Member]:
    return [Member(f"id{i}", host, 6379, "primary" if i == 0 else "replica", "id0") for i, host in enumerate(hosts)]


def _every_kind(targets: TargetSet) -> None:
    targets.set_cluster_members(targets.cluster_seeds[0], _members("10.2.0.1", "10.2.0.2"))
    targets.set_discovered([("carts-001", _aws_node("carts-001", "10.3.0.1"))])
    targets.resolve("redis://10.9.0.1:6379")


@pytest.mark.unit
def test_every_kind_is_one_entry_of_one_map_that_resolving_listing_serving_and_closing_walk():
    targets = _target_set()
    _every_kind(targets)
    every = targets.every()
    assert len(every) == 5
    assert {(target.kind, target.name) for target in every} == set(
        [
            (Kind.CONFIGURED, "cache-a"),
            (Kind.MEMBER, "10.2.0.1:6379"),
            (Kind.MEMBER, "10.2.0.2:6379"),
            (Kind.DISCOVERED, "carts-001"),
            (Kind.AD_HOC, "redis://10.9.0.1:6379"),
        ]
    )
    for target in every:  # each found by its name and by its address, and by another spelling of its address
        assert targets.resolve(target.name) is target
        assert targets.resolve(target.address) is target
        assert targets.resolve(target.node.endpoint.host_port.upper()) is target
    listed = targets.listed()
    assert [target.name for target in listed] == ["10.2.0.1:6379", "10.2.0.2:6379", "carts-001"]
    assert [targets.resolve(target.address) for target in listed] == listed
    assert {target.name for target in targets.on_metrics()} == {"cache-a", "10.2.0.1:6379", "10.2.0.2:6379"}
    assert [(target, role) for target, role in targets.cluster_members()] == [(listed[0], "primary"), (listed[1], "replica")]
    assert [(target.name, node.cluster_id) for target, node in targets.discovered_nodes()] == [("carts-001", "carts-001")]
    targets.close()
    assert all(target.node._closed for target in every)


@pytest.mark.unit
def test_discovered_nodes_are_served_on_metrics_only_when_asked():
    targets = _target_set(aws={"regions": ["eu-west-1"], "scrape_discovered": True})
    _every_kind(targets)
    assert {target.kind for target in targets.on_metrics()} == {Kind.CONFIGURED, Kind.MEMBER, Kind.DISCOVERED}


@pytest.mark.unit
def test_what_is_neither_held_nor_allowed_is_refused():
    targets = _target_set()
    _every_kind(targets)
    for text in ("redis://10.4.0.1:6379", "rediss://10.1.0.1:6379", "redis://10.1.0.1:6379/1", "orders", "nonsense://x", "a b"):
        with pytest.raises(TargetRefused):
            targets.resolve(text)  # another address, the configured one over TLS or in another database, a seed, bad text


@pytest.mark.unit
def test_a_target_found_later_answers_for_its_address_before_an_ad_hoc_one_which_comes_back_when_it_goes():
    targets = _target_set()
    ad_hoc = targets.resolve("10.9.0.5:6379")
    assert ad_hoc.kind is Kind.AD_HOC
    targets.set_discovered([("carts-001", _aws_node("carts-001", "10.9.0.5"))])
    for text in ("10.9.0.5:6379", "redis://10.9.0.5:6379"):
        assert targets.resolve(text).name == "carts-001"
    targets.set_discovered([])
    assert targets.resolve("redis://10.9.0.5:6379") is ad_hoc
    assert targets.resolve("10.9.0.5:6379") is ad_hoc


@pytest.mark.unit
def test_a_member_that_leaves_is_no_longer_resolved_listed_served_or_named():
    targets = _target_set()
    seed = targets.cluster_seeds[0]
    targets.set_cluster_members(seed, _members("10.2.0.1", "10.2.0.2"))
    leaving = targets.resolve("redis://10.2.0.2:6379")
    assert targets.address_names[("10.2.0.2", 6379)] == "10.2.0.2:6379"
    targets.set_cluster_members(seed, _members("10.2.0.1"))
    assert leaving.node._closed
    assert leaving not in targets.every()
    assert [target.name for target in targets.listed()] == ["10.2.0.1:6379"]
    assert ("10.2.0.2", 6379) not in targets.address_names  # the names of addresses no longer only grow
    with pytest.raises(TargetRefused):
        targets.resolve("redis://10.2.0.2:6379")


@pytest.mark.unit
def test_a_failover_changes_a_members_role_and_shard_in_place():
    targets = _target_set()
    seed = targets.cluster_seeds[0]
    targets.set_cluster_members(seed, _members("10.2.0.1", "10.2.0.2"))
    kept = targets.resolve("10.2.0.2:6379")
    targets.set_cluster_members(seed, [Member("id1", "10.2.0.2", 6379, "primary", "id1"), Member("id0", "10.2.0.1", 6379, "replica", "id1")])
    assert targets.resolve("10.2.0.2:6379") is kept
    assert [(target.name, role, target.shard) for target, role in targets.cluster_members()] == [
        ("10.2.0.1:6379", "replica", "id1"),
        ("10.2.0.2:6379", "primary", "id1"),
    ]


@pytest.mark.unit
def test_a_configured_name_is_never_taken_by_a_found_target():
    targets = _target_set()
    configured = targets.resolve("cache-a")
    targets.set_discovered([("cache-a", _aws_node("cache-a", "10.3.0.9"))])
    targets.set_cluster_members(targets.cluster_seeds[0], [Member("x", "10.1.0.1", 6379, "primary", "x")])
    assert targets.resolve("cache-a") is configured
    assert targets.resolve("redis://10.1.0.1:6379") is configured  # a member at a configured target's address: configured
    assert [target.kind for target in targets.every()].count(Kind.CONFIGURED) == 1
    assert targets.discovered_nodes() == []


@pytest.mark.unit
def test_ad_hoc_targets_and_remembered_spellings_stay_bounded():
    targets = _target_set()
    first = targets.resolve("10.9.0.1:6379")
    for i in range(MAX_AD_HOC_NODES + 10):
        targets.resolve(f"10.9.{i // 250 + 1}.{i % 250 + 1}:6379")
    ad_hoc = [target for target in targets.every() if target.kind is Kind.AD_HOC]
    assert len(ad_hoc) == MAX_AD_HOC_NODES
    held = {id(target) for target in ad_hoc}
    assert id(first) not in held  # the least recently asked for made room
    assert first.node._closed  # with its connection
    assert len(targets._aliases) <= MAX_ALIASES
    assert all(id(target) in held for target in targets._aliases.values())  # no spelling leads to a target that left
    for i in range(MAX_ALIASES + 100):  # as many spellings of other addresses
        targets.resolve(f"10.9.0.2:{1000 + i}")
    held = {id(target) for target in targets.every() if target.kind is Kind.AD_HOC}
    assert len(held) == MAX_AD_HOC_NODES
    assert 0 < len(targets._aliases) <= MAX_ALIASES
    assert all(id(target) in held for target in targets._aliases.values())


@pytest.mark.unit
def test_resolving_a_name_or_an_address_does_not_parse():
    from exporter.service import targets as targets_module

    targets = _target_set()
    _every_kind(targets)
    texts = [text for target in targets.every() for text in (target.name, target.address)]
    real = targets_module.parse_address
    parsed: list[object] = []
    targets_module.parse_address = lambda *args, **kwargs: parsed.append(args) or real(*args, **kwargs)
    try:
        for text in texts:
            targets.resolve(text)
    finally:
        targets_module.parse_address = real
    assert parsed == []


def _exporter_config(directory: Path, cluster_seed: str, configured: str) -> Path:
    path = directory / "config.yml"
    path.write_text(
        "targets:\n"
        f"  - name: cache-a\n    addr: {configured}\n"
        f"  - name: orders\n    addr: {cluster_seed}\n    discover: cluster\n"
        "scrape:\n  allow:\n    - hosts: ['127.0.0.1']\n"
        "cluster:\n  refresh: 5s\n"
    )
    return path


def test_every_address_discovery_lists_and_every_kind_scrapes_through_the_exporter_process(tmp_path):
    """A real cluster behind discover: cluster, a configured node and an allowed one: the process' /discovery lists each
    cluster node, and /scrape?target=<that address> answers redis_up 1, as it does for the other kinds' addresses."""
    engine = "redis-7.0"
    if ENGINES.get(engine) is None:
        missing(engine)
    nodes = start_cluster(engine, replicas=1)
    configured, allowed = start_redis(), start_redis()
    exporter = None
    try:
        exporter = start_exporter("--config.file", str(_exporter_config(tmp_path, nodes[0].addr, configured.addr)))

        def listed() -> list[dict]:
            code, body = exporter.get("/discovery")
            assert code == 200, body
            return json.loads(body)

        wait_until(lambda: len(listed()) == len(nodes), timeout=30, what="every cluster node listed")
        addresses = [group["targets"][0] for group in listed()]
        assert sorted(addresses) == sorted(f"redis://127.0.0.1:{node.port}" for node in nodes)
        texts = [*addresses, f"redis://127.0.0.1:{configured.port}", "cache-a", f"redis://127.0.0.1:{allowed.port}"]
        for text in texts:
            code, body = exporter.get("/scrape?target=" + urllib.parse.quote(text, safe=""))
            assert code == 200, f"{text}: {body}"
            assert sample(parse_samples(body), "redis_up") == 1, text
    finally:
        if exporter is not None:
            exporter.stop()
        for server in (*nodes, configured, allowed):
            server.stop()
