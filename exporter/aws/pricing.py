"""What CloudWatch charges for what this project asks and makes, in USD a month (us-east-1, the figures AWS publishes
on its CloudWatch pricing page), each with where it comes from. Pure figures and arithmetic: nothing here calls AWS."""

from __future__ import annotations

from exporter.common.records import record

SECONDS_PER_MONTH = 30 * 24 * 3600  # AWS prorates alarms and counts requests over a month of 30 days
GET_METRIC_DATA_PER_1000 = 0.01  # per 1,000 metrics requested, however many datapoints each returns
# CloudWatch's PromQL API bills programmatic queries per million samples scanned; AWS publishes no figure while the API
# is in preview (free meanwhile): the one assumed here is named wherever it is used
PROMQL_USD_PER_MILLION_SAMPLES = 0.01
PROMQL_SAMPLES_SOURCE = (
    "assumed: AWS's OTel pricing page bills PromQL API queries per million samples scanned but gives no figure while "
    "the API is in preview (free); taken as USD 0.01 a million samples, the figure a secondary source gives"
)
FREE_ALARM_METRICS = 10  # an account's free tier of standard alarm metrics a month (not counted off below)


@record(frozen=True)
class AlarmPrice:
    kind: str
    usd_per_metric_month: float  # per alarm metric: each metric an alarm (or its math) reads is billed on its own
    source: str


STANDARD_ALARM = AlarmPrice("standard", 0.10, "CloudWatch pricing: USD 0.10 per alarm metric a month, standard resolution (a period of 60 s or more)")
HIGH_RESOLUTION_ALARM = AlarmPrice("high resolution", 0.30, "CloudWatch pricing: USD 0.30 per alarm metric a month, a period under 60 s")
METRIC_MATH_ALARM = AlarmPrice(
    "metric math", 0.10, "CloudWatch pricing: a metric math alarm is billed per metric its expression reads, at the standard rate"
)

PROMQL_ALARM = AlarmPrice(
    "PromQL",
    0.10,
    "assumed: AWS's pages name the usage type (PromQLAlarmMonitorUsage) but no price; taken as a standard alarm's USD 0.10 "
    "an alarm a month. Were it billed per series evaluated, as a Metrics Insights alarm is per metric analyzed, a fleet "
    "alarm would cost what its nodes' own alarms do",
)


@record(frozen=True)
class AlarmLine:
    """Alarms of one kind: how many, how many metrics they read, and what they cost a month."""

    price: AlarmPrice
    alarms: int
    metrics: int

    @property
    def usd_per_month(self) -> float:
        return self.metrics * self.price.usd_per_metric_month


def alarm_price(arguments: dict) -> tuple[AlarmPrice, int]:
    """The kind of a PutMetricAlarm request and how many alarm metrics it is billed for: one for an alarm on a metric,
    one per metric read (MetricStat) for metric math; a period under 60 s is high resolution; a PromQL alarm, one."""
    if "EvaluationCriteria" in arguments:
        return PROMQL_ALARM, 1
    queries = arguments.get("Metrics") or []
    stats = [query["MetricStat"] for query in queries if "MetricStat" in query]
    periods = [stat.get("Period", 60) for stat in stats] if queries else [arguments.get("Period", 60)]
    if min(periods, default=60) < 60:
        return HIGH_RESOLUTION_ALARM, max(1, len(stats))
    if queries:
        return METRIC_MATH_ALARM, len(stats)
    return STANDARD_ALARM, 1


def alarm_lines(requests: list[dict]) -> list[AlarmLine]:
    """The alarms of ``requests`` (PutMetricAlarm arguments) by kind, in a fixed order, kinds with none left out."""
    counts: dict[str, list[int]] = {}
    prices = {}
    for arguments in requests:
        price, metrics = alarm_price(arguments)
        prices[price.kind] = price
        tally = counts.setdefault(price.kind, [0, 0])
        tally[0] += 1
        tally[1] += metrics
    order = (STANDARD_ALARM.kind, METRIC_MATH_ALARM.kind, HIGH_RESOLUTION_ALARM.kind, PROMQL_ALARM.kind)
    return [AlarmLine(prices[kind], *counts[kind]) for kind in order if kind in counts]
