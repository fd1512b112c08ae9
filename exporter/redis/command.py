"""What a command of the pipelined scrape is: the record each concern module declares its commands with, and the view
of one node's scrape that their families are built from. ``pipeline`` puts the records in one table."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from exporter.common.families import FamilySet
from exporter.common.records import record

from .info import CommandStats, InfoReply

Args = tuple[str, ...]
T = "`instance`"  # the label every node's family has, as docs/metrics.md writes it


class NodeView(Protocol):
    """What of a node the commands' arguments depend on."""

    info_all: bool
    histogram_commands: tuple[str, ...]
    histograms: dict[str, Any]  # the latest LATENCY HISTOGRAM of each command, as ``latency`` keeps it
    command_calls: dict[str, float]  # calls per command, from the latest INFO commandstats
    moving_commands: frozenset[str]  # those whose calls moved between the last two INFO replies
    heartbeat_keys: tuple[str, ...]

    @property
    def cluster_enabled(self) -> bool: ...

    def cluster_nodes_due(self) -> bool: ...

    def owns(self, key: str) -> bool: ...

    def allows(self, gate: str, known_only: bool = False) -> bool: ...

    def on_cluster_nodes(self, reply: Any) -> None: ...


class Doc(NamedTuple):
    """A family's row in docs/metrics.md."""

    name: str
    type: str
    labels: str  # as written in the table; the label names are the words in backquotes before any parenthesis
    source: str
    meaning: str = ""


@record(frozen=True)
class Scraped:
    """One node's scrape as the families see it: INFO parsed once, every command's replies by purpose."""

    info: InfoReply
    replies: Mapping[str, list[Any]]
    command_stats: CommandStats
    base: dict[str, str]  # the target's own labels: its instance
    read_time: float


@record(frozen=True)
class ScrapeCommand:
    """One command of the scrape. ``args`` gives what to send this scrape (none: not this time); a reply of another type
    than ``reply`` means the peer is not a sane Redis. ``gate`` names what an error reply drops until the next reconnect;
    where ``asked``, COMMAND INFO is asked on each (re)connect whether the server has it, and a ``known_only`` command is
    sent only where it said so (an older server would answer an error). ``refresh`` keeps the replies for that many
    seconds instead of asking each scrape. ``on_reply`` lets the node learn from a reply; where ``merged`` is given, the
    families read what it returns of the node (the replies merged with what was kept) instead of the replies; ``families``
    turns the replies (a list: a purpose may send several commands) into samples; ``docs`` are their rows in docs/metrics.md."""

    purpose: str
    args: Callable[[NodeView], Sequence[Args]]
    reply: tuple[type, ...]
    gate: str | None = None
    asked: bool = True
    known_only: bool = False
    refresh: float | None = None
    on_reply: Callable[[NodeView, Any], None] | None = None
    merged: Callable[[NodeView], Any] | None = None
    families: Callable[[list[Any], Scraped, FamilySet], None] | None = None
    docs: tuple[Doc, ...] = ()


def always(*args: str) -> Callable[[NodeView], Sequence[Args]]:
    """Arguments that do not depend on the node."""
    return lambda _node: (args,)


def text(reply: Any) -> str:
    return reply.decode("utf-8", errors="replace") if isinstance(reply, bytes) else ""
