"""Prometheus' protobuf exposition format as client_golang reads it: the body goes through tests/go/protodump (the
expfmt decoder of prometheus/common), and each family comes back as a dict (protojson with the .proto names). The
samples are then named as Prometheus names a classic histogram's and summary's series, so they compare with the text
format's."""

from __future__ import annotations

import json
import math
import subprocess

from tools import go_bin, require


def decode(body: bytes) -> list[dict]:
    """The MetricFamily messages of a delimited protobuf body; fails on what the Go decoder refuses."""
    done = subprocess.run([require("protodump", go_bin("protodump"))], input=body, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def _number(value) -> float:
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value, value) if isinstance(value, str) else float(value)


def _bound(value: float) -> str:
    return "+Inf" if value == math.inf else (str(int(value)) if value == int(value) else repr(value))


def classic_samples(families: list[dict]) -> dict[tuple[str, tuple], float]:
    """The samples the text format serves for these families (a histogram's buckets, +Inf, _sum and _count; a
    summary's quantiles, _sum and _count), keyed as helpers.exact_samples keys them."""
    samples: dict[tuple[str, tuple], float] = {}
    for family in families:
        name = family["name"]
        for metric in family.get("metric", []):
            labels = [(pair["name"], pair["value"]) for pair in metric.get("label", [])]

            def put(sample: str, value, *extra: tuple[str, str], labels: list[tuple[str, str]] = labels) -> None:
                key = (sample, tuple(sorted([*labels, *extra])))
                assert key not in samples, f"duplicate series {key}"
                samples[key] = _number(value)

            if "histogram" in metric:
                histogram = metric["histogram"]
                for bucket in histogram.get("bucket", []):
                    put(name + "_bucket", int(bucket.get("cumulative_count", 0)), ("le", _bound(_number(bucket["upper_bound"]))))
                put(name + "_bucket", int(histogram.get("sample_count", 0)), ("le", "+Inf"))
                put(name + "_sum", histogram.get("sample_sum", 0))
                put(name + "_count", int(histogram.get("sample_count", 0)))
            elif "summary" in metric:
                summary = metric["summary"]
                for quantile in summary.get("quantile", []):
                    put(name, quantile.get("value", 0), ("quantile", _bound(_number(quantile.get("quantile", 0)))))
                put(name + "_sum", summary.get("sample_sum", 0))
                put(name + "_count", int(summary.get("sample_count", 0)))
            else:
                kind = next(k for k in ("counter", "gauge", "untyped") if k in metric)
                put(name, metric[kind].get("value", 0))
    return samples


def native_buckets(histogram: dict) -> dict[int, int]:
    """A native histogram's positive buckets: schema-0 index → count, from its spans and deltas."""
    counts: dict[int, int] = {}
    index, count = 0, 0
    deltas = iter(int(delta) for delta in histogram.get("positive_delta", []))
    for span in histogram.get("positive_span", []):  # the first offset from 0, each next one from the last span's end
        index += int(span.get("offset", 0))
        for _ in range(int(span.get("length", 0))):
            count += next(deltas)
            counts[index] = count
            index += 1
    return counts
