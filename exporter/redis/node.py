"""One Redis node: a reused connection, what the node allows, and one pipelined scrape.

A scrape sends every command in one round trip, and everything it does (connect,
TLS, AUTH, every reply) ends by one deadline with every reply bounded in size
(see ``resp``). What the node allows is learnt on each (re)connect with
``COMMAND INFO``, which answers nil for commands that are renamed away (as
ElastiCache does with CONFIG) instead of an error, so the exporter adds no error
replies to the server's errorstats. A command that still fails (an ACL denies
it) is dropped until the next reconnect. On a cluster-mode node, keyed reads go
only to keys of the node's own slots, so they never draw MOVED or CROSSSLOT.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .addresses import Endpoint
from .keys import KeyProbeResult, KeyProbes
from .resp import DEFAULT_MAX_REPLY_BYTES, ErrorReply, RespConnection, RespFailure, is_ssl_error
from .settings import Credentials, TlsOptions
from .slots import key_slot, owned_slots, shard_primary

if TYPE_CHECKING:
    import ssl

CLIENT_NAME = "elasticache-exporter"
# COMMAND INFO answers nil for a command (or subcommand, Redis 7 and later) the node lacks or renamed away
OPTIONAL_COMMANDS = ("client", "slowlog", "latency", "cluster", "latency|histogram", "config")
# CONFIG GET of the settings redis_exporter serves as redis_config_* (maxclients and maxmemory come from INFO, which
# ElastiCache allows), one parameter per command as every Redis version accepts; re-read once a minute
CONFIG_PARAMETERS = ("io-threads", "repl-backlog-size", "client-output-buffer-limit", "databases")
CONFIG_REFRESH = 60.0
MAX_HISTOGRAM_COMMANDS = 32  # LATENCY HISTOGRAM for the most called commands only: a node may know hundreds
CLUSTER_NODES_REFRESH = 30.0  # seconds between reads of CLUSTER NODES on a cluster-mode node
ScrapeFailure = RespFailure  # raised by a scrape that produced no usable INFO; ``kind`` is a label value

_INFO_LINE = re.compile(rb"^[A-Za-z0-9_.\-]+:", re.M)


@dataclass
class ScrapeResult:
    """Raw replies of one scrape; parsing happens outside the node lock."""

    info: str = ""
    extra_info: list[str] = field(default_factory=list)
    slowlog_len: int | None = None
    slowlog_last: Any = None
    latency_latest: Any = None
    latency_histogram: Any = None
    config: dict[str, str] = field(default_factory=dict)
    cluster_info: str | None = None
    heartbeat_values: list[bytes | None] | None = None
    heartbeat_types: dict[str, str] = field(default_factory=dict)
    keys: KeyProbeResult | None = None
    read_time: float = 0.0
    duration: float = 0.0
    command_errors: int = 0


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


_AUTH_CODES = ("NOAUTH", "WRONGPASS", "NOPERM", "invalid password", "invalid username", "ERR invalid password", "ERR AUTH")


def classify(err: BaseException) -> str:
    """A small fixed set of error kinds, safe as a label value."""
    if isinstance(err, RespFailure):
        return err.kind
    if isinstance(err, TimeoutError):
        return "timeout"
    if is_ssl_error(err):
        return "tls"
    if isinstance(err, ConnectionRefusedError):
        return "refused"
    if isinstance(err, OSError):
        return "connection"
    return "internal"


def reply_failure(reply: ErrorReply, what: str) -> RespFailure:
    """The failure an error reply to a command the scrape cannot do without stands for."""
    if reply.message.startswith(_AUTH_CODES):
        return RespFailure("auth", f"{what}: {reply.message[:200]}")
    if reply.message.startswith("LOADING"):
        return RespFailure("loading", f"{what}: the node is loading its dataset")
    return RespFailure("error_reply", f"{what}: {reply.message[:200]}")


def looks_like_info(text: bytes) -> bool:
    """INFO text has ``key:value`` lines (a few odd lines are counted, not fatal); a status, an empty reply or
    binary noise is not INFO."""
    return b"\x00" not in text and _INFO_LINE.search(text) is not None


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
        self._lock = threading.Lock()
        self._conn: RespConnection | None = None
        self._allowed: dict[str, bool] = {}
        self._info_all = True
        self._cluster_enabled = False
        self._slots: frozenset[int] | None = None  # slots this node serves reads of (cluster mode); None: not known
        self._slots_read = 0.0
        self.shard_primary: str | None = None  # cluster mode: the node id of this node's shard primary
        # the commands LATENCY HISTOGRAM asks for: the most called ones of the last INFO commandstats
        self.histogram_commands: tuple[str, ...] = ()
        self._config: dict[str, str] = {}
        self._config_read = 0.0
        self._closed = False
        self.connects = 0
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
                password = creds.password.reveal()
                setup.append(("AUTH", creds.username, password) if creds.username else ("AUTH", password))
            if self.endpoint.db:
                setup.append(("SELECT", str(self.endpoint.db)))
            for reply in conn.call(setup, deadline) if setup else ():
                if isinstance(reply, ErrorReply):
                    raise reply_failure(reply, "AUTH/SELECT")
            if probe:
                self._probe(conn, deadline)
        except BaseException:
            conn.close()
            raise
        self.connects += 1
        return conn

    def _probe(self, conn: RespConnection, deadline: float) -> None:
        """Learn which optional commands exist, in one round trip, without error replies."""
        self._allowed = {}
        self._info_all = True
        self._slots = None
        command_info, cluster = conn.call([("COMMAND", "INFO", *OPTIONAL_COMMANDS), ("INFO", "cluster")], deadline)
        if isinstance(command_info, list) and len(command_info) == len(OPTIONAL_COMMANDS):
            for name, entry in zip(OPTIONAL_COMMANDS, command_info, strict=True):
                self._allowed[name] = entry is not None
        elif isinstance(command_info, ErrorReply):
            # Without COMMAND (Redis < 2.8.13, or denied) each command is tried once and dropped on error.
            if command_info.message.startswith(_AUTH_CODES[:2]):
                raise reply_failure(command_info, "COMMAND INFO")
        else:
            raise RespFailure("protocol", f"COMMAND INFO answered {_kind_of(command_info)}, not a list")
        if isinstance(cluster, ErrorReply):
            raise reply_failure(cluster, "INFO cluster")
        if not isinstance(cluster, bytes):
            raise RespFailure("protocol", f"INFO answered {_kind_of(cluster)}, not INFO text")
        self._cluster_enabled = b"cluster_enabled:1" in cluster
        if self._cluster_enabled and self._allowed.get("cluster", True):
            _, nodes = conn.call([("READONLY",), ("CLUSTER", "NODES")], deadline)
            self._on_cluster_nodes(nodes)
        if self._allowed.get("client", False):
            (name_reply,) = conn.call([("CLIENT", "SETNAME", CLIENT_NAME)], deadline)
            if isinstance(name_reply, ErrorReply):
                self._allowed["client"] = False

    def _on_cluster_nodes(self, reply: Any) -> None:
        if isinstance(reply, ErrorReply):
            self._allowed["cluster"] = False
            return
        if not isinstance(reply, bytes):
            raise RespFailure("protocol", f"CLUSTER NODES answered {_kind_of(reply)}")
        text = reply.decode("utf-8", errors="replace")
        self._slots = owned_slots(text)
        self.shard_primary = shard_primary(text)
        self._slots_read = time.monotonic()

    def owns(self, key: str) -> bool:
        """Whether a keyed read of ``key`` can be answered here without MOVED (always, outside cluster mode)."""
        if not self._cluster_enabled:
            return True
        return self._slots is not None and key_slot(key.encode()) in self._slots

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def write_heartbeat(self, key: str, value: str, ttl_ms: int, timeout: float | None = None) -> bool:
        """SET ``key`` if, and only if, ``ROLE`` says this node is a master that owns the key; False otherwise."""
        deadline = time.monotonic() + (timeout or self.credentials.timeout)
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise RespFailure("timeout", "the node is busy with another call")
        try:
            if self._conn is None:
                self._conn = self._connect(deadline)
            role, cluster = self._conn.call([("ROLE",), ("INFO", "cluster")], deadline)
            if isinstance(role, ErrorReply):
                raise reply_failure(role, "ROLE")
            if not (isinstance(role, list) and role and role[0] == b"master"):
                return False
            if isinstance(cluster, bytes) and b"cluster_enabled:1" in cluster and self._allowed.get("cluster", True):
                if self._slots is None or time.monotonic() - self._slots_read > CLUSTER_NODES_REFRESH:
                    (nodes,) = self._conn.call([("CLUSTER", "NODES")], deadline)
                    self._on_cluster_nodes(nodes)
                self._cluster_enabled = True
                if not self.owns(key):
                    return False
            (reply,) = self._conn.call([("SET", key, value, "PX", str(ttl_ms))], deadline)
            if isinstance(reply, ErrorReply):
                raise reply_failure(reply, "SET")
            return True
        except RespFailure:
            self._drop_connection()
            raise
        finally:
            self._lock.release()

    def close(self) -> None:
        """Close the connection now, or, while a call holds it, as soon as that call ends. Never waits."""
        self._closed = True
        if self._lock.acquire(blocking=False):
            try:
                self._drop_connection()
            finally:
                self._lock.release()

    # --- scrape -------------------------------------------------------------------

    def _commands(self) -> list[tuple[str, tuple[str, ...]]]:
        commands: list[tuple[str, tuple[str, ...]]] = []
        if self._info_all:
            commands.append(("info", ("INFO", "ALL")))
        else:
            commands.append(("info", ("INFO",)))
            commands.append(("info_extra", ("INFO", "commandstats")))
        if self._allowed.get("slowlog", True):
            commands.append(("slowlog_len", ("SLOWLOG", "LEN")))
            commands.append(("slowlog", ("SLOWLOG", "GET", "1")))
        if self._allowed.get("latency", True):
            commands.append(("latency", ("LATENCY", "LATEST")))
            # only where COMMAND INFO said the subcommand exists (Redis 7+): older servers would answer an error
            if self._allowed.get("latency|histogram", False) and self.histogram_commands:
                commands.append(("latency_histogram", ("LATENCY", "HISTOGRAM", *self.histogram_commands)))
        # only where COMMAND INFO said CONFIG exists (renamed away on ElastiCache)
        if self._allowed.get("config", False) and time.monotonic() - self._config_read > CONFIG_REFRESH:
            commands.extend(("config", ("CONFIG", "GET", parameter)) for parameter in CONFIG_PARAMETERS)
        if self._cluster_enabled and self._allowed.get("cluster", True):
            commands.append(("cluster", ("CLUSTER", "INFO")))
            if time.monotonic() - self._slots_read > CLUSTER_NODES_REFRESH:
                commands.append(("cluster_nodes", ("CLUSTER", "NODES")))
        if self.heartbeat_keys and self._allowed.get("heartbeat", True):
            # MGET answers nil, not an error, for a key of another type; TYPE tells the two apart.
            # In cluster mode one MGET a key of our own slots: several keys or another node's key would be an error.
            keys = [key for key in self.heartbeat_keys if self.owns(key)]
            if not self._cluster_enabled:
                commands.append(("heartbeat", ("MGET", *keys)))
            else:
                commands.extend(("heartbeat", ("MGET", key)) for key in keys)
            if self._allowed.get("heartbeat_type", True):
                commands.extend(("heartbeat_type", ("TYPE", key)) for key in keys)
        return commands

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
            if self._conn is None:
                self._conn = self._connect(deadline)
            result = self._exchange(self._conn, deadline)
            if not result.info and not self._info_all:
                result = self._exchange(self._conn, deadline)  # INFO ALL was refused: once more with INFO and its sections
        except BaseException:
            self._drop_connection()  # a connection that missed its deadline or broke is never reused
            raise
        if not result.info:
            raise RespFailure("error_reply", "INFO returned no data")
        if self.key_probes and self._allowed.get("key_probes", True) and self._conn is not None:
            result.keys = self._probe_keys(self._conn, result.info, deadline)
        result.duration = time.monotonic() - started
        return result

    def _probe_keys(self, conn: RespConnection, info: str, deadline: float) -> KeyProbeResult | None:
        """After INFO, in what is left of the deadline; a failure here costs the probes, never the INFO metrics.
        In cluster mode only a primary probes, so that each key is reported once, by the shard that owns it."""
        if self._cluster_enabled and "\nrole:master" not in info:
            return None
        from .key_probe import KeyProber  # loaded only where keys are watched

        version = re.search(r"(?:redis|valkey)_version:(\d+)", info)
        prober = KeyProber(conn, self.key_probes, deadline, cluster=self._cluster_enabled, owns=self.owns,
                           current_db=self.endpoint.db, memory_usage=version is not None and int(version.group(1)) >= 4)  # fmt: skip
        try:
            result = prober.run()
        except (RespFailure, OSError):
            self._drop_connection()
            return KeyProbeResult(complete=False)
        if prober.refused:
            self._allowed["key_probes"] = False
        if conn.closed:
            self._drop_connection()
        return result

    def _exchange(self, conn: RespConnection, deadline: float) -> ScrapeResult:
        commands = self._commands()
        replies = conn.call([args for _, args in commands], deadline)
        result = ScrapeResult(read_time=time.time())
        keys = [args[1] for purpose, args in commands if purpose == "heartbeat" and self._cluster_enabled]
        values: list[bytes | None] = []
        for (purpose, args), reply in zip(commands, replies, strict=True):
            if isinstance(reply, ErrorReply):
                self._on_command_error(purpose, args, reply)
                result.command_errors += 1
                continue
            if purpose == "heartbeat" and self._cluster_enabled:
                values.extend(_store_checked(result, purpose, args, reply) or [])
                continue
            _store_checked(result, purpose, args, reply)
            if purpose == "cluster_nodes":
                self._on_cluster_nodes(reply)
        if self._cluster_enabled and self.heartbeat_keys and self._allowed.get("heartbeat", True):
            by_key = dict(zip(keys, values, strict=False))
            result.heartbeat_values = [by_key.get(key) for key in self.heartbeat_keys]
        if any(purpose == "config" for purpose, _ in commands):
            self._config = result.config
            self._config_read = time.monotonic()
        result.config = dict(self._config)
        return result

    def _on_command_error(self, purpose: str, args: tuple[str, ...], reply: ErrorReply) -> None:
        if reply.message.startswith(_AUTH_CODES[:2]):
            raise reply_failure(reply, " ".join(args[:2]))
        if purpose == "info" and self._info_all:
            self._info_all = False  # a server without INFO ALL: INFO plus its sections from now on
            return
        if purpose == "info":
            raise reply_failure(reply, "INFO")
        if purpose in ("slowlog_len", "slowlog"):
            purpose = "slowlog"
        if purpose == "latency_histogram":
            purpose = "latency|histogram"
        if purpose == "config":
            self._config = {}
        if purpose == "cluster_nodes":
            purpose = "cluster"
        self._allowed[purpose] = False


# The reply type each command must answer with; anything else means the peer is not a sane Redis.
_EXPECTED: dict[str, tuple[type, ...]] = {
    "info": (bytes,),
    "info_extra": (bytes,),
    "slowlog_len": (int,),
    "slowlog": (list,),
    "latency": (list,),
    "latency_histogram": (list,),
    "config": (list,),
    "cluster": (bytes,),
    "cluster_nodes": (bytes,),
    "heartbeat": (list,),
    "heartbeat_type": (bytes,),
}


def _kind_of(reply: Any) -> str:
    if reply is None:
        return "nil"
    if isinstance(reply, bytes):
        return "a string"
    if isinstance(reply, int):
        return "an integer"
    if isinstance(reply, list):
        return "an array"
    return type(reply).__name__


def _store_checked(result: ScrapeResult, purpose: str, args: tuple[str, ...], reply: Any) -> Any:
    if not isinstance(reply, _EXPECTED[purpose]) or isinstance(reply, bool):
        raise RespFailure("protocol", f"{' '.join(args[:2])} answered {_kind_of(reply)}")
    if purpose == "info":
        if not looks_like_info(reply):
            raise RespFailure("protocol", "INFO did not answer INFO text")
        result.info = reply.decode("utf-8", errors="replace")
    elif purpose == "info_extra":
        result.extra_info.append(reply.decode("utf-8", errors="replace"))
    elif purpose == "slowlog_len":
        result.slowlog_len = reply
    elif purpose == "slowlog":
        result.slowlog_last = reply
    elif purpose == "latency":
        result.latency_latest = reply
    elif purpose == "latency_histogram":
        result.latency_histogram = reply
    elif purpose == "config":
        for i in range(0, len(reply) - 1, 2):
            if isinstance(reply[i], bytes) and isinstance(reply[i + 1], bytes):
                result.config[reply[i].decode("utf-8", errors="replace")] = reply[i + 1].decode("utf-8", errors="replace")
    elif purpose == "cluster":
        result.cluster_info = reply.decode("utf-8", errors="replace")
    elif purpose == "heartbeat":
        values = [v if isinstance(v, bytes) else None for v in reply]
        if len(values) != len(args) - 1:
            raise RespFailure("protocol", f"MGET of {len(args) - 1} keys answered {len(values)} values")
        result.heartbeat_values = values
        return values
    elif purpose == "heartbeat_type":
        result.heartbeat_types[args[1]] = reply.decode("utf-8", errors="replace")
    return None
