"""The poll's second source: the minutes of a Valkey node's metric-statistics that ElastiCache's OpenTelemetry metrics
stand for (``otel_metrics.POLLED``), read through CloudWatch's PromQL API instead of GetMetricData, where that is
cheaper (``budget.promql_is_cheaper``: GetMetricData bills each metric asked, the PromQL API the samples it scans).

Which nodes have the metrics is asked per account and region (``promql_api.otel_nodes``), again every discovery
interval and whenever a Valkey node is new there (a node upgraded from Redis OSS is one). Each query names at most
``IDS_PER_QUERY`` nodes, a replication group's nodes together, so no answer is cut. Whatever this source cannot bring
goes to GetMetricData in the same poll: the queries of a place where the API is refused, unreachable, over its limits
or cut an answer, and a node's metric-statistic the answer has no series for (from then on it is asked of GetMetricData
for an hour). Each cause is logged once an episode, and its end once. A refused or unreachable API ends the place's
queries for the poll, and none is asked past the poll's deadline. Every minute brought is kept by its timestamp, as GetMetricData's
are, so a node that changes source loses no minute and counts none twice. The poll thread's own state."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from exporter.common.records import record

from .budget import promql_is_cheaper
from .cloudwatch import Query
from .discovery import NodeKey
from .otel_metrics import MINUTE, NODE_LABEL, POLLED, as_results, emits_otel, samples_per_minute, with_nodes
from .promql_api import IDS_PER_QUERY, PromQLApi, PromQLError, otel_nodes
from .schedule import ASKED_AGAIN_SECONDS

log = logging.getLogger(__name__)

LACKING_SECONDS = 3600.0  # a node's metric-statistic the API had no series for is asked of GetMetricData this long
# failures that end a place's queries for the poll: asking again now would fail the same way, each after its timeout
ENDS_THE_POLL = frozenset({"connection", "throttling", "concurrency", "credentials", "access_denied", "unavailable"})


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
        # a node's metric-statistic the API had no series for -> when (replaced whole, never changed: the discovery
        # thread's replanning reads it)
        self._lacking: dict[tuple[NodeKey, str, str], float] = {}
        self._warned: set[tuple[str, str, str]] = set()  # (what, where, kind) said and not yet over

    def emitting(self, place: Any) -> frozenset[str]:
        """The node ids of the place that have the metrics, as last detected."""
        found = self._detected.get(place)
        return found.emitting if found else frozenset()

    def serves(self, query: Query, emitting: frozenset[str], interval: float) -> bool:
        """Whether this source brings the query's minutes: the node has the metrics, the metric-statistic has its
        counterpart (and had series within the last hour), and the PromQL API is the cheaper way to ask it at its tier's
        ``interval``."""
        key = (query.metric, query.statistic)
        lacking = self._lacking.get((query.node.key, *key))
        return (
            query.node.cluster_id in emitting
            and key in POLLED
            and (lacking is None or self._monotonic() - lacking >= LACKING_SECONDS)
            and promql_is_cheaper(samples_per_minute(*key), interval)
        )

    def detect(self, place: Any, region: str, ids: set[str], at: float) -> frozenset[str]:
        """The place's Valkey nodes ``ids`` that have the metrics, asked again when a node is new there or the last
        answer is older than the discovery interval; where the API cannot be asked, those found before (a query that
        fails leaves its minutes to GetMetricData). ``at``: the wall clock's now."""
        found = self._detected.get(place)
        now = self._monotonic()
        if found is not None and ids <= found.asked and now - found.at < self._redetect:
            return found.emitting
        where = _where(place, region)
        emitting: frozenset[str] = frozenset()
        if ids:
            try:
                emitting = frozenset(otel_nodes(self._promql(place), region, ids, at))
                self._count_samples(len(ids))  # the presence gauge's newest sample of each node asked about
            except PromQLError as err:
                emitting = found.emitting & ids if found is not None else frozenset()
                self._warn(
                    ("detect", where, err.kind),
                    logging.WARNING,
                    "%s: CloudWatch's PromQL API cannot be asked (%s: %s); the Valkey nodes not yet found on it are polled with GetMetricData",
                    where,
                    err.kind,
                    err,
                )
            else:
                self._over("detect", where)
                missing = len(ids - emitting)
                if missing:
                    self._warn(
                        ("missing", where, str(missing)),
                        logging.INFO,
                        "%s: %d Valkey node(s) without ElastiCache's OpenTelemetry metrics are polled with GetMetricData",
                        where,
                        missing,
                    )
        self._detected[place] = Detected(emitting, frozenset(ids), now)
        return emitting

    def fetch(self, place: Any, region: str, queries: list[Query], start: float, end: float, deadline: float, stopped: Callable[[], bool]) -> Fetched:
        """The minutes [start, end) of ``queries`` (each a node's metric-statistic), one range query per expression and
        chunk of nodes (the metric-statistics of one expression asked once); what it could not bring is left to
        GetMetricData: a failure of ENDS_THE_POLL's kinds, the poll's ``deadline`` (monotonic) or a stop leaves the rest."""
        fetched = Fetched([], [])
        by_expression: dict[str, list[Query]] = {}
        for query in queries:
            by_expression.setdefault(POLLED[(query.metric, query.statistic)], []).append(query)
        minutes = max(0, round((end - start) / MINUTE))
        where = _where(place, region)
        ended = failed = False
        for template, asked in sorted(by_expression.items()):
            for chunk in _chunks(asked):
                left = deadline - time.monotonic()
                if ended or left <= 0 or stopped():
                    fetched.left += chunk
                    continue
                ids: dict[str, list[str]] = {}
                for query in chunk:
                    ids.setdefault(query.node.cluster_id, []).append(query.id)
                try:
                    # evaluated at each minute's end: the value at start + 60 is the minute that starts at start
                    series = self._promql(place).query_range(region, with_nodes(template, ids), start + MINUTE, end, MINUTE, timeout=left)
                except PromQLError as err:
                    self._warn(
                        ("fetch", where, err.kind),
                        logging.WARNING,
                        "%s: CloudWatch's PromQL API failed (%s: %s); the minutes are asked of GetMetricData",
                        where,
                        err.kind,
                        err,
                    )
                    fetched.left += chunk
                    ended, failed = err.kind in ENDS_THE_POLL, True
                    continue
                self._count_samples(len(ids) * minutes * samples_per_minute(chunk[0].metric, chunk[0].statistic))
                results = as_results(series, ids)
                fetched.results += results
                answered = {result["Id"] for result in results}
                lacking = [query for query in chunk if query.id not in answered]
                if lacking:
                    now = self._monotonic()
                    marked = {key: at for key, at in self._lacking.items() if now - at < LACKING_SECONDS}
                    marked.update(((query.node.key, query.metric, query.statistic), now) for query in lacking)
                    self._lacking = marked
                    names = sorted({f"{query.metric} {query.statistic}" for query in lacking})
                    self._warn(
                        ("lacking", where, ",".join(names)),
                        logging.WARNING,
                        "%s: no OpenTelemetry series of %s for %d node(s); asked of GetMetricData for an hour",
                        where,
                        ", ".join(names),
                        len({query.node.key for query in lacking}),
                    )
                    fetched.left += lacking
        if not failed and not ended and queries:
            self._over("fetch", where)  # a poll whose every query answered ends an episode of failures
        return fetched

    def probe(self, place: Any, region: str, nodes: list[Any], at: float) -> None:
        """Which of ``nodes`` (emitting) have the series of each metric-statistic the API would serve, asked over the
        minutes a poll asks again up to ``at`` (a range query an expression; an instant one would miss a gauge whose
        minute was stamped late): those without are marked lacking, as a poll would find them (``cost``'s bill)."""
        emitting = self.emitting(place)
        mine = [node for node in nodes if node.cluster_id in emitting]
        if not mine:
            return
        keys_of: dict[str, list[tuple[str, str]]] = {}
        for key, template in POLLED.items():
            keys_of.setdefault(template, []).append(key)
        now = self._monotonic()
        marked = dict(self._lacking)
        for template, keys in keys_of.items():
            try:
                expression = with_nodes(template, {n.cluster_id for n in mine})
                found = {
                    labels.get(NODE_LABEL, "")
                    for labels, points in self._promql(place).query_range(region, expression, at - ASKED_AGAIN_SECONDS + MINUTE, at, MINUTE)
                    if points
                }
            except PromQLError:
                return  # the detection said why, if the API cannot be asked
            self._count_samples(len(mine) * round(ASKED_AGAIN_SECONDS / MINUTE) * samples_per_minute(*keys[0]))
            marked.update(((node.key, *key), now) for node in mine if node.cluster_id not in found for key in keys)
        self._lacking = marked

    def _warn(self, key: tuple[str, str, str], level: int, message: str, *args: object) -> None:
        if self._log and key not in self._warned:
            self._warned.add(key)
            log.log(level, message, *args)

    def _over(self, what: str, where: str) -> None:
        """A query of ``what`` in ``where`` answered: an episode of failures said there is over, and said so."""
        over = {key for key in self._warned if key[:2] == (what, where)}
        if over:
            self._warned -= over
            if self._log:
                log.info("%s: CloudWatch's PromQL API answers again", where)


def _where(place: Any, region: str) -> str:
    """A place for a log line: the region, and the role where one is assumed."""
    role = getattr(place[0], "role_arn", None) if isinstance(place, tuple) and place else None
    return f"{region} (role {role})" if role else region


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
