"""Content negotiation (exporter.service.negotiation): the Accept header read as RFC 9110 reads it, and the format
each client gets, with the exact Content-Type."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.service.negotiation import (
    DEFAULT,
    OPENMETRICS_1_0_0,
    PROTOBUF_DELIMITED,
    TEXT_0_0_4,
    TEXT_1_0_0,
    FormatCache,
    choose_format,
    parse_accept,
)

pytestmark = pytest.mark.unit

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT_1 = "text/plain; version=1.0.0; charset=utf-8"
TEXT_0 = "text/plain; version=0.0.4; charset=utf-8"
PROTOBUF = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"

# what Prometheus sends (scrape.acceptHeader over config.DefaultScrapeProtocols, and with scrape_native_histograms
# over DefaultProtoFirstScrapeProtocols; 2.x: scrapeAcceptHeader of v2.42)
PROMETHEUS_3 = (
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)
PROMETHEUS_3_PROTO_FIRST = (
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,"
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
)
PROMETHEUS_2 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
PROTOBUF_ONLY = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        (PROMETHEUS_3, f"{OPENMETRICS}; escaping=allow-utf-8"),
        (PROMETHEUS_3_PROTO_FIRST, f"{PROTOBUF}; escaping=underscores"),  # Prometheus asks no escaping of protobuf
        (PROMETHEUS_2, f"{OPENMETRICS}; escaping=underscores"),
        ("text/plain;version=0.0.4", TEXT_0),
        ("application/openmetrics-text;version=1.0.0", f"{OPENMETRICS}; escaping=underscores"),
        ("application/openmetrics-text", f"{OPENMETRICS}; escaping=underscores"),  # the one version served
        ("text/plain;version=1.0.0;escaping=allow-utf-8", f"{TEXT_1}; escaping=allow-utf-8"),
        (PROTOBUF_ONLY, f"{PROTOBUF}; escaping=underscores"),
        (PROTOBUF_ONLY + ";escaping=allow-utf-8", f"{PROTOBUF}; escaping=allow-utf-8"),
        ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text", TEXT_0),  # not served
        ("application/vnd.google.protobuf;encoding=delimited", TEXT_0),  # which message is not said
        ("application/vnd.google.protobuf", TEXT_0),
        ("application/*", f"{OPENMETRICS}; escaping=underscores"),  # a wildcard never chooses protobuf
        ("*/*", TEXT_0),  # no version named: the format every client reads
        ("text/plain", TEXT_0),
        ("text/*", TEXT_0),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", TEXT_0),  # a browser
        ("application/openmetrics-text;version=0.0.1", TEXT_0),  # not served: the fallback
        (None, TEXT_0),
        ("", TEXT_0),
    ],
)
def test_each_client_gets_the_format_it_prefers_with_the_exact_content_type(accept, content_type):
    assert choose_format(accept).content_type == content_type


def test_prometheus_3_is_answered_in_its_own_order_as_it_drops_formats():
    """Each Prometheus 3 protocol list, less what it leaves out, gets its first format we serve."""
    assert choose_format(PROMETHEUS_3_PROTO_FIRST).format is PROTOBUF_DELIMITED
    assert choose_format(",".join(PROMETHEUS_3_PROTO_FIRST.split(",")[1:])).format is OPENMETRICS_1_0_0
    ranges = PROMETHEUS_3.split(",")
    assert choose_format(",".join(ranges[1:])).format is TEXT_1_0_0  # OpenMetrics 0.0.1 is not served
    assert choose_format(",".join(ranges[2:])).format is TEXT_1_0_0
    assert choose_format(",".join(ranges[3:])).format is TEXT_0_0_4


def test_q_values_decide_before_the_exporters_order():
    assert choose_format("application/openmetrics-text;version=1.0.0;q=0.2,text/plain;version=0.0.4;q=0.9").format is TEXT_0_0_4
    assert choose_format("text/plain;version=0.0.4;q=0.5,text/plain;version=1.0.0;q=0.5").format is TEXT_1_0_0  # a tie: Prometheus' order
    assert choose_format("text/plain;version=0.0.4;q=0.5,text/plain;version=1.0.0;q=0.500").format is TEXT_1_0_0
    assert choose_format("text/plain;version=1.0.0;q=0.499,text/plain;version=0.0.4;q=0.5").format is TEXT_0_0_4
    # a format named beats the same weight reached through a wildcard
    assert choose_format("*/*;q=0.5,application/openmetrics-text;version=1.0.0;q=0.5").format is OPENMETRICS_1_0_0


def test_q_zero_refuses_a_format():
    assert choose_format("application/openmetrics-text;q=0,*/*").format is TEXT_0_0_4
    assert choose_format("text/plain;version=0.0.4;q=0,*/*").format is TEXT_1_0_0  # then the next for */*
    assert choose_format("text/plain;version=0.0.4;q=0,text/plain;version=1.0.0;q=0,*/*;q=0.1").format is OPENMETRICS_1_0_0
    # the most specific range gives the weight: text/plain;version=1.0.0 is refused though text/* is welcome
    assert choose_format("text/*;q=1,text/plain;version=1.0.0;q=0,text/plain;version=0.0.4;q=0.2").format is TEXT_0_0_4
    # an unknown parameter makes no range more specific: the refusal of text 1.0.0 stands
    accept = "application/openmetrics-text;version=1.0.0;q=0,application/openmetrics-text;foo=bar,text/plain;version=0.0.4;q=0.5"
    assert choose_format(accept).format is TEXT_0_0_4
    assert choose_format("text/plain;version=1.0.0;q=0.0").format is TEXT_0_0_4  # every format refused: the fallback
    assert choose_format("*/*;q=0") is DEFAULT


def test_types_parameter_names_and_spaces_are_read_as_rfc_9110_says():
    choice = choose_format(" Application/OpenMetrics-Text ; VERSION=1.0.0 ;\tQ=0.7 ; Escaping=dots ,text/plain;q=0.6")
    assert choice.content_type == f"{OPENMETRICS}; escaping=dots"
    assert choose_format('text/plain;version="1.0.0";escaping="values"').content_type == f"{TEXT_1}; escaping=values"
    assert choose_format("text/plain;version=1.0.0;charset=UTF-8").format is TEXT_1_0_0
    assert choose_format("text/plain;version=1.0.0;charset=iso-8859-1").format is TEXT_0_0_4  # we write utf-8 only
    [media_range] = parse_accept('a/b ; c="x,y\\"z" ;; q=0.25')
    assert (media_range.type, media_range.subtype, media_range.params, media_range.q) == ("a", "b", {"c": 'x,y"z'}, 0.25)


def test_an_unknown_escaping_is_ignored():
    assert choose_format("text/plain;version=1.0.0;escaping=rot13").content_type == f"{TEXT_1}; escaping=underscores"


@pytest.mark.parametrize(
    "accept",
    [
        "garbage",
        "text/plain;version=1.0.0;q=2",  # a weight above 1
        "text/plain;version=1.0.0;q=-1",
        "text/plain;version=1.0.0;q=abc",
        "*/plain;version=1.0.0",
        "text/plain;version",
        'text/plain;version=1.0.0;x="unterminated',
        "text/plain version=1.0.0",
        ",,,",
        "\x00\xff",
    ],
)
def test_a_malformed_element_is_left_out_and_never_raises(accept):
    assert choose_format(accept) is DEFAULT
    # the elements around it still count
    assert choose_format(f"text/plain;version=1.0.0;q=0.1,{accept},").format is TEXT_1_0_0


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='textplain/*;=,q.0159" \t\\-', max_size=80))
def test_any_header_gets_a_format(accept):
    assert choose_format(accept).format in (OPENMETRICS_1_0_0, TEXT_1_0_0, TEXT_0_0_4)


def test_a_hostile_header_is_read_in_linear_time():
    """The request head holds at most 16 KiB; no such header takes long, or a scrape could be held up by one."""
    for accept in ('a/b;c="' + '\\"' * 8000, '"' * 16000, "text/plain" + "; ; " * 4000 + "x", "," * 16000):
        started = time.process_time()
        assert choose_format(accept) is DEFAULT
        assert time.process_time() - started < 0.2, accept[:40]


def test_the_cache_answers_as_the_function_and_stays_bounded():
    cache = FormatCache(size=4)
    for accept in [PROMETHEUS_3, PROMETHEUS_2, None, PROMETHEUS_3, *(f"text/plain;q=0.{i}" for i in range(1, 10))]:
        assert cache.choose(accept) == choose_format(accept)
        assert len(cache._choices) <= 4
    assert cache.choose(PROMETHEUS_3) is cache.choose(PROMETHEUS_3)  # kept
