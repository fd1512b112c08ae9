"""One Redis node: a reused connection, what the node allows, and one pipelined scrape.

A scrape sends every command of ``pipeline``'s table in one round trip (and a second one where INFO shows a command
woke up whose latency histogram it did not ask for), and everything it does (connect,
TLS, AUTH, every reply) ends by one deadline with every reply bounded in size
(see ``resp``). What the node allows is learnt on each (re)connect with
``COMMAND INFO``, which answers nil for commands that are renamed away (as
ElastiCache does with CONFIG) instead of an error, so the exporter adds no error
replies to the server's errorstats. A command that still fails (an ACL denies
it) is dropped until the next reconnect. On a cluster-mode node, keyed reads go
only to keys of the node's own slots, so they never draw MOVED or CROSSSLOT.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from exporter.common.secrets import SecretUnavailable

from .addresses import Endpoint
from .cluster import NODES_REFRESH
from .failures import NOT_AUTHENTICATED, kind_of, reply_failure
from .info import CommandLines, InfoReply, command_lines, command_stats, parse_info
from .keys import KeyProbeResult, KeyProbes
from .latency import HISTOGRAMS
from .latency import forget as forget_histograms
from .latency import late as late_histograms
from .latency import plan as plan_histograms
from .pipeline import PROBES, Gates, ScrapeResult, collect, requests
from .resp import DEFAULT_MAX_REPLY_BYTES, ErrorReply, RespConnection, RespFailure
from .settings import Credentials, TlsOptions
from .slots import key_slot, owned_slots, shard_name, shard_primary

if TYPE_CHECKING:
    import ssl

CLIENT_NAME = "elasticache-exporter"


def build_ssl_context(tls: TlsOptions) -> ssl.SSLContext:
    """Files are read on each connect so rotated certificates are picked up."""
    import ssl  # loaded only when a target uses TLS: it costs memory a plain-TCP exporter need not pay

    context = ssl.create_default_context(cafile=tls.ca_file)
    if tls.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.cert_file and tls.key_file:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    return context


class RedisNode:
    """A Redis endpoint with at most one open connection, used by one scrape at a time."""

    def __init__(
        self,
        endpoint: Endpoint,
        credentials: Credentials,
        heartbeat_keys: tuple[str, ...] = (),
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = credentials
        self.heartbeat_keys = heartbeat_keys
        self.max_reply_bytes = max_reply_bytes
        # what the connection's age and the cluster map's refresh are measured by (deadlines are always the real clock)
        self.clock: Callable[[], float] = time.monotonic
        self._lock = threading.Lock()
        self._conn: RespConnection | None = None
        self._gates = Gates()
        self.info_all = True  # False for a server without INFO ALL (before Redis 6)
        self._cluster_enabled = False
        self._slots: frozenset[int] | None = None  # slots this node serves reads of (cluster mode); None: not known
        self._slots_read = 0.0
        self._cluster_shard: tuple[str, str] | None = None  # cluster mode: its shard's (slot ranges, primary's node id)
        # the commands LATENCY HISTOGRAM asks for: the most called ones of the last INFO commandstats
        self.histogram_commands: tuple[str, ...] = ()
        self.histograms: dict[str, Any] = {}  # command → its latest LATENCY HISTOGRAM (latency.py), reused while its calls stand
        self.command_calls: dict[str, float] = {}
        self.moving_commands: frozenset[str] = frozenset()
        # the last INFO reply parsed, whose sections that stand still the next parse reuses, and its commandstats lines
        self._last_info: InfoReply | None = None
        self._command_lines: CommandLines = {}
        self._closed = False
        self.connects = 0
        self.renewals = 0  # connections replaced for their age
        self._connected_at = 0.0
        self.key_probes = KeyProbes()  # watched keys and streams, probed after INFO

    @property
    def cluster_enabled(self) -> bool:
        return self._cluster_enabled

    # --- connection ---------------------------------------------------------------

    def _connect(self, deadline: float, probe: bool = True) -> RespConnection:
        creds = self.credentials
        context = build_ssl_context(creds.tls) if self.endpoint.tls else None
        conn = RespConnection.open(
            self.endpoint.host,
            self.endpoint.port,
            deadline,
            ssl_context=context,
            server_name=creds.tls.server_name or self.endpoint.host,
            max_reply_bytes=self.max_reply_bytes,
        )
        try:
            setup: list[tuple[str, ...]] = []
            if creds.password is not None:
                try:
                    password = creds.password.reveal()
                except SecretUnavailable as err:
                    raise RespFailure("auth", f"{creds.password.source}: {err}") from None
                setup.append(("AUTH", creds.username, password) if creds.username else ("AUTH", password))
            if self.endpoint.db:
                setup.append(("SELECT", str(self.endpoint.db)))
            for reply in conn.call(setup, deadline) if setup else ():
                if isinstance(reply, ErrorReply):
                    failure = reply_failure(reply, "AUTH/SELECT")
                    if failure.kind == "auth" and creds.password is not None:
                        creds.password.refused()
                    raise failure
            if probe:
                self._probe(conn, deadline)
        except BaseException:
            conn.close()
            raise
        self.connects += 1
        self._connected_at = self.clock()
        return conn

    def _connection(self, deadline: float) -> RespConnection:
        """The open connection, or a new one; one older than the credentials' ``max_connection_age`` is replaced first,
        so that a server that cuts connections at an age (ElastiCache's IAM, at 12 hours) never cuts one in use."""
        max_age = self.credentials.max_connection_age
        if self._conn is not None and max_age is not None and self.clock() - self._connected_at >= max_age:
            self._drop_connection()
            self.renewals += 1
        if self._conn is None:
            self._conn = self._connect(deadline)
        return self._conn

    def _probe(self, conn: RespConnection, deadline: float) -> None:
        """Learn which optional commands exist, in one round trip, without error replies."""
        self.info_all = True
        self._slots = None
        self.histograms = {}  # a restarted server counts anew: nothing kept is reused
        *probes, cluster = conn.call([*PROBES, ("INFO", "cluster")], deadline)
        command_info: Any = next((reply for reply in probes if isinstance(reply, ErrorReply)), None)
        if command_info is not None:
            # Without COMMAND (Redis < 2.8.13, or denied) each command is tried once and dropped on error.
            if command_info.message.startswith(NOT_AUTHENTICATED):
                raise reply_failure(command_info, "COMMAND INFO")
        else:
            for probe, reply in zip(PROBES, probes, strict=True):
                if not isinstance(reply, list) or len(reply) != len(probe) - 2:
                    raise RespFailure("protocol", f"COMMAND INFO answered {kind_of(reply)}, not a list of {len(probe) - 2}")
            command_info = [entry for reply in probes for entry in reply]
        self._gates.reset(command_info)
        if isinstance(cluster, ErrorReply):
            raise reply_failure(cluster, "INFO cluster")
        if not isinstance(cluster, bytes):
            raise RespFailure("protocol", f"INFO answered {kind_of(cluster)}, not INFO text")
        self._cluster_enabled = b"cluster_enabled:1" in cluster
        if self._cluster_enabled and self.allows("cluster"):
            _, nodes = conn.call([("READONLY",), ("CLUSTER", "NODES")], deadline)
            self.on_cluster_nodes(nodes)
        if self._gates.allows("client", known_only=True):
            (name_reply,) = conn.call([("CLIENT", "SETNAME", CLIENT_NAME)], deadline)
            if isinstance(name_reply, ErrorReply):
                self._gates.refuse("client")

    def allows(self, gate: str, known_only: bool = False) -> bool:
        """Whether commands gated by ``gate`` may be sent (unknown: tried once, unless ``known_only``)."""
        return self._gates.allows(gate, known_only)

    def refuse(self, gate: str) -> None:
        """Commands gated by ``gate`` are not sent again until a reconnect learns what the node allows."""
        self._gates.refuse(gate)

    def cluster_nodes_due(self) -> bool:
        return self.clock() - self._slots_read > NODES_REFRESH

    def on_cluster_nodes(self, reply: Any) -> None:
        if isinstance(reply, ErrorReply):
            self._gates.refuse("cluster")
            return
        if not isinstance(reply, bytes):
            raise RespFailure("protocol", f"CLUSTER NODES answered {kind_of(reply)}")
        text = reply.decode("utf-8", errors="replace")
        self._slots = owned_slots(text)
        primary = shard_primary(text)
        self._cluster_shard = None if primary is None else (shard_name(self._slots, primary), primary)
        self._slots_read = self.clock()

    def cluster_shard(self, grouped: bool) -> str | None:
        """Cluster mode: its shard's name. Within a named replication group (``grouped``), its slot ranges, which a
        failover keeps; without one, its primary's node id, unique across clusters where slot ranges are not (two
        clusters both have a shard ``0-5460``), though a failover changes it."""
        if self._cluster_shard is None:
            return None
        return self._cluster_shard[0] if grouped else self._cluster_shard[1]

    def owns(self, key: str) -> bool:
        """Whether a keyed read of ``key`` can be answered here without MOVED (always, outside cluster mode)."""
        if not self._cluster_enabled:
            return True
        return self._slots is not None and key_slot(key.encode()) in self._slots

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextlib.contextmanager
    def _held(self, timeout: float | None) -> Iterator[tuple[RespConnection, float]]:
        """The node's connection (opened or renewed as needed) and a deadline of its own, under the node's lock, for work
        outside the scrape (the heartbeat writer, the profiles); a call that fails drops the connection."""
        deadline = time.monotonic() + (timeout or self.credentials.timeout)
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise RespFailure("timeout", "the node is busy with another call")
        try:
            if self._closed:  # a closed node never connects again
                raise RespFailure("connection", "the target was removed")
            yield self._connection(deadline), deadline
        except RespFailure:
            self._drop_connection()
            raise
        finally:
            if self._closed:  # closed while this call held the connection: it goes now
                self._drop_connection()
            self._lock.release()

    def write_heartbeat(self, key: str, value: str, ttl_ms: int, timeout: float | None = None) -> bool:
        """SET ``key`` if, and only if, ``ROLE`` says this node is a master that owns the key; False otherwise."""
        with self._held(timeout) as (conn, deadline):
            role, cluster = conn.call([("ROLE",), ("INFO", "cluster")], deadline)
            if isinstance(role, ErrorReply):
                raise reply_failure(role, "ROLE")
            if not (isinstance(role, list) and role and role[0] == b"master"):
                return False
            if isinstance(cluster, bytes) and b"cluster_enabled:1" in cluster and self.allows("cluster"):
                if self._slots is None or self.cluster_nodes_due():
                    (nodes,) = conn.call([("CLUSTER", "NODES")], deadline)
                    self.on_cluster_nodes(nodes)
                self._cluster_enabled = True
                if not self.owns(key):
                    return False
            (reply,) = conn.call([("SET", key, value, "PX", str(ttl_ms))], deadline)
            if isinstance(reply, ErrorReply):
                raise reply_failure(reply, "SET")
            return True

    def call_many(self, commands: list[tuple[Any, ...]], timeout: float | None = None) -> list[Any]:
        """Commands in one round trip on this node's connection, by a deadline of their own (background work)."""
        with self._held(timeout) as (conn, deadline):
            return conn.call(commands, deadline)

    def call_if_allowed(self, gate: str, command: tuple[str, ...], timeout: float | None = None) -> Any:
        """``command``'s reply on this node's connection, if COMMAND INFO showed the commands of ``gate`` on the last
        (re)connect; None where it did not (renamed away) or an ACL refused it once (not asked again until a reconnect)."""
        with self._held(timeout) as (conn, deadline):
            if not self.allows(gate, known_only=True):
                return None
            (reply,) = conn.call([command], deadline)
            if isinstance(reply, ErrorReply):
                self._gates.refuse(gate)
                return None
            return reply

    def close(self) -> None:
        """Close the connection now, or, while a call holds it, as soon as that call ends. Never waits."""
        self._closed = True
        if self._lock.acquire(blocking=False):
            try:
                self._drop_connection()
            finally:
                self._lock.release()

    # --- scrape -------------------------------------------------------------------

    def scrape(self, deadline: float) -> ScrapeResult:
        """One pipelined scrape, finished by ``deadline`` (a ``time.monotonic()`` value)."""
        started = time.monotonic()
        if not self._lock.acquire(timeout=max(0.0, deadline - started)):
            raise RespFailure("timeout", "the previous scrape of this node is still running")
        try:
            if self._closed:
                raise RespFailure("connection", "the target was removed")
            return self._scrape_locked(min(deadline, started + self.credentials.timeout), started)
        finally:
            if self._closed:
                self._drop_connection()
            self._lock.release()

    def _scrape_locked(self, deadline: float, started: float) -> ScrapeResult:
        try:
            connection = self._connection(deadline)
            result = self._exchange(connection, deadline)
            if not result.info and not self.info_all:
                result = self._exchange(connection, deadline)  # INFO ALL was refused: once more with INFO and its sections
        except BaseException:
            self._drop_connection()  # a connection that missed its deadline or broke is never reused
            raise
        if not result.info:
            raise RespFailure("error_reply", "INFO returned no data")
        self._digest(result)
        if self.key_probes and self.allows("key_probes") and self._conn is not None:
            result.keys = self._probe_keys(self._conn, result.info, deadline)
        self._read_late_histograms(result, deadline)
        result.duration = time.monotonic() - started
        return result

    def _digest(self, result: ScrapeResult) -> None:
        """INFO parsed (the sections that stand where they stood in the last reply reused), its command stats, and the
        commands whose LATENCY HISTOGRAM the next scrape asks for."""
        info = parse_info(result.info, self._last_info)
        for extra in result.extra_info:
            info.merge(parse_info(extra))
        self._last_info = info.kept()
        result.parsed = info
        result.command_lines = self._command_lines = command_lines(info.sections.get("commandstats", {}), self._command_lines)
        result.command_stats = command_stats(result.command_lines)
        plan_histograms(self, result.command_stats)

    def _read_late_histograms(self, result: ScrapeResult, deadline: float) -> None:
        """LATENCY HISTOGRAM, in a second round trip after the key probes, of the commands this scrape found called that
        it did not ask for (one called again after standing still), so that no histogram is served a scrape late. A
        failure here, or no time left for it, costs those histograms this scrape, never the scrape."""
        requests = late_histograms(self, result.sent.get(HISTOGRAMS.purpose, []))
        if not requests or HISTOGRAMS.on_reply is None or HISTOGRAMS.merged is None:
            return
        reply: Any = None
        if self._conn is not None and time.monotonic() < deadline:
            try:
                (reply,) = self._conn.call(requests, deadline)
            except (RespFailure, OSError):
                self._drop_connection()
        if isinstance(reply, list):
            HISTOGRAMS.on_reply(self, reply)
        else:
            if isinstance(reply, ErrorReply):  # an ACL that denies it: not asked again until a reconnect
                self.refuse("latency|histogram")
            forget_histograms(self, requests)
        result.replies[HISTOGRAMS.purpose] = [HISTOGRAMS.merged(self)]

    def _probe_keys(self, conn: RespConnection, info: str, deadline: float) -> KeyProbeResult | None:
        """After INFO, in what is left of the deadline; a failure here costs the probes, never the INFO metrics.
        In cluster mode only a primary probes, so that each key is reported once, by the shard that owns it."""
        if self._cluster_enabled and "\nrole:master" not in info:
            return None
        from .key_probe import KeyProber  # loaded only where keys are watched

        version = re.search(r"(?:redis|valkey)_version:(\d+)", info)
        prober = KeyProber(
            conn,
            self.key_probes,
            deadline,
            cluster=self._cluster_enabled,
            owns=self.owns,
            current_db=self.endpoint.db,
            memory_usage=version is not None and int(version.group(1)) >= 4,
        )
        try:
            result = prober.run()
        except (RespFailure, OSError):
            self._drop_connection()
            return KeyProbeResult(complete=False)
        if prober.refused:
            self._gates.refuse("key_probes")
        if conn.closed:
            self._drop_connection()
        return result

    def _exchange(self, conn: RespConnection, deadline: float) -> ScrapeResult:
        sent = requests(self, self._gates)
        replies = conn.call([args for _, args in sent], deadline)
        return collect(self, self._gates, sent, replies)
