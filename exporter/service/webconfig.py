"""TLS and basic auth for the exporter's own HTTP side, from a web-config file in the format of the
Prometheus exporter-toolkit (``tls_server_config``, ``basic_auth_users`` with bcrypt hashes)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import re
import secrets
import ssl
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from exporter.common.errors import ConfigError
from exporter.common.records import field, record
from exporter.common.schema import unknown_key_problem
from exporter.common.yamlfile import read_yaml

CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1, "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


HEADERS = ("Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options", "X-XSS-Protection", "Strict-Transport-Security")
TLS_KEYS = {
    "cert",
    "key",
    "client_ca",
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "client_allowed_sans",
    "min_version",
    "max_version",
    "cipher_suites",
    "prefer_server_cipher_suites",
    "curve_preferences",
}
UNSUPPORTED = {
    "tls_server_config.cipher_suites": "Go cipher suite names have no OpenSSL equivalent here; remove it to use the TLS 1.2 defaults",
    "tls_server_config.curve_preferences": "not supported by this exporter; remove it to use OpenSSL's curves",
    "rate_limit": "not supported by this exporter; put a rate limit in front of it",
}
_BCRYPT = re.compile(r"^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$")
log = logging.getLogger(__name__)


HEALTH_PATH = "/-/healthy"


def is_loopback(host: str) -> bool:
    """Whether a peer's address is the host itself (127.0.0.0/8, ::1, or either mapped into IPv6): a connection from
    there comes from inside the machine's, or the container's, own network namespace."""
    import ipaddress

    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


@record
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    # with a client certificate required: the same TLS, the certificate only checked where given, for loopback peers;
    # a loopback connection without one is answered on HEALTH_PATH alone (the container's health check has none)
    loopback_ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(factory=dict)
    headers: list[tuple[str, str]] = field(factory=list)
    allowed_sans: tuple[str, ...] = ()
    _dummy_hash: bytes = b""
    _verified: dict[bytes, bool] = field(factory=dict)
    _lock: threading.Lock = field(factory=threading.Lock)
    _logged: dict[str, float] = field(factory=dict)

    def allows(self, path: str, header: str | None, peer: str) -> bool:
        """Whether a request for ``path`` from ``peer`` is answered. /-/healthy asked from loopback needs no credentials:
        the container's health check (`healthcheck`) has only the bcrypt hashes of the web config, and the answer tells
        nothing but that the exporter answers. Every other path, and every peer beyond loopback, is authorized as
        configured."""
        return (path == HEALTH_PATH and is_loopback(peer)) or self.authorized(header, peer)

    def authorized(self, header: str | None, peer: str = "") -> bool:
        """Checks an Authorization header. An unknown user costs what a wrong password costs (a dummy hash of
        the configured cost is checked), so user names cannot be told apart by timing. Results are remembered
        (as exporter-toolkit does), keyed by a digest of user, password and hash."""
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        known = user in self.users
        hashed = self.users.get(user, self._dummy_hash)
        key = hashlib.sha256(user.encode() + b"\0" + password.encode() + b"\0" + hashed).digest()
        with self._lock:
            remembered = self._verified.get(key)
        if remembered is None:
            import bcrypt

            try:
                remembered = bcrypt.checkpw(password.encode("utf-8"), hashed)
            except ValueError:
                remembered = False
            with self._lock:
                if len(self._verified) > 1024:
                    self._verified.clear()
                self._verified[key] = remembered
        ok = remembered and known
        if not ok:
            self._log_failure(user, peer)
        return ok

    def _log_failure(self, user: str, peer: str) -> None:
        """One line per user name and minute at most; never the password."""
        now = time.monotonic()
        name = user[:64]
        with self._lock:
            if now - self._logged.get(name, -120.0) < 60:
                return
            if len(self._logged) > 256:
                self._logged.clear()
            self._logged[name] = now
        log.warning("basic auth failed for user %r from %s", name, peer or "unknown")

    def peer_allowed(self, sock: ssl.SSLSocket) -> bool:
        """client_allowed_sans: the client certificate must carry one of the listed subject alternative names."""
        if not self.allowed_sans:
            return True
        certificate = sock.getpeercert() or {}
        names = {str(entry[1]) for entry in certificate.get("subjectAltName", ())}
        return bool(names & set(self.allowed_sans))


def load_web_config(path: str) -> WebConfig:
    """The web config file, every key checked: one-line ``ConfigError`` naming the file and the key."""

    def error(key: str, problem: str) -> ConfigError:
        return ConfigError(key, problem, source=path)

    raw = read_yaml(path, lambda message: ConfigError("web.config_file", message))
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise error("(top level)", "must be a mapping")
    _check(raw, "", {"tls_server_config", "basic_auth_users", "http_server_config", "rate_limit"}, error)
    config = WebConfig()
    if raw.get("tls_server_config") is not None:
        _read_tls(raw["tls_server_config"], Path(path).parent, config, error)
    if raw.get("http_server_config") is not None:
        _read_server(raw["http_server_config"], config, error)
    if raw.get("basic_auth_users") is not None:
        _read_users(raw["basic_auth_users"], config, error)
    return config


def _read_tls(tls: Any, base: Path, config: WebConfig, error: Any) -> None:
    if not isinstance(tls, dict):
        raise error("tls_server_config", "must be a mapping")
    _check(tls, "tls_server_config", TLS_KEYS, error)
    config.ssl_context = _ssl_context(tls, base, error)
    if config.ssl_context.verify_mode == ssl.CERT_REQUIRED:
        config.loopback_ssl_context = _ssl_context({**tls, "client_auth_type": "VerifyClientCertIfGiven"}, base, error)
    sans = tls.get("client_allowed_sans") or []
    if not isinstance(sans, list) or not all(isinstance(s, str) and s for s in sans):
        raise error("tls_server_config.client_allowed_sans", "must be a list of names")
    if sans and tls.get("client_auth_type") not in ("RequireAnyClientCert", "RequireAndVerifyClientCert"):
        raise error("tls_server_config.client_allowed_sans", "needs client_auth_type RequireAnyClientCert or RequireAndVerifyClientCert")
    config.allowed_sans = tuple(sans)


def _read_server(server: Any, config: WebConfig, error: Any) -> None:
    if not isinstance(server, dict):
        raise error("http_server_config", "must be a mapping")
    _check(server, "http_server_config", {"http2", "headers"}, error)
    if not isinstance(server.get("http2", True), bool):
        raise error("http_server_config.http2", "must be true or false")
    headers = server.get("headers") or {}
    if not isinstance(headers, dict):
        raise error("http_server_config.headers", "must be a mapping")
    _check(headers, "http_server_config.headers", set(HEADERS), error)
    for name, value in headers.items():
        if not isinstance(value, str) or "\r" in value or "\n" in value:
            raise error(f"http_server_config.headers.{name}", "must be a one-line string")
        if value:
            config.headers.append((name, value))


def _read_users(users: Any, config: WebConfig, error: Any) -> None:
    if not isinstance(users, dict):
        raise error("basic_auth_users", "must map user names to bcrypt hashes")
    costs = []
    for user, hashed in users.items():
        match = _BCRYPT.match(hashed) if isinstance(hashed, str) else None
        if match is None:
            raise error(f"basic_auth_users.{user}", "must be a bcrypt hash such as $2y$10$… (htpasswd -nBC 10 \"\" | tr -d ':\\n'), not a password")
        if not 4 <= int(match.group(1)) <= 31:
            raise error(f"basic_auth_users.{user}", "the bcrypt cost must be between 04 and 31")
        costs.append(int(match.group(1)))
        config.users[str(user)] = hashed.replace("$2y$", "$2b$", 1).encode()
    if costs:
        import bcrypt

        config._dummy_hash = bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(max(costs)))


def _check(mapping: dict[str, Any], key: str, allowed: set[str], error: Any) -> None:
    for name in mapping:
        where = f"{key}.{name}" if key else str(name)
        if where in UNSUPPORTED:
            raise error(where, UNSUPPORTED[where])
        if name not in allowed:
            raise error(where, unknown_key_problem(str(name), allowed))


def _ssl_context(tls: dict[str, Any], base: Path, error: Any) -> ssl.SSLContext:
    """The server's TLS context. Inline PEM text (``cert``, ``key``, ``client_ca``) is written for OpenSSL to read into a
    private directory (mode 0700) that is removed before this returns, whatever fails: a key never stays on disk."""
    with tempfile.TemporaryDirectory(prefix="ecx-web-") as private:  # made with mode 0700
        return _load_context(tls, base, Path(private), error)


def _pem_file(tls: dict[str, Any], key: str, inline: str, base: Path, private: Path, error: Any) -> str | None:
    """The file ``key`` names, or the inline text ``inline`` written to ``private``; None when neither is given."""
    value, text = tls.get(key), tls.get(inline)
    if value and text:
        raise error(f"tls_server_config.{inline}", f"give {key} or {inline}, not both")
    if text:
        if not isinstance(text, str):
            raise error(f"tls_server_config.{inline}", "must be PEM text")
        path = private / f"{inline}.pem"
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(text)
        return str(path)
    if not value:
        return None
    if not isinstance(value, str):
        raise error(f"tls_server_config.{key}", "must be a file name")
    path = Path(value) if Path(value).is_absolute() else base / value
    if not path.is_file() or not os.access(path, os.R_OK):
        raise error(f"tls_server_config.{key}", f"cannot read {path}")
    return str(path)


def _client_verification(context: ssl.SSLContext, tls: dict[str, Any], base: Path, private: Path, error: Any) -> None:
    """client_auth_type and the CA the client certificates are checked against."""
    auth = tls.get("client_auth_type", "NoClientCert")
    if auth not in CLIENT_AUTH:
        raise error("tls_server_config.client_auth_type", f"must be one of {', '.join(CLIENT_AUTH)}, got {auth!r}")
    context.verify_mode = CLIENT_AUTH[auth]
    ca = _pem_file(tls, "client_ca_file", "client_ca", base, private, error)
    if ca is None and auth in ("RequireAndVerifyClientCert", "VerifyClientCertIfGiven", "RequireAnyClientCert"):
        raise error("tls_server_config.client_ca_file", f"is required with client_auth_type {auth}")
    if ca:
        try:
            context.load_verify_locations(cafile=ca)
        except ssl.SSLError as err:
            raise error("tls_server_config.client_ca_file", f"cannot load the CA: {err.reason}") from err
    if auth == "RequestClientCert" and not ca:
        context.verify_mode = ssl.CERT_NONE  # asked for, never checked: without a CA there is nothing to check against


def _load_context(tls: dict[str, Any], base: Path, private: Path, error: Any) -> ssl.SSLContext:
    cert = _pem_file(tls, "cert_file", "cert", base, private, error)
    key = _pem_file(tls, "key_file", "key", base, private, error)
    if cert is None or key is None:
        raise error("tls_server_config.cert_file", "cert_file and key_file (or cert and key) are required")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except OSError as err:  # ssl.SSLError for PEM that does not parse or match; a plain OSError for a file it cannot open
        reason = getattr(err, "reason", None) or err.strerror or type(err).__name__
        raise error("tls_server_config.cert_file", f"cannot load the certificate and key: {reason}") from err
    _client_verification(context, tls, base, private, error)
    for name, default, attribute in (("min_version", "TLS12", "minimum_version"), ("max_version", "TLS13", "maximum_version")):
        version = tls.get(name, default)
        if version not in VERSIONS:
            raise error(f"tls_server_config.{name}", f"must be one of {', '.join(VERSIONS)}, got {version!r}")
        setattr(context, attribute, VERSIONS[version])
    if context.minimum_version > context.maximum_version:
        raise error("tls_server_config.max_version", "is below min_version")
    prefer = tls.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise error("tls_server_config.prefer_server_cipher_suites", "must be true or false")
    if prefer:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    return context
