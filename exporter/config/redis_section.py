"""Redis targets, credentials, TLS, the /scrape allow-list and heartbeats."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from exporter.common.errors import ConfigError
from exporter.common.records import replace
from exporter.common.secrets import Secret
from exporter.redis.addresses import AddressError, Endpoint, HostPattern, parse_address
from exporter.redis.clients import ClientsConfig
from exporter.redis.keyspace import KeyspaceConfig
from exporter.redis.settings import AllowRule, Credentials, HeartbeatConfig, TargetConfig, TlsOptions

from .auth_section import iam_password, secret_password
from .keys_section import key_probes_config
from .readers import as_bool, as_duration, as_int, as_size, as_string, check_keys, readable_path


def heartbeat_config(raw: dict[str, Any]) -> HeartbeatConfig:
    check_keys(raw, "heartbeat", {"read", "write", "key", "interval", "ttl"})
    defaults = HeartbeatConfig()
    key = as_string(raw.get("key", defaults.key), "heartbeat.key")
    if not key or len(key) > 512 or not key.isprintable() or " " in key:
        raise ConfigError("heartbeat.key", "must be a non-empty printable key name without spaces")
    interval = as_duration(raw.get("interval", defaults.interval), "heartbeat.interval")
    ttl = as_duration(raw.get("ttl", defaults.ttl), "heartbeat.ttl")
    if ttl <= interval:
        raise ConfigError("heartbeat.ttl", f"must be longer than heartbeat.interval ({interval:g}s)")
    return HeartbeatConfig(
        read=as_bool(raw.get("read", defaults.read), "heartbeat.read"),
        write=as_bool(raw.get("write", defaults.write), "heartbeat.write"),
        key=key,
        interval=interval,
        ttl=ttl,
    )


def clients_config(raw: dict[str, Any]) -> ClientsConfig:
    """``clients``: CLIENT LIST of every configured target, read in the background every ``interval``."""
    check_keys(raw, "clients", {"enabled", "interval", "top", "per_connection", "include_port", "max_connections", "max_reply_size"})
    defaults = ClientsConfig()
    interval = as_duration(raw.get("interval", defaults.interval), "clients.interval")
    if interval < 5:
        raise ConfigError("clients.interval", "must be at least 5s: CLIENT LIST walks every connection of the node")
    per_connection = as_bool(raw.get("per_connection", defaults.per_connection), "clients.per_connection")
    return ClientsConfig(enabled=as_bool(raw.get("enabled", defaults.enabled), "clients.enabled") or per_connection, interval=interval,
                         top=as_int(raw.get("top", defaults.top), "clients.top", 1, 1000), per_connection=per_connection,
                         include_port=as_bool(raw.get("include_port", defaults.include_port), "clients.include_port"),
                         max_connections=as_int(raw.get("max_connections", defaults.max_connections), "clients.max_connections",
                                                1, 1_000_000),
                         max_reply_bytes=as_size(raw.get("max_reply_size", defaults.max_reply_bytes), "clients.max_reply_size",
                                                 64 * 1024, 1024 * 1024 * 1024))  # fmt: skip


def keyspace_config(raw: dict[str, Any]) -> KeyspaceConfig:
    """``keyspace``: a sample of every configured target's keys, read in the background every ``interval``."""
    check_keys(raw, "keyspace", {"enabled", "interval", "sample", "delimiters", "depth", "top"})
    defaults = KeyspaceConfig()
    interval = as_duration(raw.get("interval", defaults.interval), "keyspace.interval")
    if interval < 10:
        raise ConfigError("keyspace.interval", "must be at least 10s")
    delimiters = as_string(raw.get("delimiters", defaults.delimiters), "keyspace.delimiters")
    if not delimiters or not delimiters.isprintable():
        raise ConfigError("keyspace.delimiters", "must be one or more printable characters, such as ':' or ':/'")
    return KeyspaceConfig(enabled=as_bool(raw.get("enabled", defaults.enabled), "keyspace.enabled"), interval=interval,
                          sample=as_int(raw.get("sample", defaults.sample), "keyspace.sample", 100, 100_000), delimiters=delimiters,
                          depth=as_int(raw.get("depth", defaults.depth), "keyspace.depth", 1, 10),
                          top=as_int(raw.get("top", defaults.top), "keyspace.top", 1, 1000))  # fmt: skip


_TLS_KEYS = {"tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name", "tls_insecure_skip_verify"}
CREDENTIAL_KEYS = {"user", "password", "password_file", "password_env", "password_secret", "password_secret_key", "timeout", *_TLS_KEYS}
_NODE_TYPE = re.compile(r"^(cache\.)?[a-z][a-z0-9-]*\.[a-z0-9]+$")


def target_config(item: Any, key: str, timeout: float, environ: Mapping[str, str], default_name: bool = False) -> TargetConfig:
    if isinstance(item, str):
        item = {"addr": item}
    if not isinstance(item, dict):
        raise ConfigError(key, "must be an address or a mapping with 'addr'")
    check_keys(item, key, {"name", "addr", "node_type", "replication_group", "shard", "keys", "iam_auth", *CREDENTIAL_KEYS})
    node_type = as_string(item.get("node_type") or "", f"{key}.node_type")
    if node_type and not _NODE_TYPE.match(node_type):
        raise ConfigError(f"{key}.node_type", f"not a node type such as cache.r6g.large: {node_type!r}")
    if node_type and not node_type.startswith("cache."):
        node_type = "cache." + node_type
    addr = as_string(item.get("addr"), f"{key}.addr")
    try:
        parsed = parse_address(addr)
    except AddressError as err:
        raise ConfigError(f"{key}.addr", str(err)) from err
    endpoint = parsed.endpoint
    user = item.get("user")
    if user is not None:
        endpoint = Endpoint(endpoint.host, endpoint.port, endpoint.tls, endpoint.db, as_string(user, f"{key}.user"))
    password = None
    if parsed.password is not None:
        password = Secret(value=parsed.password, source=f"{key}.addr")
    credentials = credentials_config(item, key, timeout, environ, password, endpoint.username)
    iam = iam_password(item, key, credentials.username, endpoint.tls)
    if iam is not None:
        credentials = replace(credentials, password=iam[0], max_connection_age=iam[1])
    name = item.get("name")
    if name is None:
        name = endpoint.host_port
    name = as_string(name, f"{key}.name")
    if not name or not name.isprintable():
        raise ConfigError(f"{key}.name", "must be a non-empty printable string")
    membership = {}
    for field in ("replication_group", "shard"):
        value = as_string(item.get(field) or "", f"{key}.{field}")
        if value and not value.isprintable():
            raise ConfigError(f"{key}.{field}", "must be a printable string")
        membership[field] = value
    if membership["shard"] and not membership["replication_group"]:
        raise ConfigError(f"{key}.shard", "needs replication_group beside it (a shard is named within its group)")
    keys = key_probes_config(item["keys"], f"{key}.keys") if item.get("keys") is not None else None
    return TargetConfig(name=name, endpoint=endpoint, credentials=credentials, node_type=node_type, keys=keys, **membership)


def allow_rule(item: Any, key: str, timeout: float, environ: Mapping[str, str]) -> AllowRule:
    if not isinstance(item, dict):
        raise ConfigError(key, "must be a mapping with 'hosts'")
    check_keys(item, key, {"hosts", *CREDENTIAL_KEYS})
    hosts_raw = item.get("hosts")
    if isinstance(hosts_raw, str):
        hosts_raw = [hosts_raw]
    if not isinstance(hosts_raw, list) or not hosts_raw:
        raise ConfigError(f"{key}.hosts", "must be a non-empty list of host globs or networks")
    hosts = []
    for i, text in enumerate(hosts_raw):
        try:
            hosts.append(HostPattern.parse(as_string(text, f"{key}.hosts[{i}]")))
        except AddressError as err:
            raise ConfigError(f"{key}.hosts[{i}]", str(err)) from err
    user = item.get("user")
    credentials = credentials_config(item, key, timeout, environ, None, None if user is None else as_string(user, f"{key}.user"))
    return AllowRule(hosts=tuple(hosts), credentials=credentials)


def credentials_config(
    item: dict[str, Any], key: str, timeout: float, environ: Mapping[str, str], password: Secret | None, username: str | None
) -> Credentials:
    if item.get("password") not in (None, ""):
        password = Secret(value=as_string(item["password"], f"{key}.password"), source=f"{key}.password")
    if item.get("password_file") not in (None, ""):
        path = as_string(item["password_file"], f"{key}.password_file")
        if not os.access(path, os.R_OK):
            raise ConfigError(f"{key}.password_file", f"cannot read {path}")
        password = Secret(file=path, source=f"{key}.password_file")
    if item.get("password_env") not in (None, ""):
        var = as_string(item["password_env"], f"{key}.password_env")
        if var not in environ:
            raise ConfigError(f"{key}.password_env", f"environment variable {var} is not set")
        password = Secret(value=environ[var], source=f"{key}.password_env")
    password = secret_password(item, key) or password
    tls = TlsOptions(
        ca_file=readable_path(item.get("tls_ca_file"), f"{key}.tls_ca_file"),
        cert_file=readable_path(item.get("tls_cert_file"), f"{key}.tls_cert_file"),
        key_file=readable_path(item.get("tls_key_file"), f"{key}.tls_key_file"),
        server_name=None if item.get("tls_server_name") in (None, "") else as_string(item["tls_server_name"], f"{key}.tls_server_name"),
        insecure_skip_verify=as_bool(item.get("tls_insecure_skip_verify", False), f"{key}.tls_insecure_skip_verify"),
    )
    if (tls.cert_file is None) != (tls.key_file is None):
        raise ConfigError(f"{key}.tls_cert_file", "tls_cert_file and tls_key_file go together")
    target_timeout = as_duration(item["timeout"], f"{key}.timeout") if "timeout" in item else timeout
    user = item.get("user", username)
    return Credentials(
        username=None if user in (None, "") else as_string(user, f"{key}.user"),
        password=password,
        tls=tls,
        timeout=target_timeout,
    )
