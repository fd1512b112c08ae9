"""Prometheus' protobuf exposition format (``io.prometheus.client.MetricFamily``, length-delimited), written from the
lines of the text encoder, and the native histograms it alone can carry.

A :class:`~exporter.common.exposition.TextFamilySet` holds each family as its HELP and TYPE lines and its sample lines
(``name{labels} value``), most of them replayed from a target's memo. The protobuf body is made from those lines: each
label set's text is read once and kept with its encoded label pairs (the same few hundred sets recur every scrape), and
a histogram's or summary's lines are gathered by their labels into one message. Only the wire format is written here,
by hand, so that no protobuf runtime is needed: varints, zig-zag integers, little-endian doubles and length-delimited
fields, as ``metrics.proto`` (prometheus/client_model) lays them out.

Native histograms: a family named in ``native`` whose bucket bounds are powers of two (within 3.5 %, see
:func:`native_index`) also carries the same counts as a native histogram of schema 0 (bucket ``i`` holds
(2^(i-1), 2^i]), beside its classic buckets, as client_golang serves a histogram that has both: Prometheus keeps the
native one where ``scrape_native_histograms`` is on and the classic buckets where it asks for them
(``always_scrape_classic_histograms``) or cannot read native ones.
"""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Iterable
from typing import Any

from .headers import split_header
from .recent import RecentCache

# metrics.proto's MetricType
COUNTER, GAUGE, SUMMARY, UNTYPED, HISTOGRAM = 0, 1, 2, 3, 4
_TYPES = {"counter": COUNTER, "gauge": GAUGE, "summary": SUMMARY, "untyped": UNTYPED, "histogram": HISTOGRAM}

_LABEL = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = re.compile(r"\\(.)")
_UNESCAPED = {"n": "\n", "\\": "\\", '"': '"'}
_DOUBLE = struct.Struct("<d")
# how far (in log2) a classic bound may lie from a power of two and still be that native bucket's bound: Redis' LATENCY
# HISTOGRAM keeps buckets of 2^k ns and reports their bounds in whole µs (1, 2, 4, 8, 16, 33, 66, 132, 264, ...: about
# 1.024 x 2^(k-10), rounded up), at most 0.045 above the power of two; half a bucket is 0.5
NATIVE_BOUND_TOLERANCE = 0.05


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64/uint64: two's complement in ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = tuple(_varint(value) for value in range(2048))  # lengths, counts, tags: most are small


def varint(value: int) -> bytes:
    return _SMALL_VARINTS[value] if 0 <= value < 2048 else _varint(value)


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63) if value < 0 else value << 1


def length_delimited(field: int, payload: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def double_field(field: int, value: float) -> bytes:
    return bytes((field << 3 | 1,)) + _DOUBLE.pack(value)


def varint_field(field: int, value: int) -> bytes:
    return bytes((field << 3,)) + varint(value)


def _string_field(field: int, text: str) -> bytes:
    return length_delimited(field, text.encode("utf-8"))


def _label_pairs(pairs: list[tuple[str, str]]) -> bytes:
    return b"".join(length_delimited(1, _string_field(1, name) + _string_field(2, value)) for name, value in pairs)


def _count(value: float) -> int:
    """A count as the uint64 the message holds (a NaN or infinite one, which no count is, as 0)."""
    return int(value) if math.isfinite(value) and value >= 0 else 0


def _number(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _unescape(value: str) -> str:
    return _UNESCAPE.sub(lambda m: _UNESCAPED.get(m.group(1), "\\" + m.group(1)), value) if "\\" in value else value


_BOUNDS: dict[str, tuple[float, bytes]] = {}  # an le label's value: the bound, and its field (none for +Inf or no number)


def _bound(le: str) -> tuple[float, bytes]:
    number = _number(le)
    bound = (math.inf, b"") if number is None or number == math.inf else (number, double_field(2, number))
    if len(_BOUNDS) < 4096:
        _BOUNDS[le] = bound
    return bound


class _LabelText:
    """One label set's text (``{a="b",le="8"}``) read: its pairs, and for a histogram's or summary's lines the LabelPair
    fields of all but ``le`` and ``quantile`` (which their messages carry as numbers)."""

    __slots__ = ("_pairs", "_scalar_heads", "bound", "encoded", "key", "quantile")

    def __init__(self, text: str) -> None:
        pairs = self._pairs = [(name, _unescape(value)) for name, value in _LABEL.findall(text)]
        kept = [(name, value) for name, value in pairs if name not in ("le", "quantile")]
        found = dict(pairs)
        le = found.get("le")
        self.bound = None if le is None else _BOUNDS.get(le) or _bound(le)  # a bucket's upper bound and its field
        self.quantile = _number(found.get("quantile"))
        self.key = tuple(kept)
        self.encoded = _label_pairs(kept)
        self._scalar_heads: dict[int, bytes] = {}

    def scalar_head(self, field: int) -> bytes:
        """A Metric of these labels (every one: ``le`` or ``quantile`` is a plain label here) and one value (a Gauge,
        Counter or Untyped message at ``field``), all but the value's eight bytes: the MetricFamily's field 4, its
        length, the label pairs, then ``field`` holding ``{double value = 1}``."""
        head = self._scalar_heads.get(field)
        if head is None:
            body = _label_pairs(self._pairs) + bytes((field << 3 | 2, 9, 1 << 3 | 1))
            head = self._scalar_heads[field] = b"\x22" + varint(len(body) + 8) + body
        return head


# label texts read, by the text: the same few hundred every scrape; bounded, and a pure function of its key
_LABEL_TEXTS: dict[str, _LabelText] = {}
_MAX_LABEL_TEXTS = 16384
_NO_LABELS = _LabelText("")


def _label_text(text: str) -> _LabelText:
    read = _LABEL_TEXTS.get(text)
    if read is None:
        if len(_LABEL_TEXTS) >= _MAX_LABEL_TEXTS:
            _LABEL_TEXTS.clear()
        read = _LABEL_TEXTS[text] = _LabelText(text)
    return read


def _sample(line: str) -> tuple[str, _LabelText, float]:
    """A text sample line: its name, its labels read and its value (``float`` takes the line's end)."""
    head, _, number = line.rpartition(" ")
    brace = head.find("{")
    if brace < 0:
        return head, _NO_LABELS, float(number)
    return head[:brace], _label_text(head[brace:]), float(number)


def _parse_header(header: str) -> tuple[str, str, str]:
    """The name, help text (unescaped) and type of a family's HELP and TYPE lines."""
    name, help_text, kind = split_header(header)
    if "\\" in help_text:
        help_text = help_text.replace("\\\\", "\0").replace("\\n", "\n").replace("\0", "\\")
    return name, help_text, kind


_FAMILY_HEADS: dict[str, tuple[bytes, int, str]] = {}  # a family's header lines: its encoded name and help, type, name


def _family_head(header: str) -> tuple[bytes, int, str]:
    head = _FAMILY_HEADS.get(header)
    if head is None:
        name, help_text, kind = _parse_header(header)
        kind_number = _TYPES.get(kind, UNTYPED)
        head = (_string_field(1, name) + _string_field(2, help_text) + varint_field(3, kind_number), kind_number, name)
        if len(_FAMILY_HEADS) >= _MAX_LABEL_TEXTS:
            _FAMILY_HEADS.clear()
        _FAMILY_HEADS[header] = head
    return head


@functools.lru_cache(maxsize=4096)
def native_index(bound: float) -> int | None:
    """The schema-0 bucket whose upper bound is ``bound`` (a power of two, within the tolerance), or None."""
    if not bound > 0 or math.isinf(bound):
        return None
    exact = math.log2(bound)
    index = round(exact)
    return index if abs(exact - index) <= NATIVE_BOUND_TOLERANCE else None


def native_fields(buckets: list[tuple[float, float]], count: float) -> bytes | None:
    """A native histogram of schema 0 (zero threshold 0) with the counts of these classic buckets ((upper bound,
    cumulative count), finite bounds in increasing order), or None where they cannot be one: a bound that is not a power
    of two, two bounds on one bucket, counts that fall, or observations above the last finite bound."""
    indexes: list[int] = []
    counts: list[int] = []
    previous = 0.0
    for bound, cumulative in buckets:
        index = native_index(bound)
        if index is None or (indexes and index <= indexes[-1]) or cumulative < previous or cumulative != int(cumulative):
            return None
        if cumulative > previous:
            indexes.append(index)
            counts.append(int(cumulative - previous))
        previous = cumulative
    if previous != count:
        return None
    fields = [varint_field(5, zigzag(0)), double_field(6, 0.0), varint_field(7, 0)]  # schema, zero threshold, zero count
    spans: list[tuple[int, int]] = []  # (offset from the end of the previous span, length)
    end = 0
    for index in indexes:
        if spans and index == end:
            spans[-1] = (spans[-1][0], spans[-1][1] + 1)
        else:
            spans.append((index - end if spans else index, 1))
        end = index + 1
    if not spans:  # no observation yet: an empty span says the histogram is native
        spans.append((0, 0))
    for offset, length in spans:
        fields.append(length_delimited(12, varint_field(1, zigzag(offset)) + varint_field(2, length)))
    deltas = bytearray()
    last = 0
    for value in counts:
        deltas += varint(zigzag(value - last))
        last = value
    if deltas:
        fields.append(length_delimited(13, bytes(deltas)))  # packed sint64
    return b"".join(fields)


def _histogram_message(buckets: Iterable[tuple[tuple[float, bytes], float]], count: float, total: float, native: bool) -> bytes:
    """A Histogram message from its finite buckets ((bound, its field), cumulative count); +Inf is the count."""
    classic: list[tuple[float, float]] = []
    parts = []
    for (bound, field), cumulative in buckets:
        if field:
            classic.append((bound, cumulative))
            bucket = b"\x08" + varint(_count(cumulative)) + field  # cumulative_count = 1, upper_bound = 2
            parts.append(b"\x1a" + varint(len(bucket)) + bucket)
    body = varint_field(1, _count(count)) + double_field(2, total) + b"".join(parts)
    if native:
        body += native_fields(classic, count) or b""
    return length_delimited(7, body)


def _summary_message(quantiles: Iterable[tuple[float, float]], count: float, total: float) -> bytes:
    """A Summary message; each quantile and its value are two doubles, 18 bytes."""
    parts = b"".join(b"\x1a\x12" + double_field(1, quantile) + double_field(2, value) for quantile, value in quantiles)
    return length_delimited(4, varint_field(1, _count(count)) + double_field(2, total) + parts)


def _sum_and_count(samples: list[tuple[str, _LabelText, float]], name: str) -> tuple[float, float]:
    found = {sample_name: value for sample_name, _, value in samples}
    return found.get(name + "_count", 0.0), found.get(name + "_sum", 0.0)


def _histogram(samples: list[tuple[str, _LabelText, float]], name: str, native: bool) -> bytes:
    bucket = name + "_bucket"
    buckets = [(labels.bound, value) for sample_name, labels, value in samples if sample_name == bucket and labels.bound is not None]
    return _histogram_message(buckets, *_sum_and_count(samples, name), native)


def _summary(samples: list[tuple[str, _LabelText, float]], name: str) -> bytes:
    quantiles = [(labels.quantile, value) for sample_name, labels, value in samples if sample_name == name and labels.quantile is not None]
    return _summary_message(quantiles, *_sum_and_count(samples, name))


def histogram_chunk(label_text: str, buckets: list[tuple[str, float]], count: float, total: float, native: bool) -> bytes:
    """One histogram's Metric message from what its text lines were made of (``FamilySet.add_histogram``'s
    arguments, ``label_text`` its labels as rendered): the bytes :func:`_grouped` reads back from those lines, without
    reading them."""
    message = _histogram_message(((_BOUNDS.get(le) or _bound(le), cumulative) for le, cumulative in buckets), count, total, native)
    return length_delimited(4, (_label_text(label_text) if label_text else _NO_LABELS).encoded + message)


def summary_chunk(label_text: str, quantiles: list[tuple[str, float]], count: float, total: float) -> bytes:
    """One summary's Metric message from ``FamilySet.add_summary``'s arguments, as :func:`histogram_chunk`."""
    numbers = [(number, value) for quantile, value in quantiles if (number := _number(quantile)) is not None]
    return length_delimited(4, (_label_text(label_text) if label_text else _NO_LABELS).encoded + _summary_message(numbers, count, total))


_VALUE_FIELD = {COUNTER: 3, GAUGE: 2, UNTYPED: 5}


# a sample line's Metric message, a histogram's or summary's lines' (from its first bucket or quantile to its _count)
# and a whole family's, by the line or the tuple of lines (with whether it is served native): most are replayed
# unchanged scrape after scrape, and the same text is the same message (a pure memo, bounded; unused entries are let
# go after two generations)
ENCODED: RecentCache[tuple[Any, ...], bytes] = RecentCache(max_entries=16384, generation_seconds=120.0)


def _grouped(lines: list[str], name: str, kind: int, native: bool) -> bytes:
    """The Metric messages of a histogram's or summary's lines, gathered by their labels (without le or quantile)."""
    grouped: dict[tuple[tuple[str, str], ...], tuple[_LabelText, list[tuple[str, _LabelText, float]]]] = {}
    for line in lines:
        sample = _sample(line)
        entry = grouped.get(sample[1].key)
        if entry is None:
            entry = grouped[sample[1].key] = (sample[1], [])
        entry[1].append(sample)
    return b"".join(
        length_delimited(4, labels.encoded + (_histogram(samples, name, native) if kind == HISTOGRAM else _summary(samples, name)))
        for labels, samples in grouped.values()
    )


def encode_family(header: str, lines: list[str], native: frozenset[str] = frozenset()) -> bytes:
    """One family, given its text header and sample lines, as a length-delimited MetricFamily."""
    head, kind, name = _FAMILY_HEADS.get(header) or _family_head(header)
    young, recall, put = ENCODED.young, ENCODED.recall, ENCODED.put
    metrics = []
    if kind in (HISTOGRAM, SUMMARY):
        last = name + "_count"  # each label set's lines end with its _count (FamilySet.add_histogram, add_summary)
        start = 0
        for end, line in enumerate(lines, 1):
            if end == len(lines) or (line.startswith(last) and line[len(last)] in "{ "):
                chunk = (name in native, *lines[start:end])
                encoded = young.get(chunk) or recall(chunk)
                if encoded is None:
                    put(chunk, encoded := _grouped(lines[start:end], name, kind, name in native))
                metrics.append(encoded)
                start = end
    else:
        field = _VALUE_FIELD[kind]
        pack = _DOUBLE.pack
        for line in lines:
            key = (field, line)  # the same line in a family of another type is another message
            encoded = young.get(key) or recall(key)
            if encoded is None:
                sample, _, number = line.rpartition(" ")
                brace = sample.find("{")
                labels = _NO_LABELS if brace < 0 else _LABEL_TEXTS.get(sample[brace:]) or _label_text(sample[brace:])
                put(key, encoded := labels.scalar_head(field) + pack(float(number)))
            metrics.append(encoded)
    family = head + b"".join(metrics)
    return varint(len(family)) + family
