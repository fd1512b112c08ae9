"""AWS accounts, discovery and CloudWatch polling settings (built by exporter.config)."""

from __future__ import annotations

from typing import Any

from exporter.common.records import field, record


@record(frozen=True)
class AwsAccount:
    """Credentials of one account: the default chain, or a role assumed from it."""

    regions: tuple[str, ...]
    role_arn: str | None = None
    external_id: str | None = None


@record(frozen=True)
class AwsConfig:
    accounts: tuple[AwsAccount, ...] = ()
    tag_filters: dict[str, tuple[str, ...]] = field(factory=dict)
    discovery_interval: float = 300.0
    cloudwatch: bool = True
    poll_interval: float = 300.0  # how often the poller wakes; the paging tier's interval
    alerting_interval: float = 900.0  # the alerting tier's (cloudwatch.TIERS); never shorter than poll_interval
    trends_interval: float = 3600.0  # the trends tier's
    period: int = 60
    delay: float = 120.0
    lookback_periods: int = 5
    metrics: tuple[Any, ...] = ()  # MetricSpec; the default set when empty
    serverless_metrics: tuple[Any, ...] | None = None  # MetricSpec of serverless caches; None: cloudwatch.SERVERLESS_METRICS
    scrape_discovered: bool = False
    export_tags: tuple[str, ...] = ()  # tag keys served as tag_<key> labels of elasticache_node_info and serverless info
    events: bool = True  # poll DescribeEvents and the service updates
    node_type_metrics: bool = True  # poll the metrics only some node types have (r6gd data tiering, t-family credits)
    exclude_groups: tuple[str, ...] = ()  # groups of cloudwatch.METRIC_GROUPS not polled
    budget_usd_per_month: float | None = None  # over it, the non-paging tiers are lengthened (budget.LENGTHENING)
    promql: str = "auto"  # auto: the OpenTelemetry metrics through CloudWatch's PromQL API where cheaper (otel_poll); off
    promql_endpoint: str | None = None  # where that API is asked; None: CloudWatch's endpoint of each region
    info_first: bool = True  # a node whose INFO the exporter reads gets no CloudWatch copy of it (cloudwatch.INFO_EQUIVALENT)

    def tier_interval(self, tier: str) -> float:
        """How often a tier is asked: its setting, never more often than the poller wakes."""
        configured = {"paging": self.poll_interval, "alerting": self.alerting_interval, "trends": self.trends_interval}[tier]
        return max(configured, self.poll_interval)

    @property
    def enabled(self) -> bool:
        return bool(self.accounts)
