"""redis_exporter's environment variables that have no equivalent here, each with the flag redis_exporter reads it
for. Those with an equivalent are declared with their setting (``upstream_env`` in ``declared.py``) and honoured; one
of these set to a value stops the start, naming it, rather than being ignored. Only redis_exporter's own names are
refused: Kubernetes gives a pod ``REDIS_EXPORTER_SERVICE_HOST`` and the like for a Service named redis-exporter."""

from __future__ import annotations

from collections.abc import Mapping

from exporter.common.errors import UsageError

# from redis_exporter's main.go: its variable and the flag it sets
NO_EQUIVALENT = {
    # a JSON map of address to password there (LoadPwdFile); here a password file holds one password, so reading the map
    # as one would fail every AUTH without a word: give each target its password_file instead
    "REDIS_PASSWORD_FILE": "redis.password-file",
    "REDIS_EXPORTER_NAMESPACE": "namespace",
    "REDIS_EXPORTER_CHECK_KEY_GROUPS": "check-key-groups",
    "REDIS_EXPORTER_STREAMS_EXCLUDE_CONSUMER_METRICS": "streams-exclude-consumer-metrics",
    "REDIS_EXPORTER_SCRIPT": "script",
    "REDIS_EXPORTER_LUA_SCRIPT_READ_ONLY": "lua-script-read-only",
    "REDIS_EXPORTER_CONFIG_COMMAND": "config-command",
    "REDIS_EXPORTER_TLS_SERVER_KEY_FILE": "tls-server-key-file",
    "REDIS_EXPORTER_TLS_SERVER_CERT_FILE": "tls-server-cert-file",
    "REDIS_EXPORTER_TLS_SERVER_CA_CERT_FILE": "tls-server-ca-cert-file",
    "REDIS_EXPORTER_TLS_SERVER_MIN_VERSION": "tls-server-min-version",
    "REDIS_EXPORTER_MAX_DISTINCT_KEY_GROUPS": "max-distinct-key-groups",
    "REDIS_EXPORTER_DEBUG": "debug",
    "REDIS_EXPORTER_SET_CLIENT_NAME": "set-client-name",
    "REDIS_EXPORTER_IS_TILE38": "is-tile38",
    "REDIS_EXPORTER_IS_CLUSTER": "is-cluster",
    "REDIS_EXPORTER_CLUSTER_DISCOVER_HOSTNAMES": "cluster-discover-hostnames",
    "REDIS_EXPORTER_REDIS_ONLY_METRICS": "redis-only-metrics",
    "REDIS_EXPORTER_INCLUDE_GO_RUNTIME_METRICS": "include-go-runtime-metrics",
    "REDIS_EXPORTER_PING_ON_CONNECT": "ping-on-connect",
    "REDIS_EXPORTER_INCL_CONFIG_METRICS": "include-config-metrics",
    "REDIS_EXPORTER_INCL_MODULES_METRICS": "include-modules-metrics",
    "REDIS_EXPORTER_INCL_SEARCH_INDEXES_METRICS": "include-search-indexes-metrics",
    "REDIS_EXPORTER_INCL_SENTINEL_PEER_INFO": "include-sentinel-peer-info",
    "REDIS_EXPORTER_CHECK_SEARCH_INDEXES": "check-search-indexes",
    "REDIS_EXPORTER_DISABLE_EXPORTING_KEY_VALUES": "disable-exporting-key-values",
    "REDIS_EXPORTER_EXCLUDE_LATENCY_HISTOGRAM_METRICS": "exclude-latency-histogram-metrics",
    "REDIS_EXPORTER_REDACT_CONFIG_METRICS": "redact-config-metrics",
    "REDIS_EXPORTER_INCL_SYSTEM_METRICS": "include-system-metrics",
    "REDIS_EXPORTER_INCL_RDB_FILE_SIZE_METRIC": "include-rdb-file-size-metric",
    "REDIS_EXPORTER_SKIP_CHECKKEYS_FOR_ROLE_MASTER": "skip-checkkeys-for-role-master",
    "REDIS_EXPORTER_BASIC_AUTH_USERNAME": "basic-auth-username",
    "REDIS_EXPORTER_BASIC_AUTH_PASSWORD": "basic-auth-password",
    "REDIS_EXPORTER_BASIC_AUTH_HASH_PASSWORD": "basic-auth-hash-password",
    "REDIS_EXPORTER_DISABLE_SCRAPE_ENDPOINT": "disable-scrape-endpoint",
    "REDIS_EXPORTER_INCL_METRICS_FOR_EMPTY_DATABASES": "include-metrics-for-empty-databases",
    "REDIS_EXPORTER_APPEND_INSTANCE_ROLE_LABEL": "append-instance-role-label",
}


# redis_exporter's default of each (main.go): a variable set to it asks for nothing this exporter lacks, as migrated
# charts set them (REDIS_EXPORTER_DEBUG=false, REDIS_EXPORTER_NAMESPACE=redis); a boolean as Go's strconv.ParseBool reads it
DEFAULTS = {
    "REDIS_EXPORTER_NAMESPACE": "redis",
    "REDIS_EXPORTER_CONFIG_COMMAND": "CONFIG",
    "REDIS_EXPORTER_TLS_SERVER_MIN_VERSION": "TLS1.2",
    "REDIS_EXPORTER_MAX_DISTINCT_KEY_GROUPS": "100",
    "REDIS_EXPORTER_CHECK_SEARCH_INDEXES": ".*",
}
TRUE_BY_DEFAULT = frozenset(
    {"REDIS_EXPORTER_SET_CLIENT_NAME", "REDIS_EXPORTER_REDACT_CONFIG_METRICS", "REDIS_EXPORTER_INCL_METRICS_FOR_EMPTY_DATABASES"}
)
BOOLEANS = TRUE_BY_DEFAULT | {
    "REDIS_EXPORTER_STREAMS_EXCLUDE_CONSUMER_METRICS",
    "REDIS_EXPORTER_LUA_SCRIPT_READ_ONLY",
    "REDIS_EXPORTER_DEBUG",
    "REDIS_EXPORTER_IS_TILE38",
    "REDIS_EXPORTER_IS_CLUSTER",
    "REDIS_EXPORTER_CLUSTER_DISCOVER_HOSTNAMES",
    "REDIS_EXPORTER_REDIS_ONLY_METRICS",
    "REDIS_EXPORTER_INCLUDE_GO_RUNTIME_METRICS",
    "REDIS_EXPORTER_PING_ON_CONNECT",
    "REDIS_EXPORTER_INCL_CONFIG_METRICS",
    "REDIS_EXPORTER_INCL_MODULES_METRICS",
    "REDIS_EXPORTER_INCL_SEARCH_INDEXES_METRICS",
    "REDIS_EXPORTER_INCL_SENTINEL_PEER_INFO",
    "REDIS_EXPORTER_DISABLE_EXPORTING_KEY_VALUES",
    "REDIS_EXPORTER_EXCLUDE_LATENCY_HISTOGRAM_METRICS",
    "REDIS_EXPORTER_INCL_SYSTEM_METRICS",
    "REDIS_EXPORTER_INCL_RDB_FILE_SIZE_METRIC",
    "REDIS_EXPORTER_SKIP_CHECKKEYS_FOR_ROLE_MASTER",
    "REDIS_EXPORTER_DISABLE_SCRAPE_ENDPOINT",
    "REDIS_EXPORTER_APPEND_INSTANCE_ROLE_LABEL",
}
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def asks_for_something(name: str, value: str) -> bool:
    """Whether ``value`` of redis_exporter's variable ``name`` asks for anything but redis_exporter's default."""
    if not value:
        return False
    if name in BOOLEANS:
        default_true = name in TRUE_BY_DEFAULT
        return not ((value in GO_TRUE and default_true) or (value in GO_FALSE and not default_true))
    return value != DEFAULTS.get(name)


def refuse_unsupported(environ: Mapping[str, str]) -> None:
    """One line naming every variable of ``NO_EQUIVALENT`` set to a value that asks for something (never the value);
    one empty or set to redis_exporter's default asks for nothing and passes."""
    refused = [name for name in NO_EQUIVALENT if asks_for_something(name, environ.get(name, ""))]
    if refused:
        named = ", ".join(f"{name} (--{NO_EQUIVALENT[name]})" for name in refused)
        one = len(refused) == 1
        raise UsageError(
            f"redis_exporter's environment variable{'' if one else 's'} {named} {'has' if one else 'have'} no equivalent "
            f"in elasticache-exporter: unset {'it' if one else 'them'} (docs/configuration.md)"
        )
