"""The known INFO fields: metric name, type, unit scaling and help text.

Names and types are oliver006/redis_exporter's wherever it has one for the same field (its counters
without _total and counters it types gauge included), so its users' dashboards and rules keep working;
``compat`` and docs/metrics.md record how the rest relate. Fields absent here are still exported,
generically, by :mod:`exporter.redis.info_metrics`.
"""

from __future__ import annotations

from exporter.common.families import COUNTER, GAUGE
from exporter.common.records import record

from .command import Doc, T

PERCENT = 0.01  # scale marker: a "12.5%" value becomes the ratio 0.125


@record(frozen=True)
class FieldMetric:
    name: str
    kind: str
    help: str
    scale: float = 1.0


def _g(name: str, help_: str, scale: float = 1.0) -> FieldMetric:
    return FieldMetric("redis_" + name, GAUGE, help_, scale)


def _c(name: str, help_: str, scale: float = 1.0) -> FieldMetric:
    return FieldMetric("redis_" + name, COUNTER, help_, scale)


US = 1e-6
MS = 1e-3

KNOWN_FIELDS: dict[str, FieldMetric] = {
    # Server
    "uptime_in_seconds": _g("uptime_in_seconds", "Seconds since the server started."),
    "process_id": _g("process_id", "Process id of the server."),
    "io_threads_active": _g("io_threads_active", "Whether I/O threads are active (1) or not (0)."),
    "hz": _g("hz", "The server's current frequency of background tasks."),
    "configured_hz": _g("configured_hz", "The configured frequency of background tasks."),
    "server_time_usec": _g("server_time_seconds", "The server's wall clock at the time of INFO, as a Unix time.", US),
    # Clients
    "connected_clients": _g("connected_clients", "Client connections, replicas excluded."),
    "cluster_connections": _g("cluster_connections", "Sockets used by the cluster bus."),
    "maxclients": _g("max_clients", "The maxclients setting."),
    "blocked_clients": _g("blocked_clients", "Clients pending on a blocking call."),
    "tracking_clients": _g("tracking_clients", "Clients being tracked (client-side caching)."),
    "clients_in_timeout_table": _g("clients_in_timeout_table", "Clients in the timeout table."),
    "pubsub_clients": _g("pubsub_clients", "Clients in pub/sub mode."),
    "watching_clients": _g("watching_clients", "Clients in watching mode (WATCH)."),
    "total_watched_keys": _g("total_watched_keys", "Number of watched keys."),
    "total_blocking_keys": _g("total_blocking_keys", "Number of blocking keys."),
    "total_blocking_keys_on_nokey": _g("total_blocking_keys_on_nokey", "Blocking keys that unblock when the key is deleted."),
    "client_recent_max_input_buffer": _g("client_recent_max_input_buffer_bytes", "Biggest input buffer among current clients."),
    "client_recent_max_output_buffer": _g("client_recent_max_output_buffer_bytes", "Biggest output buffer among current clients."),
    "client_longest_output_list": _g("client_longest_output_list", "Longest output list among current clients (Redis < 5)."),
    "client_biggest_input_buf": _g("client_biggest_input_buf", "Biggest input buffer among current clients (Redis < 5)."),
    # Memory
    "used_memory": _g("memory_used_bytes", "Bytes allocated by the allocator."),
    "used_memory_rss": _g("memory_used_rss_bytes", "Resident set size of the server process."),
    "used_memory_peak": _g("memory_used_peak_bytes", "Peak of used_memory."),
    "used_memory_peak_perc": _g("memory_used_peak_ratio", "used_memory_peak as a ratio of used_memory.", PERCENT),
    "used_memory_overhead": _g("memory_used_overhead_bytes", "Memory used for internal overhead."),
    "used_memory_startup": _g("memory_used_startup_bytes", "Memory used at startup."),
    "used_memory_dataset": _g("memory_used_dataset_bytes", "Memory used by the data set."),
    "used_memory_dataset_perc": _g("memory_used_dataset_ratio", "Data set memory as a ratio of net memory.", PERCENT),
    "used_memory_lua": _g("memory_used_lua_bytes", "Memory used by the Lua engine."),
    "used_memory_vm_total": _g("memory_used_vm_total", "Memory used by script VMs, in bytes."),
    "used_memory_scripts": _g("memory_used_scripts_bytes", "Memory used by cached scripts."),
    "number_of_cached_scripts": _g("number_of_cached_scripts", "Number of cached Lua scripts."),
    "maxmemory": _g("memory_max_bytes", "The maxmemory setting (0 = no limit)."),
    "total_system_memory": _g("total_system_memory_bytes", "Total memory of the host."),
    "allocator_active": _g("allocator_active_bytes", "Allocator active bytes."),
    "allocator_allocated": _g("allocator_allocated_bytes", "Allocator allocated bytes."),
    "allocator_resident": _g("allocator_resident_bytes", "Allocator resident bytes."),
    "allocator_frag_ratio": _g("allocator_frag_ratio", "Allocator fragmentation ratio."),
    "allocator_frag_bytes": _g("allocator_frag_bytes", "Allocator fragmentation bytes."),
    "allocator_rss_ratio": _g("allocator_rss_ratio", "Allocator RSS ratio."),
    "allocator_rss_bytes": _g("allocator_rss_bytes", "Allocator RSS bytes."),
    "mem_fragmentation_ratio": _g("mem_fragmentation_ratio", "used_memory_rss divided by used_memory."),
    "mem_fragmentation_bytes": _g("mem_fragmentation_bytes", "used_memory_rss minus used_memory."),
    "mem_not_counted_for_evict": _g("mem_not_counted_for_eviction_bytes", "Memory not counted for eviction (AOF and replica buffers)."),
    "mem_clients_slaves": _g("mem_clients_slaves", "Memory used by replica clients, in bytes."),
    "mem_clients_normal": _g("mem_clients_normal", "Memory used by normal clients, in bytes."),
    "mem_replication_backlog": _g("mem_replication_backlog_bytes", "Memory used by the replication backlog."),
    "lazyfree_pending_objects": _g("lazyfree_pending_objects", "Objects waiting to be freed."),
    "lazyfreed_objects": _g("lazyfreed_objects", "Objects freed lazily since start (a counter, typed gauge as redis_exporter does)."),
    "active_defrag_running": _g("active_defrag_running", "Whether active defragmentation runs."),
    "maxmemory_reservation": _g("memory_max_reservation_bytes", "ElastiCache reserved memory."),
    "used_memory_vm_eval": _g("memory_used_vm_eval_bytes", "Memory used by the Lua VM of EVAL scripts."),
    "used_memory_scripts_eval": _g("memory_used_scripts_eval_bytes", "Memory overhead of EVAL scripts."),
    "used_memory_vm_functions": _g("memory_used_vm_functions_bytes", "Memory used by the Lua VM of functions."),
    "used_memory_functions": _g("memory_used_functions_bytes", "Memory overhead of functions."),
    "number_of_functions": _g("number_of_functions", "Number of functions."),
    "number_of_libraries": _g("number_of_libraries", "Number of function libraries."),
    "mem_cluster_links": _g("mem_cluster_links_bytes", "Memory used by cluster bus links."),
    "mem_aof_buffer": _g("mem_aof_buffer_bytes", "Memory used by the AOF buffer."),
    "mem_total_replication_buffers": _g("mem_total_replication_buffers_bytes", "Memory used by replication buffers."),
    "mem_overhead_db_hashtable_rehashing": _g("mem_overhead_db_hashtable_rehashing_bytes", "Memory used by rehashing dictionaries."),
    "maxmemory_desired_reservation": _g("memory_max_reservation_desired_bytes", "ElastiCache desired reserved memory."),
    "maxfragmentationmemory_reservation": _g("memory_max_fragmentation_reservation_bytes", "ElastiCache fragmentation reservation."),
    "maxfragmentationmemory_desired_reservation": _g(
        "memory_max_fragmentation_reservation_desired_bytes", "ElastiCache desired fragmentation reservation."
    ),
    "allocator_muzzy": _g("allocator_muzzy_bytes", "Allocator muzzy bytes."),
    "used_memory_hash_templates": _g("memory_used_hash_templates_bytes", "Memory held by the registry of compact hash templates (Redis 8.10+)."),
    "mem_replicas_repl_buffer": _g(
        "mem_replicas_repl_buffer_bytes", "Memory of a replica's replication buffer during dual-channel replication (Valkey 9.1+)."
    ),
    # Persistence
    "loading": _g("loading_dump_file", "Whether a dump file is being loaded."),
    "async_loading": _g("async_loading", "Whether data is being loaded asynchronously."),
    "rdb_changes_since_last_save": _g("rdb_changes_since_last_save", "Changes since the last dump."),
    "rdb_bgsave_in_progress": _g("rdb_bgsave_in_progress", "Whether an RDB save runs."),
    "rdb_last_save_time": _g("rdb_last_save_timestamp_seconds", "Unix time of the last successful RDB save."),
    "rdb_last_bgsave_status": _g("rdb_last_bgsave_status", "Status of the last RDB save (1 ok, 0 error)."),
    "rdb_last_bgsave_time_sec": _g("rdb_last_bgsave_duration_sec", "Duration of the last RDB save in seconds (-1 if none)."),
    "rdb_current_bgsave_time_sec": _g("rdb_current_bgsave_duration_sec", "Duration of the running RDB save in seconds (-1 if none)."),
    "rdb_last_cow_size": _g("rdb_last_cow_size_bytes", "Copy-on-write memory of the last RDB save."),
    "rdb_last_load_keys_expired": _g("rdb_last_load_expired_keys", "Keys found expired while loading the last dump."),
    "rdb_last_load_keys_loaded": _g("rdb_last_load_loaded_keys", "Keys loaded from the last dump."),
    "rdb_saves": _g("rdb_saves_total", "RDB saves since startup (a counter, typed gauge as redis_exporter does)."),
    "aof_enabled": _g("aof_enabled", "Whether AOF is enabled."),
    "aof_rewrite_in_progress": _g("aof_rewrite_in_progress", "Whether an AOF rewrite runs."),
    "aof_rewrite_scheduled": _g("aof_rewrite_scheduled", "Whether an AOF rewrite is scheduled."),
    "aof_last_rewrite_time_sec": _g("aof_last_rewrite_duration_sec", "Duration of the last AOF rewrite in seconds (-1 if none)."),
    "aof_current_rewrite_time_sec": _g("aof_current_rewrite_duration_sec", "Duration of the running AOF rewrite in seconds."),
    "aof_last_bgrewrite_status": _g("aof_last_bgrewrite_status", "Status of the last AOF rewrite (1 ok, 0 error)."),
    "aof_last_write_status": _g("aof_last_write_status", "Status of the last AOF write (1 ok, 0 error)."),
    "aof_last_cow_size": _g("aof_last_cow_size_bytes", "Copy-on-write memory of the last AOF rewrite."),
    "aof_rewrites": _c("aof_rewrites_total", "AOF rewrites since startup."),
    "aof_current_size": _g("aof_current_size_bytes", "Current AOF size."),
    "aof_base_size": _g("aof_base_size_bytes", "AOF size at the last rewrite."),
    "aof_pending_rewrite": _g("aof_pending_rewrite", "Whether an AOF rewrite is pending."),
    "aof_buffer_length": _g("aof_buffer_length", "Size of the AOF buffer."),
    "aof_rewrite_buffer_length": _g("aof_rewrite_buffer_length", "Size of the AOF rewrite buffer."),
    "aof_pending_bio_fsync": _g("aof_pending_bio_fsync", "fsync jobs in the background queue."),
    "aof_delayed_fsync": _g("aof_delayed_fsync", "Delayed fsync count."),
    "module_fork_in_progress": _g("module_fork_in_progress", "Whether a module fork runs."),
    "module_fork_last_cow_size": _g("module_fork_last_cow_size", "Copy-on-write memory of the last module fork."),
    "backup_in_progress": _g("backup_in_progress", "Whether a BACKUP runs (Redis 8.10+)."),
    # Stats
    "total_connections_received": _c("connections_received_total", "Connections accepted."),
    "total_commands_processed": _c("commands_processed_total", "Commands processed."),
    "instantaneous_ops_per_sec": _g("instantaneous_ops_per_sec", "Commands per second (server's own sample)."),
    "total_net_input_bytes": _c("net_input_bytes_total", "Bytes read from the network."),
    "total_net_output_bytes": _c("net_output_bytes_total", "Bytes written to the network."),
    "total_net_repl_input_bytes": _c("net_repl_input_bytes_total", "Bytes read from the network for replication."),
    "total_net_repl_output_bytes": _c("net_repl_output_bytes_total", "Bytes written to the network for replication."),
    "instantaneous_input_kbps": _g("instantaneous_input_kbps", "Network read rate in KB/s (server's own sample)."),
    "instantaneous_output_kbps": _g("instantaneous_output_kbps", "Network write rate in KB/s (server's own sample)."),
    "rejected_connections": _c("rejected_connections_total", "Connections rejected because of maxclients."),
    "sync_full": _g("replica_resyncs_full", "Full resyncs with replicas (a counter, typed gauge as redis_exporter does)."),
    "sync_partial_ok": _g("replica_partial_resync_accepted", "Accepted partial resync requests (a counter, typed gauge as redis_exporter does)."),
    "sync_partial_err": _g("replica_partial_resync_denied", "Denied partial resync requests (a counter, typed gauge as redis_exporter does)."),
    "expired_keys": _c("expired_keys_total", "Keys expired."),
    "expired_stale_perc": _g("expired_stale_percentage", "Estimated percentage of keys that are expired but not yet reclaimed."),
    "expired_time_cap_reached_count": _c("expired_time_cap_reached_total", "Active expire cycles stopped early."),
    "expire_cycle_cpu_milliseconds": _c("expire_cycle_cpu_time_ms_total", "CPU time spent in active expire cycles, in milliseconds."),
    "evicted_keys": _c("evicted_keys_total", "Keys evicted because of maxmemory."),
    "evicted_clients": _c("evicted_clients_total", "Clients evicted because of maxmemory-clients."),
    "total_eviction_exceeded_time": _c("eviction_exceeded_time_ms_total", "Time used_memory was above maxmemory, in milliseconds."),
    "current_eviction_exceeded_time": _g("current_eviction_exceeded_time_ms", "Time since used_memory went above maxmemory, in milliseconds."),
    "keyspace_hits": _c("keyspace_hits_total", "Successful key lookups."),
    "keyspace_misses": _c("keyspace_misses_total", "Failed key lookups."),
    "pubsub_channels": _g("pubsub_channels", "Pub/sub channels with subscribers."),
    "pubsub_patterns": _g("pubsub_patterns", "Pub/sub patterns with subscribers."),
    "pubsubshard_channels": _g("pubsubshard_channels", "Shard channels with subscribers."),
    "latest_fork_usec": _g("latest_fork_seconds", "Duration of the latest fork.", US),
    "total_forks": _c("forks_total", "Forks since startup."),
    "migrate_cached_sockets": _g("migrate_cached_sockets_total", "Sockets open for MIGRATE (a gauge despite the name, as redis_exporter serves it)."),
    "slave_expires_tracked_keys": _g("slave_expires_tracked_keys", "Keys tracked for expiry on a writable replica."),
    "active_defrag_hits": _g("defrag_hits", "Value reallocations by active defrag (a counter, typed gauge as redis_exporter does)."),
    "active_defrag_misses": _g("defrag_misses", "Aborted value reallocations by active defrag (a counter, typed gauge as redis_exporter does)."),
    "active_defrag_key_hits": _g("defrag_key_hits", "Keys actively defragmented (a counter, typed gauge as redis_exporter does)."),
    "active_defrag_key_misses": _g("defrag_key_misses", "Keys skipped by active defrag (a counter, typed gauge as redis_exporter does)."),
    "total_active_defrag_time": _c("active_defrag_time_seconds_total", "Time memory fragmentation was over the limit.", MS),
    "tracking_total_keys": _g("tracking_total_keys", "Keys tracked by the server."),
    "tracking_total_items": _g("tracking_total_items", "Items tracked by the server."),
    "tracking_total_prefixes": _g("tracking_total_prefixes", "Tracked prefixes."),
    "reply_buffer_shrinks": _c("reply_buffer_shrinks_total", "Output buffer shrinks."),
    "reply_buffer_expands": _c("reply_buffer_expands_total", "Output buffer expansions."),
    "evicted_scripts": _c("evicted_scripts_total", "Scripts evicted from the script cache."),
    "expired_subkeys": _c("expired_subkeys_total", "Hash fields expired."),
    "expired_fields": _c("expired_fields_total", "Hash fields expired (Valkey 9+)."),
    "expired_keys_with_volatile_items_stale_perc": _g(
        "expired_keys_with_volatile_items_stale_percentage",
        "Estimated percentage of keys with expiring items whose expired items are not yet reclaimed (Valkey 9+).",
    ),
    "hash_templates": _g("hash_templates", "Compact hash templates in the shared registry (Redis 8.10+)."),
    "hash_template_keys": _g("hash_template_keys", "Keys whose hash is backed by a compact hash template (Redis 8.10+)."),
    "instantaneous_eventloop_cycles_per_sec": _g("instantaneous_eventloop_cycles_per_sec", "Event loop cycles per second."),
    "instantaneous_eventloop_duration_usec": _g("instantaneous_eventloop_duration_usec", "Average event loop cycle duration."),
    "eventloop_cycles": _c("eventloop_cycles_total", "Event loop cycles."),
    "eventloop_duration_sum": _c("eventloop_duration_sum_usec_total", "Time spent in the event loop, in microseconds."),
    "eventloop_duration_cmd_sum": _c("eventloop_duration_cmd_sum_usec_total", "Time spent executing commands, in microseconds."),
    "unexpected_error_replies": _c("unexpected_error_replies", "Unexpected error replies (AOF load, replication)."),
    "total_error_replies": _c("total_error_replies", "Error replies sent to clients."),
    "dump_payload_sanitizations": _c("dump_payload_sanitizations", "Deep dump payload integrity checks."),
    "total_reads_processed": _c("total_reads_processed", "Read events processed."),
    "total_writes_processed": _c("total_writes_processed", "Write events processed."),
    "io_threaded_reads_processed": _c("io_threaded_reads_processed", "Reads processed by I/O threads."),
    "io_threaded_writes_processed": _c("io_threaded_writes_processed", "Writes processed by I/O threads."),
    "client_query_buffer_limit_disconnections": _c(
        "client_query_buffer_limit_disconnections_total", "Clients disconnected for exceeding the query buffer limit."
    ),
    "client_output_buffer_limit_disconnections": _c(
        "client_output_buffer_limit_disconnections_total", "Clients disconnected for exceeding the output buffer limit."
    ),
    "acl_access_denied_auth": _c("acl_access_denied_auth_total", "Failed authentications."),
    "acl_access_denied_cmd": _c("acl_access_denied_cmd_total", "Commands denied by ACL."),
    "acl_access_denied_key": _c("acl_access_denied_key_total", "Key accesses denied by ACL."),
    "acl_access_denied_channel": _c("acl_access_denied_channel_total", "Channel accesses denied by ACL."),
    "acl_access_denied_tls_cert": _c("acl_access_denied_tls_cert_total", "Failed authentications by TLS client certificate."),
    "acl_access_denied_db": _c("acl_access_denied_db_total", "Database accesses denied by ACL (Valkey 9.1+)."),
    # Replication
    "connected_slaves": _g("connected_slaves", "Connected replicas."),
    "master_repl_offset": _g("master_repl_offset", "The server's replication offset in bytes."),
    "second_repl_offset": _g("second_repl_offset", "Offset up to which the previous replication id is accepted."),
    "repl_backlog_active": _g("repl_backlog_is_active", "Whether the replication backlog is active."),
    "repl_backlog_size": _g("replication_backlog_bytes", "Size of the replication backlog."),
    "repl_backlog_first_byte_offset": _g("repl_backlog_first_byte_offset", "Master offset of the backlog's first byte."),
    "repl_backlog_histlen": _g("repl_backlog_history_bytes", "Bytes of data in the replication backlog."),
    "slave_priority": _g("slave_priority", "Replica priority for failover."),
    "slave_read_only": _g("slave_read_only", "Whether the replica is read-only."),
    "master_link_down_since_seconds": _g("master_link_down_since_seconds", "Seconds since the link to the primary went down."),
    "master_sync_total_bytes": _g("master_sync_total_bytes", "Total bytes of the running sync (-1 if unknown)."),
    "master_sync_read_bytes": _g("master_sync_read_bytes", "Bytes already read in the running sync."),
    "master_sync_left_bytes": _g("master_sync_left_bytes", "Bytes left in the running sync."),
    "master_sync_last_io_seconds_ago": _g("master_sync_last_io_seconds_ago", "Seconds since the last I/O of the running sync."),
    "replicas_waiting_psync": _g("replicas_waiting_psync", "Replicas waiting for a partial resync during dual-channel replication."),
    "replicas_repl_buffer_size": _g("replicas_repl_buffer_size_bytes", "Replication stream buffered on the replica during dual-channel replication."),
    "replicas_repl_buffer_peak": _g("replicas_repl_buffer_peak_bytes", "Peak of the replication stream buffered on the replica."),
    # CPU
    "used_cpu_sys": _c("cpu_sys_seconds_total", "System CPU used by the server."),
    "used_cpu_user": _c("cpu_user_seconds_total", "User CPU used by the server."),
    "used_cpu_sys_children": _c("cpu_sys_children_seconds_total", "System CPU used by background processes."),
    "used_cpu_user_children": _c("cpu_user_children_seconds_total", "User CPU used by background processes."),
    "used_cpu_sys_main_thread": _c("cpu_sys_main_thread_seconds_total", "System CPU used by the main thread."),
    "used_cpu_user_main_thread": _c("cpu_user_main_thread_seconds_total", "User CPU used by the main thread."),
    "used_active_time_main_thread": _c("active_time_main_thread_seconds_total", "Time the main thread was busy (Valkey 9.1+)."),
    # TLS (Valkey 9.1+; 0 where TLS is off)
    "tls_server_cert_expires_in_seconds": _g("tls_server_cert_expires_in_seconds", "Seconds until the server's TLS certificate expires."),
    "tls_client_cert_expires_in_seconds": _g("tls_client_cert_expires_in_seconds", "Seconds until the TLS client certificate expires."),
    "tls_ca_cert_expires_in_seconds": _g("tls_ca_cert_expires_in_seconds", "Seconds until the earliest TLS CA certificate expires."),
    # Scripting Engines (Valkey 9.1+)
    "engines_count": _g("scripting_engines_count", "Scripting engines loaded."),
    "engines_total_used_memory": _g("scripting_engines_memory_used_bytes", "Memory used by all scripting engines."),
    "engines_total_memory_overhead": _g("scripting_engines_memory_overhead_bytes", "Memory overhead of all scripting engines."),
    # Cluster
    "cluster_enabled": _g("cluster_enabled", "Whether cluster mode is enabled."),
}

# Replica-side fields that redis_exporter labels with the primary's address.
MASTER_LABELLED_FIELDS: dict[str, FieldMetric] = {
    "master_link_status": _g("master_link_up", "Whether the link to the primary is up."),
    "master_last_io_seconds_ago": _g("master_last_io_seconds_ago", "Seconds since the last interaction with the primary."),
    "master_sync_in_progress": _g("master_sync_in_progress", "Whether the replica is syncing from the primary."),
    "slave_repl_offset": _g("slave_repl_offset", "The replica's replication offset in bytes."),
}

# Fields that become labels of redis_instance_info instead of numbers.
# redis_exporter's labels, in its order (role, run_id, process_id and master_replid included: its users' rules join on
# role), always present; then the names of Valkey and of servers that say what they are, only where INFO has them
# (as redis_exporter adds Valkey's), so that a Redis node's series has exactly redis_exporter's labels
INSTANCE_INFO_LABELS = (
    "role", "redis_version", "redis_build_id", "redis_mode", "os", "maxmemory_policy", "tcp_port", "run_id", "process_id",
    "master_replid",
)  # fmt: skip
# Valkey's, as redis_exporter sets them (not its server_name: "valkey" on every Valkey, and a label more would make
# another series than redis_exporter's)
INSTANCE_INFO_OPTIONAL_LABELS = ("valkey_version", "valkey_release_stage")

# Fields handled elsewhere (labels, the role gauge) and so never exported generically.
CONSUMED_FIELDS = frozenset((*INSTANCE_INFO_LABELS, *INSTANCE_INFO_OPTIONAL_LABELS, "role", "master_host", "master_port", "master_failover_state"))

CLUSTER_INFO_FIELDS: dict[str, FieldMetric] = {
    "cluster_state": _g("cluster_state", "Whether the cluster state is ok (1) or fail (0)."),
    "cluster_stats_messages_sent": _g("cluster_messages_sent_total", "Messages sent on the cluster bus (typed gauge as redis_exporter does)."),
    "cluster_stats_messages_received": _g(
        "cluster_messages_received_total", "Messages received on the cluster bus (typed gauge as redis_exporter does)."
    ),
}

# Sections not served from INFO: Valkey 9.1's INFO ALL repeats CLUSTER INFO in a section of its own, which the scrape
# reads with CLUSTER INFO itself (as redis_exporter skips it: the same series twice otherwise)
SKIPPED_SECTIONS = frozenset({"cluster info", "cluster_info"})

# Fields served with a label of their own beside the instance's, as redis_exporter serves them.
# used_active_time_io_thread_<N> (Valkey 9.1+): one series per I/O thread, labelled thread="<N>"
IO_THREAD_ACTIVE_TIME_PREFIX = "used_active_time_io_thread_"
IO_THREAD_ACTIVE_TIME = _c("active_time_io_thread_seconds_total", "Time each I/O thread was busy (Valkey 9.1+).")
# the certificates' serials of INFO tls (Valkey 9.1+): redis_tls_certificate_info{certificate, serial} 1
TLS_SECTION = "tls"
TLS_CERT_SERIALS = {"tls_server_cert_serial": "server", "tls_client_cert_serial": "client", "tls_ca_cert_serial": "ca"}
TLS_CERTIFICATE_INFO = _g("tls_certificate_info", "A TLS certificate of the server and its serial (none without TLS); always 1.")
# engine_<N>:name=LUA,module=built-in,abi_version=1,used_memory=..,memory_overhead=.. of INFO scripting engines
# (Valkey 9.1+): three families labelled engine, module and abi_version
SCRIPTING_ENGINES_SECTION = "scripting engines"
SCRIPTING_ENGINE_PREFIX = "engine_"
SCRIPTING_ENGINE_INFO = _g("scripting_engine_info", "A loaded scripting engine; always 1.")
SCRIPTING_ENGINE_MEMORY_USED = _g("scripting_engine_memory_used_bytes", "Memory used by a scripting engine.")
SCRIPTING_ENGINE_MEMORY_OVERHEAD = _g("scripting_engine_memory_overhead_bytes", "Memory overhead of a scripting engine.")
LABELLED_FIELDS = (IO_THREAD_ACTIVE_TIME, TLS_CERTIFICATE_INFO, SCRIPTING_ENGINE_INFO, SCRIPTING_ENGINE_MEMORY_USED, SCRIPTING_ENGINE_MEMORY_OVERHEAD)

# INFO keyspace: db<N>:keys=..,expires=..,avg_ttl=..[,subexpiry=..|,keys_with_volatile_items=..], each by its name
DB_KEYS_WITH_EXPIRING_ITEMS = _g(
    "db_keys_with_expiring_items", "Keys with items that expire (hash fields): Redis' subexpiry, Valkey's keys_with_volatile_items."
)
DB_KEYS_CACHED = _g("db_keys_cached", "Cached keys in the database (INFO keyspace cached_keys).")

# the rows of docs/metrics.md of the families above (the INFO fields' rows are made from the tables)
INFO_DOCS = (
    Doc("redis_db_keys_with_expiring_items", "gauge", f"{T}, `db`",
        "INFO keyspace `subexpiry=` (Redis 7.4+) or `keys_with_volatile_items=` (Valkey 9+)", "keys with hash fields that expire"),
    Doc("redis_active_time_io_thread_seconds_total", "counter", f"{T}, `thread`", "INFO `used_active_time_io_thread_<N>` (Valkey 9.1+)",
        "time each I/O thread was busy; `thread` is N"),
    Doc("redis_tls_certificate_info", "gauge", f"{T}, `certificate` (`server`, `client`, `ca`), `serial`",
        "INFO tls `tls_<certificate>_cert_serial` (Valkey 9.1+)", "always 1; `serial` is `none` without TLS"),
    Doc("redis_scripting_engine_info", "gauge", f"{T}, `engine`, `module`, `abi_version`",
        "INFO scripting engines `engine_<N>:name=,module=,abi_version=` (Valkey 9.1+)", "always 1, one per loaded engine"),
    Doc("redis_scripting_engine_memory_used_bytes", "gauge", f"{T}, `engine`, `module`, `abi_version`",
        "INFO scripting engines `engine_<N>:…used_memory=`"),
    Doc("redis_scripting_engine_memory_overhead_bytes", "gauge", f"{T}, `engine`, `module`, `abi_version`",
        "INFO scripting engines `engine_<N>:…memory_overhead=`"),
)  # fmt: skip
