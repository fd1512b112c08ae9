"""Parse the text of a Redis ``INFO`` reply into sections of raw fields.

Pure functions only: no I/O, no metric names. The reply is split into
``{section: {field: value}}`` with the section names lower-cased; lines that
are neither a ``# Section`` header nor a ``field:value`` pair are counted as
malformed and skipped, never raised.
"""

from __future__ import annotations

import math

from exporter.common.records import field, record

# Fields whose values look numeric but are identifiers or versions, not measurements.
IDENTIFIER_FIELDS = frozenset(
    {
        "redis_git_sha1",
        "redis_git_dirty",
        "redis_build_id",
        "run_id",
        "master_replid",
        "master_replid2",
        "tcp_port",
        "arch_bits",
        "gcc_version",
        "executable",
        "config_file",
        "redis_version",
        "valkey_version",
        "server_name",
        "mem_allocator",
        "monotonic_clock",
        "multiplexing_api",
        "atomicvar_api",
        "process_supervised",
        "master_host",
        "master_port",
        "os",
    }
)

_NUMBER_START = frozenset("0123456789-+.")
_INF = math.inf
STATUS_VALUES = {"ok": 1.0, "up": 1.0, "true": 1.0, "yes": 1.0, "err": 0.0, "fail": 0.0, "down": 0.0, "false": 0.0, "no": 0.0}


# a section's text's length and hash, its fields where they are kept for the next reply (None where not), and how many
# of its lines were malformed
Chunk = tuple[int, int, "dict[str, str] | None", int]


@record
class InfoReply:
    """A parsed INFO reply: ``sections[section][field] = raw value``. ``chunks`` keeps each section's text's length and
    hash, so that the next reply of the same node reuses the sections whose text stood still, and with it the fields of
    a section that stood still since the reply before: a section that changes at every scrape (stats, cpu, a server's
    uptime) would only be parsed again, and its fields are most of what a node would keep (at a fleet's scale, a third
    of its memory). Not the text itself: the texts were a quarter of what a node keeps. Two texts of one length and one
    64-bit hash (SipHash, keyed anew each process) that differ would serve a section one scrape late; for a section
    whose text changed, that is about one chance in 2^64."""

    sections: dict[str, dict[str, str]] = field(factory=dict)
    malformed_lines: int = 0
    chunks: dict[str, Chunk] = field(factory=dict)

    def kept(self) -> InfoReply:
        """What the node keeps for its next reply: the chunks, and the fields only of the sections kept in them."""
        return InfoReply(chunks=self.chunks)

    def get(self, name: str, default: str | None = None) -> str | None:
        """The raw value of a field, looked up across all sections."""
        for fields in self.sections.values():
            if name in fields:
                return fields[name]
        return default

    def merge(self, other: InfoReply) -> None:
        """Add the sections of another reply (used when INFO is fetched per section). Sections are copied, never
        changed in place: a parsed section may be shared with the node's next reply."""
        for section, fields in other.sections.items():
            self.sections[section] = {**self.sections.get(section, {}), **fields}
        self.malformed_lines += other.malformed_lines
        self.chunks = {}


def parse_info(text: str, previous: InfoReply | None = None) -> InfoReply:
    """Split INFO text into sections; malformed lines are counted, not raised. A section whose text is what it was in
    ``previous`` (the same node's last reply) is not parsed again where that reply kept its fields: they are shared,
    never changed. Where it did not, the section is parsed, and kept from now on, as one that stands still."""
    reply = InfoReply()
    previous_sections = previous.chunks if previous is not None else {}
    sections = reply.sections
    # what comes before the first header, then "Section\r\nfield:value\r\n..." after each "\n#"
    before, *parts = ("\n" + text).split("\n#")
    name = "default"
    sections[name] = {}
    reply.malformed_lines += _parse_lines(before, sections[name])
    for part in parts:
        header, _, body = part.partition("\n")
        stood_still = False
        if header.strip():
            name = header.strip().lower()
            chunk = previous_sections.get(name)
            if chunk is not None and chunk[0] == len(part) and chunk[1] == hash(part) and name not in sections:
                if chunk[2] is not None:
                    sections[name] = chunk[2]
                    reply.malformed_lines += chunk[3]
                    reply.chunks[name] = chunk
                    continue
                stood_still = True
        else:  # a header without a name: counted, and its lines go on in the section before it
            reply.malformed_lines += 1
        if name in sections:  # lines added to a section already made: to a copy (a shared one is never changed)
            sections[name] = {**sections[name]}
            reply.chunks.pop(name, None)
            reply.malformed_lines += _parse_lines(body, sections[name])
            continue
        sections[name] = {}
        malformed = _parse_lines(body, sections[name])
        reply.malformed_lines += malformed
        reply.chunks[name] = (len(part), hash(part), sections[name] if stood_still else None, malformed)
    if not sections["default"]:
        del sections["default"]
    return reply


def _parse_lines(text: str, fields: dict[str, str]) -> int:
    """``field:value`` lines into ``fields``; returns how many lines were malformed."""
    malformed = 0
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        if not line:
            continue
        key, sep, value = line.partition(":")
        name = _GOOD_NAMES.get(key) if sep else None
        if name is None:
            if not sep or not key or not _is_field_name(key):
                malformed += 1
                continue
            name = key
        fields[name] = value
    return malformed


# field names seen valid, each kept once (bounded): checked once, not every scrape, and every node's parsed sections
# share the one string instead of holding a copy each
_GOOD_NAMES: dict[str, str] = {}


def _is_field_name(key: str) -> bool:
    good = key.isprintable() and " " not in key and len(key) <= 200
    if good and len(_GOOD_NAMES) < 8192:
        _GOOD_NAMES[key] = key
    return good


def parse_number(value: str) -> float | None:
    """A finite float from an INFO value, or None when it is not a plain number."""
    if not value or len(value) > 40 or value[0] not in _NUMBER_START:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if -_INF < number < _INF:
        return number
    return None


def parse_value(value: str) -> float | None:
    """A number, or 1/0 for status words such as ok/err and up/down."""
    number = parse_number(value)
    if number is not None:
        return number
    return STATUS_VALUES.get(value.lower())


def parse_subfields(value: str) -> dict[str, str]:
    """Split ``a=1,b=2`` (keyspace, commandstats, replica lines) into a dict.

    Values may themselves contain ``=`` (never ``,``); pairs without ``=`` are dropped.
    """
    result: dict[str, str] = {}
    for part in value.split(","):
        key, sep, sub = part.partition("=")
        if sep and key:
            result[key] = sub
    return result


CommandStats = dict[str, tuple[float, float]]  # command -> (calls, µs) from INFO commandstats
# a commandstats line's numbers: calls, usec, rejected_calls, failed_calls (None where the server does not give one)
CommandNumbers = tuple[float | None, float | None, float | None, float | None]
CommandLines = dict[str, tuple[str, CommandNumbers]]  # cmdstat_<command> -> (the line's text, its numbers)


def command_lines(fields: dict[str, str], previous: CommandLines | None = None) -> CommandLines:
    """The numbers of each line of INFO commandstats (``cmdstat_get:calls=1,usec=2,...``); a line whose text stands
    where it stood in ``previous`` (the same node's last reply) is not parsed again. A new dict: ``previous`` is never
    changed, so a render may still read it."""
    lines: CommandLines = {}
    for name, raw in fields.items():
        if not name.startswith("cmdstat_"):
            continue
        known = previous.get(name) if previous else None
        if known is not None and known[0] == raw:
            lines[name] = known
            continue
        sub = parse_subfields(raw)
        get = sub.get
        numbers = (
            parse_number(get("calls", "")),
            parse_number(get("usec", "")),
            parse_number(get("rejected_calls", "")),
            parse_number(get("failed_calls", "")),
        )
        lines[name] = (raw, numbers)
    return lines


def command_stats(lines: CommandLines) -> CommandStats:
    """(calls, µs) per command that has both."""
    stats: CommandStats = {}
    for name, (_, (calls, usec, _, _)) in lines.items():
        if calls is not None and usec is not None:
            stats[name[8:]] = (calls, usec)
    return stats


def parse_percent(value: str) -> float | None:
    """``"99.58%"`` as the ratio 0.9958; None when it is not a percentage."""
    if not value.endswith("%"):
        return None
    number = parse_number(value[:-1])
    return None if number is None else number / 100.0
