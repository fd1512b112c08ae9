"""The poll's second source: the minutes of a Valkey node's metric-statistics that ElastiCache's OpenTelemetry metrics
stand for (``otel_metrics.POLLED``), read through CloudWatch's PromQL API instead of GetMetricData, where that is
cheaper (``budget.promql_is_cheaper``: GetMetricData bills each metric asked, the PromQL API the samples it scans).

Which nodes have the metrics is asked per account and region (``promql_api.otel_nodes``), again every discovery
interval and whenever a Valkey node is new there (a node upgraded from Redis OSS is one). Each query names at most
``IDS_PER_QUERY`` nodes, a replication group's nodes together, so no answer is cut. Whatever this source cannot bring
goes to GetMetricData in the same poll: the queries of a place where the API is refused, unreachable, over its limits
or cut an answer, and a node's metric-statistic the answer has no series for (from then on it is asked of GetMetricData
until the next detection). Each cause is logged once. Every minute brought is kept by its timestamp, as GetMetricData's
are, so a node that changes source loses no minute and counts none twice. The poll thread's own state."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from exporter.common.records import record

from .budget import promql_is_cheaper
from .cloudwatch import Query
from .discovery import NodeKey
from .otel_metrics import MINUTE, POLLED, as_results, emits_otel, samples_per_minute, with_nodes
from .promql_api import IDS_PER_QUERY, PromQLApi, PromQLError, otel_nodes

log = logging.getLogger(__name__)


@record(frozen=True)
class Detected:
    """What the last detection of a place found: the nodes with the metrics, among those asked about, and when."""

    emitting: frozenset[str]
    asked: frozenset[str]
    at: float  # monotonic


@record
class Fetched:
    """What a place's PromQL queries brought, and the queries left to GetMetricData."""

    results: list[dict[str, Any]]
    left: list[Query]


class OtelSource:
    """``promql(place)``: the PromQL API of a place's account; ``place`` is (account, region)."""

    def __init__(
        self,
        promql: Callable[[Any], PromQLApi],
        redetect_seconds: float,
        monotonic: Callable[[], float],
        count_samples: Callable[[int], None],
        log_failures: bool = True,
    ) -> None:
        self._promql = promql
        self._redetect = redetect_seconds
        self._monotonic = monotonic
        self._count_samples = count_samples
        self._log = log_failures
        self._detected: dict[Any, Detected] = {}
        self._lacking: set[tuple[NodeKey, str, str]] = set()  # a node's metric-statistic the API had no series for
        self._warned: set[str] = set()

    def emitting(self, place: Any) -> frozenset[str]:
        """The node ids of the place that have the metrics, as last detected."""
        found = self._detected.get(place)
        return found.emitting if found else frozenset()

    def serves(self, query: Query, emitting: frozenset[str], interval: float) -> bool:
        """Whether this source brings the query's minutes: the node has the metrics, the metric-statistic has its
        counterpart, and the PromQL API is the cheaper way to ask it at its tier's ``interval``."""
        key = (query.metric, query.statistic)
        return (
            query.node.cluster_id in emitting
            and key in POLLED
            and (query.node.key, *key) not in self._lacking
            and promql_is_cheaper(samples_per_minute(*key), interval)
        )

    def detect(self, place: Any, region: str, ids: set[str], at: float) -> frozenset[str]:
        """The place's Valkey nodes ``ids`` that have the metrics, asked again when a node is new there or the last
        answer is older than the discovery interval; where the API cannot be asked, none (and a log line, once). ``at``:
        the wall clock's now."""
        found = self._detected.get(place)
        now = self._monotonic()
        if found is not None and ids <= found.asked and now - found.at < self._redetect:
            return found.emitting
        emitting: frozenset[str] = frozenset()
        if ids:
            try:
                emitting = frozenset(otel_nodes(self._promql(place), region, ids, at))
                self._count_samples(len(ids))  # the presence gauge's newest sample of each node asked about
            except PromQLError as err:
                # the nodes found before keep this source (a query that fails leaves its minutes to GetMetricData)
                emitting = found.emitting & ids if found is not None else frozenset()
                self._warn(
                    f"detect:{region}:{err.kind}",
                    logging.WARNING,
                    "%s: CloudWatch's PromQL API cannot be asked (%s: %s); the Valkey nodes not yet found on it are polled with GetMetricData",
                    region,
                    err.kind,
                    err,
                )
            else:
                missing = len(ids - emitting)
                if missing:
                    self._warn(
                        f"missing:{region}:{missing}",
                        logging.INFO,
                        "%s: %d Valkey node(s) without ElastiCache's OpenTelemetry metrics are polled with GetMetricData",
                        region,
                        missing,
                    )
        # a new detection asks the API again for what it lacked: the node's metric may have come since
        self._lacking = {key for key in self._lacking if key[0][1] != region or key[0][2] not in ids}
        self._detected[place] = Detected(emitting, frozenset(ids), now)
        return emitting

    def fetch(self, place: Any, region: str, queries: list[Query], start: float, end: float) -> Fetched:
        """The minutes [start, end) of ``queries`` (each a node's metric-statistic), one range query per metric-statistic
        and chunk of nodes; what it could not bring is left to GetMetricData."""
        fetched = Fetched([], [])
        by_key: dict[tuple[str, str], list[Query]] = {}
        for query in queries:
            by_key.setdefault((query.metric, query.statistic), []).append(query)
        minutes = max(0, round((end - start) / MINUTE))
        for (metric, statistic), asked in sorted(by_key.items()):
            for chunk in _chunks(asked):
                ids = {query.node.cluster_id: query.id for query in chunk}
                expression = with_nodes(POLLED[(metric, statistic)], ids)
                try:
                    # evaluated at each minute's end: the value at start + 60 is the minute that starts at start
                    series = self._promql(place).query_range(region, expression, start + MINUTE, end, MINUTE)
                except PromQLError as err:
                    self._warn(
                        f"fetch:{region}:{err.kind}",
                        logging.WARNING,
                        "%s: CloudWatch's PromQL API failed (%s: %s); the minutes are asked of GetMetricData",
                        region,
                        err.kind,
                        err,
                    )
                    fetched.left += chunk
                    continue
                self._count_samples(len(chunk) * minutes * samples_per_minute(metric, statistic))
                results = as_results(series, ids)
                fetched.results += results
                answered = {result["Id"] for result in results}
                lacking = [query for query in chunk if query.id not in answered]
                if lacking:
                    self._lacking.update((query.node.key, metric, statistic) for query in lacking)
                    self._warn(
                        f"lacking:{region}:{metric}:{statistic}",
                        logging.WARNING,
                        "%s: no OpenTelemetry series of %s %s for %d node(s); asked of GetMetricData",
                        region,
                        metric,
                        statistic,
                        len(lacking),
                    )
                    fetched.left += lacking
        return fetched

    def _warn(self, key: str, level: int, message: str, *args: object) -> None:
        if self._log and key not in self._warned:
            self._warned.add(key)
            log.log(level, message, *args)


def valkey_ids(nodes: list[Any]) -> set[str]:
    return {node.cluster_id for node in nodes if emits_otel(node)}


def _chunks(queries: list[Query]) -> list[list[Query]]:
    """At most IDS_PER_QUERY nodes a query (an answer of one series a node stays under the 500 series AWS cuts at), a
    replication group's nodes in one chunk where it fits."""
    by_group: dict[str, list[Query]] = {}
    for query in sorted(queries, key=lambda q: (q.node.replication_group, q.node.cluster_id)):
        by_group.setdefault(query.node.replication_group or query.node.cluster_id, []).append(query)
    chunks: list[list[Query]] = [[]]
    for members in by_group.values():
        for start in range(0, len(members), IDS_PER_QUERY):
            part = members[start : start + IDS_PER_QUERY]
            if len(chunks[-1]) + len(part) > IDS_PER_QUERY:
                chunks.append([])
            chunks[-1].extend(part)
    return [chunk for chunk in chunks if chunk]
