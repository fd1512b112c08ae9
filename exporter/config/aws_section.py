"""The ``aws`` section: accounts, regions, tag filters, CloudWatch polling."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from exporter.aws.settings import AwsAccount, AwsConfig
from exporter.common.errors import ConfigError

from .readers import as_bool, as_duration, as_mapping, as_string, check_keys

if TYPE_CHECKING:
    from exporter.aws.cloudwatch import MetricSpec

_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")


def _regions(value: Any, key: str) -> tuple[str, ...]:
    if value in (None, ""):
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ConfigError(key, "must be a list of regions")
    regions = []
    for i, item in enumerate(items):
        region = as_string(item, f"{key}[{i}]").strip()
        if not _REGION.match(region):
            raise ConfigError(f"{key}[{i}]", f"not an AWS region: {region!r}")
        regions.append(region)
    return tuple(dict.fromkeys(regions))


def aws_config(raw: dict[str, Any]) -> AwsConfig:
    if not raw:
        return AwsConfig()  # AWS off: nothing of the AWS side is loaded
    from exporter.aws.cloudwatch import DEFAULT_METRICS

    check_keys(raw, "aws", {"region", "regions", "role_arn", "external_id", "accounts", "tag_filters", "discovery_interval",
                             "cloudwatch", "scrape_discovered", "discovered", "export_tags", "events"})  # fmt: skip
    regions = _regions(raw.get("regions"), "aws.regions") + _regions(raw.get("region"), "aws.region")
    accounts: list[AwsAccount] = []
    role = raw.get("role_arn")
    if regions:
        accounts.append(AwsAccount(regions=regions, role_arn=_role(role, "aws.role_arn"), external_id=raw.get("external_id")))
    elif role:
        raise ConfigError("aws.role_arn", "needs aws.regions")
    for i, item in enumerate(raw.get("accounts") or []):
        key = f"aws.accounts[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(key, "must be a mapping with role_arn and regions")
        check_keys(item, key, {"role_arn", "external_id", "regions"})
        account_regions = _regions(item.get("regions"), f"{key}.regions") or regions
        if not account_regions:
            raise ConfigError(f"{key}.regions", "no regions given here or in aws.regions")
        external_id = item.get("external_id")
        accounts.append(AwsAccount(account_regions, _role(item.get("role_arn"), f"{key}.role_arn"), external_id))
    filters_raw = raw.get("tag_filters") or {}
    if not isinstance(filters_raw, dict):
        raise ConfigError("aws.tag_filters", "must map tag keys to lists of values")
    filters: dict[str, tuple[str, ...]] = {}
    for tag, values in filters_raw.items():
        if values in (None, "", []):
            filters[str(tag)] = ()
        elif isinstance(values, list):
            filters[str(tag)] = tuple(as_string(v, f"aws.tag_filters.{tag}") for v in values)
        else:
            filters[str(tag)] = (as_string(values, f"aws.tag_filters.{tag}"),)
    cloudwatch = as_mapping(raw, "cloudwatch")
    check_keys(cloudwatch, "aws.cloudwatch", {"enabled", "interval", "period", "delay", "lookback", "metrics", "serverless_metrics",
                                              "node_type_metrics"})  # fmt: skip
    period = as_duration(cloudwatch.get("period", 60), "aws.cloudwatch.period")
    if period < 60 or period % 60:
        raise ConfigError("aws.cloudwatch.period", "must be a multiple of 60s (ElastiCache publishes one datapoint a minute)")
    delay = as_duration(cloudwatch.get("delay", "2m"), "aws.cloudwatch.delay")
    if delay < 120:
        raise ConfigError("aws.cloudwatch.delay", "must be at least 2m: newer one-minute datapoints are still incomplete")
    lookback = as_duration(cloudwatch.get("lookback", period * 5), "aws.cloudwatch.lookback")
    metrics = _metric_specs(cloudwatch.get("metrics"), "aws.cloudwatch.metrics")
    serverless_metrics = cloudwatch.get("serverless_metrics")
    return AwsConfig(
        accounts=tuple(accounts),
        tag_filters=filters,
        discovery_interval=as_duration(raw.get("discovery_interval", "5m"), "aws.discovery_interval"),
        cloudwatch=as_bool(cloudwatch.get("enabled", True), "aws.cloudwatch.enabled"),
        poll_interval=as_duration(cloudwatch.get("interval", "60s"), "aws.cloudwatch.interval"),
        period=int(period),
        delay=delay,
        lookback_periods=max(1, int(lookback // period)),
        metrics=metrics or DEFAULT_METRICS,
        serverless_metrics=None if serverless_metrics is None else _metric_specs(serverless_metrics, "aws.cloudwatch.serverless_metrics"),
        scrape_discovered=as_bool(raw.get("scrape_discovered", False), "aws.scrape_discovered"),
        export_tags=_export_tags(raw.get("export_tags")),
        events=as_bool(raw.get("events", True), "aws.events"),
        node_type_metrics=as_bool(cloudwatch.get("node_type_metrics", True), "aws.cloudwatch.node_type_metrics"),
    )


def _export_tags(value: Any) -> tuple[str, ...]:
    """``aws.export_tags``: tag keys, each served as the label YACE would name it (``tag_<key>``)."""
    from exporter.aws.fleet_events import tag_label

    if value in (None, []):
        return ()
    if not isinstance(value, list):
        raise ConfigError("aws.export_tags", "must be a list of tag keys")
    keys = []
    for i, item in enumerate(value):
        key = as_string(item, f"aws.export_tags[{i}]")
        if tag_label(key) is None:
            raise ConfigError(f"aws.export_tags[{i}]", f"tag {key!r} makes no valid label name (tag_<key>, as YACE names it)")
        if key not in keys:
            keys.append(key)
    return tuple(keys)


def _metric_specs(entries: Any, where: str) -> tuple[MetricSpec, ...]:
    """A list of metric names, or of mappings with a name and statistics (Average when none are given)."""
    from exporter.aws.cloudwatch import MetricSpec, valid_statistic

    if not isinstance(entries, list | None):
        raise ConfigError(where, "must be a list of metric names or of mappings with name and statistics")
    metrics = []
    for i, entry in enumerate(entries or []):
        key = f"{where}[{i}]"
        item = {"name": entry} if isinstance(entry, str) else entry
        if not isinstance(item, dict) or "name" not in item:
            raise ConfigError(key, "must be a metric name or a mapping with name and statistics")
        check_keys(item, key, {"name", "statistics"})
        statistics = item.get("statistics") or ["Average"]
        if isinstance(statistics, str):
            statistics = [statistics]
        for statistic in statistics:
            if not valid_statistic(str(statistic)):
                raise ConfigError(f"{key}.statistics", f"unknown statistic {statistic!r} (Average, Maximum, Minimum, Sum, SampleCount or pNN)")
        metrics.append(MetricSpec(as_string(item["name"], f"{key}.name"), tuple(str(s) for s in statistics)))
    return tuple(metrics)


def _role(value: Any, key: str) -> str | None:
    if value in (None, ""):
        return None
    role = as_string(value, key)
    if not _ROLE_ARN.match(role):
        raise ConfigError(key, f"not an IAM role ARN: {role!r}")
    return role
