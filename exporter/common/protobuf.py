"""Prometheus' protobuf exposition format (``io.prometheus.client.MetricFamily``, length-delimited), and the native
histograms it alone can carry.

:class:`ProtobufFamilySet` encodes each sample as it is added, as text does its lines: a scalar sample is one Metric
message (the label pairs and the value field, all but the value's eight bytes kept per label set), a histogram or
summary one message made from its inputs. A target's inputs that stand still replay their messages from the target's
protobuf memo, as text replays its lines. Only the wire format is written here, by hand, so that no protobuf runtime is
needed: varints, zig-zag integers, little-endian doubles and length-delimited fields, as ``metrics.proto``
(prometheus/client_model) lays them out.

Native histograms: a family named in ``native`` whose bucket bounds are powers of two (within 5 %, see
:func:`native_index`) also carries the same counts as a native histogram of schema 0 (bucket ``i`` holds
(2^(i-1), 2^i]), beside its classic buckets, as client_golang serves a histogram that has both: Prometheus keeps the
native one where ``scrape_native_histograms`` is on and the classic buckets where it asks for them
(``always_scrape_classic_histograms``) or cannot read native ones.
"""

from __future__ import annotations

import functools
import itertools
import math
import struct
from collections.abc import Hashable
from typing import Any

from .exposition import RELEASE_LINES, RenderingFamilySet, StaticLabels, _keep_rendered
from .families import COUNTER, GAUGE, HISTOGRAM, SUMMARY
from .labels import LabelSet

# metrics.proto's MetricType, and the field of a Metric that holds each scalar type's value message
_TYPES = {COUNTER: 0, GAUGE: 1, SUMMARY: 2, HISTOGRAM: 4}
UNTYPED = 3
_VALUE_FIELD = {0: 3, 1: 2, UNTYPED: 5}

_DOUBLE = struct.Struct("<d")
_INF = math.inf
_pack_double = _DOUBLE.pack
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
    if 0 <= value < 2048:
        return _SMALL_VARINTS[value]
    if 0 < value < 1 << 28:  # counts up to 268 million, as most a node serves: two to four bytes without a loop
        if value < 1 << 14:
            return bytes((value & 0x7F | 0x80, value >> 7))
        if value < 1 << 21:
            return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14))
        return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14 & 0x7F | 0x80, value >> 21))
    return _varint(value)


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


def _count(value: float) -> int:
    """A count as the uint64 the message holds (a NaN or infinite one, which no count is, as 0)."""
    return int(value) if math.isfinite(value) and value >= 0 else 0


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# label sets as their LabelPair fields, by their text as rendered (a pure function of it: the text names every pair, and
# the instance only where it is kept): the same few hundred every scrape; bounded
_LABELS: dict[str, bytes] = {}
_MAX_LABELS = 16384


def _encoded_labels(text: str, labels: dict[str, str], drop_instance: bool) -> bytes:
    encoded = _LABELS.get(text)
    if encoded is None:
        if len(_LABELS) >= _MAX_LABELS:
            _LABELS.clear()
        encoded = _LABELS[text] = b"".join(
            length_delimited(1, _string_field(1, name) + _string_field(2, str(value)))
            for name, value in labels.items()
            if not (drop_instance and name == "instance")
        )
    return encoded


class _Head(bytes):
    """A family's MetricFamily fields before its metrics (name, help, type), and for a scalar family the heads of its
    samples' Metric messages by label text (see :func:`_metric_head`; None for a histogram or summary, whose samples
    are one message each). Bytes: the first entry of its block, joined with the rest."""

    metric_heads: dict[str, bytes] | None
    value_field: int  # 0 for a histogram or summary


_HEADS: dict[tuple[str, str, str], _Head] = {}  # by (name, type, help): the same few hundred every scrape
# a scalar Metric's bytes but its value's eight: the MetricFamily's field 4, its length, the label pairs, then the
# value message's field holding ``{double value = 1}``; by the value's field (a gauge's, counter's or untyped's), then
# by label text: a family's samples find theirs in one lookup. Bounded, as _LABELS.
_METRIC_HEADS: dict[int, dict[str, bytes]] = {field: {} for field in _VALUE_FIELD.values()}


def _head(name: str, kind: str, help_: str) -> _Head:
    head = _HEADS.get((name, kind, help_))
    if head is None:
        if len(_HEADS) >= _MAX_LABELS:
            _HEADS.clear()
        kind_number = _TYPES.get(kind, UNTYPED)
        head = _HEADS[(name, kind, help_)] = _Head(_string_field(1, name) + _string_field(2, help_) + varint_field(3, kind_number))
        head.value_field = _VALUE_FIELD.get(kind_number, 0)
        head.metric_heads = _METRIC_HEADS.get(head.value_field)
    return head


def _metric_head(field: int, text: str, labels: dict[str, str], drop_instance: bool) -> bytes:
    heads = _METRIC_HEADS[field]
    if len(heads) >= _MAX_LABELS:
        heads.clear()
    body = _encoded_labels(text, labels, drop_instance) + bytes((field << 3 | 2, 9, 1 << 3 | 1))
    head = heads[text] = b"\x22" + varint(len(body) + 8) + body
    return head


@functools.lru_cache(maxsize=4096)
def native_index(bound: float) -> int | None:
    """The schema-0 bucket whose upper bound is ``bound`` (a power of two, within the tolerance), or None."""
    if not bound > 0 or math.isinf(bound):
        return None
    exact = math.log2(bound)
    index = round(exact)
    return index if abs(exact - index) <= NATIVE_BOUND_TOLERANCE else None


_NATIVE_HEAD = varint_field(5, zigzag(0)) + double_field(6, 0.0) + varint_field(7, 0)  # schema, zero threshold, zero count
_NO_OBSERVATION = length_delimited(12, varint_field(1, 0) + varint_field(2, 0))  # an empty span: native all the same


def _spans(indexes: list[int] | tuple[int, ...]) -> bytes:
    """The positive spans of schema-0 buckets at these indexes (increasing): each its offset from the end of the one
    before (the first, from 0) and its length."""
    spans: list[list[int]] = []
    end = 0
    for index in indexes:
        if spans and index == end:
            spans[-1][1] += 1
        else:
            spans.append([index - end if spans else index, 1])
        end = index + 1
    if not spans:
        return _NO_OBSERVATION
    return b"".join(length_delimited(12, varint_field(1, zigzag(offset)) + varint_field(2, length)) for offset, length in spans)


def _native(indexes: tuple[int, ...], cumulatives: list[float], count: float, spans: bytes) -> bytes | None:
    """The native fields of schema 0 for these buckets (schema-0 indexes, increasing; cumulative counts), or None where
    they cannot be one: counts that fall or are no integers, or observations above the last finite bound. ``spans``:
    those of every index, for the common case (Redis reports only buckets that hold observations)."""
    observed: list[int] = []
    deltas = bytearray()
    previous = 0.0
    last = 0
    for index, cumulative in zip(indexes, cumulatives, strict=True):
        if cumulative <= previous:
            if cumulative < previous:
                return None
            continue  # a bucket without observations is left out of the spans
        if not cumulative < _INF or cumulative != int(cumulative):
            return None
        observed.append(index)
        value = int(cumulative - previous)
        delta = (value - last) << 1 if value >= last else ((last - value) << 1) - 1  # zig-zag
        deltas += _SMALL_VARINTS[delta] if delta < 2048 else varint(delta)
        last = value
        previous = cumulative
    if previous != count:
        return None
    if len(observed) < len(indexes):
        spans = _spans(observed)
    return _NATIVE_HEAD + spans + length_delimited(13, bytes(deltas)) if deltas else _NATIVE_HEAD + spans  # packed sint64


class _Bounds:
    """A histogram's finite bucket bounds, as its ``le`` labels give them: each bucket's ``upper_bound`` field (empty for
    +Inf or no number, which the message leaves out), its schema-0 bucket (``natives``, None unless every bound is one,
    each above the last) and their spans."""

    __slots__ = ("fields", "natives", "spans")

    def __init__(self, les: tuple[str, ...]) -> None:
        numbers = [_number(le) for le in les]
        self.fields = tuple(b"" if number is None or number == math.inf else double_field(2, number) for number in numbers)
        indexes = [index for number in numbers if number is not None and (index := native_index(number)) is not None]
        increasing = all(later > earlier for earlier, later in itertools.pairwise(indexes))
        self.natives = tuple(indexes) if len(indexes) == len(les) and increasing else None
        self.spans = _spans(indexes)


# by the le labels: a command's buckets are those its observations have reached, a few layouts per command
_BOUNDS: dict[tuple[str, ...], _Bounds] = {}


def _bounds(les: tuple[str, ...]) -> _Bounds:
    bounds = _BOUNDS.get(les)
    if bounds is None:
        if len(_BOUNDS) >= _MAX_LABELS:
            _BOUNDS.clear()
        bounds = _BOUNDS[les] = _Bounds(les)
    return bounds


def native_fields(buckets: list[tuple[float, float]], count: float) -> bytes | None:
    """A native histogram of schema 0 (zero threshold 0) with the counts of these classic buckets ((upper bound,
    cumulative count), finite bounds in increasing order), or None where they cannot be one: a bound that is not a power
    of two, two bounds on one bucket, counts that fall, or observations above the last finite bound."""
    indexes = [index for bound, _ in buckets if (index := native_index(bound)) is not None]
    if len(indexes) < len(buckets) or any(later <= earlier for earlier, later in itertools.pairwise(indexes)):
        return None
    return _native(tuple(indexes), [cumulative for _, cumulative in buckets], count, _spans(indexes))


# a bucket message's first bytes by the length of its count's varint: Histogram field 3, the length (the count field,
# then the bound's nine bytes), the count's tag
_BUCKET_HEADS = tuple(bytes((3 << 3 | 2, length + 10, 1 << 3)) for length in range(11))


def histogram_message(buckets: list[tuple[str, float]], count: float, total: float, native: bool) -> bytes:
    """A Histogram message from ``FamilySet.add_histogram``'s buckets ((``le``, cumulative count), +Inf is the count),
    with a native histogram beside the classic buckets where asked and where they can be one."""
    bounds = _bounds(tuple([le for le, _ in buckets]))
    body = bytearray(b"\x08")
    body += varint(_count(count))
    body += b"\x11"
    body += _DOUBLE.pack(total)
    # the native deltas alongside, while every bucket holds observations (as Redis reports them) in whole numbers
    deltas = bytearray() if native and bounds.natives is not None else None
    previous = 0  # the last bucket's count, and its observations, while the deltas are written
    last = 0
    for field, (_, cumulative) in zip(bounds.fields, buckets, strict=True):
        whole = int(cumulative) if 0 <= cumulative < _INF else -1  # a count no histogram holds (NaN, negative): -1
        if field:
            number = _SMALL_VARINTS[whole] if 0 <= whole < 2048 else varint(max(whole, 0))
            body += _BUCKET_HEADS[len(number)]
            body += number
            body += field
        if deltas is not None:
            if whole > previous and whole == cumulative:
                value = whole - previous
                delta = (value - last) << 1 if value >= last else ((last - value) << 1) - 1  # zig-zag
                deltas += _SMALL_VARINTS[delta] if delta < 2048 else varint(delta)
                last = value
                previous = whole
            else:
                deltas = None
    if deltas is not None and previous == count:
        body += _NATIVE_HEAD
        body += bounds.spans
        if deltas:
            body += b"\x6a"  # field 13, packed sint64
            body += varint(len(deltas))
            body += deltas
    elif native and bounds.natives is not None:  # a bucket without observations, or one that cannot be native
        body += _native(bounds.natives, [cumulative for _, cumulative in buckets], count, bounds.spans) or b""
    return b"\x3a" + varint(len(body)) + body  # field 7 of a Metric


# a quantile's first bytes in a Summary, by its label: field 3, the length (two doubles), the quantile's field and value,
# the value's tag; None for a label that is no number (left out)
_QUANTILES: dict[str, bytes | None] = {}


def _quantile(label: str) -> bytes | None:
    number = _number(label)
    head = None if number is None else b"\x1a\x12" + double_field(1, number) + b"\x11"
    if len(_QUANTILES) < 4096:
        _QUANTILES[label] = head
    return head


def summary_message(quantiles: list[tuple[str, float]], count: float, total: float) -> bytes:
    """A Summary message from ``FamilySet.add_summary``'s quantiles ((label, value))."""
    body = bytearray(b"\x08")
    body += varint(_count(count))
    body += b"\x11"
    body += _DOUBLE.pack(total)
    for label, value in quantiles:
        head = _QUANTILES[label] if label in _QUANTILES else _quantile(label)
        if head is not None:
            body += head
            body += _DOUBLE.pack(value)
    return length_delimited(4, bytes(body))


class ProtobufFamilySet(RenderingFamilySet):
    """Renders each sample as its Metric message; :meth:`encode` writes the families as length-delimited MetricFamily
    messages, the histograms named in ``native`` also as native ones."""

    def __init__(self, *, drop_instance: bool = False, native: frozenset[str] = frozenset()) -> None:
        super().__init__(drop_instance=drop_instance)
        self._native = native

    @staticmethod
    def _join(entries: list[Any]) -> Any:
        return b"".join(entries)

    def way(self) -> Hashable:
        return ("protobuf", self._drop_instance, self._native)

    def _block(self, name: str, kind: str, help_: str) -> list[Any]:
        """The first help text and type of a name win, as in :class:`FamilySet`."""
        block: list[Any] = [_HEADS.get((name, kind, help_)) or _head(name, kind, help_)]
        self._blocks[name] = block
        return block

    def _encoded_labels(self, labels: dict[str, str]) -> bytes:
        text = self._labels(labels)
        return _LABELS.get(text) or _encoded_labels(text, labels, self._drop_instance)

    def _append(self, name: str, block: list[Any], entry: bytes) -> None:
        block.append(entry)
        if self._journal is not None:
            self._journal += (name, block[0], entry)

    def add(self, name: str, kind: str, help_: str, labels: dict[str, str], value: float) -> None:
        block = self._blocks.get(name) or self._block(name, kind, help_)
        heads = block[0].metric_heads
        if heads is None:
            raise TypeError(f"{name}: a histogram's or summary's samples are added by add_histogram or add_summary")
        if labels.__class__ is LabelSet:  # _labels inlined for the commonest case: this runs for every sample
            text = labels.text_without_instance if self._drop_instance else labels.text
            if text is None:
                text = _keep_rendered(labels, self._drop_instance, self._pairs)
        else:
            text = self._labels(labels)
        entry = (heads.get(text) or _metric_head(block[0].value_field, text, labels, self._drop_instance)) + _pack_double(value)
        block.append(entry)
        if self._journal is not None:
            self._journal += (name, block[0], entry)

    def _add_numbers(self, text: str, labels: dict[str, str], samples: list[tuple[str, str, str, float | str]]) -> None:
        blocks = self._blocks
        for name, kind, help_, value in samples:
            block = blocks.get(name) or self._block(name, kind, help_)
            heads = block[0].metric_heads
            if heads is None:
                raise TypeError(f"{name}: a histogram's or summary's samples are added by add_histogram or add_summary")
            head = heads.get(text) or _metric_head(block[0].value_field, text, labels, self._drop_instance)
            block.append(head + _pack_double(float(value)))

    def add_sample(self, family: str, kind: str, help_: str, sample: str, labels: dict[str, str], value: float) -> None:
        """A scalar family's Metric carries no name of its own: ``sample`` is the family's."""
        self.add(family, kind, help_, labels, value)

    def add_histogram(self, name: str, help_: str, labels: dict[str, str], buckets: list[tuple[str, float]], count: float, total: float) -> None:
        block = self._blocks.get(name) or self._block(name, HISTOGRAM, help_)
        encoded = self._encoded_labels(labels)
        message = histogram_message(buckets, count, total, name in self._native)
        self._append(name, block, b"".join((b"\x22", varint(len(encoded) + len(message)), encoded, message)))  # field 4 of a MetricFamily

    def add_summary(
        self, name: str, help_: str, labels: dict[str, str], quantiles: list[tuple[str, float]], count: float | None, total: float | None
    ) -> None:
        """A summary without a count and sum (which text leaves out) has them 0, as client_golang reads a Summary that
        lacks them."""
        block = self._blocks.get(name) or self._block(name, SUMMARY, help_)
        message = summary_message(quantiles, 0.0 if count is None else count, 0.0 if total is None else total)
        self._append(name, block, length_delimited(4, self._encoded_labels(labels) + message))

    def encode(self) -> bytes:
        out: list[bytes] = []
        for block in self._blocks.values():  # the head and the metrics of each, behind its length
            family = b"".join(block)  # a join, then its length: three times faster than summing the lengths first
            size = len(family)
            out.append(_SMALL_VARINTS[size] if size < 2048 else varint(size))
            out.append(family)
        return b"".join(out)

    def body(self, openmetrics: bool = False) -> bytes | bytearray:
        if openmetrics:
            raise ValueError("a protobuf set writes protobuf")
        blocks = list(self._blocks.values())
        if not self._compacted and sum(map(len, blocks)) < RELEASE_LINES:  # one node's body: one join
            encoded = self.encode()
            self._blocks, self._compacted = {}, {}
            return encoded
        self._blocks, self._compacted = {}, {}
        body = bytearray()
        for block in blocks:  # a fleet's: family by family, each family's messages let go once written
            family = b"".join(block)
            body += varint(len(family))
            body += family
            block.clear()
        return body


class LabelledProtobufFamilySet(StaticLabels, ProtobufFamilySet):
    """:class:`ProtobufFamilySet` with targets' static labels (``exposition.StaticLabels``)."""
