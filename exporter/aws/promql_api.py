"""CloudWatch's Prometheus-compatible query API: ``/api/v1/query`` on CloudWatch's own endpoint
(``https://monitoring.<region>.amazonaws.com``), which serves the OpenTelemetry metrics ElastiCache emits for node-based
Valkey. botocore has no operation for it: each request is signed here with SigV4 for the service ``monitoring``, with the
account's credentials (IAM: ``cloudwatch:GetMetricData`` and ``cloudwatch:ListMetrics``).

AWS's limits, as the API reports them: 300 queries a second an account (HTTP 422 past it), 30 at once (429), at most 500
series an answer (past it the answer is cut, with HTTP 200 and a warning, which is an error here: a cut answer is never
taken for the whole), 7 days a request."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

from exporter.common.records import record

from .otel_metrics import NODE_LABEL, node_matcher

SERVICE = "monitoring"
MAX_SERIES = 500
# a gauge ElastiCache vends for every node-based Valkey node every minute: a node with it has the OpenTelemetry metrics
PRESENCE_METRIC = "valkey.memory.max"
IDS_PER_QUERY = 400  # nodes a presence query names: its answer (one series a node) stays under MAX_SERIES
# HTTP status -> what went wrong, as the API documents its limits and as a Prometheus API answers a bad query
KINDS = {422: "throttling", 429: "concurrency", 401: "access_denied", 403: "access_denied", 404: "unavailable", 400: "bad_query"}


class PromQLError(Exception):
    """A query that got no whole answer; ``kind``: throttling, concurrency, access_denied, unavailable, bad_query,
    truncated, connection or protocol."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@record(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


def sign(credentials: Any, region: str, url: str, body: bytes) -> dict[str, str]:
    """The headers of a POST of ``body`` (form-encoded) to ``url``, signed with SigV4 for CloudWatch (``monitoring``)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
    SigV4Auth(credentials, SERVICE, region).add_auth(request)
    return dict(request.headers.items())


Series = tuple[dict[str, str], list[tuple[float, float]]]  # a range query's series: its labels and (time, value) points


def _result(reply: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The ``result`` of a whole answer of ``kind`` (vector, matrix); a warning that the answer was cut is an error."""
    cut = [warning for warning in reply.get("warnings") or [] if "truncat" in str(warning).lower()]
    if cut:
        raise PromQLError("truncated", f"the answer was cut: {cut[0]}")
    if reply.get("status") != "success":
        raise PromQLError("protocol", f"{reply.get('errorType', 'error')}: {reply.get('error', 'no error given')}")
    data = reply.get("data") or {}
    if data.get("resultType") != kind:
        raise PromQLError("protocol", f"expected a {kind}, got {data.get('resultType')!r}")
    return list(data.get("result") or [])


def _labels(item: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (item.get("metric") or {}).items()}


def parse_vector(reply: dict[str, Any]) -> list[Sample]:
    """An instant query's answer (pure)."""
    return [Sample(_labels(item), float(item.get("value", (0, "NaN"))[1])) for item in _result(reply, "vector")]


def parse_matrix(reply: dict[str, Any]) -> list[Series]:
    """A range query's answer (pure)."""
    return [(_labels(item), [(float(at), float(value)) for at, value in item.get("values") or []]) for item in _result(reply, "matrix")]


class PromQLApi:
    """Queries to one account's CloudWatch PromQL API in any region. ``credentials(region)``: the botocore credentials
    to sign with (``AwsApi.credentials``); ``endpoint(region)``: CloudWatch's endpoint there (``AwsApi``'s cloudwatch
    client's, so ``AWS_ENDPOINT_URL_CLOUDWATCH`` and the like apply); ``stats``: where each call and failure is counted
    (``AwsApi.stats``, as ``PromQLQuery`` and ``PromQLQueryRange``)."""

    def __init__(self, credentials: Callable[[str], Any], endpoint: Callable[[str], str], timeout: float = 20.0, stats: Any = None) -> None:
        self._credentials = credentials
        self._endpoint = endpoint
        self._timeout = timeout  # the API's own execution limit is 20 s
        self._stats = stats

    def query(self, region: str, expression: str, at: float | None = None) -> list[Sample]:
        form = {"query": expression, **({"time": f"{at:.3f}"} if at is not None else {})}
        return parse_vector(self._post(region, "/api/v1/query", form, "PromQLQuery"))

    def query_range(self, region: str, expression: str, start: float, end: float, step: float, timeout: float | None = None) -> list[Series]:
        """The expression at ``start``, every ``step`` seconds, up to ``end`` (both included); ``timeout``: this request's
        (at most the API's own 20 s)."""
        form = {"query": expression, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        return parse_matrix(self._post(region, "/api/v1/query_range", form, "PromQLQueryRange", timeout))

    def _post(self, region: str, path: str, form: dict[str, str], name: str, timeout: float | None = None) -> dict[str, Any]:
        if self._stats is not None:
            self._stats.count_call(name)
        try:
            return self._send(region, path, form, min(self._timeout, timeout) if timeout is not None else self._timeout)
        except PromQLError as err:
            if self._stats is not None:
                self._stats.count_error(name, err.kind)
            raise

    def _send(self, region: str, path: str, form: dict[str, str], timeout: float) -> dict[str, Any]:
        try:
            # the endpoint may come from a client that assumes a role, and signing refreshes credentials: whatever
            # botocore raises there is this query's failure, never the poll's
            url = self._endpoint(region).rstrip("/") + path
            credentials = self._credentials(region)
            if credentials is None:
                raise PromQLError("credentials", "no AWS credentials to sign with")
            body = urllib.parse.urlencode(form).encode()
            headers = sign(credentials, region, url, body)
        except PromQLError:
            raise
        except Exception as err:  # botocore's errors, whatever their class
            raise PromQLError("credentials", f"cannot sign a query for {region}: {type(err).__name__}: {err}") from err
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 - an https endpoint of AWS's
        try:
            with urllib.request.urlopen(request, timeout=max(0.5, timeout)) as reply:  # noqa: S310
                answer: dict[str, Any] = json.loads(reply.read())
                return answer
        except urllib.error.HTTPError as err:
            detail = err.read()[:300].decode("utf-8", errors="replace")
            raise PromQLError(KINDS.get(err.code, "protocol"), f"HTTP {err.code} from {url}: {detail}") from err
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            raise PromQLError("connection", f"cannot reach {url}: {err}") from err
        except ValueError as err:
            raise PromQLError("protocol", f"{url} answered no JSON: {err}") from err


def otel_nodes(api: PromQLApi, region: str, ids: Iterable[str], at: float | None = None) -> set[str]:
    """Which of the nodes ``ids`` (CacheClusterIds) have ElastiCache's vended OpenTelemetry metrics in ``region``: those
    with a sample of PRESENCE_METRIC in the 5 minutes before ``at`` (now when None: a query's own lookback), asked
    for at most IDS_PER_QUERY nodes a query so no answer is cut."""
    wanted = sorted(set(ids))
    found: set[str] = set()
    for start in range(0, len(wanted), IDS_PER_QUERY):
        selector = f'{{"{PRESENCE_METRIC}", {node_matcher(wanted[start : start + IDS_PER_QUERY])}}}'
        expression = f'count by ("{NODE_LABEL}") ({selector})'
        found |= {sample.labels.get(NODE_LABEL, "") for sample in api.query(region, expression, at)}
    return found & set(wanted)
