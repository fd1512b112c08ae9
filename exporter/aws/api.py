"""AWS API calls with counting, classified errors and bounded exponential backoff with jitter.

boto3 is imported only when AWS is used, so the Redis part stays small. botocore's
own retries are switched off: every call made is counted here (the bill), and a
throttled or failing call is retried with backoff inside the caller's deadline,
never in a tight loop.
"""

from __future__ import annotations

import datetime
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from exporter.common.records import field, record

log = logging.getLogger(__name__)

RETRYABLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "LimitExceededException",
        "InternalFailure",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
    }
)
_TOKENS = {
    "describe_replication_groups": ("Marker", "Marker"),
    "describe_cache_clusters": ("Marker", "Marker"),
    "describe_serverless_caches": ("NextToken", "NextToken"),
    "describe_events": ("Marker", "Marker"),
    "describe_update_actions": ("Marker", "Marker"),
    "describe_service_updates": ("Marker", "Marker"),
    "describe_global_replication_groups": ("Marker", "Marker"),
    "get_metric_data": ("NextToken", "NextToken"),
    "list_metrics": ("NextToken", "NextToken"),
    "describe_alarms": ("NextToken", "NextToken"),
}


RENEW_BEFORE_EXPIRY = 300.0  # seconds: an assumed role is renewed this long before its credentials expire
RENEW_RETRY_SECONDS = 30.0  # after a failed renewal, while the old credentials last


def _utc_timestamp(value: Any) -> datetime.datetime:
    """botocore's timestamp parser, less its cost for an epoch number: it makes a datetime in dateutil's local zone,
    which took 60 % of decoding a GetMetricData reply (bench/poll_scrape_bench.py); the same instant in UTC."""
    if isinstance(value, (int, float)):
        return datetime.datetime.fromtimestamp(value, datetime.timezone.utc)
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)


def _new_session(**credentials: Any) -> Any:
    """A boto3 session whose replies' epoch timestamps are decoded by :func:`_utc_timestamp`."""
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=_utc_timestamp)
    return boto3.session.Session(botocore_session=core, **credentials)


class AwsCallError(Exception):
    def __init__(self, api: str, kind: str, detail: str) -> None:
        super().__init__(f"{api}: {kind}: {detail}")
        self.api = api
        self.kind = kind


@record
class ApiStats:
    calls: dict[str, int] = field(factory=dict)
    errors: dict[tuple[str, str], int] = field(factory=dict)
    metrics_requested: int = 0
    promql_samples: int = 0  # samples CloudWatch's PromQL API scanned, as estimated from each query (otel_poll)
    lock: threading.Lock = field(factory=threading.Lock)

    def count_call(self, api: str) -> None:
        with self.lock:
            self.calls[api] = self.calls.get(api, 0) + 1

    def count_error(self, api: str, kind: str) -> None:
        with self.lock:
            self.errors[(api, kind)] = self.errors.get((api, kind), 0) + 1

    def count_metrics(self, number: int) -> None:
        with self.lock:
            self.metrics_requested += number

    def count_samples(self, number: int) -> None:
        with self.lock:
            self.promql_samples += number

    def snapshot(self) -> tuple[dict[str, int], dict[tuple[str, str], int], int]:
        with self.lock:
            return dict(self.calls), dict(self.errors), self.metrics_requested


def classify_aws_error(err: BaseException) -> tuple[str, bool]:
    """(kind, retryable) for an exception raised by botocore."""
    from botocore import exceptions as bex

    if isinstance(err, bex.NoCredentialsError | bex.PartialCredentialsError | bex.CredentialRetrievalError):
        return "credentials", False
    if isinstance(err, bex.ClientError):
        code = err.response.get("Error", {}).get("Code", "")
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in RETRYABLE_CODES or "Throttl" in code:
            return ("throttling" if "hrottl" in code or "Limit" in code or "TooMany" in code else "server"), True
        if status >= 500:
            return "server", True
        if code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "ExpiredToken", "InvalidClientTokenId"):
            return "access_denied", False
        return "client", False
    if isinstance(err, bex.ReadTimeoutError | bex.ConnectTimeoutError):
        return "timeout", True
    if isinstance(err, bex.EndpointConnectionError | bex.ConnectionClosedError):
        return "connection", True
    if isinstance(err, NotImplementedError):
        return "unsupported", False
    return "other", False


@record(frozen=True)
class Backoff:
    base: float = 0.5
    cap: float = 8.0
    attempts: int = 4

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2^attempt))."""
        return rng() * min(self.cap, self.base * 2**attempt)


class AwsApi:
    """boto3 clients per (service, region, role), and calls made through :meth:`call`."""

    def __init__(
        self,
        *,
        role_arn: str | None = None,
        external_id: str | None = None,
        backoff: Backoff | None = None,
        stats: ApiStats | None = None,
        timeout: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.role_arn = role_arn
        self.external_id = external_id
        self.backoff = backoff or Backoff()
        self.stats = stats or ApiStats()
        self.timeout = timeout
        self._sleep = sleep
        self._clock = clock
        self._clients: dict[tuple[str, str], Any] = {}
        self._session: Any = None
        self._session_expires = 0.0
        self._renew_after = 0.0
        self._lock = threading.Lock()

    def _boto_session(self, region: str) -> Any:
        if self.role_arn is None:
            if self._session is None:
                self._session = _new_session()
            return self._session
        now = self._clock()
        expired = self._session is None or now >= self._session_expires
        if expired or (now > self._session_expires - RENEW_BEFORE_EXPIRY and now >= self._renew_after):
            try:
                self._assume_role(region)
            except AwsCallError as err:
                if expired:
                    raise
                # STS failing is no reason to stop while the credentials in hand are still good: tried again in a while
                self._renew_after = now + RENEW_RETRY_SECONDS
                log.warning("renewing %s failed (%s); its credentials stay valid for %.0f s more", self.role_arn, err, self._session_expires - now)
        return self._session

    def _assume_role(self, region: str) -> None:
        sts = _new_session().client("sts", region_name=region, config=self._config())
        kwargs: dict[str, Any] = {"RoleArn": self.role_arn, "RoleSessionName": "elasticache-exporter"}
        if self.external_id:
            kwargs["ExternalId"] = self.external_id
        credentials = self.call(sts, "assume_role", **kwargs)["Credentials"]
        self._session = _new_session(
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
        )
        expiration = credentials.get("Expiration")
        self._session_expires = expiration.timestamp() if hasattr(expiration, "timestamp") else self._clock() + 3600
        self._clients.clear()  # every client made with the old credentials

    def _config(self) -> Any:
        from botocore.config import Config

        return Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=self.timeout,
            read_timeout=self.timeout,
            user_agent_extra="elasticache-exporter",
        )

    @property
    def account_id(self) -> str:
        """The account a role acts in, from its ARN; "" for the default credentials (each node's ARN names its account)."""
        return self.role_arn.split(":")[4] if self.role_arn else ""

    def credentials(self, region: str) -> Any:
        """The botocore credentials calls are signed with (the assumed role's, renewed when due), for local signing."""
        with self._lock:
            return self._boto_session(region).get_credentials()

    def client(self, service: str, region: str) -> Any:
        with self._lock:
            session = self._boto_session(region)
            key = (service, region)
            client = self._clients.get(key)
            if client is None:
                client = session.client(service, region_name=region, config=self._config())
                self._clients[key] = client
            return client

    def call(self, client: Any, api: str, *, deadline: float | None = None, **kwargs: Any) -> dict[str, Any]:
        """One API call, retried with jittered backoff on throttling, 5xx and timeouts while time remains."""
        attempt = 0
        while True:
            self.stats.count_call(api)
            try:
                return getattr(client, api)(**kwargs)
            except Exception as err:
                kind, retryable = classify_aws_error(err)
                self.stats.count_error(api, kind)
                delay = self.backoff.delay(attempt)
                attempt += 1
                out_of_time = deadline is not None and time.monotonic() + delay > deadline
                if not retryable or attempt >= self.backoff.attempts or out_of_time:
                    raise AwsCallError(api, kind, _short(err)) from err
                log.debug("%s failed (%s), retry %d in %.2fs", api, kind, attempt, delay)
                self._sleep(delay)

    def pages(self, client: Any, api: str, *, deadline: float | None = None, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every reply of a paginated call, following its token; each page is one counted :meth:`call`."""
        input_token, output_token = _TOKENS[api]
        while True:
            reply = self.call(client, api, deadline=deadline, **kwargs)
            yield reply
            token = reply.get(output_token)
            if not token:
                return
            kwargs[input_token] = token

    def paginate(self, client: Any, api: str, key: str, *, deadline: float | None = None, **kwargs: Any) -> list[Any]:
        """The items under ``key`` of every page."""
        return [item for reply in self.pages(client, api, deadline=deadline, **kwargs) for item in reply.get(key, [])]


def _short(err: BaseException) -> str:
    return str(err).splitlines()[0][:200] if str(err) else type(err).__name__
