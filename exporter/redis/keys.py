"""Watched keys and streams, with redis_exporter's settings and families: what to watch (parsed from its flag
syntax), what a probe found, and the samples made of it. The probe itself (I/O) is in ``key_probe.py``."""

from __future__ import annotations

import re
from functools import lru_cache

from exporter.common.families import COUNTER, GAUGE, FamilySet
from exporter.common.records import field, record
from exporter.common.urltext import unquote_plus

from .info import parse_number

GLOB = re.compile(r"[?*\[\]^]")  # a pattern (found by SCAN) rather than a key name, as redis_exporter tells them apart
DEFAULT_BATCH_SIZE = 1000
DEFAULT_MAX_KEYS = 10_000  # keys found by the patterns of check_keys and check_streams per scrape, each probed
DEFAULT_MAX_COUNTED = 1_000_000  # keys a count_keys pattern may visit per scrape
MAX_VALUE_BYTES = 1024  # a longer string value is not served (redis_exporter would make any value a label)


@record(frozen=True)
class KeySpec:
    db: int
    key: str

    @property
    def is_pattern(self) -> bool:
        return GLOB.search(self.key) is not None


@record(frozen=True)
class QueueSpec:
    """Watched keys that are queues: the queue alerts watch their length; ``max_length`` None: growth only."""

    db: int
    key: str  # a key name or a glob pattern
    max_length: int | None = None

    def matches(self, db: int, key: str) -> bool:
        return db == self.db and (key == self.key or glob_regex(self.key).fullmatch(key) is not None)


@record(frozen=True)
class KeyProbes:
    """A target's watched keys and streams; empty: nothing is probed."""

    check_keys: tuple[KeySpec, ...] = ()
    check_single_keys: tuple[KeySpec, ...] = ()
    count_keys: tuple[KeySpec, ...] = ()
    check_streams: tuple[KeySpec, ...] = ()
    check_single_streams: tuple[KeySpec, ...] = ()
    batch_size: int = DEFAULT_BATCH_SIZE
    max_keys: int = DEFAULT_MAX_KEYS
    max_counted: int = DEFAULT_MAX_COUNTED
    stream_consumers: bool = True
    queues: tuple[QueueSpec, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.check_keys or self.check_single_keys or self.count_keys or self.check_streams or self.check_single_streams)


def parse_key_list(text: str) -> tuple[KeySpec, ...]:
    """redis_exporter's list syntax: ``key,db3=pattern*,db1=a%2Cb``: comma-separated, each entry optionally
    ``db<N>=`` (or ``N=``) first, URL-escaped (a comma in a key is ``%2C``). Raises ValueError naming the entry."""
    specs: list[KeySpec] = []
    for entry in text.split(","):
        if not entry.strip():
            continue
        parts = entry.split("=")
        if len(parts) > 2:
            raise ValueError(f"{entry!r} has more than one '=' (write '=' in a key as %3D)")
        db_text, key_text = ("0", parts[0]) if len(parts) == 1 else (parts[0].strip().removeprefix("db"), parts[1])
        if not (db_text.isascii() and db_text.isdigit()):
            raise ValueError(f"{entry!r}: {parts[0].strip()!r} is not a database such as db3")
        key = unquote_plus(key_text.strip())
        if not key:
            raise ValueError(f"{entry!r} names no key")
        specs.append(KeySpec(int(db_text), key))
    return tuple(dict.fromkeys(specs))


@record
class KeyReading:
    db: int
    key: str
    type: str  # "none" for a missing key
    size: int = 0
    value: bytes | None = None  # a string's value, when short enough
    memory: int | None = None


@record
class ScanReading:
    option: str  # check_keys, count_keys or check_streams
    db: int
    pattern: str
    found: int
    complete: bool


@record
class StreamReading:
    db: int
    key: str
    info: dict[str, object]
    groups: list[dict[str, object]]
    consumers: list[list[dict[str, object]]]


@record
class KeyProbeResult:
    keys: list[KeyReading] = field(factory=list)
    counts: list[tuple[int, str, int]] = field(factory=list)  # complete counts only
    scans: list[ScanReading] = field(factory=list)
    streams: list[StreamReading] = field(factory=list)
    complete: bool = True  # False: the deadline (or a refusal) ended the probes early
    duration: float = 0.0
    queues: tuple[QueueSpec, ...] = ()


@lru_cache(maxsize=1024)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Redis' glob (``*``, ``?``, ``[a-z]``, ``[^a]``, ``\\`` escapes) as a regular expression."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif char == "[":
            negate = pattern[i + 1 : i + 2] == "^"
            start = i + 2 if negate else i + 1
            end = pattern.find("]", start)
            end = len(pattern) if end < 0 else end
            members = "".join("-" if c == "-" else re.escape(c) for c in pattern[start:end])
            out.append(f"[{'^' if negate else ''}{members}]" if members else ("(?!)" if not negate else "."))
            i = end + 1
        else:
            out.append(".*" if char == "*" else "." if char == "?" else re.escape(char))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def stream_id_ms(value: object) -> float:
    """An entry id ``1526919030474-55`` as its milliseconds, as redis_exporter serves ids; 0 when absent."""
    if isinstance(value, bytes):
        value = value.decode("ascii", errors="replace")
    if not isinstance(value, str) or not value:
        return 0.0
    number = parse_number(value.split("-", 1)[0])
    return number if number is not None else 0.0


def _number(value: object) -> float:
    if isinstance(value, int):
        return float(value)
    if isinstance(value, bytes):
        number = parse_number(value.decode("ascii", errors="replace"))
        return number if number is not None else 0.0
    return 0.0


def add_key_metrics(result: KeyProbeResult, base: dict[str, str], out: FamilySet) -> None:
    for reading in result.keys:
        labels = {**base, "db": f"db{reading.db}", "key": reading.key}
        out.add("redis_key_size", GAUGE, 'The length or size of "key".', labels, float(reading.size))
        if reading.memory is not None:
            out.add("redis_key_memory_usage_bytes", GAUGE, 'The memory usage of "key" in bytes.', labels, float(reading.memory))
        if reading.type == "string" and reading.value:
            text = reading.value.decode("utf-8", errors="replace")
            number = parse_number(text)
            if number is not None:
                out.add("redis_key_value", GAUGE, 'The value of "key".', labels, number)
            else:
                out.add("redis_key_value_as_string", GAUGE, 'The value of "key" as a string.', {**labels, "val": text}, 1.0)
    _add_queue_limits(result, base, out)
    for db, pattern, count in result.counts:
        out.add("redis_keys_count", GAUGE, "Count of keys.", {**base, "db": f"db{db}", "key": pattern}, float(count))
    for scan in result.scans:
        labels = {**base, "option": scan.option, "db": f"db{scan.db}", "pattern": scan.pattern}
        out.add("elasticache_exporter_key_pattern_keys", GAUGE, "Keys a pattern's SCAN found in the last scrape.", labels, float(scan.found))
        out.add(
            "elasticache_exporter_key_pattern_complete",
            GAUGE,
            "1 when the pattern's SCAN ran to its end; 0 when the key budget or the deadline stopped it (its redis_keys_count is then not served).",
            labels,
            1.0 if scan.complete else 0.0,
        )
    for stream in result.streams:
        _add_stream(stream, base, out)
    if result.keys or result.counts or result.scans or result.streams or not result.complete:
        out.add(
            "elasticache_exporter_key_probes_complete",
            GAUGE,
            "1 when every watched key and stream was probed in the last scrape, 0 when the deadline or a refusal ended it early.",
            base,
            1.0 if result.complete else 0.0,
        )
        out.add(
            "elasticache_exporter_key_probes_duration_seconds",
            GAUGE,
            "Time the key and stream probes took in the last scrape.",
            base,
            result.duration,
        )


def _add_queue_limits(result: KeyProbeResult, base: dict[str, str], out: FamilySet) -> None:
    if not result.queues:
        return
    for reading in result.keys:
        spec = next((queue for queue in result.queues if queue.matches(reading.db, reading.key)), None)
        if spec is not None:
            limit = float(spec.max_length) if spec.max_length is not None else float("inf")
            out.add(
                "elasticache_exporter_queue_length_limit",
                GAUGE,
                "The configured maximum length of a watched key that is a queue (+Inf: none; the queue alerts watch its growth).",
                {**base, "db": f"db{reading.db}", "key": reading.key},
                limit,
            )


_STREAM_GAUGES = (
    ("redis_stream_length", "length", "The number of elements of the stream.", _number),
    ("redis_stream_radix_tree_keys", "radix-tree-keys", "Radix tree keys count.", _number),
    ("redis_stream_radix_tree_nodes", "radix-tree-nodes", "Radix tree nodes count.", _number),
    ("redis_stream_last_generated_id", "last-generated-id", "The epoch timestamp (ms) of the latest message on the stream.", stream_id_ms),
    ("redis_stream_groups", "groups", "Groups count of stream.", _number),
    ("redis_stream_max_deleted_entry_id", "max-deleted-entry-id", "The epoch timestamp (ms) of the last message deleted from the stream.",
     stream_id_ms),
)  # fmt: skip
_GROUP_GAUGES = (
    ("redis_stream_group_consumers", "consumers", "Consumers count of stream group.", _number),
    ("redis_stream_group_messages_pending", "pending", "Pending number of messages in that stream group.", _number),
    ("redis_stream_group_last_delivered_id", "last-delivered-id", "The epoch timestamp (ms) of the last delivered message.", stream_id_ms),
    ("redis_stream_group_entries_read", "entries-read", "Total number of entries read from the stream group.", _number),
    ("redis_stream_group_lag", "lag", "The number of messages waiting to be delivered to the stream group's consumers.", _number),
)


def _entry_id(entry: object) -> object:
    return entry[0] if isinstance(entry, list) and entry else None


def _add_stream(stream: StreamReading, base: dict[str, str], out: FamilySet) -> None:
    labels = {**base, "db": f"db{stream.db}", "stream": stream.key}
    info = stream.info
    for name, field_name, help_text, convert in _STREAM_GAUGES:
        out.add(name, GAUGE, help_text, labels, convert(info.get(field_name)))
    out.add(
        "redis_stream_first_entry_id",
        GAUGE,
        "The epoch timestamp (ms) of the first message in the stream.",
        labels,
        stream_id_ms(_entry_id(info.get("first-entry"))),
    )
    out.add(
        "redis_stream_last_entry_id",
        GAUGE,
        "The epoch timestamp (ms) of the last message in the stream.",
        labels,
        stream_id_ms(_entry_id(info.get("last-entry"))),
    )
    out.add(
        "redis_stream_entries_added_total",
        COUNTER,
        "The count of all entries added to the stream during its lifetime.",
        labels,
        _number(info.get("entries-added")),
    )
    for index, group in enumerate(stream.groups):
        group_name = as_text(group.get("name"))
        group_labels = {**labels, "group": group_name}
        for name, field_name, help_text, convert in _GROUP_GAUGES:
            out.add(name, GAUGE, help_text, group_labels, convert(group.get(field_name)))
        for consumer in stream.consumers[index] if index < len(stream.consumers) else ():
            consumer_labels = {**group_labels, "consumer": as_text(consumer.get("name"))}
            out.add(
                "redis_stream_group_consumer_messages_pending",
                GAUGE,
                "Pending number of messages for this specific consumer.",
                consumer_labels,
                _number(consumer.get("pending")),
            )
            out.add(
                "redis_stream_group_consumer_idle_seconds",
                GAUGE,
                "Consumer idle time in seconds.",
                consumer_labels,
                _number(consumer.get("idle")) / 1e3,
            )


def as_text(value: object) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value or "")


def pairs(reply: object) -> dict[str, object]:
    """A RESP2 flat map (``[name, value, name, value, ...]``) as a dict."""
    if not isinstance(reply, list):
        return {}
    return {as_text(reply[i]): reply[i + 1] for i in range(0, len(reply) - 1, 2)}
