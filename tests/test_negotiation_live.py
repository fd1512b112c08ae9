"""Each client's Accept against the real app and a real redis-server: the Content-Type exact, and the body read by
client_python's parser for that format, with the samples the text format 0.0.4 serves."""

from __future__ import annotations

import gzip

import pytest
from helpers import call, exact_samples, make_app, sample
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text
from protobuf_read import classic_samples, decode
from test_negotiation import PROMETHEUS_2, PROMETHEUS_3, PROMETHEUS_3_PROTO_FIRST, PROTOBUF_ONLY

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT_1 = "text/plain; version=1.0.0; charset=utf-8"
TEXT_0 = "text/plain; version=0.0.4; charset=utf-8"
PROTOBUF = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"

CLIENTS = {
    "Prometheus 3": (PROMETHEUS_3, f"{OPENMETRICS}; escaping=allow-utf-8"),
    "Prometheus 3, scrape_native_histograms": (PROMETHEUS_3_PROTO_FIRST, f"{PROTOBUF}; escaping=underscores"),
    "Prometheus 2.x": (PROMETHEUS_2, f"{OPENMETRICS}; escaping=underscores"),
    "Prometheus 3, text only": (
        "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3",
        f"{TEXT_1}; escaping=allow-utf-8",
    ),
    "text 0.0.4 only": ("text/plain;version=0.0.4", TEXT_0),
    "OpenMetrics only": ("application/openmetrics-text;version=1.0.0", f"{OPENMETRICS}; escaping=underscores"),
    "protobuf only": (PROTOBUF_ONLY, f"{PROTOBUF}; escaping=underscores"),
    "anything": ("*/*", TEXT_0),
    "no Accept": (None, TEXT_0),
}

# Families whose OpenMetrics lines client_python's strict parser refuses, and why. Prometheus' own OpenMetrics parser
# reads them (it checks no quantile's range), and they are what redis_exporter serves.
OUTSIDE_OPENMETRICS = {"redis_latency_percentiles_usec": "a summary whose quantile labels are percentiles (50, 99, 99.9), not 0 to 1"}


def _without_families(text: str, names: set[str]) -> str:
    def family(line: str) -> str:
        name = line.split()[2] if line.startswith("# ") else line.split("{", maxsplit=1)[0].split(" ", maxsplit=1)[0]
        for suffix in ("_count", "_sum", "_bucket", "_created"):
            if name.endswith(suffix) and name[: -len(suffix)] in names:
                return name[: -len(suffix)]
        return name

    return "".join(line for line in text.splitlines(keepends=True) if line.startswith("# EOF") or family(line) not in names)


def _comparable(samples: dict) -> dict:
    """The series two calls both serve: the latency buckets of the scrape's own commands may gain a bucket between
    them, so those are left out."""
    return {key: value for key, value in samples.items() if not key[0].startswith("redis_commands_latencies_usec")}


@pytest.fixture(scope="module")
def app(plain_redis):
    app = make_app({"redis": {"addr": plain_redis.addr}})
    for _ in range(3):  # the scrape's own commands are counted and timed: let the set of series settle
        call(app, "/metrics")
    yield app
    app.close()


def _parsed(body: bytes, content_type: str) -> dict:
    """The exact samples, after the format's own parser has read the whole body (protobuf: client_golang's)."""
    if content_type.startswith(PROTOBUF):
        return classic_samples(decode(body))
    text = body.decode()
    if content_type.startswith("application/openmetrics-text"):
        assert text.endswith("# EOF\n")
        strict = _without_families(text, set(OUTSIDE_OPENMETRICS))
        assert sum(len(family.samples) for family in parse_openmetrics(strict)) == len(exact_samples(strict))
        for name in OUTSIDE_OPENMETRICS:  # still served, as in text
            assert f"# TYPE {name} " in text
    else:
        families = list(parse_text(text))
        assert sum(len(family.samples) for family in families) == len(exact_samples(text))
    return exact_samples(text)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("path", ["/metrics", "/scrape"])
def test_each_client_gets_its_format_exactly_with_the_same_samples(app, plain_redis, client, path):
    accept, content_type = CLIENTS[client]
    query = f"target={plain_redis.addr}" if path == "/scrape" else ""
    headers = {} if accept is None else {"Accept": accept}
    response = call(app, path, query, headers=headers)
    assert response.code == 200
    assert response.headers["Content-Type"] == content_type
    served = _parsed(response.body, content_type)
    text = call(app, path, query, headers={"Accept": "text/plain;version=0.0.4"})
    reference = _parsed(text.body, TEXT_0)
    assert set(_comparable(served)) == set(_comparable(reference))
    labels = {} if path == "/scrape" else {"instance": f"127.0.0.1:{plain_redis.port}"}
    for name, more in (("redis_up", {}), ("redis_config_maxclients", {}), ("redis_db_keys", {"db": "db0"})):
        assert sample(served, name, **labels, **more) == sample(reference, name, **labels, **more)


def test_gzip_is_negotiated_apart_from_the_format(app):
    response = call(app, "/metrics", headers={"Accept": PROMETHEUS_3, "Accept-Encoding": "gzip"})
    assert response.headers["Content-Encoding"] == "gzip"
    assert response.headers["Content-Type"] == f"{OPENMETRICS}; escaping=allow-utf-8"
    assert int(response.headers["Content-Length"]) == len(response.body)
    assert gzip.decompress(response.body).endswith(b"# EOF\n")
    plain = call(app, "/metrics", headers={"Accept": PROMETHEUS_3})
    assert "Content-Encoding" not in plain.headers


@pytest.mark.parametrize(
    ("accept_encoding", "gzipped"),
    [
        ("gzip", True),
        ("GZIP", True),
        ("br, gzip;q=0.5", True),
        ("gzip;q=0, identity", False),
        ("gzip; q=0.000", False),
        ("identity", False),
        ("*", True),
        ("*, gzip;q=0", False),
        ("x-gzip", True),
        ("gzipped", False),
        ("", False),
    ],
)
def test_gzip_is_chosen_by_its_weight_as_rfc_9110_reads_accept_encoding_and_the_reply_varies_by_both(app, accept_encoding, gzipped):
    response = call(app, "/metrics", headers={"Accept": PROMETHEUS_3, "Accept-Encoding": accept_encoding})
    assert ("Content-Encoding" in response.headers) == gzipped
    assert response.headers["Vary"] == "Accept, Accept-Encoding"
    if gzipped:
        assert gzip.decompress(response.body).endswith(b"# EOF\n")
