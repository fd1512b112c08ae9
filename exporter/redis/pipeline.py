"""The pipelined scrape, built from one table: every command a scrape may send, in the order it is sent.

To add a command, add a :class:`~exporter.redis.command.ScrapeCommand` to the ``COMMANDS`` of its concern's module
(or a new module, listed in ``SCRAPE_COMMANDS`` below): COMMAND INFO, the error handling, the reply checks, the
families and docs/metrics.md all follow from the entry.
"""

from __future__ import annotations

import time
from typing import Any

from exporter.common.records import field, record

from . import cluster, commandlog, config_get, latency, slowlog
from .command import Args, NodeView, ScrapeCommand, always, text
from .failures import NOT_AUTHENTICATED, kind_of, looks_like_info, reply_failure
from .heartbeat_read import HEARTBEAT_COMMANDS, heartbeat_values
from .info import CommandLines, CommandStats, InfoReply
from .info_fields import INFO_DOCS
from .keys import KeyProbeResult
from .resp import ErrorReply, RespFailure

INFO = ScrapeCommand("info", lambda node: [("INFO", "ALL")] if node.info_all else [("INFO",)], (bytes,), docs=INFO_DOCS)
# a server without INFO ALL (before Redis 6): INFO, plus the sections it leaves out
INFO_EXTRA = ScrapeCommand("info_extra", lambda node: [] if node.info_all else [("INFO", "commandstats")], (bytes,))

SCRAPE_COMMANDS: tuple[ScrapeCommand, ...] = (
    INFO,
    INFO_EXTRA,
    *slowlog.COMMANDS,
    *latency.COMMANDS,
    *config_get.COMMANDS,
    *commandlog.COMMANDS,
    *cluster.COMMANDS,
    *HEARTBEAT_COMMANDS,
)
SETNAME = ScrapeCommand("client", always("CLIENT", "SETNAME"), (bytes,), gate="client")  # on connect, not in the scrape
# what COMMAND INFO asks on each (re)connect: it answers nil for a command (or subcommand, Redis 7+) the node lacks or
# renamed away, so nothing is sent that would draw an error reply
# and the commands of the background profiles (keyspace.py, slot_stats.py), which are sent only where the node has them
BACKGROUND_GATES = ("randomkey", "scan", "memory", "object", "cluster|slot-stats")
ASKED: tuple[str, ...] = tuple(dict.fromkeys([*(c.gate for c in (SETNAME, *SCRAPE_COMMANDS) if c.gate and c.asked), *BACKGROUND_GATES]))
# Redis 6.2.6+ closes an unauthenticated connection whose command has more than 10 elements (CVE-2021-32675): a node
# that wants a password the exporter lacks must answer NOAUTH (an auth error), not close. So COMMAND INFO asks at most
# eight names a command, the commands pipelined.
PROBES: tuple[tuple[str, ...], ...] = tuple(("COMMAND", "INFO", *ASKED[i : i + 8]) for i in range(0, len(ASKED), 8))


@record
class ScrapeResult:
    """One scrape: the replies by purpose, and INFO parsed under the node's lock (where its last reply is kept)."""

    info: str = ""
    extra_info: list[str] = field(factory=list)
    parsed: InfoReply = field(factory=InfoReply)
    command_lines: CommandLines = field(factory=dict)  # INFO commandstats' lines with their numbers, each parsed once
    command_stats: CommandStats = field(factory=dict)
    replies: dict[str, list[Any]] = field(factory=dict)
    sent: dict[str, list[Args]] = field(factory=dict)  # the commands that were answered, by purpose
    heartbeat_values: list[bytes | None] | None = None
    heartbeat_types: dict[str, str] = field(factory=dict)
    keys: KeyProbeResult | None = None
    read_time: float = 0.0
    duration: float = 0.0


class Gates:
    """What a node allows: learnt from COMMAND INFO on each (re)connect, narrowed by refusals until the next one; and
    the replies of commands re-read only now and then."""

    def __init__(self) -> None:
        self.allowed: dict[str, bool] = {}
        self.refreshed_replies: dict[str, list[Any]] = {}  # the last replies of each command with a refresh interval
        self._read_at: dict[str, float] = {}

    def reset(self, command_info: Any) -> None:
        """After a (re)connect: COMMAND INFO's answer for ASKED (an error: nothing is known, each command is tried once)."""
        self.allowed = {}
        if isinstance(command_info, list) and len(command_info) == len(ASKED):
            self.allowed = {name: entry is not None for name, entry in zip(ASKED, command_info, strict=True)}

    def allows(self, gate: str, known_only: bool = False) -> bool:
        return self.allowed.get(gate, not known_only)

    def refuse(self, gate: str) -> None:
        self.allowed[gate] = False

    def due(self, command: ScrapeCommand) -> bool:
        return command.refresh is None or time.monotonic() - self._read_at.get(command.purpose, float("-inf")) > command.refresh

    def store_refreshed(self, purpose: str, replies: list[Any]) -> None:
        self.refreshed_replies[purpose] = replies
        self._read_at[purpose] = time.monotonic()


def requests(node: NodeView, gates: Gates) -> list[tuple[ScrapeCommand, Args]]:
    """This scrape's commands, in table order."""
    sent: list[tuple[ScrapeCommand, Args]] = []
    for command in SCRAPE_COMMANDS:
        if command.gate and not gates.allows(command.gate, command.known_only):
            continue
        if gates.due(command):
            sent.extend((command, args) for args in command.args(node))
    return sent


def collect(node: NodeView, gates: Gates, sent: list[tuple[ScrapeCommand, Args]], replies: list[Any]) -> ScrapeResult:
    """The replies of one round trip, checked and kept by purpose; error replies drop what they gate."""
    result = ScrapeResult(read_time=time.time())
    commands_sent = result.sent
    for (command, args), reply in zip(sent, replies, strict=True):
        if isinstance(reply, ErrorReply):
            _on_error(node, gates, command, args, reply)
            continue
        if not isinstance(reply, command.reply) or isinstance(reply, bool):
            raise RespFailure("protocol", f"{' '.join(args[:2])} answered {kind_of(reply)}")
        if command is INFO:
            if not isinstance(reply, bytes) or not looks_like_info(reply):
                raise RespFailure("protocol", "INFO did not answer INFO text")
            result.info = text(reply)
            continue  # kept as text only: INFO's bytes are the scrape's largest reply
        if command is INFO_EXTRA:
            result.extra_info.append(text(reply))
            continue
        result.replies.setdefault(command.purpose, []).append(reply)
        commands_sent.setdefault(command.purpose, []).append(args)
        if command.on_reply is not None:
            command.on_reply(node, reply)
    _merge_and_refresh(node, gates, sent, result)
    if node.heartbeat_keys and gates.allows("heartbeat"):
        result.heartbeat_values = heartbeat_values(node.heartbeat_keys, commands_sent.get("heartbeat", []), result.replies.get("heartbeat", []))
        for args, reply in zip(commands_sent.get("heartbeat_type", []), result.replies.get("heartbeat_type", []), strict=True):
            result.heartbeat_types[args[1]] = text(reply)
    return result


def _merge_and_refresh(node: NodeView, gates: Gates, sent: list[tuple[ScrapeCommand, Args]], result: ScrapeResult) -> None:
    """The replies of merged commands from what the node gathered, and of refreshed ones from this round or the last."""
    for command in SCRAPE_COMMANDS:
        if command.merged is not None:
            result.replies[command.purpose] = [command.merged(node)]
        if command.refresh is not None:
            if any(c is command for c, _ in sent):
                gates.store_refreshed(command.purpose, result.replies.get(command.purpose, []))
            result.replies[command.purpose] = gates.refreshed_replies.get(command.purpose, [])


def _on_error(node: NodeView, gates: Gates, command: ScrapeCommand, args: Args, reply: ErrorReply) -> None:
    if reply.message.startswith(NOT_AUTHENTICATED):
        raise reply_failure(reply, " ".join(args[:2]))
    if command is INFO and node.info_all:
        node.info_all = False  # a server without INFO ALL: INFO plus its sections from now on
        return
    if command is INFO:
        raise reply_failure(reply, "INFO")
    if command.gate:
        gates.refuse(command.gate)
