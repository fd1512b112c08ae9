"""Background discovery and CloudWatch polling; scrapes only read the cache this keeps.

Two loops, each on its own interval: discovery (DescribeReplicationGroups,
DescribeCacheClusters, tags) and CloudWatch (GetMetricData in batches of 500).
A failing call is retried with backoff inside the cycle; after that the last
good values keep being served and their age shows it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from exporter.common.records import field, record

from .api import ApiStats, AwsApi, AwsCallError
from .budget import BudgetPlan, describe, plan
from .cloudwatch import (
    DURABILITY_METRICS,
    GLOBAL_DATASTORE_METRICS,
    INFO_EQUIVALENT,
    NODE_TYPE_METRICS,
    SERVERLESS_METRICS,
    TIERS,
    Datapoint,
    MetricSpec,
    Query,
    batches,
    build_queries,
    durability_metrics,
    fresh_seconds,
    get_metric_data,
    in_tiers,
    newest_datapoints,
    node_type_metrics,
    pairs_by_tier,
    polled_metrics,
    split_info_equivalent,
    tier_of,
    window,
)
from .discovery import Node, NodeKey, ServerlessCache, discover_region, instance_names
from .fleet_watch import FleetWatch
from .global_datastores import GlobalDatastore, describe_global_datastores, merge_global_datastores, secondary_groups
from .held import Held, MinutesHeld, SeriesKey
from .minutes import RISING_SERIES, WINDOW_SERIES, BurstWindow, MinuteWindow, Rising, SustainedWindow
from .network_baseline import BURST_SERIES, HISTORY_SECONDS, HISTORY_SERIES
from .otel_metrics import samples_per_minute
from .otel_poll import OtelSource, valkey_ids
from .promql_api import PromQLApi
from .schedule import PollSchedule
from .settings import AwsAccount, AwsConfig

log = logging.getLogger(__name__)


# A node whose INFO answered a scrape this recently is "on INFO": its INFO-equivalent CloudWatch metrics are not asked.
# Three scrapes at Prometheus' default minute, so one failed scrape does not buy them again.
INFO_FRESH_SECONDS = 180.0
# The share of the interpreter a poll's own work may take: after each batch the poll thread rests three times as long
# as the batch's decoding and keeping took, within the poll's deadline. A poll's work is pure Python, so without the
# rest a scrape running meanwhile gets half the interpreter (a poll of 1,000 nodes doubled /metrics' latency).
POLL_CPU_SHARE = 0.25


@record(frozen=True)
class CachedValue:
    query: Query
    datapoint: Datapoint


@record
class _Poll:
    """What one poll gathers across its accounts and regions (the poll thread's alone)."""

    deadline: float
    fresh: dict[SeriesKey, CachedValue] = field(factory=dict)
    minutes: list[tuple[tuple[NodeKey, str, str], dict[str, Any]]] = field(factory=list)
    queried: set[SeriesKey] = field(factory=set)
    queries: int = 0  # GetMetricData's
    promql: int = 0  # node metric-statistics asked of the PromQL API
    rests: bool = False  # whether it rests between batches (POLL_CPU_SHARE)
    cpu_mark: float | None = None  # the poll thread's CPU time at its last rest


class AwsMonitor:
    def __init__(
        self,
        config: AwsConfig,
        *,
        on_nodes: Callable[[list[tuple[str, Node]]], None] | None = None,
        apis: dict[AwsAccount, AwsApi] | None = None,
        log_failures: bool = True,
        owns: Callable[[str], bool] | None = None,
        info_answers: Callable[[str, Node, float], bool] | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        stats: ApiStats | None = None,
    ) -> None:
        self.config = config
        self._clock = clock  # what "now" is for the CloudWatch windows and the datapoints' age
        # a sharded exporter polls and describes only its own share of the nodes (all are still discovered)
        self.owns = owns or (lambda _cluster_id: True)
        # whether the exporter read a node's INFO in the last seconds given (by its instance name); None: it reads none
        self._info_answers = info_answers if config.info_first else None
        self._on_info: set[NodeKey] = set()  # nodes whose INFO-equivalents the last poll left out (written under the lock)
        self._catch_up: set[NodeKey] = set()  # nodes off INFO whose asking them again failed: asked at the next poll too
        self._log_failures = log_failures  # off for a command, which reports failures itself
        # every account's calls counted in one record: a process's own (``stats``), which outlives this monitor, so the
        # counters of a monitor built anew on a reload go on from where the last one's were
        stats = stats or ApiStats()
        self.apis = apis or {account: AwsApi(role_arn=account.role_arn, external_id=account.external_id, stats=stats) for account in config.accounts}
        self._on_nodes = on_nodes
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._discovered = threading.Event()
        self._nodes: dict[tuple[AwsAccount, str], list[Node]] = {}
        self._serverless: dict[tuple[AwsAccount, str], list[ServerlessCache]] = {}
        self._global_datastores: dict[tuple[AwsAccount, str], list[GlobalDatastore]] = {}
        self._secondaries: set[tuple[str, str, str]] = set()  # (account, region, replication group) of global secondaries
        self._cache: dict[SeriesKey, CachedValue] = {}
        self._names: dict[NodeKey, str] = {}
        # (instance, metric, statistic) → the cached value: a scrape's lookups are dict reads, not scans of the cache
        self._by_instance: dict[tuple[str, str, str], CachedValue] = {}
        self._held = MinutesHeld(config.period)  # every minute polled that alerts reason about (the poll thread's)
        # what the held minutes made at the last poll, for the scrapes (swapped in whole under the lock)
        self._made = Held({}, {}, {}, {}, {})
        self.node_metrics = polled_metrics(config.metrics, config.exclude_groups)
        self.last_discovery = 0.0
        self.last_poll = 0.0
        self.last_poll_duration = 0.0
        self.last_queries = 0
        self.polls = 0
        self.nodes_on_info = 0  # of the last poll
        self._schedule = PollSchedule(monotonic)  # when each tier is asked, from which minute (the poll thread's)
        self._warned: set[str] = set()
        # how often each tier is asked, for the fleet of the moment and the budget (budget.plan): replanned after each
        # discovery and poll
        self._plan = plan({}, {tier: config.tier_interval(tier) for tier in TIERS}, config.poll_interval, config.budget_usd_per_month)
        self._budget_outcome = "configured"  # the plan's outcome last logged (under the lock)
        self._born = clock()  # no budget outcome is told before the exporter can know which nodes answer INFO
        # the metrics only some nodes are asked (extra_metrics), and per node of the last poll those that apply to it: a
        # cached value of one that no longer applies (a group switched to sync durability) is not served on
        extras = [*(spec for _, group in NODE_TYPE_METRICS for spec in group), *GLOBAL_DATASTORE_METRICS, *DURABILITY_METRICS]
        self._extra_names = frozenset(spec.name for spec in extras) - {spec.name for spec in self.node_metrics}
        self._extras_apply: dict[NodeKey, frozenset[str]] = {}  # the poll thread's
        self.fleet = FleetWatch(self.apis, self._account_id_of) if config.events else None
        # a Valkey node's metric-statistics that ElastiCache's OpenTelemetry metrics stand for, through the PromQL API
        self._promql: dict[AwsAccount, PromQLApi] = {}
        self._otel = (
            OtelSource(lambda place: self.promql_api(place[0]), config.discovery_interval, monotonic, stats.count_samples, log_failures)
            if config.promql == "auto"
            else None
        )
        self._threads = [threading.Thread(target=self._loop, args=(self.discover_once, config.discovery_interval), name="aws-discovery", daemon=True)]
        if config.cloudwatch or config.events:
            self._threads.append(threading.Thread(target=self._poll_loop, name="cloudwatch-poll", daemon=True))

    # --- loops ----------------------------------------------------------------------

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 2.0) -> bool:
        """Stop the loops: a poll ends at its next batch, discovery at its next region. Whether both ended within
        ``timeout`` (a reload that builds a new monitor waits longer: never two pollers at once)."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def attach(
        self,
        on_nodes: Callable[[list[tuple[str, Node]]], None] | None,
        owns: Callable[[str], bool] | None,
        info_answers: Callable[[str, Node, float], bool] | None,
    ) -> None:
        """Serve another app with what this monitor knows (a reload whose AWS settings did not change): its discovery
        callback, its shard and its targets' INFO from now on; the nodes found so far handed to it at once. The minutes,
        the poll marks, the counters and the schedule go on as they were."""
        with self._lock:
            self._on_nodes = on_nodes
            self.owns = owns or (lambda _cluster_id: True)
            self._info_answers = info_answers if self.config.info_first else None
        if on_nodes is not None and self._discovered.is_set():
            on_nodes(self.named_nodes())

    def _loop(self, work: Callable[[], None], interval: float) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                work()
            except Exception:
                log.exception("AWS background work failed")
            self._stop.wait(max(1.0, interval - (time.monotonic() - started)))

    def _poll_loop(self) -> None:
        self._discovered.wait()
        self._loop(self._poll_all, self.config.poll_interval)

    def _poll_all(self) -> None:
        if self.config.cloudwatch:
            self.poll_once(self.due_tiers(), rest=True)
        if self.fleet is not None:
            self.poll_events()

    def poll_events(self) -> list[tuple[str, AwsCallError]]:
        """DescribeEvents in every account and region, since the last poll; the failures, as discovery gives them."""
        if self.fleet is None:
            return []
        failures = self.fleet.poll_events()
        for where, err in failures:
            self._report(err, f"events in {where}")
        return failures

    def _account_id_of(self, account: AwsAccount, region: str) -> str:
        """The id of an account whose credentials name none (the default chain): that of the nodes it discovered."""
        with self._lock:
            nodes = self._nodes.get((account, region)) or [n for (a, _), found in self._nodes.items() if a == account for n in found]
        return next((node.account_id for node in nodes if node.account_id), "")

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned and self._log_failures:
            self._warned.add(key)
            log.warning(message, *args)

    # --- discovery ------------------------------------------------------------------

    def discover_once(self) -> list[tuple[str, AwsCallError]]:
        """Discover every account and region; the failures, as (where: the region and the role's account, error), for a
        caller that must not go on with part of the fleet (the CLI); the background loop logs them and keeps the last
        good data."""
        ok = False
        failures: list[tuple[str, AwsCallError]] = []
        for account in self.config.accounts:
            api = self.apis[account]
            for region in account.regions:
                if self._stop.is_set():
                    return failures
                try:
                    nodes, serverless = discover_region(api, region, self.config.tag_filters, api.account_id, bool(self.config.export_tags))
                except AwsCallError as err:
                    self._report(err, f"discovery in {_place(api, region)}")
                    failures.append((_place(api, region), err))
                    continue
                ok = True
                with self._lock:
                    self._nodes[(account, region)] = nodes
                    self._serverless[(account, region)] = serverless
                datastores = self._describe_global(api, region, api.account_id or self._account_id_of(account, region))
                if datastores is not None:
                    with self._lock:
                        self._global_datastores[(account, region)] = datastores
        with self._lock:
            self._names = instance_names(node for nodes in self._nodes.values() for node in nodes)
            self._secondaries = secondary_groups(d for listing in self._global_datastores.values() for d in listing)
            self._index()
        if ok:
            self.last_discovery = self._clock()
        if self.fleet is not None:
            for where, update_error in self.fleet.poll_updates():
                self._report(update_error, f"service updates in {where}")
        self._replan()
        self._discovered.set()
        if self._on_nodes is not None:
            self._on_nodes(self.named_nodes())
        return failures

    def _describe_global(self, api: AwsApi, region: str, account_id: str) -> list[GlobalDatastore] | None:
        """The global datastores listed in the region, or None where the call failed (the last listing is kept)."""
        try:
            return describe_global_datastores(api, region, account_id)
        except AwsCallError as err:
            self._report(err, f"global datastores in {_place(api, region)}")
            return None

    def global_datastores(self) -> list[GlobalDatastore]:
        """Every global datastore an account's regions list, once each."""
        with self._lock:
            listings = list(self._global_datastores.values())
        return merge_global_datastores(listings)

    def extra_metrics(self, node: Node) -> tuple[MetricSpec, ...]:
        """What is polled for this node beside the metric set: its node type's metrics, the Global Datastore lag of a
        secondary cluster's primary (or of a node whose role the API does not say, as in cluster mode), and the
        durability metrics of a node of an asynchronously durable group (every node: a failover moves the primary)."""
        specs = node_type_metrics(node.node_type) if self.config.node_type_metrics else ()
        with self._lock:
            secondary = (node.account_id, node.region, node.replication_group) in self._secondaries
        if secondary and node.role in ("primary", ""):
            specs = (*specs, *GLOBAL_DATASTORE_METRICS)
        return (*specs, *durability_metrics(node))

    def promql_api(self, account: AwsAccount) -> PromQLApi:
        """The account's CloudWatch PromQL API (``aws.cloudwatch.promql_endpoint``, else CloudWatch's endpoint of the
        region), its calls counted with the account's."""
        api = self._promql.get(account)
        if api is None:
            aws = self.apis[account]
            endpoint = self.config.promql_endpoint
            api = self._promql[account] = PromQLApi(
                aws.credentials, lambda region: endpoint or aws.client("cloudwatch", region).meta.endpoint_url, stats=aws.stats
            )
        return api

    def detect_otel(self, probe: bool = False) -> dict[tuple[AwsAccount, str], frozenset[str]]:
        """Per account and region, the Valkey nodes that have ElastiCache's OpenTelemetry metrics (none where
        ``aws.cloudwatch.promql`` is off or the API cannot be asked): what the poll asks of the PromQL API; ``probe``:
        and which series each has (``cost``, which polls nothing, prices what a poll would find). The plan follows."""
        if self._otel is None:
            return {}
        with self._lock:
            places = {key: list(nodes) for key, nodes in self._nodes.items()}
        found = {}
        for (account, region), nodes in places.items():
            found[(account, region)] = self._otel.detect((account, region), region, valkey_ids(nodes), self._clock())
            if probe:
                self._otel.probe((account, region), region, nodes, self._clock())
        self._replan(warn=False)
        return found

    def node_pairs(self, node: Node, specs: tuple[MetricSpec, ...], emitting: frozenset[str]) -> tuple[dict[str, int], dict[str, int]]:
        """A node's metric-statistics by tier: GetMetricData pairs, and the samples a minute of those asked of the
        PromQL API (the node ``emitting`` the OpenTelemetry metrics, the pair's counterpart cheaper there)."""
        pairs, samples = dict.fromkeys(TIERS, 0), dict.fromkeys(TIERS, 0)
        for spec in specs:
            for statistic in spec.statistics:
                tier = tier_of(spec.name, statistic)
                query = Query("", node, spec.name, statistic)
                if self._otel is not None and self._otel.serves(query, emitting, self.config.tier_interval(tier)):
                    samples[tier] += samples_per_minute(spec.name, statistic)
                else:
                    pairs[tier] += 1
        return pairs, samples

    def credentials_for(self, node: Node) -> Callable[[], Any]:
        """Where a node's IAM tokens get their credentials: the session of the account that discovered it (its role,
        where one is assumed), renewed as that account's calls renew it."""
        api = next((api for account, api in self.apis.items() if api.account_id == node.account_id), None)
        api = api or next(iter(self.apis.values()))
        return lambda: api.credentials(node.region)

    def nodes(self) -> list[Node]:
        with self._lock:
            return [node for nodes in self._nodes.values() for node in nodes]

    def api_stats(self) -> list[ApiStats]:
        """The records of the calls, each once: the accounts' clients share the process's."""
        return list({id(api.stats): api.stats for api in self.apis.values()}.values())

    def named_nodes(self) -> list[tuple[str, Node]]:
        """Every discovered node with its ``instance`` name (unique in the fleet), sorted by name."""
        with self._lock:
            named = [(self._names.get(node.key, node.cluster_id), node) for nodes in self._nodes.values() for node in nodes]
        return sorted(named, key=lambda item: (item[0], item[1].key))

    def nodes_by_account(self) -> dict[AwsAccount, list[Node]]:
        with self._lock:
            result: dict[AwsAccount, list[Node]] = {}
            for (account, _region), nodes in self._nodes.items():
                result.setdefault(account, []).extend(nodes)
            return result

    def serverless(self) -> list[ServerlessCache]:
        with self._lock:
            return [cache for caches in self._serverless.values() for cache in caches]

    def _report(self, err: AwsCallError, what: str) -> None:
        if err.kind == "credentials":
            self._warn_once(
                "credentials",
                "no AWS credentials found (environment, profile, instance role or web identity): "
                "discovery and CloudWatch idle until there are some; Redis scraping is unaffected",
            )
        else:
            self._warn_once(f"{what}:{err.kind}", "%s failed (%s): %s; the last good data keeps being served", what, err.kind, err)

    # --- CloudWatch -------------------------------------------------------------------

    def due_tiers(self) -> tuple[str, ...]:
        """The tiers whose interval has passed since they were last asked (half a wake-up early, so a tier of 15 minutes
        polled by a 5-minute poller is asked every third poll, not every fourth)."""
        return self._schedule.due(self.tier_interval, self.config.poll_interval / 2)

    def tier_interval(self, tier: str) -> float:
        """How often ``tier`` is asked: its configured interval as the poller's wake-ups make it, or longer to keep the
        budget."""
        with self._lock:
            return self._plan.intervals[tier]

    @property
    def budget_plan(self) -> BudgetPlan:
        """The tiers' intervals and the month's bill they make for the fleet of the moment."""
        with self._lock:
            return self._plan

    def fleet_pairs(self) -> tuple[dict[str, int], dict[str, int]]:
        """What each poll of a tier asks for the nodes and serverless caches this exporter polls (a node on INFO without
        the INFO-equivalent ones), per tier: the GetMetricData metric-statistics, and the samples a minute of those
        asked of the PromQL API."""
        with self._lock:
            caches = [cache for caches in self._serverless.values() for cache in caches if self.owns(cache.name)]
            on_info = self._on_info
        pairs, samples = dict.fromkeys(TIERS, 0), dict.fromkeys(TIERS, 0)
        for _node, node_pairs, node_samples in self.node_bills(lambda node: node.key in on_info, owned=True):
            for tier in TIERS:
                pairs[tier] += node_pairs[tier]
                samples[tier] += node_samples[tier]
        for tier, count in pairs_by_tier(self.serverless_metrics).items():
            pairs[tier] += count * len(caches)
        return pairs, samples

    def node_bills(self, on_info: Callable[[Node], bool], owned: bool = False) -> list[tuple[Node, dict[str, int], dict[str, int]]]:
        """Every node discovered (``owned``: this shard's) with what a poll of each tier asks for it: GetMetricData
        pairs, and the samples a minute of those asked of the PromQL API; a node ``on_info`` without the
        INFO-equivalent ones."""
        with self._lock:
            places = [(place, node) for place, found in self._nodes.items() for node in found]
            names = dict(self._names)
        aws_only = split_info_equivalent(self.node_metrics)[0]
        names_polled = {spec.name for spec in self.node_metrics}
        bills = []
        for place, node in places:
            if owned and not self.owns(names.get(node.key, node.cluster_id)):
                continue
            specs = aws_only if on_info(node) else self.node_metrics
            extra = tuple(spec for spec in self.extra_metrics(node) if spec.name not in names_polled)
            emitting = self._otel.emitting(place) if self._otel is not None else frozenset()
            bills.append((node, *self.node_pairs(node, (*specs, *extra), emitting)))
        return bills

    def _replan(self, *, warn: bool = True) -> None:
        """The tiers' intervals for the fleet now. Each time the outcome changes (``warn``): a warning with the figures
        where the budget lengthens a tier or cannot be kept, a line where the configured intervals keep it again."""
        config = self.config
        pairs, samples = self.fleet_pairs()
        made = plan(pairs, {tier: config.tier_interval(tier) for tier in TIERS}, config.poll_interval, config.budget_usd_per_month, samples)
        outcome = f"{sorted(made.intervals.items())}:{made.kept}" if made.lengthened or not made.kept else "configured"
        warn = warn and self._clock() - self._born >= INFO_FRESH_SECONDS  # before, no scrape may have read INFO yet
        with self._lock:
            self._plan = made
            before, changed = self._budget_outcome, warn and outcome != self._budget_outcome
            if changed:
                self._budget_outcome = outcome
        if changed and self._log_failures:
            if outcome != "configured":
                log.warning("%s", describe(made))
            elif before != "configured":
                log.info("CloudWatch budget USD %.2f a month kept at the configured intervals again: USD %.2f", made.budget, made.usd_per_month)

    def poll_once(self, tiers: tuple[str, ...] | None = None, *, rest: bool = False) -> None:
        """Ask CloudWatch for the metric-statistics of ``tiers`` (every tier when None), each over every minute since the
        last poll of its tier in that account and region; every minute a poll brings is kept by its own timestamp.
        ``rest``: leave the scrapes most of the interpreter (:data:`POLL_CPU_SHARE`), as the background poller does."""
        tiers = TIERS if tiers is None else tiers
        started = time.monotonic()
        now = self._clock()
        poll = _Poll(deadline=started + max(5.0, 0.8 * self.config.poll_interval), rests=rest)
        serverless_metrics = in_tiers(self.serverless_metrics, tiers)
        with self._lock:
            groups = {key: [node for node in nodes if self.owns(self._names.get(node.key, node.cluster_id))] for key, nodes in self._nodes.items()}
            caches = {key: [cache.as_node() for cache in caches if self.owns(cache.name)] for key, caches in self._serverless.items()}
            names = dict(self._names)
        on_info = self._nodes_on_info([node for nodes in groups.values() for node in nodes], names)
        extras = {node.key: self.extra_metrics(node) for nodes in groups.values() for node in nodes}  # once a poll
        self._extras_apply = {key: frozenset(spec.name for spec in specs) for key, specs in extras.items()}
        # their INFO stopped (or asking them again failed): CloudWatch's copy is asked now, whatever the tier
        caught_up = (self._on_info | self._catch_up) - on_info
        failed: set[NodeKey] = set()
        self._schedule.asking(tiers)
        for account, region in [*groups, *(key for key in caches if key not in groups)]:
            place_nodes = groups.get((account, region), [])
            queries = self._node_queries(place_nodes, tiers, on_info, caught_up, extras)
            queries += build_queries(caches.get((account, region), []), serverless_metrics, first=len(queries))
            otel = self._otel_queries(account, region, place_nodes, queries)
            if queries and not self._poll_place(account, region, queries, otel, now, poll, tiers):
                failed.update(node.key for node in place_nodes)
        self._catch_up = caught_up & failed
        with self._lock:
            live = {node.key for nodes in self._nodes.values() for node in nodes}
            live.update(cache.as_node().key for caches in self._serverless.values() for cache in caches)
            names_now = self._names  # replaced whole by discovery, never changed
        # made outside the lock, so a scrape never waits for a poll's merging (the poll thread is their only writer): a
        # series that failed or had no data this cycle keeps its last good value; a node gone is dropped, and a node on
        # INFO serves none of CloudWatch's copy of what its INFO says
        merged = {key: value for key, value in self._cache.items() if self._kept(key, live, on_info) and key not in poll.fresh}
        merged.update(poll.fresh)
        by_instance = _instance_index(merged, names_now)
        kept = self._held.keep(
            poll.minutes, live, lambda key: self._kept(key, live, on_info), names_now, self._minutes_a_poll(), self._clock() - HISTORY_SECONDS
        )
        with self._lock:
            self._cache = merged
            self._by_instance = by_instance if self._names is names_now else _instance_index(merged, self._names)
            self._made = kept
            # a success: a poll that brought data, or one of tiers due with nothing to ask of a fleet discovery found (this
            # shard owns no node); a wake-up with no tier due, answers that brought nothing, or no discovery yet, is none
            if poll.fresh or (tiers and not poll.queries and not poll.promql and self.last_discovery > 0):
                self.last_poll = self._clock()
            self.last_poll_duration = time.monotonic() - started
            self.last_queries = poll.queries
            self.polls += 1
            self.nodes_on_info = len(on_info)
            self._on_info = on_info  # written by the poll thread, read by discovery's replanning
        self._replan()

    def _kept(self, key: SeriesKey, live: set[NodeKey], on_info: set[NodeKey]) -> bool:
        """Whether a series keeps its cached value and minutes: its node is live, not on INFO where INFO says it, and
        asked it still where only some nodes are (the poll thread's)."""
        node, metric = key[:4], key[4]
        if node not in live or (node in on_info and metric in INFO_EQUIVALENT):
            return False
        applies = self._extras_apply.get(node)
        return applies is None or metric not in self._extra_names or metric in applies

    def _nodes_on_info(self, nodes: list[Node], names: dict[NodeKey, str]) -> set[NodeKey]:
        """The nodes whose INFO the exporter read lately (INFO_FRESH_SECONDS): CloudWatch's copy of it is not asked."""
        if self._info_answers is None:
            return set()
        answers = self._info_answers
        return {node.key for node in nodes if not node.serverless and answers(names.get(node.key, node.cluster_id), node, INFO_FRESH_SECONDS)}

    def _node_queries(
        self, nodes: list[Node], tiers: tuple[str, ...], on_info: set[NodeKey], caught_up: set[NodeKey], extras: dict[NodeKey, tuple[MetricSpec, ...]]
    ) -> list[Query]:
        """The queries of a place's nodes: the tiers' metrics, without the INFO-equivalent ones for a node on INFO, with
        every INFO-equivalent one (whatever its tier) for a node whose INFO stopped since the last poll left them out."""
        aws_only, info_said = split_info_equivalent(self.node_metrics)

        def extra(node: Node) -> tuple[MetricSpec, ...]:
            return in_tiers(extras[node.key], tiers)

        plain = [node for node in nodes if node.key not in on_info and node.key not in caught_up]
        queries = build_queries(plain, in_tiers(self.node_metrics, tiers), extra=extra)
        queries += build_queries([node for node in nodes if node.key in on_info], in_tiers(aws_only, tiers), first=len(queries), extra=extra)
        again = (*in_tiers(aws_only, tiers), *info_said)
        queries += build_queries([node for node in nodes if node.key in caught_up], again, first=len(queries), extra=extra)
        return queries

    def _otel_queries(self, account: AwsAccount, region: str, nodes: list[Node], queries: list[Query]) -> list[Query]:
        """Those of a place's ``queries`` asked of the PromQL API (``otel_poll``), once it knows which nodes have the
        metrics (asked again when due)."""
        if self._otel is None:
            return []
        emitting = self._otel.detect((account, region), region, valkey_ids(nodes), self._clock())
        if not emitting:
            return []
        return [query for query in queries if self._otel.serves(query, emitting, self.config.tier_interval(tier_of(query.metric, query.statistic)))]

    def _poll_place(
        self, account: AwsAccount, region: str, queries: list[Query], otel: list[Query], now: float, poll: _Poll, tiers: tuple[str, ...]
    ) -> bool:
        """One account's and region's queries, over the window since their tiers' last poll there (the widest of them):
        ``otel`` of them through the PromQL API, the rest and what it could not bring with GetMetricData; whether every
        one was answered."""
        since = self._schedule.since(tiers, (account, region))
        span = window(now, self.config.period, self.config.delay, self.config.lookback_periods, since=since)
        api = self.apis[account]
        if otel and self._otel is not None:
            fetched = self._otel.fetch((account, region), region, otel, span[0].timestamp(), span[1].timestamp(), poll.deadline, self._stop.is_set)
            asked = {query.id for query in otel}
            left = {query.id for query in fetched.left}
            queries = [query for query in queries if query.id not in asked or query.id in left]
            poll.queried.update(series_key(query) for query in otel if query.id not in left)
            poll.promql += len(asked) - len(left)
            self._take(fetched.results, {query.id: query for query in otel}, poll)
        poll.queries += len(queries)
        if not queries:
            self._schedule.answered(tiers, (account, region), span[1].timestamp())
            return True
        try:
            client = api.client("cloudwatch", region)  # assumes the account's role when it is due: may fail alone
        except AwsCallError as err:
            poll.queried.update(series_key(query) for query in queries)
            self._report(err, f"GetMetricData in {_place(api, region)}")
            return False
        complete = True
        for batch in batches(queries):
            if self._stop.is_set():  # stopped (a reload): the next poll, of this monitor or the next, asks these again
                return False
            self._rest(poll)
            poll.queried.update(series_key(query) for query in batch)
            try:
                results = get_metric_data(api, client, batch, self.config.period, span, deadline=poll.deadline)
            except AwsCallError as err:
                self._report(err, f"GetMetricData in {_place(api, region)}")
                complete = False
                continue
            self._take(results, {query.id: query for query in batch}, poll)
        if complete:  # after a failure, the next poll starts where this one started
            self._schedule.answered(tiers, (account, region), span[1].timestamp())
        return complete

    @staticmethod
    def _take(results: list[dict[str, Any]], by_id: dict[str, Query], poll: _Poll) -> None:
        """A batch's MetricDataResults (of either source): the minutes the keepers hold, and each query's newest value."""
        poll.minutes += [
            ((query.node.key, query.metric, query.statistic), result)
            for result in results
            if (query := by_id.get(result.get("Id", ""))) is not None
            and any((query.metric, query.statistic) in kept for kept in (HISTORY_SERIES, BURST_SERIES, RISING_SERIES, WINDOW_SERIES))
        ]
        for query_id, datapoint in newest_datapoints(results).items():
            query = by_id.get(query_id)
            if query is not None:
                poll.fresh[series_key(query)] = CachedValue(query, datapoint)

    def _rest(self, poll: _Poll) -> None:
        """Between two batches: rest as :data:`POLL_CPU_SHARE` says for the work done since the last rest, while the
        poll's deadline allows (a stop ends the rest at once)."""
        if not poll.rests:
            return
        cpu = time.thread_time()
        if poll.cpu_mark is not None:
            rest = (cpu - poll.cpu_mark) * (1 / POLL_CPU_SHARE - 1)
            rest = min(rest, (poll.deadline - time.monotonic()) / 4)
            if rest > 0.001:
                self._stop.wait(rest)
        poll.cpu_mark = time.thread_time()

    def _minutes_a_poll(self) -> int:
        """The CloudWatch minutes a poll of the paging tier brings: the windows ending at each of them are looked at."""
        return max(1, math.ceil(self.config.tier_interval("paging") / self.config.period))

    def windows(self) -> dict[SeriesKey, MinuteWindow]:
        """The paging gauges' lowest and highest of the last minutes held (``minute_window``), by series."""
        with self._lock:
            return dict(self._made.windows)

    def rising(self) -> dict[SeriesKey, Rising]:
        """The allowance-exceeded counters' count of rising minutes among their last 5 (``rising_minutes``), by series."""
        with self._lock:
            return dict(self._made.rising)

    def burst_window(self, instance: str, direction: str) -> BurstWindow | None:
        """The node's last 10 CloudWatch minutes of busiest seconds (``network_baseline.burst_window``), or None."""
        with self._lock:
            return self._made.bursts.get((instance, direction))

    def sustained_window(self, instance: str, direction: str) -> SustainedWindow | None:
        """The node's last 15 CloudWatch minutes of average share of the baseline (``network_baseline``), or None."""
        with self._lock:
            return self._made.sustained.get((instance, direction))

    def implied_baseline(self, instance: str, direction: str) -> float | None:
        """The bandwidth (bytes/s) AWS counts as the node's baseline over the last hour (``network_baseline``), or None."""
        with self._lock:
            return self._made.implied.get((instance, direction))

    @property
    def serverless_metrics(self) -> tuple[MetricSpec, ...]:
        metrics = self.config.serverless_metrics
        return SERVERLESS_METRICS if metrics is None else metrics

    def now(self) -> float:
        """The wall clock the minutes are asked by: a datapoint's age is measured on it."""
        return self._clock()

    def fresh_seconds(self, tier: str = "paging") -> float:
        """How old the newest datapoint of a tier's metric may be while it still describes the node now."""
        config = self.config
        return fresh_seconds(self.tier_interval(tier), config.period, config.delay)

    def latest(self, instance: str, metric: str, statistic: str) -> Datapoint | None:
        """The newest datapoint of a metric of the node named ``instance`` (its CacheClusterId where unique, else
        ``account/region/CacheClusterId``): never another account's node of the same id."""
        with self._lock:
            value = self._by_instance.get((instance, metric, statistic))
        return value.datapoint if value is not None else None

    def _index(self) -> None:
        """Rebuild the lookup by instance name; called with the lock held, after the names change."""
        self._by_instance = _instance_index(self._cache, self._names)

    def serverless_datapoint(self, cache: ServerlessCache, metric: str, statistic: str) -> Datapoint | None:
        """The newest datapoint of a serverless cache's metric, if it is still fresh."""
        with self._lock:
            value = self._cache.get((*cache.as_node().key, metric, statistic))
        if value is None or value.datapoint.timestamp < self._clock() - self.fresh_seconds():
            return None
        return value.datapoint

    def cache(self) -> dict[SeriesKey, CachedValue]:
        with self._lock:
            return dict(self._cache)


def _place(api: AwsApi, region: str) -> str:
    """Where a call failed, for a log line: the region, and the account when a role names it."""
    return f"{region} of account {api.account_id}" if api.account_id else region


def _instance_index(cache: dict[SeriesKey, CachedValue], names: dict[NodeKey, str]) -> dict[tuple[str, str, str], CachedValue]:
    """(instance, metric, statistic) → the cached value, for a scrape's lookups."""
    return {(names.get(key[:4], key[2]), key[4], key[5]): value for key, value in cache.items() if not value.query.node.serverless}


def series_key(query: Query) -> SeriesKey:
    return (*query.node.key, query.metric, query.statistic)
