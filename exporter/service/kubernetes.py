"""The shard count of ``scrape.shard INDEX/auto``: the ``spec.replicas`` of the pod's own StatefulSet, read from the
in-cluster Kubernetes API as kube-state-metrics' automated sharding reads it, so ``kubectl scale`` re-shards.

One plain HTTPS GET of ``/apis/apps/v1/namespaces/<ns>/statefulsets/<name>`` at ``KUBERNETES_SERVICE_HOST`` and
``_PORT``, with the pod's service account token (re-read for every request: projected tokens rotate) and its CA; the
standard library's urllib and ssl, loaded only by an exporter in this mode. :class:`ShardCount` reads it every
``scrape.shard_refresh`` and hands a changed count to the target set. A read that fails keeps the last count (before
the first, the shard owns nothing and /-/ready says why); it is logged in one line, never with the token.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from exporter.common.records import record
from exporter.common.sharding import MAX_SHARDS, SERVICE_ACCOUNT_DIR, Shard, StatefulSetRef

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 1024 * 1024  # a StatefulSet is a few KiB; its pod template may carry large annotations
REQUEST_TIMEOUT = 10.0
# before the first count is known a failed read is tried again sooner than every refresh: the shard serves nothing meanwhile
FIRST_READ_RETRY = 5.0


class KubernetesError(Exception):
    """A read of the StatefulSet that failed, in one line naming what and where (never the token)."""


@record(frozen=True)
class InClusterApi:
    """Where the API is and how this pod proves who it is: the address of the ``kubernetes`` Service the kubelet puts
    in every container's environment, and the service account directory's token and CA."""

    host: str
    port: str
    token_file: str
    ca_file: str

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 service address
        return f"https://{host}:{self.port}"


def in_cluster_api(environ: Mapping[str, str], service_account_dir: str = SERVICE_ACCOUNT_DIR) -> InClusterApi:
    """The API of the cluster the pod runs in, or a :class:`KubernetesError` saying what is missing."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubernetesError("not in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
    directory = Path(service_account_dir)
    return InClusterApi(host, port, str(directory / "token"), str(directory / "ca.crt"))


def replicas_of(body: bytes, where: str) -> int:
    """``spec.replicas`` of a StatefulSet's JSON (0 to 1024), or a :class:`KubernetesError` naming ``where``."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise KubernetesError(f"{where}: not JSON ({err.__class__.__name__})") from None
    spec = document.get("spec") if isinstance(document, dict) else None
    if not isinstance(document, dict) or document.get("kind", "StatefulSet") != "StatefulSet" or not isinstance(spec, dict):
        raise KubernetesError(f"{where}: not a StatefulSet")
    replicas = spec.get("replicas", 1)  # the API server defaults it to 1; absent only from a hand-made object
    if not isinstance(replicas, int) or isinstance(replicas, bool) or not 0 <= replicas <= MAX_SHARDS:
        raise KubernetesError(f"{where}: spec.replicas must be 0 to {MAX_SHARDS}, got {replicas!r}")
    return replicas


_REFUSALS = {
    401: "the service account token was refused (401)",
    403: "forbidden (403): the service account needs get on this StatefulSet (the chart's Role grants it)",
    404: "no such StatefulSet (404)",
}


def read_replicas(api: InClusterApi, statefulset: StatefulSetRef, timeout: float = REQUEST_TIMEOUT) -> int:
    """One GET of the StatefulSet: its ``spec.replicas``, or a :class:`KubernetesError`."""
    import http.client
    import ssl  # only an exporter of automatic shards loads these (a plain serve keeps its footprint)
    import urllib.error
    import urllib.request

    where = f"GET {api.base_url}{statefulset.path}"
    try:
        token = Path(api.token_file).read_text().strip()  # each time: a projected token is rotated in place
        context = ssl.create_default_context(cafile=api.ca_file)
    except (OSError, ssl.SSLError) as err:
        raise KubernetesError(f"{where}: the service account's token or CA cannot be read: {err.__class__.__name__}: {err}") from None
    if not token or any(not 0x21 <= ord(char) <= 0x7E for char in token):  # what a header can carry, and never logged
        raise KubernetesError(f"{where}: the service account's token is empty or holds characters a header cannot carry")
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    request = urllib.request.Request(api.base_url + statefulset.path, headers=headers)  # noqa: S310 - https, built above

    class _NoRedirect(urllib.request.HTTPRedirectHandler):  # the API server does not redirect: never the token elsewhere
        def redirect_request(self, *_: object, **__: object) -> None:
            return None

    opener = urllib.request.build_opener(_NoRedirect, urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(request, timeout=timeout) as response:
            body = response.read(MAX_BODY_BYTES + 1)
    except urllib.error.HTTPError as err:
        err.close()
        raise KubernetesError(f"{where}: {_REFUSALS.get(err.code, f'HTTP {err.code}')}") from None
    except ValueError as err:  # its text may quote the request's headers, the token among them
        raise KubernetesError(f"{where}: the request could not be made ({err.__class__.__name__})") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        reason = getattr(err, "reason", err)
        raise KubernetesError(f"{where}: {reason}") from None
    if len(body) > MAX_BODY_BYTES:
        raise KubernetesError(f"{where}: the reply is larger than {MAX_BODY_BYTES} bytes")
    return replicas_of(body, where)


class ShardCount:
    """Keeps the shard's count equal to the StatefulSet's replicas: :meth:`check` reads it once (``read``, which raises
    :class:`KubernetesError`) and hands a changed shard to ``apply``; the thread of :meth:`start` checks every
    ``interval`` seconds (sooner while no count is known yet). The shard and the failure counts are this object's,
    changed only by the one thread that checks."""

    def __init__(
        self,
        shard: Shard,
        read: Callable[[], int],
        apply: Callable[[Shard], None],
        *,
        interval: float,
        source: str,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        self.shard = shard
        self._read = read
        self._apply = apply
        self.interval = interval
        self.source = source  # what the count is read from, for the log: "StatefulSet monitoring/elasticache-exporter"
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait  # an injected wait drives the loop in tests
        self._thread: threading.Thread | None = None
        self.failures = 0  # reads that failed, since start
        self.last_error = ""  # the last failure's text while they last; empty after a success
        if not shard.known:
            log.info("scrape.shard %s: waiting for the replicas of %s before serving any target", shard, source)

    def check(self) -> Shard:
        """One read: the shard with the count read, or the last one where the read failed."""
        try:
            count = self._read()
        except KubernetesError as err:
            self.failures += 1
            message = str(err)
            if message != self.last_error:  # once per kind of failure, not every refresh while the API is down
                kept = f"keeping count {self.shard.count}" if self.shard.known else "serving no target until it is known"
                log.warning("scrape.shard %s: the replicas of %s cannot be read, %s: %s", self.shard, self.source, kept, message)
            self.last_error = message
            return self.shard
        except Exception:  # our bug: logged, never the end of the thread or of the exporter
            self.failures += 1
            self.last_error = "internal error"
            log.exception("scrape.shard %s: reading the replicas of %s", self.shard, self.source)
            return self.shard
        if self.last_error:
            log.info("scrape.shard %s: the replicas of %s are readable again", self.shard, self.source)
            self.last_error = ""
        if count != self.shard.count:
            previous, self.shard = self.shard, self.shard.with_count(count)
            self._apply(self.shard)
            beyond = "; this pod's index is beyond it, so it serves no target" if self.shard.index >= count else ""
            log.info("scrape.shard %s: %s has %d replicas: shard %s, was %s%s", self.shard, self.source, count, self.shard, previous, beyond)
        return self.shard

    def run(self) -> None:
        while True:
            self.check()
            delay = self.interval if self.shard.known else min(self.interval, FIRST_READ_RETRY)
            if self._wait(delay) or self._stop.is_set():
                return

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="shard-count", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ends the thread at its next wait; a read under way is not waited for (at exit, the thread is a daemon)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)


def start_shard_count(
    shard: Shard, statefulset: StatefulSetRef, apply: Callable[[Shard], None], interval: float, service_account_dir: str, environ: Mapping[str, str]
) -> ShardCount:
    """The reader of ``scrape.shard INDEX/auto``, started: reads at once, then every ``interval``."""

    def read() -> int:
        return read_replicas(in_cluster_api(environ, service_account_dir), statefulset)

    counter = ShardCount(shard, read, apply, interval=interval, source=f"StatefulSet {statefulset}")
    counter.start()
    return counter
