"""Redis targets, credentials, TLS, the /scrape allow-list and heartbeats."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exporter.common.errors import ConfigError
from exporter.common.labels import static_label_problem
from exporter.common.records import replace
from exporter.common.secrets import Secret
from exporter.redis.addresses import AddressError, Endpoint, HostPattern
from exporter.redis.clients import ClientsConfig
from exporter.redis.settings import AllowRule, Credentials, HeartbeatConfig, TargetConfig, TlsOptions

from .auth_section import iam_password, secret_password
from .declared import ALLOW_RULE, CLIENTS, CREDENTIALS, HEARTBEAT, TARGET
from .keys_section import key_probes_config
from .readers import as_string, check_keys


def heartbeat_config(raw: dict[str, Any]) -> HeartbeatConfig:
    config = HeartbeatConfig(**HEARTBEAT.fields(raw, "heartbeat"))
    if config.ttl <= config.interval:
        raise ConfigError("heartbeat.ttl", f"must be longer than heartbeat.interval ({config.interval:g}s)")
    return config


def clients_config(raw: dict[str, Any]) -> ClientsConfig:
    """``clients``: CLIENT LIST of every configured target, read in the background every ``interval``."""
    fields = CLIENTS.fields(raw, "clients")
    fields["enabled"] = fields["enabled"] or fields["per_connection"]  # per-connection series need the list
    return ClientsConfig(**fields)


def target_config(item: Any, key: str, timeout: float, environ: Mapping[str, str], default_name: bool = False) -> TargetConfig:
    if isinstance(item, str):
        item = {"addr": item}
    if not isinstance(item, dict):
        raise ConfigError(key, "must be an address or a mapping with 'addr'")
    check_keys(item, key, TARGET.keys())
    if item.get("addr") is None:
        raise ConfigError(f"{key}.addr", "must be a string, got NoneType")
    parsed = TARGET.value(item, "addr", key)
    endpoint = parsed.endpoint
    user = CREDENTIALS.value(item, "user", key)
    if user is not None:
        endpoint = Endpoint(endpoint.host, endpoint.port, endpoint.tls, endpoint.db, user)
    password = None
    if parsed.password is not None:
        password = Secret(value=parsed.password, source=f"{key}.addr")
    credentials = credentials_config(item, key, timeout, environ, password, endpoint.username)
    iam = iam_password(item, key, credentials.username, endpoint.tls)
    if iam is not None:
        credentials = replace(credentials, password=iam[0], max_connection_age=iam[1])
    name = TARGET.value(item, "name", key)
    if name is None:
        name = endpoint.host_port
    if not name or not name.isprintable():
        raise ConfigError(f"{key}.name", "must be a non-empty printable string")
    group, shard = TARGET.value(item, "replication_group", key) or "", TARGET.value(item, "shard", key) or ""
    if shard and not group:
        raise ConfigError(f"{key}.shard", "needs replication_group beside it (a shard is named within its group)")
    keys = key_probes_config(item["keys"], f"{key}.keys") if item.get("keys") is not None else None
    node_type = TARGET.value(item, "node_type", key) or ""
    discover = TARGET.value(item, "discover", key) or ""
    labels = static_labels_config(item.get("labels"), f"{key}.labels")
    return TargetConfig(name, endpoint, credentials, node_type, replication_group=group, shard=shard, keys=keys, discover=discover, labels=labels)


def static_labels_config(raw: Any, key: str) -> tuple[tuple[str, str], ...]:
    """``labels``: a mapping of label name to value, added to every series of the target's instance (as Prometheus'
    relabelling adds a target's labels to its scrape); names the exporter's own series carry are refused. In name order."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ConfigError(key, "must be a mapping of label name to value, such as {team: payments}")
    labels = {}
    for name, value in raw.items():
        problem = static_label_problem(name) if isinstance(name, str) else f"{name!r} is not a label name"
        if problem is not None:
            raise ConfigError(f"{key}.{name}", problem)
        if value is None or value == "":
            raise ConfigError(f"{key}.{name}", "must be a non-empty string (an empty label is no label to Prometheus)")
        labels[name] = as_string(value, f"{key}.{name}")
    return tuple(sorted(labels.items()))


def allow_rule(item: Any, key: str, timeout: float, environ: Mapping[str, str]) -> AllowRule:
    if not isinstance(item, dict):
        raise ConfigError(key, "must be a mapping with 'hosts'")
    check_keys(item, key, ALLOW_RULE.keys())
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
    credentials = credentials_config(item, key, timeout, environ, None, CREDENTIALS.value(item, "user", key))
    return AllowRule(hosts=tuple(hosts), credentials=credentials)


def credentials_config(
    item: dict[str, Any], key: str, timeout: float, environ: Mapping[str, str], password: Secret | None, username: str | None
) -> Credentials:
    text = CREDENTIALS.value(item, "password", key)
    if text is not None:
        password = Secret(value=text, source=f"{key}.password")
    password_file = CREDENTIALS.value(item, "password_file", key)
    if password_file is not None:
        password = Secret(file=password_file, source=f"{key}.password_file")
    variable = CREDENTIALS.value(item, "password_env", key)
    if variable is not None:
        if variable not in environ:
            raise ConfigError(f"{key}.password_env", f"environment variable {variable} is not set")
        password = Secret(value=environ[variable], source=f"{key}.password_env")
    password = secret_password(item, key) or password
    tls = TlsOptions(**CREDENTIALS.fields(item, key, check=False))
    if (tls.cert_file is None) != (tls.key_file is None):
        raise ConfigError(f"{key}.tls_cert_file", "tls_cert_file and tls_key_file go together")
    target_timeout = CREDENTIALS.value(item, "timeout", key) if "timeout" in item else timeout
    user = CREDENTIALS.value(item, "user", key) if "user" in item else username
    return Credentials(
        username=user or None,
        password=password,
        tls=tls,
        timeout=target_timeout,
        own_timeout="timeout" in item,
    )
