"""The background loop over nodes: one round at a time whoever runs it, and closed nodes that stay closed."""

from __future__ import annotations

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
