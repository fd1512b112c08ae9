"""Prometheus' protobuf format and the native histograms of command latency: the wire encoding against known bytes,
every kind of family read back by client_golang's own decoder (tests/go/protodump) with the samples the text format
serves, and a real redis-server's latency histograms as native ones whose quantiles agree with the classic buckets."""

from __future__ import annotations

import math

import pytest
from helpers import call, exact_samples, make_app
from protobuf_read import classic_samples, decode, native_buckets
from test_exposition import fill_every_kind
from test_negotiation import PROMETHEUS_3_PROTO_FIRST

from exporter.common.exposition import TextFamilySet
from exporter.common.protobuf import native_fields, native_index, varint, zigzag
from exporter.redis.latency import NATIVE_HISTOGRAMS

PROTOBUF = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
LATENCY = "redis_commands_latencies_usec"


@pytest.mark.unit
@pytest.mark.parametrize(("value", "encoded"), [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02")])
def test_varints_as_protobuf_writes_them(value, encoded):
    assert varint(value) == encoded


@pytest.mark.unit
@pytest.mark.parametrize(("value", "zigzagged"), [(0, 0), (-1, 1), (1, 2), (-2, 3), (2147483647, 4294967294), (-2147483648, 4294967295)])
def test_zigzag_as_protobuf_writes_sint(value, zigzagged):
    assert zigzag(value) == zigzagged


@pytest.mark.unit
@pytest.mark.parametrize(
    ("bound", "index"),
    [(1, 0), (2, 1), (4, 2), (8, 3), (16, 4), (33, 5), (66, 6), (132, 7), (264, 8), (528, 9), (1056, 10), (0.5, -1)],
)
def test_latency_histogram_bounds_are_powers_of_two(bound, index):
    """LATENCY HISTOGRAM's bounds in µs, rounded from 2^k ns: each is one schema-0 bucket."""
    assert native_index(bound) == index


@pytest.mark.unit
@pytest.mark.parametrize("bound", [3, 5, 12, 100, 0, -1, math.inf, math.nan])
def test_other_bounds_are_no_native_bucket(bound):
    assert native_index(bound) is None


@pytest.mark.unit
def test_buckets_that_are_no_native_histogram_stay_classic():
    assert native_fields([(1, 2.0), (3, 4.0)], 4.0) is None  # 3 is no power of two
    assert native_fields([(1, 2.0), (2, 1.0)], 2.0) is None  # counts fall
    assert native_fields([(1, 2.0), (2, 3.0)], 5.0) is None  # observations above the last bound
    assert native_fields([(32, 2.0), (33, 3.0)], 3.0) is None  # two bounds on one bucket
    assert native_fields([(1, 2.0), (2, 3.0)], 3.0) is not None


def filled() -> TextFamilySet:
    out = TextFamilySet()
    fill_every_kind(out)
    bounds = [("1", 2.0), ("2", 5.0), ("8", 9.0), ("33", 10.0), ("66", 10.0)]  # as Redis leaves empty buckets out
    out.add_histogram(LATENCY, "Latency.", {"instance": "n1", "cmd": "set"}, bounds, 10.0, 70.0)
    out.add_histogram(LATENCY, "Latency.", {"instance": "n1", "cmd": "get"}, [], 0.0, 0.0)
    return out


def test_every_kind_reads_back_in_go_with_the_samples_of_the_text_format():
    out = filled()
    families = decode(out.encode_protobuf(NATIVE_HISTOGRAMS))
    ours = {key: repr(value) for key, value in classic_samples(families).items()}
    assert ours == {key: repr(value) for key, value in exact_samples(out.encode().decode()).items()}
    by_name = {family["name"]: family for family in families}
    assert by_name["a_gauge"]["help"] == 'Back\\slash, "quoted"\nsecond line.'
    assert [by_name[name]["type"] for name in ("a_gauge", "redis_commands_processed_total", "redis_something", "lat_usec", "pct")] == [
        "GAUGE",
        "COUNTER",
        "UNTYPED",
        "HISTOGRAM",
        "SUMMARY",
    ]
    assert "schema" not in by_name["lat_usec"]["metric"][0]["histogram"]  # classic only: not a latency histogram


def test_latency_histograms_are_native_of_schema_0_with_the_same_counts():
    (family,) = [family for family in decode(filled().encode_protobuf(NATIVE_HISTOGRAMS)) if family["name"] == LATENCY]
    histograms = {dict((p["name"], p["value"]) for p in metric["label"])["cmd"]: metric["histogram"] for metric in family["metric"]}
    set_ = histograms["set"]
    assert (set_["schema"], set_["zero_threshold"], int(set_["zero_count"])) == (0, 0, 0)
    assert native_buckets(set_) == {0: 2, 1: 3, 3: 4, 5: 1}  # (0.5,1] 2, (1,2] 3, (4,8] 4, (16,32] 1
    assert (int(set_["sample_count"]), set_["sample_sum"]) == (10, 70)
    empty = histograms["get"]
    assert empty["positive_span"] == [{"offset": 0, "length": 0}]  # no observation yet, and still a native histogram
    assert native_buckets(empty) == {}


def _quantile_bucket(cumulative: list[tuple[float, float]], q: float) -> float:
    """The upper bound of the bucket that holds the q-quantile (what histogram_quantile interpolates within)."""
    total = cumulative[-1][1]
    return next(bound for bound, count in cumulative if count >= q * total)


def test_a_real_servers_latency_histograms_as_native_ones(fresh_redis):
    client = fresh_redis.client()
    pipe = client.pipeline(transaction=False)
    for i in range(3000):
        pipe.set(f"key:{i}", "v" * (i % 500))
        pipe.get(f"key:{i % 50}")
    pipe.execute()
    app = make_app({"redis": {"addr": fresh_redis.addr}})
    try:
        for _ in range(3):  # the scrape's own commands are counted and timed: let the set of series settle
            call(app, "/metrics")
        response = call(app, "/metrics", headers={"Accept": PROMETHEUS_3_PROTO_FIRST})
        assert response.headers["Content-Type"] == f"{PROTOBUF}; escaping=underscores"
        families = decode(response.body)
        (family,) = [family for family in families if family["name"] == LATENCY]
        text = exact_samples(call(app, "/metrics", headers={"Accept": "text/plain;version=0.0.4"}).text)
        classic = classic_samples(families)
        assert {key for key in classic if not key[0].startswith(LATENCY)} == {key for key in text if not key[0].startswith(LATENCY)}
        histograms = {dict((p["name"], p["value"]) for p in metric["label"])["cmd"]: metric["histogram"] for metric in family["metric"]}
        assert {"set", "get"} <= set(histograms)
        for histogram in histograms.values():
            natives = native_buckets(histogram)
            assert sum(natives.values()) == int(histogram["sample_count"])
            cumulative = [(float(b["upper_bound"]), float(b["cumulative_count"])) for b in histogram["bucket"]]
            running, native_cumulative = 0, []
            for index in sorted(natives):
                running += natives[index]
                native_cumulative.append((2.0**index, float(running)))
            for q in (0.5, 0.9, 0.99):  # the same bucket, its bound a power of two within 3.5 %
                classic_bound, native_bound = _quantile_bucket(cumulative, q), _quantile_bucket(native_cumulative, q)
                assert native_index(classic_bound) == math.log2(native_bound)
    finally:
        app.close()


@pytest.mark.unit
def test_what_is_kept_between_scrapes_is_what_a_fresh_encoding_writes():
    from exporter.common.protobuf import ENCODED

    def scrape(calls: float) -> TextFamilySet:
        out = filled()
        out.add("redis_connected_clients", "gauge", "Clients.", {"instance": "n1"}, calls)
        out.add_histogram(LATENCY, "Latency.", {"instance": "n1", "cmd": "incr"}, [("1", calls), ("2", calls + 1)], calls + 1, 9.0)
        return out

    ENCODED.turn()
    ENCODED.turn()
    first = scrape(1.0).encode_protobuf(NATIVE_HISTOGRAMS)
    assert scrape(1.0).encode_protobuf(NATIVE_HISTOGRAMS) == first  # from what was kept
    changed = scrape(2.0).encode_protobuf(NATIVE_HISTOGRAMS)
    ENCODED.turn()
    ENCODED.turn()
    assert scrape(2.0).encode_protobuf(NATIVE_HISTOGRAMS) == changed != first
    assert scrape(2.0).encode_protobuf(frozenset()) != changed  # classic only: kept apart from the native encoding


def test_a_line_is_encoded_by_its_familys_type_and_keeps_every_label():
    """The same text line in a gauge family and in a counter family is two messages; a gauge's ``le`` or ``quantile``
    label is a plain label (only a histogram's or summary's lines carry them as numbers); a NaN count encodes."""
    gauge = TextFamilySet()
    gauge.add("x_total", "gauge", "A gauge.", {"i": "1"}, 3.0)
    gauge.add("limits", "gauge", "Limits.", {"le": "10", "quantile": "0.5"}, 1.0)
    counter = TextFamilySet()
    counter.add("x_total", "counter", "A counter.", {"i": "1"}, 3.0)
    counter.add_summary("pct", "Quantiles.", {}, [("0.5", 1.0)], float("nan"), 1.0)
    (x_gauge, limits) = decode(gauge.encode_protobuf())
    (x_counter, pct) = decode(counter.encode_protobuf())
    assert x_gauge["metric"][0]["gauge"] == {"value": 3}
    assert x_counter["metric"][0]["counter"] == {"value": 3}
    assert limits["metric"][0]["label"] == [{"name": "le", "value": "10"}, {"name": "quantile", "value": "0.5"}]
    assert pct["metric"][0]["summary"]["quantile"] == [{"quantile": 0.5, "value": 1}]


@pytest.mark.unit
@pytest.mark.parametrize("drop_instance", [False, True])
def test_a_histogram_encoded_as_it_is_added_is_what_its_lines_read_back_give(drop_instance, monkeypatch):
    """A set that will be encoded as protobuf encodes each histogram and summary from its inputs as they are added; the
    bytes are those the encoder makes from their text lines, and the lines are not read back."""
    from exporter.common import protobuf
    from exporter.common.protobuf import ENCODED

    histograms = [
        ({"instance": "n1", "cmd": "set"}, [("1", 2.0), ("2", 5.0), ("8", 9.0), ("33", 10.0)], 10.0, 70.0),
        ({"instance": "n1", "cmd": "get"}, [], 0.0, 0.0),
        ({"instance": "n1", "cmd": 'we"ird\\'}, [("3", 1.0), ("12", 4.0)], 4.0, 9.5),  # no powers of two: classic only
        ({"instance": "n1"}, [("1", 1.0)], 3.0, 5.0),  # observations above the last bound
    ]

    def encoded(protobuf: frozenset[str] | None) -> bytes:
        ENCODED.turn()
        ENCODED.turn()
        out = TextFamilySet(drop_instance=drop_instance, protobuf=protobuf)
        for labels, buckets, count, total in histograms:
            out.add_histogram(LATENCY, "Latency.", labels, buckets, count, total)
            out.add_histogram("other_usec", "Other.", labels, buckets, count, total)
            out.add_summary("pct_usec", "Percentiles.", labels, [("50", count), ("99.9", total), ("bad", 1.0)], count, total)
        out.add_summary("pct_usec", "Percentiles.", {"instance": "n2"}, [("50", 1.0)], None, None)  # no _count: read back
        out.add_summary("pct_usec", "Percentiles.", {"instance": "n3"}, [("50", 2.0)], 1.0, 2.0)
        return out.encode_protobuf(NATIVE_HISTOGRAMS)

    from_lines = encoded(None)
    read_back = []
    grouped = protobuf._grouped
    monkeypatch.setattr(protobuf, "_grouped", lambda lines, *rest: read_back.append(len(lines)) or grouped(lines, *rest))
    assert encoded(NATIVE_HISTOGRAMS) == from_lines
    assert read_back == [4]  # the summary without a _count (one line), read back with the next one (three)
