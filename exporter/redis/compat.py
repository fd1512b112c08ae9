"""How this exporter's families relate to redis_exporter's (oliver006/redis_exporter with its default flags).

Every family it serves by default from INFO, SLOWLOG, LATENCY, CLUSTER and CONFIG is served here under the same
name, TYPE and labels (plus ``instance`` on /metrics, where one reply holds many nodes), except those listed in
``UPSTREAM_DIFFERENCES`` with what to write instead. ``OURS_ONLY`` names the families redis_exporter does not
serve. tests/test_compat.py checks both against real servers and the family list recorded from a real
redis_exporter (tests/data/redis_exporter_families.tsv).
"""

from __future__ import annotations

# redis_exporter family -> (what this exporter serves instead, the PromQL a user writes instead, or why not)
UPSTREAM_DIFFERENCES: dict[str, tuple[str, str]] = {
    "redis_exporter_build_info": ("`elasticache_exporter_build_info{version, python_version}`", "`elasticache_exporter_build_info`"),
    "redis_exporter_last_scrape_duration_seconds": (
        "`elasticache_exporter_target_scrape_duration_seconds{instance}`",
        "`elasticache_exporter_target_scrape_duration_seconds`, per node",
    ),
    "redis_exporter_scrape_duration_seconds": (
        "`elasticache_exporter_target_scrape_duration_seconds{instance}` (a gauge per node, not a summary)",
        "`avg_over_time(elasticache_exporter_target_scrape_duration_seconds[5m])` for the mean",
    ),
    "redis_exporter_last_scrape_error": (
        "`elasticache_exporter_target_last_error{instance, kind}` (a fixed set of kinds, never the error text)",
        '`redis_exporter_last_scrape_error == 1` becomes `elasticache_exporter_target_last_error{kind!="none"}`',
    ),
    "redis_exporter_scrapes_total": (
        "not served: every scrape of a node sets `redis_up`",
        "`count_over_time(redis_up[1h])` counts scrapes",
    ),
    "redis_exporter_last_scrape_connect_time_seconds": (
        "not served: the connection to a node is kept between scrapes",
        "`rate(elasticache_exporter_target_connects_total[5m]) > 0` shows reconnects",
    ),
    "redis_target_scrape_request_errors_total": (
        "not served: a `/scrape?target=` that is refused answers HTTP 400",
        "Prometheus' `up == 0` for that target",
    ),
    "redis_latest_fork_usec": (
        "`redis_latest_fork_seconds`, which redis_exporter itself serves for this field",
        "`redis_latest_fork_seconds * 1e6`",
    ),
    "redis_last_key_groups_scrape_duration_milliseconds": (
        "not served: key groups (`--check-key-groups`) are not supported",
        "none",
    ),
}

# Fields of modules and of other servers that redis_exporter maps to names of its own (RediSearch, Bloom, JSON,
# Tile38, KeyDB): this exporter serves them as found, as redis_<field>, like any INFO field it does not know.
OTHER_SERVERS = ("redis_search_", "redis_bf_", "redis_json_", "redis_tile38_")
OTHER_SERVER_FAMILIES = frozenset(
    {"redis_cached_keys_total", "redis_current_client_thread", "redis_long_lock_waits_total", "redis_server_threads_total",
     "redis_storage_provider_read_hits", "redis_storage_provider_read_misses"}
)  # fmt: skip

# the families of the docs' tables that redis_exporter does not serve (INFO fields it does not map are served too,
# by the generic rule, and are not listed here)
OURS_ONLY: frozenset[str] = frozenset(
    {
        "redis_active_defrag_time_seconds_total", "redis_aof_rewrites_total", "redis_forks_total", "redis_instantaneous_input_kbps",
        "redis_instantaneous_ops_per_sec", "redis_instantaneous_output_kbps", "redis_master_link_down_since_seconds",
        "redis_master_sync_last_io_seconds_ago", "redis_master_sync_left_bytes", "redis_master_sync_read_bytes",
        "redis_master_sync_total_bytes", "redis_memory_used_dataset_ratio", "redis_memory_used_peak_ratio", "redis_server_time_seconds",
        "redis_slave_read_only", "redis_total_system_memory_bytes", "redis_instance_role", "redis_module_info", "redis_db_<field>",
        "redis_cluster_slot_keys", "redis_cluster_slot_cpu_seconds_total", "redis_cluster_slot_network_bytes_total", "redis_cluster_node_slots",
        "redis_cluster_node_slots_keys", "redis_cluster_node_slots_cpu_seconds_total", "redis_cluster_node_slots_network_bytes_total",
    }
)  # fmt: skip
