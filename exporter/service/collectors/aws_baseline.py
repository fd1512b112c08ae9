"""AWS's view of each node's bandwidth beside the baseline table's: the share of its baseline AWS reports (average and
busiest second), the baseline that share implies, and how the table's figure compares with it per node type."""

from __future__ import annotations

import statistics

from exporter.aws.minutes import BurstWindow, SustainedWindow
from exporter.aws.monitor import AwsMonitor
from exporter.aws.network_baseline import DIRECTIONS
from exporter.baselines.table import BaselineTable
from exporter.common.families import GAUGE, FamilySet


def aws_shares(monitor: AwsMonitor, instance: str, fresh_after: float) -> dict[str, tuple[float | None, float | None]]:
    """Per direction with fresh data: (the minute's share of the baseline, its busiest second's), as ratios."""
    shares: dict[str, tuple[float | None, float | None]] = {}
    for direction, word in DIRECTIONS.items():
        usage = monitor.latest(instance, f"NetworkBaselineUsage{word}Percentage", "Average")
        peak = monitor.latest(instance, f"NetworkBaselineMaxUsage{word}Percentage", "Maximum")
        average = usage.value / 100.0 if usage is not None and usage.timestamp >= fresh_after else None
        busiest = peak.value / 100.0 if peak is not None and peak.timestamp >= fresh_after else None
        if average is not None or busiest is not None:
            shares[direction] = (average, busiest)
    return shares


def add_aws_baseline(monitor: AwsMonitor, table: BaselineTable | None, out: FamilySet) -> None:
    fresh_after = monitor.now() - monitor.fresh_seconds()
    implied_by_type: dict[tuple[str, str], list[float]] = {}
    for name, node in monitor.named_nodes():
        if not monitor.owns(name):
            continue
        shares = aws_shares(monitor, name, fresh_after)
        for direction in DIRECTIONS:
            labels = {"instance": name, "direction": direction, "node_type": node.node_type}
            usage, peak = shares.get(direction, (None, None))
            if usage is not None:
                out.add(
                    "elasticache_network_aws_baseline_usage_ratio",
                    GAUGE,
                    "Traffic of the minute as a fraction of the instance's baseline bandwidth, as AWS reports it "
                    "(NetworkBaselineUsage*Percentage / 100, Average; over 1 spends burst credits).",
                    labels,
                    usage,
                )
            if peak is not None:
                out.add(
                    "elasticache_network_aws_baseline_peak_usage_ratio",
                    GAUGE,
                    "The busiest second of the minute as a fraction of the instance's baseline bandwidth, as AWS reports it "
                    "(NetworkBaselineMaxUsage*Percentage / 100).",
                    labels,
                    peak,
                )
            bursts = monitor.burst_window(name, direction)
            if bursts is not None and bursts.newest >= fresh_after:
                _add_bursts(bursts, labels, out)
            held = monitor.sustained_window(name, direction)
            if held is not None and held.newest >= fresh_after:
                _add_sustained(held, labels, out)
            implied = monitor.implied_baseline(name, direction)
            if implied is not None:
                out.add(
                    "elasticache_network_aws_baseline_bytes_per_second",
                    GAUGE,
                    "The baseline bandwidth AWS counts for the node: NetworkBytes (Sum / period) over NetworkBaselineUsage "
                    "(Average / 100), the median of the last hour's minutes at 1 % or more.",
                    labels,
                    implied,
                )
                implied_by_type.setdefault((node.node_type, direction), []).append(implied)
    if table is not None:
        _add_agreement(table, implied_by_type, out)


def _add_bursts(bursts: BurstWindow, labels: dict[str, str], out: FamilySet) -> None:
    """The node's last 10 CloudWatch minutes, each counted once by its timestamp, however often it was polled."""
    out.add(
        "elasticache_network_aws_baseline_window_minutes",
        GAUGE,
        "CloudWatch minutes with a busiest-second datapoint (NetworkBaselineMaxUsage*Percentage) among the 10 up to the newest.",
        labels,
        bursts.minutes,
    )
    out.add(
        "elasticache_network_aws_baseline_burst_minutes",
        GAUGE,
        "Of those minutes, the ones whose busiest second was above the instance's baseline bandwidth (over 100 %).",
        labels,
        bursts.burst_minutes,
    )
    if bursts.max_usage_percent is not None:
        out.add(
            "elasticache_network_aws_baseline_window_max_usage_ratio",
            GAUGE,
            "The highest minute average (NetworkBaselineUsage*Percentage / 100) of the same 10 minutes.",
            labels,
            bursts.max_usage_percent / 100.0,
        )


def _add_sustained(held: SustainedWindow, labels: dict[str, str], out: FamilySet) -> None:
    """The node's last 15 CloudWatch minutes of average share, each minute once: what the 15-minute rules read."""
    out.add(
        "elasticache_network_aws_baseline_sustained_minutes",
        GAUGE,
        "CloudWatch minutes with an average (NetworkBaselineUsage*Percentage) among the 15 up to the newest.",
        labels,
        held.minutes,
    )
    out.add(
        "elasticache_network_aws_baseline_sustained_min_usage_ratio",
        GAUGE,
        "The lowest minute average (NetworkBaselineUsage*Percentage / 100) of the same 15 minutes: held in every one of them.",
        labels,
        held.min_usage_percent / 100.0,
    )


def _add_agreement(table: BaselineTable, implied_by_type: dict[tuple[str, str], list[float]], out: FamilySet) -> None:
    for (node_type, direction), values in sorted(implied_by_type.items()):
        baseline = table.get(node_type)
        levels = baseline.levels(table.basis) if baseline is not None else None
        if not levels:
            continue
        out.add(
            "elasticache_baseline_agreement_ratio",
            GAUGE,
            "The baseline table's 100 % bandwidth of the node type over the baseline AWS implies for it (median over the "
            "fleet's nodes of the type): 1 agrees, 0.5 means the table allows half of what AWS does.",
            {"node_type": node_type, "direction": direction},
            levels[100] / statistics.median(values),
        )
