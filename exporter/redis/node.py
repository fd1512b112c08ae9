"""One Redis node: a reused connection, what the node allows, and one pipelined scrape.

A scrape sends every command in one round trip. What the node allows is learnt
on each (re)connect with ``COMMAND INFO``, which answers nil for commands that
are renamed away (as ElastiCache does with CONFIG) instead of an error, so the
exporter adds no error replies to the server's errorstats. A command that still
fails (an ACL denies it) is dropped until the next reconnect.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.connection import Connection

from .addresses import Endpoint
from .settings import Credentials, TlsOptions

CLIENT_NAME = "elasticache-exporter"
OPTIONAL_COMMANDS = ("client", "slowlog", "latency", "cluster")


class ScrapeFailure(Exception):
    """A scrape that produced no INFO; ``kind`` is a short stable label value."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


@dataclass
class ScrapeResult:
    """Raw replies of one scrape; parsing happens outside the node lock."""

    info: str = ""
    extra_info: list[str] = field(default_factory=list)
    slowlog_len: int | None = None
    slowlog_last: Any = None
    latency_latest: Any = None
    cluster_info: str | None = None
    heartbeat_values: list[bytes | None] | None = None
    heartbeat_types: dict[str, str] = field(default_factory=dict)
    read_time: float = 0.0
    duration: float = 0.0
    command_errors: int = 0


class _TlsConnection(Connection):
    """A TCP connection wrapped in TLS with our own context and server name."""

    def __init__(self, *, ssl_context: ssl.SSLContext, server_hostname: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ssl_context = ssl_context
        self._server_hostname = server_hostname

    def _connect(self) -> socket.socket:
        sock = super()._connect()
        try:
            return self._ssl_context.wrap_socket(sock, server_hostname=self._server_hostname)
        except (OSError, ssl.SSLError):
            sock.close()
            raise


def build_ssl_context(tls: TlsOptions) -> ssl.SSLContext:
    """Files are read on each connect so rotated certificates are picked up."""
    context = ssl.create_default_context(cafile=tls.ca_file)
    if tls.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.cert_file and tls.key_file:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    return context


def classify(err: BaseException) -> str:
    """A small fixed set of error kinds, safe as a label value."""
    if isinstance(err, ScrapeFailure):
        return err.kind
    if isinstance(err, redis.exceptions.BusyLoadingError):
        return "loading"
    if isinstance(err, redis.exceptions.AuthenticationError | redis.exceptions.AuthorizationError):
        return "auth"
    if isinstance(err, redis.exceptions.ResponseError):
        text = str(err)
        if text.startswith(("NOAUTH", "WRONGPASS", "NOPERM", "invalid password", "invalid username")):
            return "auth"
        if text.startswith("LOADING"):
            return "loading"
        return "error_reply"
    if isinstance(err, redis.exceptions.TimeoutError | socket.timeout | TimeoutError):
        return "timeout"
    text = str(err)
    if isinstance(err, ssl.SSLError) or "SSL" in text or "certificate" in text:
        return "tls"
    if isinstance(err, redis.exceptions.ConnectionError | ConnectionError | OSError):
        if "Timeout" in text or "timed out" in text:
            return "timeout"
        if "resolve" in text or "Name or service not known" in text or "nodename" in text:
            return "dns"
        if "refused" in text:
            return "refused"
        return "connection"
    if isinstance(err, redis.exceptions.RedisError):
        return "protocol"
    return "internal"


class RedisNode:
    """A Redis endpoint with at most one open connection, used by one scrape at a time."""

    def __init__(self, endpoint: Endpoint, credentials: Credentials, heartbeat_keys: tuple[str, ...] = ()) -> None:
        self.endpoint = endpoint
        self.credentials = credentials
        self.heartbeat_keys = heartbeat_keys
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._allowed: dict[str, bool] = {}
        self._info_all = True
        self._cluster_enabled = False
        self.connects = 0

    # --- connection ---------------------------------------------------------------

    def _new_connection(self) -> Connection:
        creds = self.credentials
        kwargs: dict[str, Any] = {
            "host": self.endpoint.host,
            "port": self.endpoint.port,
            "db": self.endpoint.db,
            "username": creds.username,
            "password": creds.password.reveal() if creds.password else None,
            "socket_timeout": creds.timeout,
            "socket_connect_timeout": creds.timeout,
            "driver_info": None,  # CLIENT SETINFO is an error on Redis < 7.2
            "retry_on_timeout": False,
            "retry": None,
            "protocol": 2,  # redis-py would send HELLO 3, which servers before Redis 6 refuse
        }
        if self.endpoint.tls:
            return _TlsConnection(
                ssl_context=build_ssl_context(creds.tls),
                server_hostname=creds.tls.server_name or self.endpoint.host,
                **kwargs,
            )
        return Connection(**kwargs)

    def _connect(self, probe: bool = True) -> Connection:
        conn = self._new_connection()
        try:
            conn.connect()
            if probe:
                self._probe(conn)
        except BaseException:
            conn.disconnect()
            raise
        self.connects += 1
        return conn

    def _probe(self, conn: Connection) -> None:
        """Learn which optional commands exist, in one round trip, without error replies."""
        self._allowed = {}
        self._info_all = True
        deadline = time.monotonic() + self.credentials.timeout
        replies = _pipeline(conn, [("COMMAND", "INFO", *OPTIONAL_COMMANDS), ("INFO", "cluster")], deadline)
        command_info, cluster = replies
        if isinstance(command_info, list) and len(command_info) == len(OPTIONAL_COMMANDS):
            for name, entry in zip(OPTIONAL_COMMANDS, command_info, strict=True):
                self._allowed[name] = entry is not None
        # Without COMMAND (Redis < 2.8.13, or denied) each command is tried once and dropped on error.
        self._cluster_enabled = isinstance(cluster, bytes) and b"cluster_enabled:1" in cluster
        if self._allowed.get("client", False):
            name_reply = _pipeline(conn, [("CLIENT", "SETNAME", CLIENT_NAME)], deadline)[0]
            if isinstance(name_reply, Exception):
                self._allowed["client"] = False

    def write_heartbeat(self, key: str, value: str, ttl_ms: int) -> bool:
        """SET ``key`` if, and only if, ``ROLE`` says this node is a master; False when it is not."""
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = self._connect(probe=False)
                deadline = time.monotonic() + self.credentials.timeout
                (role,) = _pipeline(self._conn, [("ROLE",)], deadline)
                if isinstance(role, Exception):
                    raise role
                if not (isinstance(role, list) and role and role[0] == b"master"):
                    return False
                (reply,) = _pipeline(self._conn, [("SET", key, value, "PX", str(ttl_ms))], deadline)
                if isinstance(reply, Exception):
                    raise reply
                return True
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ScrapeFailure, OSError):
                if self._conn is not None:
                    self._conn.disconnect()
                    self._conn = None
                raise

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.disconnect()
                self._conn = None

    # --- scrape -------------------------------------------------------------------

    def _commands(self) -> list[tuple[str, tuple[str, ...]]]:
        commands: list[tuple[str, tuple[str, ...]]] = []
        if self._info_all:
            commands.append(("info", ("INFO", "ALL")))
        else:
            commands.append(("info", ("INFO",)))
            commands.append(("info_extra", ("INFO", "commandstats")))
        if self._allowed.get("slowlog", True):
            commands.append(("slowlog", ("SLOWLOG", "LEN")))
            commands.append(("slowlog", ("SLOWLOG", "GET", "1")))
        if self._allowed.get("latency", True):
            commands.append(("latency", ("LATENCY", "LATEST")))
        if self._cluster_enabled and self._allowed.get("cluster", True):
            commands.append(("cluster", ("CLUSTER", "INFO")))
        if self.heartbeat_keys and self._allowed.get("heartbeat", True):
            # MGET answers nil, not an error, for a key of another type; TYPE tells the two apart
            commands.append(("heartbeat", ("MGET", *self.heartbeat_keys)))
            if self._allowed.get("heartbeat_type", True):
                commands.extend(("heartbeat_type", ("TYPE", key)) for key in self.heartbeat_keys)
        return commands

    def scrape(self, deadline: float) -> ScrapeResult:
        """One pipelined scrape, finished by ``deadline`` (a ``time.monotonic()`` value)."""
        started = time.monotonic()
        if not self._lock.acquire(timeout=max(0.0, deadline - started)):
            raise ScrapeFailure("timeout", "the previous scrape of this node is still running")
        try:
            return self._scrape_locked(deadline, started)
        finally:
            self._lock.release()

    def _scrape_locked(self, deadline: float, started: float) -> ScrapeResult:
        deadline = min(deadline, started + self.credentials.timeout)
        result = self._exchange(deadline)
        if not result.info and not self._info_all:
            result = self._exchange(deadline)  # INFO ALL was refused: once more with INFO and its sections
        result.duration = time.monotonic() - started
        if not result.info:
            raise ScrapeFailure("error_reply", "INFO returned no data")
        return result

    def _exchange(self, deadline: float) -> ScrapeResult:
        try:
            if self._conn is None:
                self._conn = self._connect()
            commands = self._commands()
            replies = _pipeline(self._conn, [args for _, args in commands], deadline)
        except BaseException:
            if self._conn is not None:
                self._conn.disconnect()
                self._conn = None
            raise
        result = ScrapeResult(read_time=time.time())
        for (purpose, args), reply in zip(commands, replies, strict=True):
            if isinstance(reply, Exception):
                self._on_command_error(purpose, reply)
                result.command_errors += 1
                continue
            _store(result, purpose, args, reply)
        return result

    def _on_command_error(self, purpose: str, reply: Exception) -> None:
        if purpose == "info" and self._info_all:
            self._info_all = False  # a server without INFO ALL: INFO plus its sections from now on
            return
        if purpose == "info":
            raise reply
        self._allowed[purpose] = False


def _store(result: ScrapeResult, purpose: str, args: tuple[str, ...], reply: Any) -> None:
    if purpose == "info":
        result.info = _text(reply)
    elif purpose == "info_extra":
        result.extra_info.append(_text(reply))
    elif purpose == "slowlog" and args[1] == "LEN":
        result.slowlog_len = reply if isinstance(reply, int) else None
    elif purpose == "slowlog":
        result.slowlog_last = reply
    elif purpose == "latency":
        result.latency_latest = reply
    elif purpose == "cluster":
        result.cluster_info = _text(reply)
    elif purpose == "heartbeat":
        result.heartbeat_values = [v if isinstance(v, bytes) else None for v in reply] if isinstance(reply, list) else None
    elif purpose == "heartbeat_type":
        result.heartbeat_types[args[1]] = _text(reply)


def _text(reply: Any) -> str:
    if isinstance(reply, bytes):
        return reply.decode("utf-8", errors="replace")
    return reply if isinstance(reply, str) else ""


def _pipeline(conn: Connection, commands: list[tuple[str, ...]], deadline: float) -> list[Any]:
    """Send all commands at once and read every reply by ``deadline``.

    Error replies are returned in place, not raised, except authentication errors.
    """
    conn.send_packed_command(conn.pack_commands(commands), check_health=False)
    replies: list[Any] = []
    for _ in commands:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ScrapeFailure("timeout", "deadline passed while reading replies")
        try:
            replies.append(conn.read_response(timeout=remaining))
        except redis.exceptions.ResponseError as err:
            if classify(err) == "auth" and str(err).startswith(("NOAUTH", "WRONGPASS")):
                raise
            replies.append(err)
    return replies
