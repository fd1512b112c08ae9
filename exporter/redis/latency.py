"""Latency: the newest spike per event (LATENCY LATEST) and, on Redis 7+, the per-command histograms of the most called
commands (LATENCY HISTOGRAM), as redis_exporter serves them."""

from __future__ import annotations

from array import array
from typing import Any

from exporter.common.families import GAUGE, FamilySet
from exporter.common.labels import with_label

from .command import Args, CommandStats, Doc, NodeView, ScrapeCommand, Scraped, T, always

MAX_HISTOGRAM_COMMANDS = 32  # LATENCY HISTOGRAM for the most called commands only: a node may know hundreds
# the exporter's own monitoring reads, sent by every scrape (or on connecting, or once a minute): their histograms,
# which would measure the exporter, are not asked for (a node's walk of a histogram costs it about 9 µs; their
# percentiles stay in INFO latencystats). Not the heartbeat's MGET and TYPE, nor CLUSTER NODES: applications send them.
SCRAPE_READS = frozenset(
    {"info", "slowlog|len", "slowlog|get", "latency|latest", "latency|histogram", "config|get", "commandlog|len", "commandlog|get",
     "cluster|info", "command|info", "client|setname"}
)  # fmt: skip
# served also as native histograms (schema 0) where the client reads protobuf: LATENCY HISTOGRAM's buckets are powers
# of two and it leaves out only empty ones, so each classic bucket is exactly one native bucket
NATIVE_HISTOGRAMS = frozenset({"redis_commands_latencies_usec"})


def add_spikes(replies: list[Any], scraped: Scraped, out: FamilySet) -> None:
    for reply in replies:
        for event in reply:
            if not isinstance(event, list) or len(event) < 3 or not isinstance(event[0], bytes):
                continue
            labels = {**scraped.base, "event_name": event[0].decode("utf-8", errors="replace")}
            if isinstance(event[1], int):
                out.add("redis_latency_spike_last", GAUGE, "Unix time of the latest latency spike per event.", labels, float(event[1]))
            if isinstance(event[2], int):
                out.add("redis_latency_spike_duration_seconds", GAUGE, "Duration of the latest latency spike per event.", labels, event[2] / 1000.0)


def plan(node: NodeView, command_stats: CommandStats, limit: int | None = None) -> None:
    """Within a scrape, under the node's lock, once INFO is parsed: the commands whose histograms the next scrape serves
    (the ``limit`` most called but the scrape's own reads, subcommands as ``config|get``), their calls now, and which
    of them were called since the INFO before (most such are called again before the next scrape)."""
    ranked = sorted((-calls, cmd) for cmd, (calls, _) in command_stats.items() if calls and cmd not in SCRAPE_READS)
    node.histogram_commands = tuple(cmd for _, cmd in ranked[: MAX_HISTOGRAM_COMMANDS if limit is None else limit])
    before = node.command_calls
    node.command_calls = {cmd: command_stats[cmd][0] for cmd in node.histogram_commands}
    node.moving_commands = frozenset(cmd for cmd, calls in node.command_calls.items() if before.get(cmd) != calls)


def due(node: NodeView) -> list[str]:
    """The commands whose LATENCY HISTOGRAM the scrape asks for with INFO, before it knows their calls now: those called
    between the last two scrapes, and those called since their histogram was read. One that stood still over the last
    interval most likely still does, and is served from the kept reply (the server's walk of a histogram costs about as
    much as INFO's commandstats section); if it was called after all, :func:`late` finds it once INFO is read."""
    read, moving, calls = node.histograms, node.moving_commands, node.command_calls
    return [cmd for cmd in node.histogram_commands if cmd in moving or cmd not in read or read[cmd][0] != calls.get(cmd)]


def _allowed(node: NodeView) -> bool:
    """Whether the node shows LATENCY HISTOGRAM (Redis 7+) and lets this user send it: a user refused LATENCY LATEST is
    refused LATENCY HISTOGRAM too (the same ACL category)."""
    return node.allows("latency|histogram", known_only=True) and node.allows("latency")


def late(node: NodeView, asked: list[Args]) -> list[Args]:
    """Once this scrape's INFO is planned, the LATENCY HISTOGRAM (if any) that a second round trip sends: of the most
    called commands whose histograms this scrape did not ask for (``asked``: its LATENCY HISTOGRAM commands) and whose
    calls moved since their histogram was read, rather than serve them a scrape late."""
    if not _allowed(node):
        return []
    read, calls = node.histograms, node.command_calls
    skipped = set(node.histogram_commands).difference(*(args[2:] for args in asked))
    commands = [cmd for cmd in node.histogram_commands if cmd in skipped and (cmd not in read or read[cmd][0] != calls[cmd])]
    return [("LATENCY", "HISTOGRAM", *commands)] if commands else []


def forget(node: NodeView, requests: list[Args]) -> None:
    """The histograms these requests asked for, not read after all: served in no scrape until read, rather than late."""
    unread = {cmd for args in requests for cmd in args[2:]}
    node.histograms = {cmd: value for cmd, value in node.histograms.items() if cmd not in unread}


# a bucket bound's le text, by the bound: LATENCY HISTOGRAM's bounds are one fixed series of a few dozen, so every node's
# histograms share these strings (a pure memo, bounded)
_LE_TEXTS: dict[int, str] = {}


def _le_text(bound: int) -> str:
    text = _LE_TEXTS.get(bound)
    if text is None:
        text = str(bound)  # le="8", as redis_exporter's Go client writes 8
        if len(_LE_TEXTS) < 1024:
            _LE_TEXTS[bound] = text
    return text


# a histogram's le texts, as the bounds its observations have reached: a few layouts per command, the same on every
# node, so every node's histograms share them (a pure memo, bounded)
_LAYOUTS: dict[tuple[str, ...], tuple[str, ...]] = {}

# LATENCY HISTOGRAM's buckets of one command as a node keeps them: the le texts (shared) and the cumulative counts
# (doubles in one array: 8 bytes a count, not a float object each)
Buckets = tuple[tuple[str, ...], "array[float]"]


def _layout(les: tuple[str, ...]) -> tuple[str, ...]:
    if len(_LAYOUTS) < 4096:
        _LAYOUTS[les] = les
    return les


def bucket_pairs(buckets: Buckets) -> list[tuple[str, float]]:
    """The buckets as ``FamilySet.add_histogram`` takes them: (le, cumulative count) each."""
    return list(zip(*buckets, strict=True))


def parse_histograms(reply: Any) -> dict[str, tuple[int, Buckets]]:
    """LATENCY HISTOGRAM's reply: command → (calls, its buckets: the upper bounds in µs as le texts, the cumulative
    counts). Kept per node between scrapes: a tuple and an array a command, not a pair a bucket."""
    parsed: dict[str, tuple[int, Buckets]] = {}
    if not isinstance(reply, list):
        return parsed
    for i in range(0, len(reply) - 1, 2):
        name, details = reply[i], reply[i + 1]
        if not isinstance(name, bytes) or not isinstance(details, list):
            continue
        cmd = name.decode("utf-8", errors="replace")
        if cmd in parsed:
            continue
        fields = {details[j]: details[j + 1] for j in range(0, len(details) - 1, 2) if isinstance(details[j], bytes)}
        calls, buckets = fields.get(b"calls"), fields.get(b"histogram_usec")
        if not isinstance(calls, int) or not isinstance(buckets, list):
            continue
        pairs = [
            (bound, count) for bound, count in zip(buckets[::2], buckets[1::2], strict=False) if isinstance(bound, int) and isinstance(count, int)
        ]
        les = tuple([_LE_TEXTS.get(bound) or _le_text(bound) for bound, _ in pairs])
        parsed[cmd] = (calls, (_LAYOUTS.get(les) or _layout(les), array("d", [count for _, count in pairs])))
    return parsed


def _store_histograms(node: NodeView, reply: Any) -> None:
    wanted = set(node.histogram_commands)
    node.histograms = {cmd: value for cmd, value in {**node.histograms, **parse_histograms(reply)}.items() if cmd in wanted}


def _current_histograms(node: NodeView) -> dict[str, Any]:
    """This scrape's view: every most called command's latest histogram (a new dict each time: the families read it
    after the node's lock is released); none once the node refuses them, rather than the last ones read."""
    if not _allowed(node):
        return {}
    read = node.histograms
    return {cmd: read[cmd] for cmd in node.histogram_commands if cmd in read}


def add_histograms(replies: list[Any], scraped: Scraped, out: FamilySet) -> None:
    """``redis_commands_latencies_usec{cmd}``: the server's cumulative counts per bucket upper bound (µs), +Inf and _count
    the command's calls, _sum its µs from commandstats (a container command's subcommands included)."""
    totals: dict[str, float] = {}  # a command's µs with its subcommands'
    for command, (_, usec) in scraped.command_stats.items():
        totals[command] = totals.get(command, 0) + usec
        container, sub, _ = command.partition("|")
        if sub:
            totals[container] = totals.get(container, 0) + usec
    memo = out.memo("latency histograms")
    for histograms in replies:
        for cmd, (calls, buckets) in histograms.items():
            total = totals.get(cmd, 0)
            source = (calls, buckets, total)  # the same buckets object while the histogram is not read again
            if out.replay(memo, cmd, source) is not None:
                continue
            with out.recording(memo, cmd, source):
                out.add_histogram(
                    "redis_commands_latencies_usec",
                    "Latency of each command in microseconds (LATENCY HISTOGRAM).",
                    with_label(scraped.base, "cmd", cmd),
                    bucket_pairs(buckets),
                    float(calls),
                    total,
                )


def _histogram_args(node: NodeView) -> list[Args]:
    commands = due(node) if _allowed(node) else []
    return [("LATENCY", "HISTOGRAM", *commands)] if commands else []


# only where COMMAND INFO shows the subcommand (Redis 7+), and only with the latency group allowed
HISTOGRAMS = ScrapeCommand(
    "latency_histogram", _histogram_args, (list,), gate="latency|histogram", known_only=True,
    on_reply=_store_histograms, merged=_current_histograms, families=add_histograms,
    docs=(Doc("redis_commands_latencies_usec", "histogram", f"{T}, `cmd`, `le` (the server's bounds, written `8`, `16`, `132`, …)",
              f"`LATENCY HISTOGRAM` (Redis 7+, where `COMMAND INFO` shows it) of the {MAX_HISTOGRAM_COMMANDS} most called "
              "commands but the scrape's own reads; `_sum` from commandstats", "microseconds; cumulative counts"),),
)  # fmt: skip

COMMANDS = (
    ScrapeCommand("latency", always("LATENCY", "LATEST"), (list,), gate="latency", families=add_spikes,
                  docs=(Doc("redis_latency_spike_last", "gauge", f"{T}, `event_name`", "`LATENCY LATEST`", "Unix time"),
                        Doc("redis_latency_spike_duration_seconds", "gauge", f"{T}, `event_name`", "`LATENCY LATEST`"))),
    HISTOGRAMS,
)  # fmt: skip
