"""Passwords that live in AWS: a Secrets Manager secret (``password_secret``), and ElastiCache IAM authentication
(``iam_auth``), whose password is a token signed on each connect. The AWS modules are loaded only when used."""

from __future__ import annotations

import re
from typing import Any

from exporter.common.errors import ConfigError
from exporter.common.secrets import Secret

from .declared import IAM_AUTH
from .readers import as_bool, as_mapping, as_string, check_keys

_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_CACHE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}$")  # a replication group id or a serverless cache name


def secret_password(item: dict[str, Any], key: str) -> Secret | None:
    """``password_secret`` (an ARN or a name) and ``password_secret_key`` (a key of a JSON secret)."""
    if item.get("password_secret") in (None, ""):
        if item.get("password_secret_key") not in (None, ""):
            raise ConfigError(f"{key}.password_secret_key", "goes with password_secret")
        return None
    from exporter.aws.secrets import SecretsManagerPassword

    secret_id = as_string(item["password_secret"], f"{key}.password_secret")
    json_key = item.get("password_secret_key")
    json_key = None if json_key in (None, "") else as_string(json_key, f"{key}.password_secret_key")
    return SecretsManagerPassword(secret_id, json_key=json_key, source=f"{key}.password_secret")


def iam_password(item: dict[str, Any], key: str, username: str | None, tls: bool) -> tuple[Secret, float] | None:
    """A target's ``iam_auth: {cache, region, serverless, max_connection_age}``: the token signer and the age at which
    its connections are renewed. IAM needs a user and TLS: refused without them."""
    raw = item.get("iam_auth")
    if raw is None or raw is False:
        return None
    where = f"{key}.iam_auth"
    settings = as_mapping({"iam_auth": raw}, "iam_auth") if isinstance(raw, dict) else None
    if settings is None:
        raise ConfigError(where, "must be a mapping with cache and region (the replication group id or serverless cache name)")
    check_keys(settings, where, IAM_AUTH.keys())
    from exporter.aws.iam_auth import IamAuth, IamToken

    cache = as_string(settings.get("cache"), f"{where}.cache")
    if not _CACHE.match(cache):
        raise ConfigError(f"{where}.cache", f"not a replication group id or serverless cache name: {cache!r}")
    region = as_string(settings.get("region"), f"{where}.region")
    if not _REGION.match(region):
        raise ConfigError(f"{where}.region", f"not an AWS region such as eu-west-1: {region!r}")
    check_iam_prerequisites(item, key, username, tls)
    age = IAM_AUTH.value(settings, "max_connection_age", where)
    auth = IamAuth(cache=cache, user=username or "", region=region, serverless=IAM_AUTH.value(settings, "serverless", where))
    return IamToken(auth, source=where), age


def discovered_iam(item: dict[str, Any], key: str, username: str | None) -> bool:
    """``aws.discovered.iam_auth: true``: each discovered node signs for its own replication group or serverless cache."""
    if not as_bool(item.get("iam_auth", False), f"{key}.iam_auth"):
        return False
    check_iam_prerequisites(item, key, username, tls=True)  # discovered nodes use TLS where in-transit encryption is on
    return True


def check_iam_prerequisites(item: dict[str, Any], key: str, username: str | None, tls: bool) -> None:
    if not username:
        raise ConfigError(f"{key}.iam_auth", "needs user: the ElastiCache user id created with authentication type iam")
    if not tls:
        raise ConfigError(f"{key}.iam_auth", "needs TLS: ElastiCache accepts IAM authentication only in transit encryption (a rediss:// address)")
    others = [name for name in ("password", "password_file", "password_env", "password_secret") if item.get(name) not in (None, "")]
    if others:
        raise ConfigError(f"{key}.iam_auth", f"replaces the password: remove {', '.join(others)}")
