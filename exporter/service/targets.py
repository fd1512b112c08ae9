"""The set of nodes the exporter may scrape, and the per-target state between scrapes.

Configured targets are known by name and address; /scrape may also reach
addresses matching an allow rule. Anything else is refused before any
connection is attempted or credential sent.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable
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
    from exporter.redis.cluster_members import Member

MAX_AD_HOC_NODES = 512
# targets whose rendered lines are kept for their next scrape (about 90 KiB each): granted as targets are made
# (configured ones first) and given back when a target goes; past that a target renders every sample afresh
MAX_REPLAYING_TARGETS = 32


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
    version: str = ""
    scraped: bool = False


@record
class Target:
    """A node the exporter scrapes, and what it keeps of it between scrapes: its state for the status page and the
    self-metrics, and its render state (its labels and the lines its last scrape rendered to), which go with it."""

    name: str
    node: RedisNode
    node_type: str = ""
    replication_group: str = ""  # configured or discovered; empty: unknown
    shard: str = ""
    state: TargetState = field(factory=TargetState)
    lock: threading.Lock = field(factory=threading.Lock)
    replay: bool = True  # whether its rendered lines are kept for its next scrape (the target set grants it)
    on_down: Callable[[], None] | None = None  # a node found from a cluster endpoint: a failed scrape asks for a new look

    def __post_init__(self) -> None:
        self.rendering = TargetRendering(self.name, self.replay)

    @property
    def display(self) -> str:
        return self.node.endpoint.display()


class TargetSet:
    def __init__(self, config: Config) -> None:
        self._by_name: dict[str, Target] = {}
        self._replaying = 0  # targets granted a render memo (MAX_REPLAYING_TARGETS)
        self._by_address: dict[tuple[str, int, int], Target] = {}
        self.heartbeat_sources: tuple[tuple[str, str], ...] = (
            ((SOURCE_ELASTICACHE, ELASTICACHE_KEY), (SOURCE_EXPORTER, config.heartbeat.key)) if config.heartbeat.read else ()
        )
        keys = tuple(key for _, key in self.heartbeat_sources)
        self.max_reply_bytes = config.scrape_max_reply_bytes
        self.shard = config.shard
        # a target with discover: cluster stands for the nodes of its cluster: those are its targets, under host:port
        self.cluster_seeds = tuple(item for item in config.targets if item.discover == "cluster")
        self._members: dict[str, Target] = {}
        self._member_roles: dict[str, str] = {}
        self.member_down: Callable[[], None] | None = None  # the cluster discovery's wake-up (set by the app)
        for item in config.targets:
            if item.discover == "cluster":
                continue
            node = RedisNode(item.endpoint, item.credentials, keys, self.max_reply_bytes)
            node.key_probes = item.keys if item.keys is not None else config.keys
            target = Target(item.name, node, item.node_type, item.replication_group, item.shard, replay=self._grant_replay())
            self._by_name[item.name] = target
            self._by_address.setdefault(_key(item.endpoint), target)
        self.address_names: dict[tuple[str, int], str] = {(item.endpoint.host, item.endpoint.port): item.name for item in reversed(config.targets)}
        self._allow = config.allow
        self._ad_hoc: OrderedDict[tuple[str, int, int, bool], Target] = OrderedDict()
        # /scrape?target= text -> its ad hoc target's key: Prometheus asks with the same text every scrape, and the
        # address need not be parsed and matched again while the node stays ad hoc (a discovery makes it anew)
        self._ad_hoc_texts: dict[str, tuple[str, int, int, bool]] = {}
        self._discoveries = 0  # how many times the discovered nodes were set: a mapping made across one is not kept
        self._lock = threading.Lock()
        self._discovered: dict[str, Target] = {}
        self._discovered_nodes: dict[str, Node] = {}
        self._discovered_credentials = config.discovered_credentials
        self._discovered_iam = config.discovered_iam
        self.credentials_for: Callable[[Node], Any] | None = None  # an account's AWS credentials, for IAM tokens
        self._key_probes = config.keys
        self._config = config
        # discovered nodes are always resolvable by /scrape (Prometheus finds them in /discovery); on /metrics only if asked
        self._discovered_on_metrics = config.aws.scrape_discovered

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

    def on_metrics(self) -> list[Target]:
        """The targets /metrics serves: those of the configuration, then, with ``aws.scrape_discovered``, the discovered
        ones (of this shard only, when the exporter is one of several shards)."""
        with self._lock:
            targets = [*self._by_name.values(), *self._members.values()]
            targets += list(self._discovered.values()) if self._discovered_on_metrics else []
        if self.shard is None:
            return targets
        return [target for target in targets if self.owns(target.name)]

    def owns(self, name: str) -> bool:
        """Whether the target ``name`` belongs on this exporter's /metrics (always, unless sharded)."""
        return self.shard is None or self.shard.owns(name)

    def set_discovered(self, nodes: list[tuple[str, Node]]) -> None:
        """Make discovered nodes targets under their instance names (by endpoint, TLS when in-transit encryption is on),
        keeping live connections."""
        keys = tuple(key for _, key in self.heartbeat_sources)
        wanted = {name: node for name, node in nodes if node.address and name not in self._by_name}
        with self._lock:
            self._ad_hoc_texts.clear()  # an address may now be a discovered node's
            self._discoveries += 1
            for name in list(self._discovered):
                current = self._discovered_nodes[name]
                node = wanted.get(name)
                if node is None or (node.address, node.port, node.tls, node.node_type, node.replication_group, node.shard) != (
                    current.address,
                    current.port,
                    current.tls,
                    current.node_type,
                    current.replication_group,
                    current.shard,
                ):
                    self._drop(self._discovered.pop(name))
                    del self._discovered_nodes[name]
            for name, node in wanted.items():
                if name in self._discovered:
                    continue
                endpoint = Endpoint(node.address.lower(), node.port, node.tls, 0, self._discovered_credentials.username)
                redis_node = RedisNode(endpoint, self._discovered_node_credentials(name, node), keys, self.max_reply_bytes)
                redis_node.key_probes = self._key_probes
                node_type = "" if node.serverless else node.node_type  # no node-type baseline applies
                self._discovered[name] = Target(name, redis_node, node_type, node.replication_group, node.shard, replay=self._grant_replay())
                self._discovered_nodes[name] = node
                self.address_names[(endpoint.host, endpoint.port)] = name

    def set_cluster_members(self, seed: TargetConfig, members: list[Member]) -> None:
        """The nodes of ``seed``'s cluster as targets (``host:port``, the seed's credentials and TLS), each labelled with
        its shard (its primary's node id) and role; a node that left is dropped with its connection."""
        keys = tuple(key for _, key in self.heartbeat_sources)
        group = seed.replication_group or seed.name
        wanted = {member.name: member for member in members if member.name not in self._by_name}
        with self._lock:
            self._ad_hoc_texts.clear()
            mine = [name for name, target in self._members.items() if target.replication_group == group]
            for name in mine:
                member = wanted.get(name)
                if member is None:
                    self._drop(self._members.pop(name))
                    self._member_roles.pop(name, None)
                else:
                    self._members[name].shard = member.shard  # a failover moves a node to another primary's shard
                    self._member_roles[name] = member.role
            for name, member in wanted.items():
                if name in self._members:
                    continue
                endpoint = Endpoint(member.host.lower(), member.port, seed.endpoint.tls, 0, seed.credentials.username)
                node = RedisNode(endpoint, seed.credentials, keys, self.max_reply_bytes)
                node.key_probes = seed.keys if seed.keys is not None else self._key_probes
                self._members[name] = Target(
                    name, node, seed.node_type, group, member.shard, replay=self._grant_replay(), on_down=self._on_member_down
                )
                self._member_roles[name] = member.role
                self.address_names[(endpoint.host, endpoint.port)] = name

    def _on_member_down(self) -> None:
        if self.member_down is not None:
            self.member_down()

    def cluster_members(self) -> list[tuple[Target, str]]:
        """(target, role as the cluster last said) of every node found from a cluster endpoint."""
        with self._lock:
            return [(self._members[name], self._member_roles.get(name, "")) for name in sorted(self._members)]

    def discovered_nodes(self) -> list[tuple[Target, Node]]:
        with self._lock:
            return [(self._discovered[name], self._discovered_nodes[name]) for name in sorted(self._discovered)]

    def resolve(self, text: str) -> Target:
        """The target /scrape?target=<text> names, or :class:`TargetRefused`."""
        with self._lock:
            target = self._by_name.get(text) or self._members.get(text) or self._discovered.get(text)
            key = self._ad_hoc_texts.get(text) if target is None else None
            discoveries = self._discoveries
            if key is not None and (target := self._ad_hoc.get(key)) is not None:
                self._ad_hoc.move_to_end(key)
        if target is not None:
            return target
        try:
            endpoint = parse_address(text, allow_userinfo=False).endpoint
        except AddressError as err:
            raise TargetRefused(str(err)) from err
        target = self._by_address.get(_key(endpoint))
        if target is None:
            with self._lock:
                target = next((t for t in self._discovered.values() if _key(t.node.endpoint) == _key(endpoint)), None)
        if target is not None and target.node.endpoint.tls == endpoint.tls:
            return target
        for rule in self._allow:
            if rule.matches(endpoint):
                target = self._ad_hoc_target(endpoint, rule.credentials)
                with self._lock:
                    if len(self._ad_hoc_texts) >= 2 * MAX_AD_HOC_NODES:  # texts of evicted targets, or many spellings
                        self._ad_hoc_texts.clear()
                    if self._discoveries == discoveries:  # else the discovered node checked above may be out of date
                        self._ad_hoc_texts[text] = _ad_hoc_key(endpoint)
                return target
        raise TargetRefused("target is neither configured nor allowed by scrape.allow")

    def _ad_hoc_target(self, endpoint: Endpoint, credentials: Credentials) -> Target:
        key = _ad_hoc_key(endpoint)
        with self._lock:
            target = self._ad_hoc.get(key)
            if target is None:
                if len(self._ad_hoc) >= MAX_AD_HOC_NODES:  # the least recently asked for makes room (and gives back its grant)
                    _, evicted = self._ad_hoc.popitem(last=False)
                    self._drop(evicted)
                node = RedisNode(
                    Endpoint(endpoint.host, endpoint.port, endpoint.tls, endpoint.db, credentials.username),
                    credentials,
                    tuple(key for _, key in self.heartbeat_sources),
                    self.max_reply_bytes,
                )
                node.key_probes = self._key_probes
                target = Target(node.endpoint.display(), node, replay=self._grant_replay())
                self._ad_hoc[key] = target
            else:
                self._ad_hoc.move_to_end(key)
            return target

    def _grant_replay(self) -> bool:
        """A new target may keep its rendered lines while fewer than MAX_REPLAYING_TARGETS do (under the set's lock, or
        before the set is shared)."""
        if self._replaying >= MAX_REPLAYING_TARGETS:
            return False
        self._replaying += 1
        return True

    def _drop(self, target: Target) -> None:
        """A target leaves the set: its connection closed, its grant given back."""
        target.node.close()
        if target.replay:
            self._replaying -= 1

    def every(self) -> list[Target]:
        """Every target this set holds, each once: configured, discovered (whatever /metrics serves of them) and the
        ad hoc ones of /scrape. Each may hold a connection."""
        with self._lock:
            targets = [*self._by_name.values(), *self._members.values(), *self._discovered.values(), *self._ad_hoc.values()]
        return list({id(target): target for target in targets}.values())

    def close(self) -> None:
        """Close every connection the set's targets opened (on reload and at exit)."""
        for target in self.every():
            target.node.close()


def _key(endpoint: Endpoint) -> tuple[str, int, int]:
    return (endpoint.host, endpoint.port, endpoint.db)


def _ad_hoc_key(endpoint: Endpoint) -> tuple[str, int, int, bool]:
    return (*_key(endpoint), endpoint.tls)
