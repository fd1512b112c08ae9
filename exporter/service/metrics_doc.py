"""docs/metrics.md's tables, generated from the code: every family with its type, labels, source and relation to
redis_exporter. ``python -m exporter.service.metrics_doc [docs/metrics.md]`` rewrites the generated blocks;
tests/test_compat.py checks the result against what the exporter serves from real servers. The table of the series the
rules record is exporter.alerts.recorded_doc's (this package may not import the alerts)."""

from __future__ import annotations

import re

from exporter.redis.command import Doc, T
from exporter.redis.compat import OTHER_SERVER_FAMILIES, OTHER_SERVERS, OURS_ONLY, UPSTREAM_DIFFERENCES
from exporter.redis.info_fields import CLUSTER_INFO_FIELDS, KNOWN_FIELDS, MASTER_LABELLED_FIELDS, FieldMetric
from exporter.redis.pipeline import SCRAPE_COMMANDS
from exporter.service.collectors.clients import CONNECTION_GAUGES

STRUCTURED = [
    Doc("redis_up", "gauge", T, "the scrape", "1 when the last scrape of the target succeeded, else 0 (the HTTP reply is still 200)"),
    Doc("redis_instance_info", "gauge", f"{T}, `role`, `redis_version`, `redis_build_id`, `redis_mode`, `os`, `maxmemory_policy`, "
        "`tcp_port`, `run_id`, `process_id`, `master_replid`, `valkey_version`, `valkey_release_stage`",
        "INFO server, memory, replication", "always 1; redis_exporter's labels, then Valkey's where INFO has them, as it sets them"),
    Doc("redis_slave_info", "gauge", f"{T}, `master_host`, `master_port`, `read_only`", "INFO replication, on replicas", "always 1"),
    Doc("redis_instance_role", "gauge", f"{T}, `role`", "INFO `role`", "always 1; the role alone (`master` or `slave`)"),
    Doc("redis_start_time_seconds", "gauge", T, "INFO `server_time_usec` (before Redis 5 the time of the reply) − `uptime_in_seconds`",
        "Unix time the server started"),
    Doc("redis_config_maxclients", "gauge", T, "INFO `maxclients` (no CONFIG needed)"),
    Doc("redis_config_maxmemory", "gauge", T, "INFO `maxmemory` (no CONFIG needed)", "bytes"),
    Doc("redis_connected_slave_offset_bytes", "gauge", f"{T}, `slave_ip`, `slave_port`, `slave_state`", "INFO `slaveN:…offset=`"),
    Doc("redis_connected_slave_lag_seconds", "gauge", f"{T}, `slave_ip`, `slave_port`, `slave_state`", "INFO `slaveN:…lag=`"),
    Doc("redis_db_keys", "gauge", f"{T}, `db`", "INFO keyspace `keys=`",
        "0 for an empty database where `CONFIG GET databases` is allowed (as redis_exporter); elsewhere only databases with keys"),
    Doc("redis_db_keys_expiring", "gauge", f"{T}, `db`", "INFO keyspace `expires=`", "as `redis_db_keys`"),
    Doc("redis_db_avg_ttl_seconds", "gauge", f"{T}, `db`", "INFO keyspace `avg_ttl=` (ms)"),
    Doc("redis_db_keys_cached", "gauge", f"{T}, `db`", "INFO keyspace `cached_keys=`", "as redis_exporter 1.90"),
    Doc("redis_db_<field>", "gauge", f"{T}, `db`", "any other keyspace sub-field"),
    Doc("redis_commands_total", "counter", f"{T}, `cmd` (subcommands as `config|get`)", "INFO commandstats `calls=`"),
    Doc("redis_commands_duration_seconds_total", "counter", f"{T}, `cmd`", "INFO commandstats `usec=`"),
    Doc("redis_commands_rejected_calls_total", "counter", f"{T}, `cmd`", "INFO commandstats `rejected_calls=`"),
    Doc("redis_commands_failed_calls_total", "counter", f"{T}, `cmd`", "INFO commandstats `failed_calls=`"),
    Doc("redis_latency_percentiles_usec", "summary", f"{T}, `cmd`, `quantile` (`50`, `99`, `99.9`)",
        "INFO latencystats `pNN=`; `_sum` (µs) and `_count` from commandstats", "microseconds"),
    Doc("redis_errors_total", "counter", f"{T}, `err`", "INFO errorstats `count=`"),
    Doc("redis_module_info", "gauge", f"{T}, `name`, `ver`", "INFO modules", "always 1"),
]  # fmt: skip

# the families of the scrape's other commands, from their entries in the scrape table
STRUCTURED += [doc for command in SCRAPE_COMMANDS for doc in command.docs]

REPLICATION = [
    Doc("elasticache_replication_heartbeat_lag_seconds", "gauge", f"{T}, `source` (`elasticache`, `exporter`)", "heartbeat key",
        "on a replica: read time minus the replicated heartbeat time"),
    Doc("elasticache_replication_heartbeat_age_seconds", "gauge", f"{T}, `source`", "heartbeat key",
        "on a primary: how old its own heartbeat is; growing means the writer stopped, not that replication lags"),
    Doc("elasticache_replication_heartbeat_timestamp_seconds", "gauge", f"{T}, `source`", "heartbeat key", "the heartbeat time as read"),
    Doc("elasticache_exporter_heartbeat_read_time_seconds", "gauge", T, "the exporter's clock", "when it read the heartbeats"),
    Doc("elasticache_exporter_heartbeat_errors_total", "counter", f"{T}, `source`, `reason` (`wrong_type`, `unparsable`)", "heartbeat key",
        "heartbeat keys that could not be read"),
    Doc("elasticache_exporter_heartbeat_writes_total", "counter", T, "the writer", "heartbeats the exporter wrote (writer on)"),
    Doc("elasticache_exporter_heartbeat_skipped_total", "counter", T, "the writer", "writes skipped because the node was not a master"),
    Doc("elasticache_exporter_heartbeat_write_errors_total", "counter", f"{T}, `kind` (`permission`, `timeout`, …)", "the writer",
        "failed writes; each kind is also logged once"),
    Doc("elasticache_exporter_heartbeat_last_write_timestamp_seconds", "gauge", T, "the writer", "the last successful write"),
    Doc("elasticache_replication_lag_bytes", "gauge", f"{T}, `slave_ip`, `slave_port`", "INFO replication of a primary",
        "`master_repl_offset` minus the offset the replica acknowledged"),
    Doc("elasticache_replication_primary_info", "gauge", f"{T}, `primary`, `master_host`, `master_port`", "INFO replication of a replica",
        "always 1; `primary` is the configured target at that address, else `host:port`"),
    Doc("elasticache_replication_replica_info", "gauge", f"{T}, `replica`, `slave_ip`, `slave_port`, `slave_state`",
        "INFO replication of a primary", "always 1; `replica` is the configured target at that address, else `host:port`"),
    Doc("elasticache_shard_member_info", "gauge", f"{T}, `replication_group`, `shard`, `shard_source`, `role`",
        "configuration, discovery, `CLUSTER NODES` or `master_replid`", "always 1, for every node; no `role` while it does not answer"),
]  # fmt: skip

BASELINES = [
    Doc("elasticache_baseline_network_bytes_per_second", "gauge", "`node_type`, `level` (`100`, `90`, `80`), `source` (`measured`, `published`)",
        "the baseline table", "the node type's bandwidth at that level"),
    Doc("elasticache_baseline_engine_cpu_percent", "gauge", "`node_type`", "the baseline table",
        "engine CPU p90 at the benchmarked bandwidth (measured types)"),
    Doc("elasticache_network_bytes_per_second", "gauge", f"{T}, `direction`, `source` (`info`, `cloudwatch`), `node_type`",
        "INFO counters or CloudWatch", "traffic"),
    Doc("elasticache_network_utilization_ratio", "gauge", f"{T}, `direction`, `source`, `node_type`", "traffic / baseline", "1 = at the baseline"),
    Doc("elasticache_network_headroom_bytes_per_second", "gauge", f"{T}, `direction`, `source`, `node_type`", "baseline − traffic"),
    Doc("elasticache_engine_cpu_utilization_percent", "gauge", f"{T}, `source`, `node_type`", "INFO main-thread CPU or CloudWatch",
        "percent of one core"),
    Doc("elasticache_engine_cpu_utilization_ratio", "gauge", f"{T}, `source`, `node_type`", "engine CPU / the type's benchmarked engine CPU"),
    Doc("elasticache_exporter_baseline_missing_total", "counter", f"{T}, `node_type`", "the baseline table",
        "scrapes of a target whose node type has no baseline"),
]  # fmt: skip

AWS = [
    Doc("aws_elasticache_<metric>_<statistic>", "gauge", "`account_id`, `region`, `dimension_CacheClusterId`, `dimension_CacheNodeId`; "
        "a serverless cache's: `account_id`, `region`, `dimension_clusterId`",
        "CloudWatch", "the newest complete datapoint, named and labelled as YACE does"),
    Doc("elasticache_cloudwatch_datapoint_timestamp_seconds", "gauge",
        "`account_id`, `region`, `dimension_CacheClusterId`, `dimension_CacheNodeId` (a serverless cache's: `dimension_clusterId`), `metric`",
        "CloudWatch", "time of that datapoint"),
    Doc("elasticache_cloudwatch_rising_minutes", "gauge",
        "`account_id`, `region`, `dimension_CacheClusterId`, `dimension_CacheNodeId`, `metric`", "CloudWatch, kept by minute",
        "of the windows of 5 minutes ending at each minute the last poll brought, the most minutes of an allowance-exceeded "
        "series (`metric`) above the minute held before it (as DIFF), each minute counted once however often a poll brings it; the allowance alerts "
        "read it (2 or more: shaped in more than one minute, as their CloudWatch alarms count)"),
    Doc("elasticache_cloudwatch_window_minutes", "gauge",
        "`account_id`, `region`, `dimension_CacheClusterId`, `dimension_CacheNodeId`, `metric`", "CloudWatch, kept by minute",
        "minutes held of the newest window of a gauge an alert holds (`metric`): the newest 1 of DurabilityBufferExceededErrorCount "
        "(its lowest: the highest count of the minutes the last poll brought), the last 2 of TrafficManagementActive, the last "
        "5 of ReplicationLag, GlobalDatastoreReplicationLag, DurabilityLag, DatabaseMemoryUsagePercentage, FreeableMemory, SwapUsage and a "
        "serverless cache's ThrottledCmds, the last 10 of CPUUtilization, the last 15 of the alerting tier's Evictions, "
        "CurrConnections, MajorPageFaults and DatabaseCapacityUsageCountedForEvictPercentage; each counted once however often "
        "a poll brings it"),
    Doc("elasticache_cloudwatch_window_lowest", "gauge", "`account_id`, `region`, `dimension_CacheClusterId`, `dimension_CacheNodeId`, `metric`",
        "CloudWatch, kept by minute",
        "of the full windows ending at each minute the last poll brought, the highest lowest value: a value held in every "
        "minute of one window, which the alerts read, so a run of minutes between two polls is seen at any poll interval"),
    Doc("elasticache_cloudwatch_window_highest", "gauge", "`account_id`, `region`, `dimension_CacheClusterId`, `dimension_CacheNodeId`, `metric`",
        "CloudWatch, kept by minute", "of the same windows, the lowest highest value (for a `<` alert: FreeableMemory)"),
    Doc("elasticache_cloudwatch_fresh_seconds", "gauge", "`metric`, `tier`", "the configuration",
        "how old that datapoint may be while its poller is healthy: two of the tier's intervals as polled, the delay, two periods and "
        "a minute (docs/cloudwatch-cost.md); every CloudWatch guard of the rules reads it, and older, ElastiCacheCloudWatchDataStale fires"),
    Doc("elasticache_node_info", "gauge", f"{T}, `account_id`, `region`, `node`, `replication_group`, `shard`, `role`, `node_type`, `engine`, "
        "`engine_version`, `az`, `dimension_CacheClusterId`, `dimension_CacheNodeId`, `tag_<key>` (each of `aws.export_tags`)", "discovery",
        "always 1, one per discovered node, for joins; `instance` is the CacheClusterId, or `account/region/id` where the id clashes"),
    Doc("elasticache_serverless_cache_info", "gauge", "`account_id`, `region`, `cache`, `engine`, `engine_version`, `status`, `tag_<key>` "
        "(each of `aws.export_tags`)", "discovery", "always 1, one per serverless cache"),
    Doc("elasticache_events_total", "counter", "`account_id`, `region`, `source_type`, `source_id`, `category` (`global_failover`, `failover`, "
        "`node_replaced`, `maintenance`, `scaling`, `snapshot`, `error`, `other`), `replication_group`", "DescribeEvents",
        "events, each counted once, by the category of their message; `replication_group`: the source's group (a cache cluster's as "
        "discovery knows it), for inhibitions"),
    Doc("elasticache_event_last_timestamp_seconds", "gauge", "`account_id`, `region`, `source_type`, `source_id`, `category`, "
        "`replication_group`", "DescribeEvents", "when the newest event of that source and category happened"),
    Doc("elasticache_service_update_info", "gauge", "`account_id`, `region`, `replication_group`, `service_update`, `severity`, "
        "`update_type`, `status`", "DescribeUpdateActions", "always 1, one per service update not yet applied to a group"),
    Doc("elasticache_service_update_apply_by_timestamp_seconds", "gauge", "`account_id`, `region`, `replication_group`, `service_update`",
        "DescribeUpdateActions", "the recommended apply-by date"),
    Doc("elasticache_service_update_auto_update_start_timestamp_seconds", "gauge", "`account_id`, `region`, `replication_group`, "
        "`service_update`", "DescribeServiceUpdates", "when AWS applies the update itself, where it does (after the apply-by date)"),
    Doc("elasticache_maintenance_window_next_start_timestamp_seconds", "gauge", "`account_id`, `region`, `replication_group`", "discovery",
        "the next start of the preferred maintenance window (UTC); a cluster outside any group stands for a group of its own"),
    Doc("elasticache_pending_modification_info", "gauge", "`account_id`, `region`, `replication_group`, `field`", "discovery",
        "always 1, one per field of the PendingModifiedValues of a group or its clusters"),
    Doc("elasticache_global_datastore_info", "gauge", "`account_id`, `global_replication_group`, `status`, `engine`, `engine_version`",
        "DescribeGlobalReplicationGroups", "always 1, one per Global Datastore (listed in several regions, served once)"),
    Doc("elasticache_global_datastore_members", "gauge", "`account_id`, `global_replication_group`, `role` (`primary`, `secondary`)",
        "DescribeGlobalReplicationGroups", "the member clusters of each role (0 secondaries: it replicates nowhere)"),
    Doc("elasticache_global_datastore_member_info", "gauge", "`account_id`, `global_replication_group`, `replication_group`, `region`, `role`",
        "DescribeGlobalReplicationGroups", "always 1, one per member cluster, in the member's own region"),
    Doc("elasticache_global_datastore_member_associated", "gauge", "`account_id`, `global_replication_group`, `replication_group`, `region`, "
        "`role`", "DescribeGlobalReplicationGroups", "1 while the member is associated (replicating), else 0"),
    Doc("elasticache_engine_support_end_timestamp_seconds", "gauge", "`account_id`, `region`, `replication_group`, `engine`, "
        "`engine_version`, `phase` (`standard`, `extended`)", "discovery and the engine support table",
        "the end of the engine major version's standard support (Extended Support is billed from the next month) or of its "
        "Extended Support (ElastiCache then upgrades the cache itself); only for versions with an announced end"),
    Doc("elasticache_engine_support_upgrade_info", "gauge", "`account_id`, `region`, `replication_group`, `engine`, `engine_version`, "
        "`upgrade_to`", "the engine support table", "always 1: the version AWS recommends moving to, beside each end above"),
    Doc("elasticache_engine_support_unknown_clusters", "gauge", "`account_id`, `region`, `engine`, `engine_version`",
        "discovery and the engine support table", "clusters on a version the table lacks (its dates are not guessed)"),
    Doc("elasticache_network_aws_baseline_usage_ratio", "gauge", f"{T}, `direction`, `node_type`", "CloudWatch",
        "NetworkBaselineUsage{In,Out}Percentage (Average) / 100: the minute's traffic as AWS counts it against the instance's "
        "baseline bandwidth (over 1 spends burst credits); while fresh"),
    Doc("elasticache_network_aws_baseline_peak_usage_ratio", "gauge", f"{T}, `direction`, `node_type`", "CloudWatch",
        "NetworkBaselineMaxUsage{In,Out}Percentage (Maximum) / 100: the minute's busiest second; while fresh"),
    Doc("elasticache_network_aws_baseline_window_minutes", "gauge", f"{T}, `direction`, `node_type`", "CloudWatch, kept by minute",
        "CloudWatch minutes with a busiest-second datapoint in a window of 10 (of the windows ending at each minute the last "
        "poll brought, the one with the most burst minutes, then the calmest), each counted once by its timestamp however "
        "often a poll brings it; while fresh"),
    Doc("elasticache_network_aws_baseline_burst_minutes", "gauge", f"{T}, `direction`, `node_type`", "CloudWatch, kept by minute",
        "of those minutes, the ones whose busiest second was above the baseline (over 100 %); ElastiCacheNetworkMicrobursts "
        "reads it; while fresh"),
    Doc("elasticache_network_aws_baseline_window_max_usage_ratio", "gauge", f"{T}, `direction`, `node_type`", "CloudWatch, kept by minute",
        "the highest minute average (NetworkBaselineUsage*Percentage / 100) of the same minutes; while fresh"),
    Doc("elasticache_network_aws_baseline_sustained_minutes", "gauge", f"{T}, `direction`, `node_type`", "CloudWatch, kept by minute",
        "CloudWatch minutes with an average among the 15 up to the newest, each counted once by its timestamp however often "
        "a poll brings it; while fresh"),
    Doc("elasticache_network_aws_baseline_sustained_min_usage_ratio", "gauge", f"{T}, `direction`, `node_type`",
        "CloudWatch, kept by minute", "the lowest minute average (NetworkBaselineUsage*Percentage / 100) of those minutes: a share "
        "held in every one of them; the 15-minute AWS-baseline alerts read it; while fresh"),
    Doc("elasticache_network_aws_baseline_bytes_per_second", "gauge", f"{T}, `direction`, `node_type`", "CloudWatch",
        "the baseline AWS implies: NetworkBytes (Sum / period) / (the share / 100), median of the last hour's minutes at 1 % or more"),
    Doc("elasticache_baseline_agreement_ratio", "gauge", "`node_type`, `direction`", "CloudWatch and the baseline table",
        "the table's 100 % bandwidth / the median implied baseline of the fleet's nodes of the type (1: agree)"),
    Doc("elasticache_serverless_ecpu_per_second_limit", "gauge", "`account_id`, `region`, `cache`", "discovery",
        "the cache's ECPU-per-second maximum, where set"),
    Doc("elasticache_serverless_data_storage_limit_bytes", "gauge", "`account_id`, `region`, `cache`", "discovery",
        "the cache's data storage maximum, where set"),
    Doc("elasticache_serverless_ecpu_utilization_ratio", "gauge", "`account_id`, `region`, `cache`", "CloudWatch and discovery",
        "ElastiCacheProcessingUnits per second over the period / the ECPU-per-second maximum; only while the datapoint is fresh"),
    Doc("elasticache_serverless_data_storage_utilization_ratio", "gauge", "`account_id`, `region`, `cache`", "CloudWatch and discovery",
        "BytesUsedForCache / the data storage maximum; only while the datapoint is fresh"),
    Doc("elasticache_exporter_aws_api_calls_total", "counter", "`api`", "the AWS client", "calls made"),
    Doc("elasticache_exporter_aws_api_errors_total", "counter", "`api`, `kind` (`throttling`, `server`, `timeout`, `connection`, "
        "`credentials`, `access_denied`, `client`, `unsupported`)", "the AWS client", "failed calls, each retry counted"),
    Doc("elasticache_exporter_cloudwatch_metrics_requested_total", "counter", "", "GetMetricData",
        "metric-statistics requested: the bill, USD 0.01 per 1,000"),
    Doc("elasticache_exporter_cloudwatch_queries", "gauge", "", "the poller", "queries in the last cycle"),
    Doc("elasticache_exporter_cloudwatch_promql_samples_total", "counter", "", "the poller",
        "samples the PromQL API scanned, estimated (docs/cloudwatch-cost.md)"),
    Doc("elasticache_exporter_cloudwatch_usd_per_month_estimate", "gauge", "", "the poller",
        "the month's GetMetricData bill (USD) at the tiers' intervals for the fleet of the moment, as `cost` prints it"),
    Doc("elasticache_exporter_cloudwatch_budget_usd_per_month", "gauge", "", "the configuration",
        "`aws.cloudwatch.budget_usd_per_month`, where set"),
    Doc("elasticache_exporter_cloudwatch_tier_interval_seconds", "gauge", "`tier`", "the poller",
        "how often a tier is asked: its interval as the poller's wake-ups make it, lengthened to keep the budget"),
    Doc("elasticache_exporter_cloudwatch_nodes_on_info", "gauge", "", "the poller",
        "nodes whose INFO the exporter read lately (3 minutes), so the last poll left CloudWatch's copy of it out"),
    Doc("elasticache_exporter_cloudwatch_last_success_timestamp_seconds", "gauge", "", "the poller",
        "when a poll last brought data, or had nothing to ask of the fleet discovery found (0: never)"),
    Doc("elasticache_exporter_cloudwatch_poll_duration_seconds", "gauge", "", "the poller", "duration of the last poll"),
    Doc("elasticache_exporter_discovery_last_success_timestamp_seconds", "gauge", "", "discovery", "when discovery last succeeded (0: never)"),
    Doc("elasticache_exporter_discovered_nodes", "gauge", "`account_id`, `region`", "discovery", "nodes found"),
]  # fmt: skip

CLIENTS = [
    Doc("elasticache_clients_connected", "gauge", f"{T}, `client_name` (the top `clients.top` names, `(unnamed)`, `(other)`)",
        "`CLIENT LIST` (background, `clients.enabled`)", "connections by client name"),
    Doc("elasticache_clients_idle", "gauge", f"{T}, `client_name`, `idle` (`1m`, `10m`, `1h`)", "`CLIENT LIST`",
        "connections of that name idle longer than `idle`"),
    Doc("elasticache_clients_connected_by_source", "gauge", f"{T}, `source` (the top `clients.top` addresses, `(other)`)", "`CLIENT LIST`",
        "connections by source address, without the port"),
    Doc("elasticache_clients_output_buffer_bytes_max", "gauge", f"{T}, `client_name`", "`CLIENT LIST`",
        "the largest `omem` of the name's connections"),
    Doc("elasticache_clients_profile_age_seconds", "gauge", T, "`CLIENT LIST`", "seconds since it was last read"),
    Doc("elasticache_exporter_client_list_duration_seconds", "gauge", T, "the client profiler", "duration of the last read and count"),
    Doc("elasticache_exporter_client_list_errors_total", "counter", f"{T}, `kind`", "the client profiler",
        "failed reads by kind (`reply_too_large` where the list is larger than `clients.max_reply_size`)"),
    Doc("redis_connected_client_info", "gauge", f"{T}, `id`, `name`, `flags`, `db`, `host`, `port` (`clients.include_port`), `user`, `resp`",
        "`CLIENT LIST` (background, `clients.per_connection` or `--export-client-list`)",
        "1 per connection, as redis_exporter's `--export-client-list` (`user` and `resp` where the server lists them)"),
    *[Doc(name, "gauge", f"{T}, `id`, `name`", "`CLIENT LIST` (`clients.per_connection`)",
          f"`{field}` of each connection" + (": the time of the read less it" if field in ("age", "idle") else "")
          + ("; not served where the server does not list it" if field in ("ssub", "watch") else ""))
      for name, _, field in CONNECTION_GAUGES],
]  # fmt: skip

KEYSPACE = [
    Doc("elasticache_keyspace_prefix_keys", "gauge", f"{T}, `db`, `prefix` (the top `keyspace.top` by memory, `(other)`, `(none)`)",
        "`RANDOMKEY`, `TYPE` (background, `keyspace.enabled`)", "keys of the prefix, estimated from the sample"),
    Doc("elasticache_keyspace_prefix_keys_lower", "gauge", f"{T}, `db`, `prefix`", "the sample",
        "95 % confidence bounds of `elasticache_keyspace_prefix_keys` (Wilson, for a finite keyspace and RANDOMKEY's uneven "
        "draws): the true count lies outside them in about one sample of 20; both equal the estimate where the database "
        "was read whole"),
    Doc("elasticache_keyspace_prefix_keys_upper", "gauge", f"{T}, `db`, `prefix`", "the sample", "as `elasticache_keyspace_prefix_keys_lower`"),
    Doc("elasticache_keyspace_prefix_memory_bytes", "gauge", f"{T}, `db`, `prefix`", "`MEMORY USAGE ... SAMPLES 5`",
        "memory of the prefix, estimated; absent where MEMORY is renamed away"),
    Doc("elasticache_keyspace_prefix_keys_without_ttl", "gauge", f"{T}, `db`, `prefix`", "`PTTL`", "keys of the prefix without a TTL, estimated"),
    Doc("elasticache_keyspace_expiring_keys", "gauge", f"{T}, `db`, `within` (`1m`, `5m`, `1h`)", "`PTTL`",
        "keys whose TTL ends within that time, estimated: an expiry wave ahead"),
    Doc("elasticache_keyspace_big_key_memory_bytes", "gauge", f"{T}, `db`, `key` (cut at 100 bytes), `type`", "`MEMORY USAGE`",
        "the ten largest keys of the latest sample"),
    Doc("elasticache_keyspace_hot_key_frequency", "gauge", f"{T}, `db`, `key` (cut at 100 bytes), `type`", "`OBJECT FREQ`",
        "the ten most used keys of the sample by their LFU counter, under an LFU maxmemory policy only"),
    Doc("elasticache_keyspace_sample_keys", "gauge", f"{T}, `db`", "the sample", "distinct keys sampled"),
    Doc("elasticache_keyspace_sample_age_seconds", "gauge", f"{T}, `db`", "the sample", "seconds since the database was sampled"),
    Doc("elasticache_exporter_keyspace_sample_duration_seconds", "gauge", T, "the keyspace profiler", "duration of the last sample"),
    Doc("elasticache_exporter_keyspace_sample_errors_total", "counter", f"{T}, `kind`", "the keyspace profiler", "failed samples by kind"),
]  # fmt: skip

EXPORTER = [
    Doc("elasticache_exporter_target_scrape_duration_seconds", "gauge", T, "the scrape", "duration of the last scrape of the target"),
    Doc("elasticache_exporter_target_scrape_errors_total", "counter", f"{T}, `kind`", "the scrape",
        "failed scrapes by kind: `refused`, `timeout`, `auth`, `tls`, `dns`, `connection`, `loading`, `error_reply`, `protocol`, "
        "`reply_too_large`, `internal`"),
    Doc("elasticache_exporter_target_last_error", "gauge", f"{T}, `kind`", "the scrape",
        "always 1: the last scrape's error kind, `none` after a success"),
    Doc("elasticache_exporter_info_malformed_lines_total", "counter", T, "INFO", "lines that could not be parsed and were skipped"),
    Doc("elasticache_exporter_target_connects_total", "counter", T, "the scrape", "connections opened; a rising rate means reconnects"),
    Doc("elasticache_exporter_scrape_workers", "gauge", "", "the scrape pool", "scrape workers (`scrape.concurrency`)"),
    Doc("elasticache_exporter_scrape_workers_busy", "gauge", "", "the scrape pool", "workers running a scrape now"),
    Doc("elasticache_exporter_scrape_queue_length", "gauge", "", "the scrape pool", "target scrapes waiting for a worker"),
    Doc("elasticache_exporter_http_connections", "gauge", "", "the HTTP front end", "open connections"),
    Doc("elasticache_exporter_http_connections_max", "gauge", "", "the HTTP front end", "the bound on open connections"),
    Doc("elasticache_exporter_http_workers_busy", "gauge", "", "the HTTP front end", "HTTP workers answering now"),
    Doc("elasticache_exporter_http_connections_evicted_total", "counter", "", "the HTTP front end",
        "connections closed to make room at the bound (the longest idle first)"),
    Doc("elasticache_exporter_http_request_head_timeouts_total", "counter", "", "the HTTP front end",
        "connections closed because their request head did not arrive within 10 s"),
    Doc("elasticache_exporter_shard_info", "gauge", "`index`, `count`", "`scrape.shard`",
        "always 1, only on a shard (with INDEX/auto, once the count is read; it follows the StatefulSet's replicas)"),
    Doc("elasticache_exporter_shard_count_read_errors_total", "counter", "", "`scrape.shard` INDEX/auto",
        "reads of the StatefulSet's replicas that failed (the last count is kept)"),
    Doc("elasticache_exporter_build_info", "gauge", "`version`, `python_version`", "the build", "always 1"),
    Doc("elasticache_exporter_config_last_reload_successful", "gauge", "", "the configuration",
        "1 when the last load (the start, or a reload on SIGHUP) succeeded; 0 while a refused file leaves the previous one running"),
    Doc("elasticache_exporter_config_last_reload_success_timestamp_seconds", "gauge", "", "the configuration",
        "when the configuration was last loaded successfully"),
    Doc("process_cpu_seconds_total", "counter", "", "the exporter process", "on the telemetry path only"),
    Doc("process_resident_memory_bytes", "gauge", "", "the exporter process"),
    Doc("process_virtual_memory_bytes", "gauge", "", "the exporter process"),
    Doc("process_start_time_seconds", "gauge", "", "the exporter process"),
    Doc("process_open_fds", "gauge", "", "the exporter process"),
    Doc("process_max_fds", "gauge", "", "the exporter process"),
]  # fmt: skip

K = f"{T}, `db`, `key`"
S = f"{T}, `db`, `stream`"
G = f"{S}, `group`"
KEYS = [
    Doc("redis_key_size", "gauge", K, "`check_keys`, `check_single_keys`",
        "length by type (LLEN, SCARD, ZCARD, HLEN, XLEN, STRLEN; a HyperLogLog's PFCOUNT); 0 for a missing key"),
    Doc("redis_key_value", "gauge", K, "the same", "a string key's value, where it is a number"),
    Doc("redis_key_value_as_string", "gauge", f"{K}, `val`", "the same", "always 1; a string key's value (up to 1 KiB) that is not a number"),
    Doc("redis_key_memory_usage_bytes", "gauge", K, "the same, `MEMORY USAGE` (Redis 4+)", "bytes"),
    Doc("redis_keys_count", "gauge", K, "`count_keys` (SCAN)", "keys matching the pattern (`key`); only when the SCAN ran to its end"),
    Doc("redis_stream_length", "gauge", S, "`check_streams`, `check_single_streams`: XINFO STREAM", "entries"),
    Doc("redis_stream_radix_tree_keys", "gauge", S, "XINFO STREAM"),
    Doc("redis_stream_radix_tree_nodes", "gauge", S, "XINFO STREAM"),
    Doc("redis_stream_groups", "gauge", S, "XINFO STREAM", "consumer groups"),
    Doc("redis_stream_last_generated_id", "gauge", S, "XINFO STREAM", "ms part of the id"),
    Doc("redis_stream_max_deleted_entry_id", "gauge", S, "XINFO STREAM (Redis 7+)", "ms part of the id"),
    Doc("redis_stream_first_entry_id", "gauge", S, "XINFO STREAM", "ms part of the id; 0 for an empty stream"),
    Doc("redis_stream_last_entry_id", "gauge", S, "XINFO STREAM", "ms part of the id; 0 for an empty stream"),
    Doc("redis_stream_entries_added_total", "counter", S, "XINFO STREAM (Redis 7+)", "entries ever added"),
    Doc("redis_stream_group_consumers", "gauge", G, "XINFO GROUPS"),
    Doc("redis_stream_group_messages_pending", "gauge", G, "XINFO GROUPS", "delivered, not acknowledged"),
    Doc("redis_stream_group_last_delivered_id", "gauge", G, "XINFO GROUPS", "ms part of the id"),
    Doc("redis_stream_group_entries_read", "gauge", G, "XINFO GROUPS (Redis 7+)"),
    Doc("redis_stream_group_lag", "gauge", G, "XINFO GROUPS (Redis 7+)", "entries not yet delivered to the group"),
    Doc("redis_stream_group_consumer_messages_pending", "gauge", f"{G}, `consumer`", "XINFO CONSUMERS"),
    Doc("redis_stream_group_consumer_idle_seconds", "gauge", f"{G}, `consumer`", "XINFO CONSUMERS"),
    Doc("elasticache_exporter_key_pattern_keys", "gauge", f"{T}, `option`, `db`, `pattern`", "SCAN of a pattern",
        "keys the pattern matched in the last scrape (at most the budget)"),
    Doc("elasticache_exporter_key_pattern_complete", "gauge", f"{T}, `option`, `db`, `pattern`", "SCAN of a pattern",
        "1 when the SCAN ran to its end, 0 when `max_keys`/`max_counted` or the deadline stopped it"),
    Doc("elasticache_exporter_key_probes_complete", "gauge", T, "the key probes",
        "1 when every watched key and stream was probed, 0 when the deadline or a refusal ended it early"),
    Doc("elasticache_exporter_key_probes_duration_seconds", "gauge", T, "the key probes", "time the probes took after INFO"),
    Doc("elasticache_exporter_queue_length_limit", "gauge", f"{T}, `db`, `key`", "`keys.queues`",
        "the maximum length configured for a watched key that is a queue, `+Inf` when none; the queue alerts watch these keys"),
]  # fmt: skip

SLOTS = [
    Doc("redis_cluster_slot_keys", "gauge", f"{T}, `slot` (the node's top `cluster.slot_stats.top` slots by CPU and by keys)",
        "`CLUSTER SLOT-STATS` (background, `cluster.slot_stats.enabled`)", "keys in the slot"),
    Doc("redis_cluster_slot_cpu_seconds_total", "counter", f"{T}, `slot`", "`CLUSTER SLOT-STATS` (`cluster-slot-stats-enabled`)",
        "CPU the slot's commands took, as the node counts it: it starts afresh when the node gains the slot (a reset to `rate()`), "
        "and the series leaves when the slot moves away"),
    Doc("redis_cluster_slot_network_bytes_total", "counter", f"{T}, `slot`, `direction` (`in`, `out`)", "`CLUSTER SLOT-STATS`",
        "network bytes of the slot's commands"),
    Doc("redis_cluster_node_slots", "gauge", T, "`CLUSTER SLOT-STATS`", "slots the primary serves"),
    Doc("redis_cluster_node_slots_keys", "gauge", T, "`CLUSTER SLOT-STATS`", "keys over all its slots"),
    Doc("redis_cluster_node_slots_cpu_seconds_total", "counter", T, "`CLUSTER SLOT-STATS`, counted by the exporter",
        "CPU of its slots since the exporter's first read of the node (from 0), the sum of each slot's increase between two "
        "reads: it never falls when a slot moves away, unlike the node's own sum"),
    Doc("redis_cluster_node_slots_network_bytes_total", "counter", f"{T}, `direction`", "`CLUSTER SLOT-STATS`, counted by the exporter",
        "network bytes of its slots, counted as the CPU is"),
    Doc("elasticache_cluster_shard_share_ratio", "gauge", "`replication_group`, `shard`, `resource` (`cpu`, `network`, `keys`)",
        "`CLUSTER SLOT-STATS`", "the shard's share of its group's load, 0 to 1 (cpu, network: each slot's increase since the "
        "previous read; keys: now)"),
    Doc("elasticache_cluster_shard_load_over_mean", "gauge", "`replication_group`, `shard`, `resource`", "`CLUSTER SLOT-STATS`",
        "the shard's load over the mean shard's, 0 to the number of shards (1: its fair part); RedisClusterHotShard reads it"),
    Doc("elasticache_cluster_load_skew", "gauge", "`replication_group`, `resource`", "`CLUSTER SLOT-STATS`",
        "the busiest shard's load over the mean shard's, 1 (even) to the number of shards (at most 2 with two shards)"),
    Doc("elasticache_exporter_slot_stats_errors_total", "counter", f"{T}, `kind`", "the slot-stats profiler", "failed reads"),
    Doc("elasticache_exporter_slot_stats_read_duration_seconds", "gauge", T, "the slot-stats profiler", "how long the last read took"),
]  # fmt: skip

SECTIONS: dict[str, list[Doc]] = {
    "structured": STRUCTURED,
    "replication": REPLICATION,
    "keys": KEYS,
    "baselines": BASELINES,
    "aws": AWS,
    "clients": CLIENTS,
    "keyspace": KEYSPACE,
    "slots": SLOTS,
    "exporter": EXPORTER,
}


def relation(name: str) -> str:
    if not name.startswith("redis_"):
        return "ours only"
    return "ours only" if name in OURS_ONLY else "same"


def field_docs() -> list[Doc]:
    """The INFO fields of the field table, as rows."""

    def row(field: str, spec: FieldMetric, labels: str, source: str) -> Doc:
        return Doc(spec.name, spec.kind, labels, f"{source} `{field}`", spec.help)

    rows = [row(field, spec, T, "INFO") for field, spec in KNOWN_FIELDS.items()]
    rows += [row(field, spec, f"{T}, `master_host`, `master_port`", "INFO") for field, spec in MASTER_LABELLED_FIELDS.items()]
    rows += [row(field, spec, T, "CLUSTER INFO") for field, spec in CLUSTER_INFO_FIELDS.items()]
    return rows


def all_docs() -> list[Doc]:
    return field_docs() + [doc for docs in SECTIONS.values() for doc in docs]


def label_names(doc: Doc) -> set[str]:
    return set(re.findall(r"`([a-z_A-Z]+)`", re.sub(r"\([^)]*\)", "", doc.labels)))


def _table(docs: list[Doc]) -> list[str]:
    lines = ["| metric | type | labels | source | meaning | redis_exporter |", "|---|---|---|---|---|---|"]
    for doc in docs:
        source = doc.source.replace("|", "\\|")
        lines.append(f"| `{doc.name}` | {doc.type} | {doc.labels.replace('|', chr(92) + '|')} | {source} | {doc.meaning} | {relation(doc.name)} |")
    return lines


def render(section: str) -> str:
    if section == "info":
        lines = _table(field_docs())
    elif section == "differences":
        lines = ["| redis_exporter | this exporter | instead write |", "|---|---|---|"]
        lines += [f"| `{name}` | {ours} | {rewrite} |" for name, (ours, rewrite) in sorted(UPSTREAM_DIFFERENCES.items())]
        others = ", ".join(f"`{prefix}*`" for prefix in OTHER_SERVERS) + ", " + ", ".join(f"`{n}`" for n in sorted(OTHER_SERVER_FAMILIES))
        lines.append(f"| fields of modules and other servers: {others} | each as found, `redis_<field>` (a gauge) | the field's own name |")
    else:
        lines = _table(SECTIONS[section])
    return "\n".join(lines)


_BLOCK = re.compile(r"(<!-- BEGIN GENERATED: (\w+) -->\n)(.*?)(<!-- END GENERATED -->)", re.S)


OTHER_GENERATORS = {"recorded": "exporter.alerts.recorded_doc"}  # blocks the alerts package renders (service may not import it)


def replace_tables(document: str) -> str:
    """The document with every generated block rendered anew (but those of OTHER_GENERATORS, left as they are)."""
    return _BLOCK.sub(
        lambda match: match.group(0) if match.group(2) in OTHER_GENERATORS else match.group(1) + render(match.group(2)) + "\n" + match.group(4),
        document,
    )


if __name__ == "__main__":
    import sys
    from pathlib import Path

    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/metrics.md")
    path.write_text(replace_tables(path.read_text()))
