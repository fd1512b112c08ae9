"""The background loop over nodes: one round at a time whoever runs it, and closed nodes that stay closed."""

from __future__ import annotations

import itertools
import sys
import threading
import time

import pytest

from exporter.redis import node_loop
from exporter.redis.addresses import Endpoint
from exporter.redis.node import RedisNode
from exporter.redis.resp import RespFailure
from exporter.redis.settings import Credentials, TargetConfig

pytestmark = pytest.mark.unit

NOWHERE = Endpoint("127.0.0.1", 1, False, 0, None)  # nothing listens: a connection attempt would be refused


class Visits(node_loop.NodeLoop):
    def __init__(self, targets: list[TargetConfig]) -> None:
        super().__init__("test-loop", targets, interval=3600)
        self.visited: list[str] = []

    def visit(self, name: str, node: RedisNode) -> None:
        self.visited.append(name)


def test_two_callers_of_a_round_make_one_node_per_target(monkeypatch):
    made: list[RedisNode] = []

    def slowly_made(*args, **kwargs) -> RedisNode:  # a wide window for two rounds to meet in
        time.sleep(0.05)
        made.append(RedisNode(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(node_loop, "RedisNode", slowly_made)
    loop = Visits([TargetConfig("a", NOWHERE, Credentials())])
    rounds = [threading.Thread(target=loop.visit_all) for _ in range(2)]
    for thread in rounds:
        thread.start()
    for thread in rounds:
        thread.join(timeout=5)
    assert len(made) == 1  # else one node, and its connection, would be left behind unclosed
    assert loop.visited == ["a", "a"]
    loop.stop()
    loop.visit_all()
    assert loop.visited == ["a", "a"]  # no round after stop


def test_a_closed_node_never_connects_again():
    node = RedisNode(NOWHERE, Credentials())
    node.close()
    with pytest.raises(RespFailure, match="removed") as failure:
        node.call_many([("PING",)], timeout=1)
    assert failure.value.kind == "connection"  # refused before any connection was tried (that would say "refused")
    assert node.connects == 0


class Reads(node_loop.NodeProfiler):
    """A profiler whose reads answer from a script instead of a server: a value, None (does not apply) or an error."""

    def __init__(self, targets: node_loop.Targets) -> None:
        super().__init__("test-profiler", targets, interval=3600)
        self.answers: dict[str, object] = {}

    def read(self, node: RedisNode) -> object:
        answer = self.answers.get(next(name for name, (_, kept) in self._nodes.items() if kept is node))
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_members_read_while_rounds_change_them_never_fail():
    """A scrape reads the profiler's members while its round adds and drops nodes (discovery finds and loses them):
    2,083 "dictionary changed size during iteration" errors in 3 s, each a /metrics answered 500, before the round
    published its members whole."""
    from exporter.redis.slot_stats import SlotStatsConfig, SlotStatsProfiler
    from exporter.service.collectors.slot_stats import SlotStatsCollector

    many = [TargetConfig(f"n{i}", NOWHERE, Credentials()) for i in range(200)]
    rounds = itertools.count()

    class Quiet(SlotStatsProfiler):
        def read(self, node: RedisNode) -> None:
            return None  # nothing is asked of a node: the race is in the node table

    profiler = Quiet(SlotStatsConfig(enabled=True), lambda: many if next(rounds) % 2 else many[:100], 1 << 20)
    collector = SlotStatsCollector(profiler)
    failures: list[BaseException] = []
    deadline = time.monotonic() + 1.5
    done = threading.Event()

    def scrape() -> None:
        while not done.is_set():
            try:
                assert len(profiler.members) in (0, 100, 200)
                collector.build()
            except BaseException as err:  # every failure is the test's finding
                failures.append(err)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads change hands often: the window of a race is met within the deadline
    scrapes = [threading.Thread(target=scrape) for _ in range(2)]
    try:
        for thread in scrapes:
            thread.start()
        while time.monotonic() < deadline and not failures:
            profiler.visit_all()
    finally:
        done.set()
        for thread in scrapes:
            thread.join(timeout=5)
        sys.setswitchinterval(switch)
        profiler.stop()
    assert next(rounds) > 20  # membership changed many times under the scrapes
    assert not failures, f"{len(failures)} failed reads, the first: {failures[0]!r}"


def test_a_profile_whose_read_fails_or_no_longer_applies_is_no_longer_served():
    targets = [TargetConfig(name, NOWHERE, Credentials()) for name in ("primary", "replica")]
    profiler = Reads(targets)
    profiler.answers = {"primary": "slots of the primary", "replica": "slots of the replica"}
    profiler.visit_all()
    assert profiler.snapshot()[0] == {"primary": "slots of the primary", "replica": "slots of the replica"}
    # a failover: the old primary is a replica now (its read no longer applies), the other's read fails
    profiler.answers = {"primary": None, "replica": RespFailure("timeout", "timed out")}
    profiler.visit_all()
    profiles, errors, durations = profiler.snapshot()
    assert profiles == {}
    assert durations == {}
    assert errors == {("replica", "timeout"): 1}  # the failure is still counted
    profiler.answers = {"replica": "slots of the new primary"}
    profiler.visit_all()
    assert profiler.snapshot()[0] == {"replica": "slots of the new primary"}
    profiler.stop()
