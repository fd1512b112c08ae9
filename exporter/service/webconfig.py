"""TLS and basic auth for the exporter's own HTTP side, from a web-config file in the format of the
Prometheus exporter-toolkit (``tls_server_config``, ``basic_auth_users`` with bcrypt hashes)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.common.errors import ConfigError
from exporter.config import load_yaml

CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1, "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    _verified: dict[bytes, bool] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authorized(self, header: str | None) -> bool:
        """Checks an Authorization header; bcrypt results are remembered (as exporter-toolkit does), keyed by a digest."""
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            return False
        key = hashlib.sha256(user.encode() + b"\0" + password.encode() + b"\0" + hashed).digest()
        with self._lock:
            known = self._verified.get(key)
        if known is not None:
            return known
        import bcrypt

        try:
            ok = bcrypt.checkpw(password.encode("utf-8"), hashed)
        except ValueError:
            ok = False
        with self._lock:
            if len(self._verified) > 1024:
                self._verified.clear()
            self._verified[key] = ok
        return ok


def load_web_config(path: str) -> WebConfig:
    raw = load_yaml(path)  # a mapping, or a one-line ConfigError
    allowed = {"tls_server_config", "basic_auth_users", "http_server_config"}
    for key in raw:
        if key not in allowed:
            raise ConfigError(f"web.config.file {key}", f"unknown key (expected one of: {', '.join(sorted(allowed))})")
    config = WebConfig()
    tls = raw.get("tls_server_config")
    if tls:
        config.ssl_context = _ssl_context(tls, Path(path).parent)
    users = raw.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise ConfigError("web.config.file basic_auth_users", "must map user names to bcrypt hashes")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise ConfigError(f"web.config.file basic_auth_users.{user}", "must be a bcrypt hash ($2y$…)")
        config.users[str(user)] = hashed.replace("$2y$", "$2b$", 1).encode()
    return config


def _ssl_context(tls: Any, base: Path) -> ssl.SSLContext:
    if not isinstance(tls, dict):
        raise ConfigError("web.config.file tls_server_config", "must be a mapping")

    def file(key: str, required: bool) -> str | None:
        value = tls.get(key)
        if not value:
            if required:
                raise ConfigError(f"web.config.file tls_server_config.{key}", "is required")
            return None
        path = Path(value) if Path(value).is_absolute() else base / value
        if not path.is_file():
            raise ConfigError(f"web.config.file tls_server_config.{key}", f"cannot read {path}")
        return str(path)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(file("cert_file", True), file("key_file", True))
    except ssl.SSLError as err:
        raise ConfigError("web.config.file tls_server_config.cert_file", f"cannot load the certificate and key: {err.reason}") from err
    auth = tls.get("client_auth_type", "NoClientCert")
    if auth not in CLIENT_AUTH:
        raise ConfigError("web.config.file tls_server_config.client_auth_type", f"must be one of {', '.join(CLIENT_AUTH)}")
    context.verify_mode = CLIENT_AUTH[auth]
    ca = file("client_ca_file", auth in ("RequireAndVerifyClientCert", "VerifyClientCertIfGiven"))
    if ca:
        context.load_verify_locations(cafile=ca)
    version = tls.get("min_version", "TLS12")
    if version not in VERSIONS:
        raise ConfigError("web.config.file tls_server_config.min_version", f"must be one of {', '.join(VERSIONS)}")
    context.minimum_version = VERSIONS[version]
    return context
