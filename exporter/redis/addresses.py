"""Redis addresses: parsing, display without secrets, and the /scrape allow-list."""

from __future__ import annotations

import fnmatch
import re
import socket
from typing import TYPE_CHECKING

from exporter.common.records import record
from exporter.common.urltext import unquote

if TYPE_CHECKING:
    import ipaddress

DEFAULT_PORT = 6379
PLAIN_SCHEMES = {"redis": False, "valkey": False, "rediss": True, "valkeys": True}
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?$")


class AddressError(ValueError):
    """An address that is not a Redis endpoint this exporter will connect to."""


@record(frozen=True)
class Endpoint:
    host: str
    port: int
    tls: bool
    db: int = 0
    username: str | None = None

    @property
    def host_port(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def display(self) -> str:
        """The address as it may be shown in labels, logs and pages: never a password."""
        scheme = "rediss" if self.tls else "redis"
        user = f"{self.username}@" if self.username else ""
        db = f"/{self.db}" if self.db else ""
        return f"{scheme}://{user}{self.host_port}{db}"


@record(frozen=True)
class ParsedAddress:
    endpoint: Endpoint
    password: str | None  # only from a URI's userinfo; callers move it into a secret


def parse_address(text: str, *, allow_userinfo: bool = True) -> ParsedAddress:
    """Parse ``redis://[user[:password]@]host[:port][/db]``, ``rediss://…`` or ``host[:port]``."""
    text = text.strip()
    if not text:
        raise AddressError("empty address")
    if any(ord(ch) < 33 or ord(ch) == 127 for ch in text):
        raise AddressError("address contains spaces or control characters")
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "redis", text
    scheme = scheme.lower()
    if scheme not in PLAIN_SCHEMES:
        raise AddressError(f"unsupported scheme {scheme!r} (use redis:// or rediss://)")
    tls = PLAIN_SCHEMES[scheme]
    for bad in ("?", "#", "\\"):
        if bad in rest:
            raise AddressError(f"unexpected {bad!r} in address")
    authority, _, path = rest.partition("/")
    username = password = None
    if "@" in authority:
        if not allow_userinfo:
            raise AddressError("credentials in the address are not accepted here")
        userinfo, _, authority = authority.rpartition("@")
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    host, port = _split_host_port(authority)
    db = 0
    if path:
        if not (path.isascii() and path.isdigit()) or len(path) > 5:
            raise AddressError(f"database must be a number, got {path!r}")
        db = int(path)
    return ParsedAddress(Endpoint(host=host, port=port, tls=tls, db=db, username=username), password)


def _split_host_port(authority: str) -> tuple[str, int]:
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise AddressError("unclosed '[' in IPv6 address")
        host, rest = authority[1:end], authority[end + 1 :]
        try:
            socket.inet_pton(socket.AF_INET6, host)
        except (OSError, ValueError) as err:
            raise AddressError(f"invalid IPv6 address {host!r}") from err
        if rest and not rest.startswith(":"):
            raise AddressError("unexpected text after IPv6 address")
        port_text = rest[1:] if rest else ""
    elif authority.count(":") > 1:
        raise AddressError("IPv6 addresses must be written in brackets, as [::1]:6379")
    else:
        host, _, port_text = authority.partition(":")
        if not host:
            raise AddressError("missing host")
        if not _HOSTNAME.match(host):
            raise AddressError(f"invalid host name {host!r}")
        host = host.rstrip(".").lower()
    if port_text == "":
        return host, DEFAULT_PORT
    if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
        raise AddressError(f"invalid port {port_text!r}")
    return host, int(port_text)


@record(frozen=True)
class HostPattern:
    """A host glob (``*.cache.amazonaws.com``) or a network (``10.0.0.0/8``)."""

    text: str
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        import ipaddress  # only where scrape.allow names hosts: a plain exporter does without it

        text = text.strip()
        if not text:
            raise AddressError("empty host pattern")
        if "/" in text:
            try:
                return cls(text, ipaddress.ip_network(text, strict=False))
            except ValueError as err:
                raise AddressError(f"invalid network {text!r}") from err
        try:
            address = ipaddress.ip_address(text.strip("[]"))
        except ValueError:
            return cls(text.lower(), None)
        return cls(text, ipaddress.ip_network(address))

    def matches(self, host: str) -> bool:
        import ipaddress

        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            address = None
        if self.network is not None:
            return address is not None and address.version == self.network.version and address in self.network
        if address is not None:
            return False  # a glob names hosts; addresses are allowed only by networks
        return fnmatch.fnmatchcase(host.lower(), self.text)


def ip_literal(host: str) -> None:
    """Raises ValueError unless ``host`` is an IPv4 or IPv6 address as written (no name lookup)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return
        except (OSError, ValueError):
            continue
    raise ValueError(f"not an IP address: {host!r}")
