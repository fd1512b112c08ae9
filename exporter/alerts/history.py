"""A Prometheus' HTTP API, as the backtest reads it: ``query_range`` and the metric names it holds, over plain HTTP(S)
with basic auth, a bearer token or a CA of one's own, or signed with SigV4 (Amazon Managed Service for Prometheus:
``aps``; CloudWatch's PromQL API: ``monitoring``). Thanos and Mimir query front ends answer the same API."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from exporter.common.records import record

from .backtest import BacktestError, Series


@record(frozen=True)
class Access:
    url: str
    bearer_token: str | None = None
    basic_auth: tuple[str, str] | None = None
    ca_file: str | None = None
    sigv4_service: str | None = None  # aps | monitoring
    sigv4_region: str | None = None
    timeout: float = 120.0


def _parts(url: str) -> tuple[str, str, tuple[str, str] | None, str]:
    """The URL without its user, password and query (what requests go to), the query (kept on each request), the
    user and password it carried, and the URL as a message may show it (no secret)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port:
        netloc += f":{parts.port}"
    base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    user = (urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")) if parts.username else None
    return base, parts.query, user, base


class _NoCredentialsElsewhere(urllib.request.HTTPRedirectHandler):
    """A redirect is followed, but a credential (a bearer token, basic auth, a SigV4 signature) goes to no other host
    than the one it was given for, as Prometheus' own HTTP client has it."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> urllib.request.Request | None:
        made = super().redirect_request(req, fp, code, msg, headers, newurl)
        if made is not None and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
            for name in [name for name in made.headers if name.lower() in ("authorization", "x-amz-date", "x-amz-security-token")]:
                del made.headers[name]
        return made


class PrometheusHistory:
    def __init__(self, access: Access) -> None:
        self.access = access
        self._context = ssl.create_default_context(cafile=access.ca_file) if access.ca_file else None
        self._opener = urllib.request.build_opener(_NoCredentialsElsewhere(), urllib.request.HTTPSHandler(context=self._context))
        self._base, self._query, user, self.shown = _parts(access.url)
        self._basic_auth = access.basic_auth or user
        self._signer: Any = None  # with SigV4: the credentials and region, found once (on EC2 a metadata call each)
        self.requests = 0
        self._lock = threading.Lock()  # the backtest's queries come from a few threads

    def query_range(self, expr: str, start: float, end: float, step: float) -> tuple[list[Series], list[str]]:
        """The expression's series over [start, end] every ``step``, and the answer's warnings (partial data)."""
        reply = self._call("/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})
        data = reply.get("data") or {}
        if data.get("resultType") != "matrix":
            raise BacktestError(f"{self.shown}: a range query answered {data.get('resultType')!r}, not a matrix")
        series = [
            (
                {str(k): str(v) for k, v in (item.get("metric") or {}).items()},
                [(round(float(at), 3), float(value)) for at, value in item.get("values") or []],
            )
            for item in data.get("result") or []
        ]
        return series, [str(warning) for warning in reply.get("warnings") or []]

    def metric_names(self, start: float, end: float) -> set[str] | None:
        """The metric names the history holds over the range; None where the server answers but will not list them
        (then none is taken for missing, and the report says so). One that cannot be reached at all is an error."""
        try:
            reply = self._call("/api/v1/label/__name__/values", {"start": f"{start:.3f}", "end": f"{end:.3f}"}, "GET")
        except BacktestError as err:
            if str(err).startswith("cannot reach") or " answered HTTP 401" in str(err) or " answered HTTP 403" in str(err):
                raise  # no history at all, or none for these credentials: one line, exit 1
            return None
        return {str(name) for name in reply.get("data") or []}

    def _call(self, path: str, form: dict[str, str], method: str = "POST") -> dict[str, Any]:
        """POST the form, or GET with it as the query string (an endpoint that takes no POST); the URL's own query
        (a tenant, say) on each request. No message shows a credential."""
        url = self._base + path + (f"?{self._query}" if self._query else "")
        body: bytes | None = urllib.parse.urlencode(form).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if method == "GET":
            url, body, headers = f"{url}{'&' if self._query else '?'}{urllib.parse.urlencode(form)}", None, {}
        if self.access.bearer_token:
            headers["Authorization"] = f"Bearer {self.access.bearer_token}"
        elif self._basic_auth:
            user, password = self._basic_auth
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        if self.access.sigv4_service:
            headers = self._signed(method, url, body)
        request = urllib.request.Request(url, data=body, headers=headers, method=method)  # noqa: S310 - the URL the user gave
        with self._lock:
            self.requests += 1
        try:
            with self._opener.open(request, timeout=self.access.timeout) as answer:
                reply: dict[str, Any] = json.loads(answer.read())
        except urllib.error.HTTPError as err:
            detail = err.read()[:300].decode("utf-8", errors="replace").strip()
            raise BacktestError(f"{self.shown} answered HTTP {err.code}: {detail}") from err
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            raise BacktestError(f"cannot reach {self.shown}: {getattr(err, 'reason', err)}") from err
        except http.client.HTTPException as err:  # an answer cut short, a status line that is none
            raise BacktestError(f"{self.shown} answered a broken response: {type(err).__name__}") from err
        except ValueError as err:
            raise BacktestError(f"{self.shown} answered no JSON: {err}") from err
        if reply.get("status") != "success":
            raise BacktestError(f"{self.shown}: {reply.get('errorType', 'error')}: {reply.get('error', 'no error given')}")
        return reply

    def _signed(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        import boto3
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        with self._lock:
            if self._signer is None:
                session = boto3.session.Session()
                self._signer = (self.access.sigv4_region or session.region_name, session.get_credentials())
            region, credentials = self._signer
        if not region or credentials is None:
            raise BacktestError("SigV4 needs AWS credentials and a region (--sigv4-region)")
        headers = {"Content-Type": "application/x-www-form-urlencoded"} if body is not None else {}
        request = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
        SigV4Auth(credentials, self.access.sigv4_service or "aps", region).add_auth(request)
        return dict(request.headers.items())
