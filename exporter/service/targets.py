"""The set of nodes the exporter may scrape, and the per-target state between scrapes.

One map holds every target by name, each knowing its kind: configured, a member of a cluster found from one endpoint,
discovered by AWS, or ad hoc (an address /scrape was asked for that an allow rule covers). Resolving (/scrape), listing
(/discovery), serving (/metrics) and closing all walk that map, so they cannot disagree: whatever /discovery lists,
/scrape resolves. Anything neither held nor allowed is refused before any connection is attempted or credential sent.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

from exporter.common.exposition import TargetRendering
from exporter.common.records import field, record, replace
from exporter.config import Config
from exporter.redis.addresses import AddressError, Endpoint, parse_address
from exporter.redis.heartbeat import ELASTICACHE_KEY, SOURCE_ELASTICACHE, SOURCE_EXPORTER
from exporter.redis.node import RedisNode
from exporter.redis.settings import Credentials, TargetConfig

if TYPE_CHECKING:
    from exporter.aws.discovery import Node
    from exporter.common.sharding import Shard
    from exporter.redis.cluster_members import Member

MAX_AD_HOC_NODES = 512
# texts /scrape resolved by parsing them (other spellings than a target's own names), kept so the next scrape of the same
# text is a lookup; forgotten all at once past this, and whenever the targets other than the ad hoc ones change
MAX_ALIASES = 2 * MAX_AD_HOC_NODES
# targets whose rendered lines are kept for their next scrape (about 90 KiB each): granted as targets are made
# (configured ones first) and given back when a target goes; past that a target renders every sample afresh (but the
# CONFIG GET settings' lines, shared by the targets with the same settings)
MAX_REPLAYING_TARGETS = 32


class Kind(Enum):
    """What made a target, in order of precedence: where two share a name or an address, the earlier kind answers."""

    CONFIGURED = "configured"
    MEMBER = "cluster member"  # a node of the cluster behind a configured endpoint with discover: cluster
    DISCOVERED = "discovered"  # by AWS (ElastiCache discovery)
    AD_HOC = "ad hoc"  # an address /scrape was asked for that scrape.allow covers

    @property
    def listed(self) -> bool:
        """Whether /discovery lists targets of this kind (those the exporter found, for Prometheus' http_sd)."""
        return self is MEMBER or self is DISCOVERED


# the kinds by module name too: on Python 3.11, each lookup of an Enum member as a class attribute costs 0.3 µs
CONFIGURED, MEMBER, DISCOVERED, AD_HOC = Kind
_RANK = {kind: rank for rank, kind in enumerate(Kind)}


class TargetRefused(Exception):
    """A /scrape target that is not configured and matches no allow rule."""


@record
class TargetState:
    """What the status page and the self-metrics know of a target."""

    errors: dict[str, int] = field(factory=dict)
    last_error: str = "none"
    last_duration: float = 0.0
    last_success: float = 0.0
    malformed_lines: int = 0
    heartbeat_errors: dict[tuple[str, str], int] = field(factory=dict)
    # (monotonic time, bytes out, bytes in, engine CPU seconds) of recent scrapes, for rates over a window
    counters: deque[tuple[float, float, float, float]] = field(factory=lambda: deque(maxlen=256))
    baseline_missing: int = 0
    heartbeat_lag: dict[str, float] = field(factory=dict)
    logged_bugs: set[str] = field(factory=set)  # types of the exceptions its replies raised in our code, logged once each
    up: bool = False
    role: str = ""
    shard: tuple[str, str, str] | None = None  # the shard it last answered in: served while it is down
    version: str = ""
    scraped: bool = False
    scraped_at: float = 0.0  # monotonic: when its last scrape ended, in success or failure


@record
class Target:
    """A node the exporter scrapes, and what it keeps of it between scrapes: its state for the status page and the
    self-metrics, and its render state (its labels and the lines its last scrape rendered to), which go with it.

    Its kind says what made it; a cluster member knows its seed (the configured endpoint's name) and its role as the
    cluster last said, a discovered node the AWS record it was made from. Its credentials are its node's."""

    name: str
    node: RedisNode
    node_type: str = ""
    replication_group: str = ""  # configured or discovered; empty: unknown
    shard: str = ""
    state: TargetState = field(factory=TargetState)
    lock: threading.Lock = field(factory=threading.Lock)
    replay: bool = True  # whether its rendered lines are kept for its next scrape (the target set grants it)
    on_down: Callable[[], None] | None = None  # a node found from a cluster endpoint: a failed scrape asks for a new look
    kind: Kind = CONFIGURED
    seed: str = ""  # a cluster member: the name of the configured endpoint it was found from
    member_role: str = ""  # a cluster member: "primary" or "replica", as the cluster last said
    aws_node: Node | None = None  # a discovered node: what discovery knows of it
    role_listed_at: float = 0.0  # monotonic: when the cluster or discovery last told a new role (the last scrape's, if newer, wins)
    labels: tuple[tuple[str, str], ...] = ()  # its static labels (targets[].labels), on every series of its instance

    def __post_init__(self) -> None:
        self.rendering = TargetRendering(self.name, self.replay, self.labels)

    @property
    def display(self) -> str:
        return self.node.endpoint.display()

    @property
    def address(self) -> str:
        """Its address as /discovery lists it and /scrape?target= takes it: ``redis[s]://host:port[/db]``, no user."""
        endpoint = self.node.endpoint
        return f"{'rediss' if endpoint.tls else 'redis'}://{endpoint.host_port}{f'/{endpoint.db}' if endpoint.db else ''}"

    @property
    def names(self) -> tuple[str, ...]:
        """The texts /scrape?target= finds it by without parsing: its name and its address."""
        return (self.name, self.address)


class TargetSet:
    """Every target, in one map by name, under one lock; the lookups /scrape uses are indexes derived from that map."""

    def __init__(self, config: Config) -> None:
        self._lock = threading.Lock()  # held for every change of the map and its indexes, and every read of them
        self._targets: dict[str, Target] = {}  # the one map: every target the set holds, by name
        # derived from the map, by precedence of kind: a text that names a target (its name, its address) or that
        # resolved to one (at most MAX_ALIASES of those); an endpoint's target; the ad hoc targets, least recently asked first
        self._by_text: dict[str, Target] = {}
        self._aliases: dict[str, Target] = {}
        self._by_address: dict[tuple[str, int, int, bool], Target] = {}
        self._ad_hoc_recency: OrderedDict[str, Target] = OrderedDict()
        # (host, port) -> the name of the target there (ad hoc ones left out): a replica's or primary's label in the
        # replication series; replaced, never changed, so a scrape reads it without the lock
        self.address_names: dict[tuple[str, int], str] = {}
        # target name -> its static labels, for the targets that have some (empty: none has, the common case); replaced,
        # never changed, as address_names
        self.static_labels: dict[str, dict[str, str]] = {}
        self._discovered_labels = config.discovered_labels
        self._replaying = 0  # targets granted a render memo (MAX_REPLAYING_TARGETS)
        self.heartbeat_sources: tuple[tuple[str, str], ...] = (
            ((SOURCE_ELASTICACHE, ELASTICACHE_KEY), (SOURCE_EXPORTER, config.heartbeat.key)) if config.heartbeat.read else ()
        )
        self._heartbeat_keys = tuple(key for _, key in self.heartbeat_sources)
        self.max_reply_bytes = config.scrape_max_reply_bytes
        self.shard = config.shard
        # a target with discover: cluster stands for the nodes of its cluster: those are its targets, under host:port
        self.cluster_seeds = tuple(item for item in config.targets if item.discover == "cluster")
        self.member_down: Callable[[], None] | None = None  # the cluster discovery's wake-up (set by the app)
        self._allow = config.allow
        self._discovered_credentials = config.discovered_credentials
        self._discovered_iam = config.discovered_iam
        self.credentials_for: Callable[[Node], Any] | None = None  # an account's AWS credentials, for IAM tokens
        self._key_probes = config.keys
        self._config = config
        # discovered nodes are always resolvable by /scrape (Prometheus finds them in /discovery); on /metrics only if asked
        self._discovered_on_metrics = config.aws.scrape_discovered
        for item in config.targets:
            if item.discover != "cluster" and item.name not in self._targets:
                node = self._node(item.endpoint, item.credentials, item.keys)
                self._add(
                    Target(item.name, node, item.node_type, item.replication_group, item.shard, replay=self._grant_replay(), labels=item.labels)
                )
        self._reindex()

    def prepare_passwords(self) -> None:
        """At start-up: every password that lives in AWS is fetched or checked once (a Secrets Manager secret is read;
        IAM needs credentials). Raises the ExporterError that names the first that cannot be had."""
        config = self._config
        credentials = [item.credentials for item in config.targets] + [rule.credentials for rule in config.allow]
        credentials.append(config.discovered_credentials)
        seen: set[int] = set()
        for item in credentials:
            if item.password is not None and id(item.password) not in seen:
                seen.add(id(item.password))
                item.password.prepare()
        if self._discovered_iam:  # each discovered node's token signs with the default chain, or a role assumed from it
            from exporter.aws.iam_auth import default_chain, require_credentials, resolved

            require_credentials("aws.discovered.iam_auth", lambda: resolved(default_chain))

    def _discovered_node_credentials(self, name: str, node: Node) -> Credentials:
        """aws.discovered's credentials; with IAM, a token signed for the node's own replication group (or serverless
        cache) in its region, with the account's credentials (its role, where one is assumed)."""
        credentials = self._discovered_credentials
        if not self._discovered_iam:
            return credentials
        from exporter.aws.iam_auth import MAX_CONNECTION_AGE, IamAuth, IamToken, default_chain

        auth = IamAuth(cache=node.group, user=credentials.username or "", region=node.region, serverless=node.serverless)
        source = self.credentials_for(node) if self.credentials_for is not None else default_chain
        token = IamToken(auth, source=f"aws.discovered.iam_auth ({name})", credentials=source)
        return replace(credentials, password=token, max_connection_age=MAX_CONNECTION_AGE)

    def _node(self, endpoint: Endpoint, credentials: Credentials, key_probes: Any = None) -> RedisNode:
        node = RedisNode(endpoint, credentials, self._heartbeat_keys, self.max_reply_bytes)
        node.key_probes = key_probes if key_probes is not None else self._key_probes
        return node

    # --- walking the map

    def on_metrics(self) -> list[Target]:
        """The targets /metrics serves: the configured ones and the cluster members, then, with ``aws.scrape_discovered``,
        the discovered ones (of this shard only, when the exporter is one of several shards)."""
        with self._lock:
            targets = [target for target in self._targets.values() if self._served(target)]
            shard = self.shard  # one count for the whole walk, even while set_shard changes it
        if shard is None:
            return targets
        return [target for target in targets if shard.owns(target.name)]

    def _served(self, target: Target) -> bool:
        kind = target.kind
        return kind is CONFIGURED or kind is MEMBER or (kind is DISCOVERED and self._discovered_on_metrics)

    def listed(self) -> list[Target]:
        """The targets /discovery lists (the cluster members and the discovered nodes), by name: each resolves by its
        address."""
        with self._lock:
            return sorted((target for target in self._targets.values() if target.kind.listed), key=lambda target: target.name)

    def of_kind(self, kind: Kind) -> list[Target]:
        """The targets of one kind, by name."""
        with self._lock:
            return sorted((target for target in self._targets.values() if target.kind is kind), key=lambda target: target.name)

    def cluster_members(self) -> list[tuple[Target, str]]:
        """(target, role as the cluster last said) of every node found from a cluster endpoint."""
        with self._lock:
            members = sorted((target for target in self._targets.values() if target.kind is MEMBER), key=lambda target: target.name)
            return [(target, target.member_role) for target in members]

    def discovered_nodes(self) -> list[tuple[Target, Node]]:
        """(target, what discovery knows of it) of every node discovered by AWS."""
        return [(target, target.aws_node) for target in self.of_kind(DISCOVERED) if target.aws_node is not None]

    def of_owned_groups(self) -> list[Target]:
        """The targets /metrics serves, and every member, on any shard, of the replication groups whose name this shard
        owns: a group's figures (each shard's share of its load) are of the whole group, whichever exporter serves them."""
        with self._lock:
            targets = [target for target in self._targets.values() if self._served(target)]
            shard = self.shard
        if shard is None:
            return targets
        return [target for target in targets if shard.owns(target.name) or (target.replication_group and shard.owns(target.replication_group))]

    def every(self) -> list[Target]:
        """Every target this set holds, each once: configured, cluster members, discovered (whatever /metrics serves of
        them) and the ad hoc ones of /scrape. Each may hold a connection."""
        with self._lock:
            return list(self._targets.values())

    def close(self) -> None:
        """Close every connection the set's targets opened (on reload and at exit)."""
        for target in self.every():
            target.node.close()

    def answered_lately(self, name: str, node: Node, seconds: float) -> bool:
        """Whether the target that is this node answered a scrape in the last ``seconds``: its INFO then says what
        CloudWatch would repeat. That target is the one discovered from the node, or one at the node's endpoint (by
        ``name`` first, the node's instance name); a target of that name elsewhere is another node (a group's primary
        endpoint, say) and does not count. A node whose endpoint discovery does not know is matched by name alone."""
        endpoint = (node.address.lower(), node.port)
        with self._lock:
            named = self._targets.get(name)
            at_endpoint = self._targets.get(self.address_names.get(endpoint, "")) if node.address else None
        target = next((t for t in (named, at_endpoint) if t is not None and _is_node(t, node, endpoint)), None)
        if target is None:
            return False
        with target.lock:
            return time.time() - target.state.last_success < seconds

    def owns(self, name: str) -> bool:
        """Whether the target ``name`` belongs on this exporter's /metrics (always, unless sharded)."""
        shard = self.shard
        return shard is None or shard.owns(name)

    def set_shard(self, shard: Shard) -> None:
        """A new count for this exporter's shard (``scrape.shard INDEX/auto``): /metrics, the profilers and the AWS
        monitor's ``owns`` follow from their next walk."""
        with self._lock:
            self.shard = shard

    # --- resolving

    def resolve(self, text: str) -> Target:
        """The target /scrape?target=<text> names, or :class:`TargetRefused`: a target's name or address is one lookup;
        another spelling of an address is parsed, then found by its endpoint or made ad hoc where an allow rule covers it."""
        with self._lock:
            target = self._by_text.get(text) or self._aliases.get(text)
            if target is not None:
                if target.kind is AD_HOC:
                    self._ad_hoc_recency.move_to_end(target.name)
                return target
        try:
            endpoint = parse_address(text, allow_userinfo=False).endpoint
        except AddressError as err:
            raise TargetRefused(str(err)) from err
        rule = next((rule for rule in self._allow if rule.matches(endpoint)), None)
        with self._lock:
            target = self._by_address.get(_address_key(endpoint))
            if target is None:
                if rule is None:
                    raise TargetRefused("target is neither configured nor allowed by scrape.allow")
                target = self._add_ad_hoc(endpoint, rule.credentials)
            elif target.kind is AD_HOC:
                self._ad_hoc_recency.move_to_end(target.name)
            if len(self._aliases) >= MAX_ALIASES:  # texts of many spellings: start afresh
                self._aliases.clear()
            self._aliases[text] = target
            return target

    def _add_ad_hoc(self, endpoint: Endpoint, credentials: Credentials) -> Target:
        """A target for an allowed address that no target holds (under the lock); the least recently asked for makes
        room past MAX_AD_HOC_NODES."""
        node_endpoint = Endpoint(endpoint.host, endpoint.port, endpoint.tls, endpoint.db, credentials.username)
        name = node_endpoint.display()
        if name in self._targets:  # a configured or found target named like this address, at another address
            raise TargetRefused(f"{name} is the name of a target at another address")
        if len(self._ad_hoc_recency) >= MAX_AD_HOC_NODES:
            self._remove_ad_hoc(next(iter(self._ad_hoc_recency.values())))
        target = Target(name, self._node(node_endpoint, credentials), replay=self._grant_replay(), kind=AD_HOC)
        self._add(target)
        for text in target.names:
            self._by_text.setdefault(text, target)
        self._by_address.setdefault(_address_key(node_endpoint), target)
        return target

    def _remove_ad_hoc(self, target: Target) -> None:
        """An ad hoc target leaves, and every lookup that finds it (under the lock)."""
        self._remove(target)
        for text in target.names:
            if self._by_text.get(text) is target:
                del self._by_text[text]
        key = _address_key(target.node.endpoint)
        if self._by_address.get(key) is target:
            del self._by_address[key]
        for text in [text for text, held in self._aliases.items() if held is target]:
            del self._aliases[text]

    # --- what discovery finds

    def set_discovered(self, nodes: list[tuple[str, Node]]) -> None:
        """Make discovered nodes targets under their instance names (by endpoint, TLS when in-transit encryption is on),
        keeping live connections; a node discovery no longer finds, or finds changed, goes with its connection."""
        with self._lock:
            wanted = {name: node for name, node in nodes if node.address and self._free_for(name, DISCOVERED)}
            changed = False
            for target in [target for target in self._targets.values() if target.kind is DISCOVERED]:
                node = wanted.get(target.name)
                if node is None or target.aws_node is None or _endpoint_facts(node) != _endpoint_facts(target.aws_node):
                    self._remove(target)
                    changed = True
                else:
                    if node.role != target.aws_node.role:
                        target.role_listed_at = time.monotonic()
                    target.aws_node = node  # its other facts (role, engine version, ...) as discovery now says
            for name, node in wanted.items():
                if name in self._targets:
                    continue
                endpoint = Endpoint(node.address.lower(), node.port, node.tls, 0, self._discovered_credentials.username)
                redis_node = self._node(endpoint, self._discovered_node_credentials(name, node))
                node_type = "" if node.serverless else node.node_type  # no node-type baseline applies
                target = Target(
                    name,
                    redis_node,
                    node_type,
                    node.replication_group,
                    node.shard,
                    replay=self._grant_replay(),
                    kind=DISCOVERED,
                    aws_node=node,
                    labels=self._discovered_labels,
                )
                self._add(target)
                changed = True
            if changed:
                self._reindex()

    def set_cluster_members(self, seed: TargetConfig, members: list[Member]) -> None:
        """The nodes of ``seed``'s cluster as targets (``host:port``, the seed's credentials and TLS), each labelled with
        its shard (its slot ranges: ``slots.shard_name``) and role; a node that left (the cluster forgot it) is dropped with its
        connection. A node the cluster holds failed stays, in the shard and role it had: its membership does not end
        when it stops answering, so it is scraped (``redis_up 0``) and its alerts keep their shard."""
        group = seed.replication_group or seed.name
        with self._lock:
            wanted = {member.name: member for member in members if self._free_for(member.name, MEMBER, seed.name)}
            changed = False
            for target in [target for target in self._targets.values() if target.kind is MEMBER and target.seed == seed.name]:
                member = wanted.get(target.name)
                if member is None:
                    self._remove(target)
                    changed = True
                elif member.answering:
                    target.shard = member.shard  # a resharding renames its shard; a replica moved to another shard moves
                    if member.role != target.member_role:
                        target.role_listed_at = time.monotonic()
                    target.member_role = member.role
            for name, member in wanted.items():
                if name in self._targets:
                    continue
                endpoint = Endpoint(member.host.lower(), member.port, seed.endpoint.tls, 0, seed.credentials.username)
                target = Target(
                    name,
                    self._node(endpoint, seed.credentials, seed.keys),
                    seed.node_type,
                    group,
                    member.shard,
                    replay=self._grant_replay(),
                    on_down=self._on_member_down,
                    kind=MEMBER,
                    seed=seed.name,
                    member_role=member.role,
                    labels=seed.labels,
                )
                self._add(target)
                changed = True
            if changed:
                self._reindex()

    def _free_for(self, name: str, kind: Kind, seed: str = "") -> bool:
        """Whether ``name`` is free for a target of ``kind`` (of ``seed``'s cluster), or already one (under the lock)."""
        held = self._targets.get(name)
        return held is None or (held.kind is kind and held.seed == seed)

    def _on_member_down(self) -> None:
        if self.member_down is not None:
            self.member_down()

    # --- the map and its indexes (all under the lock, or before the set is shared)

    def _add(self, target: Target) -> None:
        self._targets[target.name] = target
        if target.kind is AD_HOC:
            self._ad_hoc_recency[target.name] = target

    def _remove(self, target: Target) -> None:
        """A target leaves the map: its connection closed, its grant given back."""
        del self._targets[target.name]
        self._ad_hoc_recency.pop(target.name, None)
        target.node.close()
        if target.replay:
            self._replaying -= 1

    def _reindex(self) -> None:
        """Every index made anew from the map, the earlier kind first where two targets share a text or an address."""
        by_text: dict[str, Target] = {}
        by_address: dict[tuple[str, int, int, bool], Target] = {}
        address_names: dict[tuple[str, int], str] = {}
        static_labels: dict[str, dict[str, str]] = {}
        for target in sorted(self._targets.values(), key=lambda target: _RANK[target.kind]):  # stable: configured in order
            for text in target.names:
                by_text.setdefault(text, target)
            endpoint = target.node.endpoint
            by_address.setdefault(_address_key(endpoint), target)
            if target.kind is not AD_HOC:
                address_names.setdefault((endpoint.host, endpoint.port), target.name)
            if target.labels:
                static_labels[target.name] = dict(target.labels)
        self._by_text, self._by_address, self.address_names = by_text, by_address, address_names
        self.static_labels = static_labels
        self._aliases = {}  # a text may now name another target

    def _grant_replay(self) -> bool:
        """A new target may keep its rendered lines while fewer than MAX_REPLAYING_TARGETS do (under the set's lock, or
        before the set is shared)."""
        if self._replaying >= MAX_REPLAYING_TARGETS:
            return False
        self._replaying += 1
        return True


def _is_node(target: Target, node: Node, endpoint: tuple[str, int]) -> bool:
    """Whether ``target`` scrapes the AWS ``node``: discovered from it, or at its endpoint (when discovery knows it)."""
    if target.aws_node is not None:
        return target.aws_node.key == node.key
    return not node.address or (target.node.endpoint.host, target.node.endpoint.port) == endpoint


def _address_key(endpoint: Endpoint) -> tuple[str, int, int, bool]:
    return (endpoint.host, endpoint.port, endpoint.db, endpoint.tls)


def _endpoint_facts(node: Node) -> tuple[Any, ...]:
    """What a discovered node's target is made from: a change of any makes it anew."""
    return (node.address, node.port, node.tls, node.node_type, node.replication_group, node.shard)
