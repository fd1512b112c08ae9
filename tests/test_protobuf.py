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

from exporter.common.exposition import TargetRendering, TextFamilySet
from exporter.common.families import FamilySet
from exporter.common.protobuf import ProtobufFamilySet, native_fields, native_index, varint, zigzag
from exporter.redis.latency import NATIVE_HISTOGRAMS

PROTOBUF = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
LATENCY = "redis_commands_latencies_usec"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2047, b"\xff\x0f"),
        (2048, b"\x80\x10"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (2097151, b"\xff\xff\x7f"),
        (2097152, b"\x80\x80\x80\x01"),
        (268435455, b"\xff\xff\xff\x7f"),
        (268435456, b"\x80\x80\x80\x80\x01"),
        (-1, b"\xff" * 9 + b"\x01"),
    ],
)
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


def fill(out: FamilySet) -> None:
    fill_every_kind(out)
    bounds = [("1", 2.0), ("2", 5.0), ("8", 9.0), ("33", 10.0), ("66", 10.0)]  # as Redis leaves empty buckets out
    out.add_histogram(LATENCY, "Latency.", {"instance": "n1", "cmd": "set"}, bounds, 10.0, 70.0)
    out.add_histogram(LATENCY, "Latency.", {"instance": "n1", "cmd": "get"}, [], 0.0, 0.0)


def filled(drop_instance: bool = False) -> tuple[TextFamilySet, ProtobufFamilySet]:
    """The same samples in a text set and a protobuf set."""
    text, protobuf = TextFamilySet(drop_instance=drop_instance), ProtobufFamilySet(drop_instance=drop_instance, native=NATIVE_HISTOGRAMS)
    fill(text)
    fill(protobuf)
    return text, protobuf


def test_every_kind_reads_back_in_go_with_the_samples_of_the_text_format():
    text, protobuf = filled()
    families = decode(protobuf.encode())
    ours = {key: repr(value) for key, value in classic_samples(families).items()}
    assert ours == {key: repr(value) for key, value in exact_samples(text.encode().decode()).items()}
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
    (family,) = [family for family in decode(filled()[1].encode()) if family["name"] == LATENCY]
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
def test_what_a_target_replays_is_what_a_fresh_encoding_writes():
    """Inputs that stand still replay their messages from the target's protobuf memo, kept apart from its text lines."""
    rendering = TargetRendering("n1")
    labels = rendering.labels

    def scrape(calls: float, out: ProtobufFamilySet | TextFamilySet, target: TargetRendering | None = rendering) -> bytes:
        inputs = {
            "clients": lambda: out.add("redis_connected_clients", "gauge", "Clients.", labels, calls),
            "set": lambda: out.add_histogram(LATENCY, "Latency.", labels.with_label("cmd", "set"), [("1", 2.0), ("2", 5.0)], 5.0, 9.0),
            "incr": lambda: out.add_histogram(
                LATENCY, "Latency.", labels.with_label("cmd", "incr"), [("1", calls), ("4", calls + 1)], calls + 1, 9.0
            ),
            "pct": lambda: out.add_summary("pct_usec", "Percentiles.", labels.with_label("cmd", "set"), [("50", calls)], calls, 2.0),
        }
        with out.rendering(target):
            memo = out.memo("part")
            for key, add in inputs.items():
                source = calls if key != "set" else 0
                if out.replay(memo, key, source) is None:
                    with out.recording(memo, key, source):
                        add()
        return out.encode()

    def protobuf() -> ProtobufFamilySet:
        return ProtobufFamilySet(native=NATIVE_HISTOGRAMS)

    first = scrape(1.0, protobuf())
    scrape(1.0, TextFamilySet())  # the text memo of the same target
    assert scrape(1.0, protobuf()) == first == scrape(1.0, protobuf(), None)  # replayed, as a fresh encoding writes it
    changed = scrape(2.0, protobuf())
    assert changed == scrape(2.0, protobuf(), None) != first
    assert scrape(2.0, ProtobufFamilySet()) != changed  # classic only: another encoding of the same inputs
    assert rendering.memos is not None
    assert {way: len(memo) for way, memo in rendering.memos.items()} == {
        ("text", False): 4,
        ("protobuf", False, NATIVE_HISTOGRAMS): 4,
        ("protobuf", False, frozenset()): 4,
    }


@pytest.mark.unit
@pytest.mark.parametrize("odd", [math.nan, math.inf, -1.0, 2.5])
def test_a_count_no_histogram_holds_leaves_the_histogram_classic(odd):
    native = ProtobufFamilySet(native=frozenset({LATENCY}))
    classic = ProtobufFamilySet()
    for out in (native, classic):
        out.add_histogram(LATENCY, "Latency.", {}, [("1", 1.0), ("2", odd)], 3.0, 1.0)
    assert native.encode() == classic.encode()


@pytest.mark.unit
def test_a_histograms_or_summarys_samples_one_by_one_are_refused():
    out = ProtobufFamilySet()
    out.add_histogram("lat_usec", "Latency.", {}, [("1", 1.0)], 1.0, 1.0)
    with pytest.raises(TypeError, match="lat_usec: a histogram's or summary's samples are added by add_histogram or add_summary"):
        out.add_sample("lat_usec", "histogram", "Latency.", "lat_usec_bucket", {"le": "2"}, 1.0)


def test_a_sample_is_encoded_by_its_familys_type_and_keeps_every_label():
    """The same sample in a gauge family and in a counter family is two messages; a gauge's ``le`` or ``quantile``
    label is a plain label (only a histogram's or summary's messages carry them as numbers); a NaN count encodes."""
    gauge = ProtobufFamilySet()
    gauge.add("x_total", "gauge", "A gauge.", {"i": "1"}, 3.0)
    gauge.add("limits", "gauge", "Limits.", {"le": "10", "quantile": "0.5"}, 1.0)
    counter = ProtobufFamilySet()
    counter.add("x_total", "counter", "A counter.", {"i": "1"}, 3.0)
    counter.add_summary("pct", "Quantiles.", {}, [("0.5", 1.0)], float("nan"), 1.0)
    (x_gauge, limits) = decode(gauge.encode())
    (x_counter, pct) = decode(counter.encode())
    assert x_gauge["metric"][0]["gauge"] == {"value": 3}
    assert x_counter["metric"][0]["counter"] == {"value": 3}
    assert limits["metric"][0]["label"] == [{"name": "le", "value": "10"}, {"name": "quantile", "value": "0.5"}]
    assert pct["metric"][0]["summary"]["quantile"] == [{"quantile": 0.5, "value": 1}]


@pytest.mark.parametrize("drop_instance", [False, True])
def test_histograms_and_summaries_of_every_shape_read_back_as_their_text_lines(drop_instance):
    """Bounds that are powers of two or not, observations above the last bound, counts that fall, no observation, a
    count past two million, labels that need escaping: Go reads the samples the text format serves, and the native
    histograms only where the classic buckets can be one."""
    histograms = [
        ({"instance": "n1", "cmd": "set"}, [("1", 2.0), ("2", 5.0), ("8", 9.0), ("33", 10.0)], 10.0, 70.0, {0: 2, 1: 3, 3: 4, 5: 1}),
        ({"instance": "n1", "cmd": "get"}, [], 0.0, 0.0, {}),
        ({"instance": "n1", "cmd": 'we"ird\\\n'}, [("3", 1.0), ("12", 4.0)], 4.0, 9.5, None),  # no powers of two
        ({"instance": "n1", "cmd": "above"}, [("1", 1.0)], 3.0, 5.0, None),  # observations above the last bound
        ({"instance": "n1", "cmd": "falls"}, [("1", 2.0), ("2", 1.0)], 2.0, 5.0, None),
        ({"instance": "n1", "cmd": "gap"}, [("1", 2.0), ("2", 2.0), ("66", 2_500_000.0)], 2_500_000.0, 7e9, {0: 2, 6: 2_499_998}),
    ]
    text = TextFamilySet(drop_instance=drop_instance)
    protobuf = ProtobufFamilySet(drop_instance=drop_instance, native=NATIVE_HISTOGRAMS)
    for out in (text, protobuf):
        for labels, buckets, count, total, _ in histograms:
            out.add_histogram(LATENCY, "Latency.", labels, buckets, count, total)
            out.add_summary("pct_usec", "Percentiles.", labels, [("50", count), ("99.9", total), ("bad", 1.0)], count, total)
    families = decode(protobuf.encode())
    expected = exact_samples(text.encode().decode())
    expected = {key: value for key, value in expected.items() if ("quantile", "bad") not in key[1]}  # no number: left out
    assert {key: repr(value) for key, value in classic_samples(families).items()} == {key: repr(value) for key, value in expected.items()}
    (latency,) = [family for family in families if family["name"] == LATENCY]
    for metric, (*_, natives) in zip(latency["metric"], histograms, strict=True):
        histogram = metric["histogram"]
        assert (native_buckets(histogram) if "schema" in histogram else None) == natives
    assert all("instance" not in str(family) for family in families) if drop_instance else True


@pytest.mark.unit
@pytest.mark.parametrize("fleet", [False, True])
def test_the_protobuf_body_an_answer_sends_is_the_encoding(fleet, monkeypatch):
    from exporter.common import protobuf

    if fleet:  # past RELEASE_LINES: family by family
        monkeypatch.setattr(protobuf, "RELEASE_LINES", 0)
    _, kept = filled()
    _, released = filled()
    assert bytes(released.body()) == kept.encode()
    assert released.names() == set()
    with pytest.raises(ValueError, match="protobuf"):
        kept.body(openmetrics=True)
