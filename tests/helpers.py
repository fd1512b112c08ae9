"""Calling the exporter's app in process, and reading its exposition with the real parser."""

from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from exporter.config import build_config
from exporter.service.http import Request
from exporter.service.server import ExporterApp


class Response:
    def __init__(self, code: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.code = code
        self.headers = dict(headers)
        self.body = body

    @property
    def text(self) -> str:
        if self.headers.get("Content-Encoding") == "gzip":
            return gzip.decompress(self.body).decode()
        return self.body.decode()

    def samples(self) -> dict[tuple[str, tuple], float]:
        """Samples keyed by their exact names and labels (on /metrics a node's series carry instance=<target>;
        /scrape serves one node's without it)."""
        return parse_samples(self.text)


_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def exposition_types(text: str) -> dict[str, str]:
    """{family name: TYPE} exactly as the text format names them (no parser normalisation)."""
    return {line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE ")}


def exact_samples(text: str) -> dict[tuple[str, tuple], float]:
    """Samples by their names exactly as served. prometheus_client's parser appends _total to a counter's samples
    that lack it; Prometheus keeps names as served, and so must the compatibility checks."""
    samples: dict[tuple[str, tuple], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            body, _, value = rest.rpartition("} ")
            labels = tuple(sorted((key, raw.encode().decode("unicode_escape")) for key, raw in _LABEL.findall(body)))
        else:
            name, _, value = line.partition(" ")
            labels = ()
        key = (name, labels)
        assert key not in samples, f"duplicate series {key}"
        samples[key] = float(value.split()[0])
    return samples


def parse_samples(text: str) -> dict[tuple[str, tuple], float]:
    """The samples by their served names, after the real parser has accepted the whole text."""
    parsed = [sample for family in text_string_to_metric_families(text) for sample in family.samples]
    samples = exact_samples(text)
    assert len(parsed) == len(samples)
    return samples


def client_samples(text: str) -> dict[tuple[str, tuple], float]:
    """Samples as prometheus_client's parser names them (a counter's with _total), keyed by sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def client_exposition(families: Any) -> str:
    """What prometheus_client's own encoder makes of a FamilySet (or any iterable of its metric families)."""
    from prometheus_client.exposition import generate_latest

    class Registry:
        def collect(self):
            return iter(families)

    return generate_latest(Registry()).decode()


def cfn_lint() -> str:
    """The cfn-lint installed beside this Python (the test extra), else the one on PATH."""
    beside = Path(sys.executable).parent / "cfn-lint"
    return str(beside) if beside.exists() else "cfn-lint"


def sample(samples: dict, name: str, **labels: str) -> float:
    """The sample with exactly these labels."""
    key = (name, tuple(sorted(labels.items())))
    if key not in samples:
        candidates = [k for k in samples if k[0] == name]
        raise AssertionError(f"no sample {key}; samples of that name: {candidates}")
    return samples[key]


def make_app(raw: dict[str, Any], environ: dict[str, str] | None = None) -> ExporterApp:
    return ExporterApp(build_config(raw, environ=environ or {}))


def call(app: ExporterApp, path: str, query: str = "", headers: dict[str, str] | None = None, method: str = "GET") -> Response:
    target = f"{path}?{query}" if query else path
    request = Request(method, target, "HTTP/1.1", {name.lower(): value for name, value in (headers or {}).items()})
    return Response(*app.handle(request))


STAMPED = re.compile(r'^elasticache_cloudwatch_datapoint_timestamp_seconds\{.*\bmetric="(aws_elasticache_[a-z0-9_]+)"')
FRESH_LIMIT = re.compile(r'^elasticache_cloudwatch_fresh_seconds\{.*\bmetric="(aws_elasticache_[a-z0-9_]+)"')


def with_served_freshness(tests: list[dict[str, Any]], minutes: int = 1500) -> list[dict[str, Any]]:
    """promtool tests whose inputs stamp CloudWatch datapoints, each with the limit an exporter at the default intervals
    serves for that series (``elasticache_cloudwatch_fresh_seconds``, which the rules' guards read), where the test gives
    none of its own."""
    from exporter.aws.cloudwatch import DEFAULT_TIER_INTERVALS, fresh_seconds, tier_of_series

    for test in tests:
        names = [item["series"] for item in test.get("input_series", [])]
        served = {match.group(1) for name in names if (match := FRESH_LIMIT.match(name))}
        stamped = sorted({match.group(1) for name in names if (match := STAMPED.match(name))} - served)
        for metric in stamped:
            tier = tier_of_series(metric)
            limit = fresh_seconds(DEFAULT_TIER_INTERVALS[tier])
            labels = f'instance="exporter:9769", metric="{metric}", tier="{tier}"'
            test["input_series"].append({"series": f"elasticache_cloudwatch_fresh_seconds{{{labels}}}", "values": f"{limit:g}+0x{minutes}"})
    return tests


def recording_api(*apis: str) -> Any:
    """The real AWS API client, keeping the keyword arguments of every call of ``apis`` (``.sent``) as they went out."""
    from exporter.aws.api import AwsApi

    class RecordingApi(AwsApi):
        def __init__(self) -> None:
            super().__init__()
            self.sent: list[tuple[str, dict]] = []

        def call(self, client, api, *, deadline=None, **kwargs):  # type: ignore[no-untyped-def]
            if api in apis:
                self.sent.append((api, kwargs))
            return super().call(client, api, deadline=deadline, **kwargs)

    return RecordingApi()


def rendered_three_ways(info: Any) -> tuple[bytes, bytes, bytes, bytes]:
    """An INFO reply's metrics encoded sample by sample, rendered without a memo, and rendered with one twice (the
    second time replayed): a target serves the same bytes whichever way it takes."""
    from exporter.common.exposition import TargetRendering, TextFamilySet, encode_text
    from exporter.common.families import FamilySet
    from exporter.common.labels import instance_labels
    from exporter.redis.info_metrics import add_info_metrics

    by_sample = FamilySet()
    add_info_metrics(info, instance_labels("t"), by_sample)
    fresh = TextFamilySet()
    add_info_metrics(info, instance_labels("t"), fresh)
    rendering = TargetRendering("t")
    served = []
    for _ in range(2):
        out = TextFamilySet()
        with out.rendering(rendering):
            add_info_metrics(info, rendering.labels, out)
        served.append(out.encode())
    return encode_text(by_sample.families()), fresh.encode(), served[0], served[1]
