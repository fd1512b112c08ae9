"""The ``aws`` section: accounts, regions, tag filters, CloudWatch polling."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from exporter.aws.settings import AwsAccount, AwsConfig
from exporter.common.errors import ConfigError

from .declared import ACCOUNT, AWS, CLOUDWATCH, METRIC
from .readers import as_mapping, as_string, check_keys

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
        known = known_regions()
        if known and region not in known:
            import difflib

            near = difflib.get_close_matches(region, sorted(known), n=1, cutoff=0.8)
            hint = f"did you mean {near[0]!r}?" if near else "a region newer than the installed botocore needs a newer one"
            raise ConfigError(f"{key}[{i}]", f"no ElastiCache region {region!r} in botocore's partition data ({hint})")
        regions.append(region)
    return tuple(dict.fromkeys(regions))


def known_regions() -> frozenset[str]:
    """The regions ElastiCache has in any partition, as the installed botocore's endpoint data lists them (none where
    botocore cannot say: then the name's form alone is checked)."""
    try:
        import botocore.session

        session = botocore.session.get_session()
        return frozenset(
            region
            for partition in session.get_available_partitions()
            for region in session.get_available_regions("elasticache", partition_name=partition)
        )
    except Exception:  # noqa: BLE001 - botocore's data missing or unreadable: the form check stands
        return frozenset()


def aws_config(raw: dict[str, Any]) -> AwsConfig:
    if not raw:
        return AwsConfig()  # AWS off: nothing of the AWS side is loaded
    from exporter.aws.cloudwatch import DEFAULT_METRICS

    fields = AWS.fields(raw, "aws")
    accounts = _accounts(raw)
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
    fields.update(CLOUDWATCH.fields(cloudwatch, "aws.cloudwatch"))
    period = fields["period"] = int(fields["period"])
    if period != 60:
        # a poll asks every minute since the last at the price of one query a metric, so a longer period saves nothing, and
        # the series that count minutes for the alerts (bursts, sustained runs, rising counters) need one datapoint each
        raise ConfigError("aws.cloudwatch.period", f"must be 60s (one datapoint a minute, as ElastiCache publishes), got {period}s")
    lookback = CLOUDWATCH.value(cloudwatch, "lookback", "aws.cloudwatch") or period * 5
    metrics = _metric_specs(cloudwatch.get("metrics"), "aws.cloudwatch.metrics")
    serverless_metrics = cloudwatch.get("serverless_metrics")
    return AwsConfig(
        **fields,
        accounts=tuple(accounts),
        tag_filters=filters,
        lookback_periods=max(1, int(lookback // period)),
        metrics=metrics or DEFAULT_METRICS,
        serverless_metrics=None if serverless_metrics is None else _metric_specs(serverless_metrics, "aws.cloudwatch.serverless_metrics"),
        export_tags=_export_tags(raw.get("export_tags")),
    )


def _accounts(raw: dict[str, Any]) -> list[AwsAccount]:
    """The default chain's account in ``regions`` (with its role, if any) and the ``accounts`` listed; an aws section
    with no region at all would scrape localhost instead of AWS, so it is refused."""
    regions = _regions(raw.get("regions"), "aws.regions") + _regions(raw.get("region"), "aws.region")
    accounts: list[AwsAccount] = []
    role = raw.get("role_arn")
    if regions:
        accounts.append(AwsAccount(regions=regions, role_arn=_role(role, "aws.role_arn"), external_id=raw.get("external_id")))
    elif role:
        raise ConfigError("aws.role_arn", "needs aws.regions")
    if not regions and not role and not raw.get("accounts") and ("regions" in raw or "region" in raw or raw.get("scrape_discovered")):
        # regions: [] (a list templated empty) or scrape_discovered with no region: AWS clearly meant, and what would run
        # instead is a scrape of localhost
        raise ConfigError("aws.regions", "is empty: name the regions to discover (or leave aws.regions and scrape_discovered out)")
    for i, item in enumerate(raw.get("accounts") or []):
        key = f"aws.accounts[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(key, "must be a mapping with role_arn and regions")
        check_keys(item, key, ACCOUNT.keys())
        account_regions = _regions(item.get("regions"), f"{key}.regions") or regions
        if not account_regions:
            raise ConfigError(f"{key}.regions", "no regions given here or in aws.regions")
        external_id = item.get("external_id")
        accounts.append(AwsAccount(account_regions, _role(item.get("role_arn"), f"{key}.role_arn"), external_id))
    return accounts


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
        check_keys(item, key, METRIC.keys())
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
