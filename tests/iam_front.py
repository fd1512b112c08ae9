"""A TLS RESP front that authenticates as ElastiCache's IAM authentication does, in front of a real redis-server.

``AUTH <user> <token>`` is accepted only when the token verifies: its SigV4 query signature is recomputed here, from
the token's own date and the test credentials, by AWS's documented algorithm (written out below, not botocore's),
and the host (the cache), action, user, resource type, expiry, region and service are checked. Until then every
command is refused with NOAUTH; after it, commands go to the redis-server behind. Connections are cut at
``max_age`` seconds, as ElastiCache cuts IAM-authenticated ones at 12 hours.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import hmac
import socket
import ssl
import threading
from urllib.parse import parse_qsl, quote

from fake_resp import LoopbackServer

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"


class TokenRejected(Exception):
    pass


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def verify_token(
    token: str, *, user: str, cache: str, region: str, access_key: str, secret_key: str, serverless: bool, now: datetime.datetime
) -> None:
    """Raises :class:`TokenRejected` naming what is wrong; returns when the token is ElastiCache's for these."""
    host, sep, query = token.partition("/?")
    if not sep:
        raise TokenRejected("not <cache>/?<query>")
    if token.startswith("http"):
        raise TokenRejected("the http:// prefix is sent")
    if host != cache:
        raise TokenRejected(f"signed for cache {host!r}")
    pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    params = dict(pairs)
    if len(params) != len(pairs):
        raise TokenRejected("a repeated parameter")
    _check_request(params, user, serverless)
    date, stamp = _check_credential(params, access_key, region, now)
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(pairs) if k != "X-Amz-Signature")
    canonical_request = "\n".join(["GET", "/", canonical_query, f"host:{host}", "", "host", EMPTY_SHA256])
    scope = f"{date}/{region}/elasticache/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret_key).encode(), date), region), "elasticache"), "aws4_request")
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, params.get("X-Amz-Signature", "")):
        raise TokenRejected("bad signature")


def _check_request(params: dict[str, str], user: str, serverless: bool) -> None:
    """What is asked: a connect of this user to this kind of cache, presigned with SigV4 over the host header."""
    if params.get("Action") != "connect":
        raise TokenRejected("Action is not connect")
    if params.get("User") != user:
        raise TokenRejected(f"signed for user {params.get('User')!r}")
    if (params.get("ResourceType") == "ServerlessCache") != serverless:
        raise TokenRejected("ResourceType does not match the cache")
    if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or params.get("X-Amz-SignedHeaders") != "host":
        raise TokenRejected("not a SigV4 presign of the host header")


def _check_credential(params: dict[str, str], access_key: str, region: str, now: datetime.datetime) -> tuple[str, str]:
    """Whose key signed, for which region and service, and when: (the scope's date, the signature's time stamp)."""
    key_id, date, scope_region, service, terminator = (params.get("X-Amz-Credential", "") + "////").split("/")[:5]
    if key_id != access_key or terminator != "aws4_request":
        raise TokenRejected("unknown credential")
    if scope_region != region or service != "elasticache":
        raise TokenRejected(f"signed for {service} in {scope_region}")
    stamp = params.get("X-Amz-Date", "")
    signed_at = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    if stamp[:8] != date:
        raise TokenRejected("the credential's date is not the signature's")
    if params.get("X-Amz-Expires") != "900":
        raise TokenRejected(f"expiry {params.get('X-Amz-Expires')} s, not 900")
    if not signed_at - datetime.timedelta(minutes=5) <= now <= signed_at + datetime.timedelta(seconds=900):
        raise TokenRejected("expired")
    return date, stamp


def _read_line(reader) -> bytes:
    line = reader.readline()
    if not line:
        raise EOFError
    return line


def read_command(reader) -> tuple[bytes, list[bytes]]:
    line = _read_line(reader)
    if not line.startswith(b"*"):
        raise EOFError
    raw, parts = [line], []
    for _ in range(int(line[1:])):
        header = _read_line(reader)
        body = reader.read(int(header[1:]) + 2)
        raw += [header, body]
        parts.append(body[:-2])
    return b"".join(raw), parts


def read_reply(reader) -> bytes:
    line = _read_line(reader)
    if line[:1] == b"$":
        length = int(line[1:])
        return line + (reader.read(length + 2) if length >= 0 else b"")
    if line[:1] == b"*":
        return line + b"".join(read_reply(reader) for _ in range(max(int(line[1:]), 0)))
    return line


class IamFront(LoopbackServer):
    def __init__(
        self,
        upstream_port: int,
        certificates: dict[str, str],
        *,
        user: str,
        cache: str,
        region: str,
        access_key: str,
        secret_key: str,
        serverless: bool = False,
        max_age: float | None = None,
        clock_skew: float = 0.0,
    ) -> None:
        self.upstream_port = upstream_port
        self.expect = {"user": user, "cache": cache, "region": region, "access_key": access_key, "secret_key": secret_key, "serverless": serverless}
        self.max_age = max_age
        self.clock_skew = clock_skew  # seconds added to the front's clock: a token of now is old to it
        self.accepted = 0
        self.rejected: list[str] = []
        self.cut = 0
        self.tokens: list[str] = []
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(certificates["server_cert"], certificates["server_key"])
        super().__init__()

    @property
    def addr(self) -> str:
        return f"rediss://127.0.0.1:{self.port}"

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            tls = self._context.wrap_socket(conn, server_side=True)
        except (OSError, ssl.SSLError):
            conn.close()
            return
        if self.max_age is not None:
            timer = threading.Timer(self.max_age, self._cut, args=(tls,))
            timer.daemon = True
            timer.start()
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
        reader, upstream_reader = tls.makefile("rb"), upstream.makefile("rb")
        authenticated = False
        try:
            while self._running():
                raw, parts = read_command(reader)
                name = parts[0].upper() if parts else b""
                if name == b"AUTH":
                    reply, ok = self._auth(parts)
                    tls.sendall(reply)
                    authenticated = authenticated or ok
                elif not authenticated:
                    tls.sendall(b"-NOAUTH Authentication required.\r\n")
                else:
                    upstream.sendall(raw)
                    tls.sendall(read_reply(upstream_reader))
        except (OSError, EOFError, ValueError, ssl.SSLError):
            pass
        finally:
            for sock in (tls, upstream):
                with contextlib.suppress(OSError):
                    sock.close()

    def _auth(self, parts: list[bytes]) -> tuple[bytes, bool]:
        if len(parts) != 3:
            self.rejected.append("AUTH without a user")
            return WRONGPASS, False
        user, token = parts[1].decode(), parts[2].decode()
        self.tokens.append(token)
        now = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=self.clock_skew)
        try:
            if user != self.expect["user"]:
                raise TokenRejected(f"AUTH as {user!r}")
            verify_token(token, now=now, **self.expect)
        except (TokenRejected, ValueError) as err:
            self.rejected.append(str(err))
            return WRONGPASS, False
        self.accepted += 1
        return b"+OK\r\n", True

    def _cut(self, tls: ssl.SSLSocket) -> None:
        self.cut += 1
        with contextlib.suppress(OSError):
            tls.shutdown(socket.SHUT_RDWR)
