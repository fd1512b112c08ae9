"""Who holds a node's connections: CLIENT LIST, read in the background every ``clients.interval`` on a connection of
its own (never inside a scrape's deadline, its reply bounded by the reply-size limit), turned into a few aggregates of
low cardinality: connections by client name (the top N, ``(unnamed)`` and ``(other)``), those idle longer than 1 m,
10 m and 1 h, connections by source address, and the largest output buffer by name.

With ``per_connection`` (redis_exporter's ``--export-client-list``) each connection is also kept, as redis_exporter
serves it: one ``redis_connected_client_info`` and a dozen gauges per connection, up to ``max_connections``."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator

from exporter.common.records import field, record, replace

from .node import RedisNode
from .node_loop import NodeProfiler, Targets

UNNAMED, OTHER = "(unnamed)", "(other)"
IDLE_BUCKETS = (("1m", 60), ("10m", 600), ("1h", 3600))  # connections idle longer than each


@record(frozen=True)
class ClientsConfig:
    enabled: bool = False
    interval: float = 60.0
    top: int = 20  # client names and source addresses served by name; the rest add up in (other)
    per_connection: bool = False  # redis_exporter's connected_client families, a series set per connection
    include_port: bool = False  # the client's port as a label of redis_connected_client_info (a new series per connection)
    max_connections: int = 10000  # per-connection series of at most this many connections (the lowest ids)
    max_reply_bytes: int = 32 * 1024 * 1024  # CLIENT LIST is about 280 bytes a connection: 65,000 of them are 18 MB


# CLIENT LIST's numeric fields a connection's gauges show, by field (ssub: Redis 7.0.3 and later; watch: 7.4 and later)
CONNECTION_NUMBERS = ("age", "idle", "sub", "psub", "ssub", "watch", "qbuf", "qbuf-free", "obl", "oll", "omem", "tot-mem")


@record(frozen=True)
class Connection:
    """One line of CLIENT LIST, its labels as redis_exporter gives them; a numeric field the server did not list is None."""

    id: str
    name: str
    flags: str
    db: str
    host: str
    port: str
    user: str
    resp: str
    numbers: dict[str, int | None]


def parse_connections(reply: bytes) -> Iterator[Connection]:
    """Every well-formed line of CLIENT LIST (one that starts ``id=<digits> addr=``) as a Connection."""
    for raw in reply.decode("utf-8", "replace").split("\n"):
        line = raw.rstrip("\r")
        if not line.startswith("id=") or " addr=" not in line:
            continue
        fields = dict(part.split("=", 1) for part in line.split(" ") if "=" in part)
        host, _, port = fields["addr"].rpartition(":")
        if not fields["id"].isdigit() or not port:
            continue
        numbers = {key: _integer(fields.get(key)) for key in CONNECTION_NUMBERS}
        yield Connection(
            fields["id"],
            fields.get("name", ""),
            fields.get("flags", ""),
            fields.get("db", ""),
            host,
            port,
            fields.get("user", ""),
            fields.get("resp", ""),
            numbers,
        )


def _integer(raw: str | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


# name, idle and omem in the order every Redis and Valkey lists them; one match per line (``.`` stops at the newline)
_AGGREGATED_FIELDS = re.compile(rb"addr=(\S*) .*?name=(\S*) .*?idle=(\d+) .*?omem=(\d+)")


def parse_client_list(reply: bytes) -> Iterator[tuple[str, str, int, int]]:
    """(name, source address without the port, idle seconds, output buffer bytes) of each line of CLIENT LIST."""
    matches = _AGGREGATED_FIELDS.findall(reply)
    if len(matches) != sum(1 for line in reply.split(b"\n") if line.strip()):
        yield from _parse_each_line(reply)  # a line without one of the fields: each line on its own
        return
    for addr, name, idle, omem in matches:
        yield name.decode("utf-8", "replace"), _source(addr.decode("utf-8", "replace")), int(idle), int(omem)


def _parse_each_line(reply: bytes) -> Iterator[tuple[str, str, int, int]]:
    for line in reply.split(b"\n"):
        if not line.strip():
            continue
        fields = dict(part.split(b"=", 1) for part in line.split(b" ") if b"=" in part)
        name = fields.get(b"name", b"").decode("utf-8", "replace")
        yield name, _source(fields.get(b"addr", b"").decode("utf-8", "replace")), _number(fields.get(b"idle")), _number(fields.get(b"omem"))


def _source(addr: str) -> str:
    return addr.rsplit(":", 1)[0].strip("[]") if ":" in addr else addr


def _number(raw: bytes | None) -> int:
    return int(raw) if raw is not None and raw.isdigit() else 0


@record(frozen=True)
class ClientProfile:
    connected: dict[str, int] = field(factory=dict)  # client name (top N, (unnamed), (other)) -> connections
    idle: dict[tuple[str, str], int] = field(factory=dict)  # (client name, bucket) -> connections idle longer than the bucket
    by_source: dict[str, int] = field(factory=dict)  # source address (top N, (other)) -> connections
    output_buffer_max: dict[str, int] = field(factory=dict)  # client name -> the largest omem
    total: int = 0
    read_at: float = 0.0
    connections: tuple[Connection, ...] = ()  # with per_connection: the lowest max_connections ids


def profile(clients: Iterable[tuple[str, str, int, int]], top: int, read_at: float = 0.0) -> ClientProfile:
    names: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    rows = []
    for name, source, idle, omem in clients:
        label = name or UNNAMED
        names[label] += 1
        sources[source] += 1
        rows.append((label, idle, omem))
    kept = {name for name, _ in names.most_common(top)} | {UNNAMED}
    connected: Counter[str] = Counter()
    idle_counts: Counter[tuple[str, str]] = Counter()
    omem_max: dict[str, int] = {}
    for label, idle, omem in rows:
        name = label if label in kept else OTHER
        connected[name] += 1
        for bucket, seconds in IDLE_BUCKETS:
            if idle > seconds:
                idle_counts[(name, bucket)] += 1
        omem_max[name] = max(omem_max.get(name, 0), omem)
    by_source: Counter[str] = Counter()
    kept_sources = {source for source, _ in sources.most_common(top)}
    for source, count in sources.items():
        by_source[source if source in kept_sources else OTHER] += count
    return ClientProfile(dict(connected), dict(idle_counts), dict(by_source), omem_max, len(rows), read_at)


class ClientProfiler(NodeProfiler):
    """Reads CLIENT LIST of every target from one background thread, each on a connection of its own."""

    what = "clients: CLIENT LIST"

    def __init__(self, config: ClientsConfig, targets: Targets) -> None:
        # a bound of its own (clients.max_reply_size), not the scrape's: the list grows with the connections, and it is
        # read in the background, never inside a scrape's deadline
        super().__init__("client-profiler", targets, config.interval, max_reply_bytes=config.max_reply_bytes)
        self.config = config

    def read(self, node: RedisNode) -> ClientProfile | None:
        reply = node.call_if_allowed("client", ("CLIENT", "LIST"))
        if not isinstance(reply, bytes):  # CLIENT is renamed away or refused: nothing to read, no error reply sent
            return None
        read_at = time.time()
        result = profile(parse_client_list(reply), self.config.top, read_at)
        if not self.config.per_connection:
            return result
        connections = sorted(parse_connections(reply), key=lambda connection: int(connection.id))[: self.config.max_connections]
        return replace(result, connections=tuple(connections))
