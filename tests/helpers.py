"""Calling the exporter's WSGI app in process, and reading its exposition with the real parser."""

from __future__ import annotations

import gzip
import io
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from exporter.config import build_config
from exporter.service.server import ExporterApp


class Response:
    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.code = int(status.split(maxsplit=1)[0])
        self.headers = dict(headers)
        self.body = body

    @property
    def text(self) -> str:
        if self.headers.get("Content-Encoding") == "gzip":
            return gzip.decompress(self.body).decode()
        return self.body.decode()

    def samples(self) -> dict[tuple[str, tuple], float]:
        return parse_samples(self.text)


def parse_samples(text: str) -> dict[tuple[str, tuple], float]:
    samples: dict[tuple[str, tuple], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in samples, f"duplicate series {key}"
            samples[key] = sample.value
    return samples


def sample(samples: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    if key not in samples:
        candidates = [k for k in samples if k[0] == name]
        raise AssertionError(f"no sample {key}; samples of that name: {candidates}")
    return samples[key]


def make_app(raw: dict[str, Any], environ: dict[str, str] | None = None) -> ExporterApp:
    return ExporterApp(build_config(raw, environ=environ or {}))


def call(app: ExporterApp, path: str, query: str = "", headers: dict[str, str] | None = None) -> Response:
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "wsgi.input": io.BytesIO(),
        "SERVER_NAME": "test",
        "SERVER_PORT": "0",
    }
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    captured: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
        captured["status"], captured["headers"] = status, response_headers

    body = b"".join(app(environ, start_response))
    return Response(captured["status"], captured["headers"], body)
