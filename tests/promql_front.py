"""CloudWatch's PromQL API, as far as the tests need it: a real Prometheus 3 holding series in the shape of ElastiCache's
OpenTelemetry metrics (UTF-8 names and labels, scraped from a small exposition server), behind a front that does what
CloudWatch's endpoint does with a request before the engine sees it: it checks the SigV4 signature (the service
``monitoring``, the region, the credentials, the body's hash) and answers 403 where it is wrong; and, on demand, the
limits' answers (422 past the request rate, 429 past the concurrent queries, a cut answer with a warning)."""

from __future__ import annotations

import http.server
import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from servers import PrometheusProcess, free_port, start_prometheus, wait_ready, wait_until
from tools import prometheus_3

AUTHORIZATION = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]+)")
TRUNCATED = "result truncated to the maximum of 500 series"


class Exposition:
    """Serves ``text`` (Prometheus' text format, UTF-8 names quoted) for Prometheus to scrape; ``text`` may change."""

    def __init__(self, text: str) -> None:
        self.text = text
        exposition = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exposition.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8; escaping=allow-utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class PromQLFront:
    """SigV4 in front of a Prometheus' ``/api/v1/query``, for ``region`` and the credentials ``key``/``secret``/``token``."""

    def __init__(self, prometheus_port: int, region: str, key: str, secret: str, token: str | None) -> None:
        self.prometheus_port = prometheus_port
        self.region = region
        self.credentials = (key, secret, token)
        self.answers: list[int | str] = []  # what the next requests get instead of the engine's answer: 422, 429, "truncated"
        self.queries: list[str] = []  # each query the engine answered
        self.refused: list[str] = []  # why each refused request was refused
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                why = front.check(self.command, self.path, dict(self.headers.items()), body)
                if why:
                    front.refused.append(why)
                    return self._send(403, {"message": why})
                if self.path not in ("/api/v1/query", "/api/v1/query_range"):
                    return self._send(404, {"message": f"no such path {self.path}"})
                if front.answers:
                    answer = front.answers.pop(0)
                    if answer == "truncated":
                        reply = front.forward(self.path, body)
                        reply["warnings"] = [*reply.get("warnings", []), TRUNCATED]
                        return self._send(200, reply)
                    return self._send(int(answer), {"status": "error", "errorType": "limit", "error": f"limit answered {answer}"})
                front.queries.append(urllib.parse.parse_qs(body.decode())["query"][0])
                return self._send(200, front.forward(self.path, body))

            def _send(self, status: int, document: dict) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def check(self, method: str, path: str, headers: dict[str, str], body: bytes) -> str:
        """Why the request's signature is not the one AWS would accept, or "" where it is."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        lowered = {name.lower(): value for name, value in headers.items()}
        found = AUTHORIZATION.fullmatch(lowered.get("authorization", ""))
        if found is None:
            return "no SigV4 Authorization header"
        key, day, region, service, signed, signature = found.groups()
        key_wanted, secret, token = self.credentials
        if service != "monitoring":
            return f"signed for the service {service}, not monitoring"
        if region != self.region:
            return f"signed for the region {region}, not {self.region}"
        if key != key_wanted or (token and lowered.get("x-amz-security-token") != token):
            return "unknown credentials"
        stamp = lowered.get("x-amz-date", "")
        if not stamp.startswith(day):
            return "X-Amz-Date is not the credential's day"
        names = signed.split(";")
        if not {"host", "x-amz-date"} <= set(names):
            return "host and x-amz-date must be signed"
        request = AWSRequest(method=method, url=f"http://{lowered['host']}{path}", data=body, headers={n: lowered[n] for n in names if n != "host"})
        request.context["timestamp"] = stamp
        auth = SigV4Auth(Credentials(key_wanted, secret, token), service, region)
        expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
        return "" if expected == signature else "the signature does not match the request"

    def forward(self, path: str, body: bytes) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.prometheus_port}{path}",
            data=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=20) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as err:  # Prometheus' own error answer (a bad query: 400)
            return json.loads(err.read())

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def otel_presence(node_ids: list[str]) -> str:
    """The vended gauge every node-based Valkey node has, for ``node_ids``, as Prometheus' text format."""
    return "".join(
        f'{{"valkey.memory.max", "@resource.aws.elasticache.node.id"="{node}", "valkey.role"="primary"}} 13000000000\n' for node in node_ids
    )


def start_otel_prometheus(directory: Path, text: str) -> tuple[PrometheusProcess, Exposition]:
    """A real Prometheus scraping ``text`` every second, once it holds it."""
    exposition = Exposition(text)
    rules = directory / "none.rules.yml"
    rules.write_text("groups: []\n")
    scrape = [{"job_name": "otel", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{exposition.port}"]}]}]
    prometheus = start_prometheus(directory, rules, scrape)

    def scraped() -> bool:
        query = urllib.parse.urlencode({"query": "count(up == 1)"})
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{prometheus.port}/api/v1/query?{query}", timeout=5) as reply:
                return bool(json.loads(reply.read())["data"]["result"])
        except OSError:
            return False

    wait_until(scraped, timeout=60, interval=0.3, what="Prometheus holding the OpenTelemetry series")
    return prometheus, exposition


def start_backfilled_prometheus(directory: Path, openmetrics: str | Path) -> PrometheusProcess:
    """A real Prometheus that holds ``openmetrics`` (OpenMetrics text with timestamps, UTF-8 names quoted; or a file of
    it, ending with ``# EOF``) from the start: written into TSDB blocks with ``promtool tsdb create-blocks-from
    openmetrics``, as a backfill is."""
    import subprocess
    import tempfile

    if isinstance(openmetrics, Path):
        source = openmetrics
    else:
        source = directory / "otel.om"
        source.write_text(openmetrics if openmetrics.endswith("# EOF\n") else openmetrics + "# EOF\n")
    data = Path(tempfile.mkdtemp(prefix="ecx-prometheus-"))
    backfill = [prometheus_3("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)]
    subprocess.run(backfill, check=True, capture_output=True, timeout=1800)
    rules = directory / "none.rules.yml"
    rules.write_text("groups: []\n")
    # a history of minutes, read as a Prometheus that evaluates its rules every minute reads it (a subquery's step)
    prometheus = start_prometheus(directory, rules, [], data=data, evaluation_interval="1m")
    wait_ready(prometheus.process, prometheus.port, "Prometheus over the backfilled OpenTelemetry series")
    return prometheus
