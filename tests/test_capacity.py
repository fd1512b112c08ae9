"""The capacity report: 14 days of rising traffic in moto, projection and recommendation."""

from __future__ import annotations

import datetime
import json
import time

import boto3
import pytest
from moto import mock_aws

from exporter.baselines.table import load_table
from exporter.capacity.assess import build_reports, daily_p90
from exporter.capacity.history import DAY, plan_calls
from exporter.capacity.render import render_html, render_text
from exporter.capacity.trend import BAND_Z, project
from exporter.cli.main import main

REGION = "eu-west-1"
BASELINE = 93_750_000  # cache.r6g.large: 0.75 Gbit/s


@pytest.mark.unit
def test_plan_calls_respects_the_datapoint_limit():
    # 14 days of one-minute data is 20,160 datapoints a series: 5 series a call
    assert plan_calls(15, 14) == [5, 5, 5]
    assert plan_calls(1, 1) == [1]
    assert sum(plan_calls(1000, 1)) == 1000
    assert max(plan_calls(1000, 1)) <= 70


def reference_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Ordinary least squares written out, as a reference independent of the code under test."""
    n = len(xs)
    sx, sy, sxx, sxy = sum(xs), sum(ys), sum(x * x for x in xs), sum(x * y for x, y in zip(xs, ys, strict=True))
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return slope, (sy - slope * sx) / n


DAY0 = 1_700_000_000.0


@pytest.mark.unit
def test_linear_growth_is_projected_as_a_line():
    series = [(DAY0 + d * DAY, 100.0 + 10.0 * d) for d in range(14)]
    projection = project(series)
    assert projection.fit.model == "linear"
    assert not projection.step
    now = DAY0 + 13 * DAY
    earliest, central = projection.reaches(300.0, now)
    assert central == pytest.approx(DAY0 + 20 * DAY)
    assert earliest == pytest.approx(central)  # an exact line: no residuals, no range
    assert projection.reaches(100.0, now) == (now, now)  # already above
    assert project([(t, -v) for t, v in series]).reaches(0.0, now) == (None, None)  # falling: never


@pytest.mark.unit
def test_compound_growth_of_5_percent_a_week_for_8_weeks_is_projected_as_compound():
    """A line under-projects compound growth: it must not be chosen, and the date must match a log-linear reference."""
    import math
    import random

    rng = random.Random(7)
    days = list(range(56))
    values = [1e6 * 1.05 ** (d / 7) * (1 + rng.uniform(-0.01, 0.01)) for d in days]
    series = [(DAY0 + d * DAY, v) for d, v in zip(days, values, strict=True)]
    projection = project(series)
    assert projection.fit.model == "compound"
    assert projection.fit.growth_per_week == pytest.approx(0.05, abs=0.003)
    slope, intercept = reference_line([t for t, _ in series], [math.log(v) for v in values])
    level = 3e6
    reference = (math.log(level) - intercept) / slope
    now = series[-1][0]
    earliest, central = projection.reaches(level, now)
    assert central == pytest.approx(reference, abs=3600)
    assert now < earliest <= central  # the range starts earlier, never later
    line_slope, line_intercept = reference_line([t for t, _ in series], values)
    assert central < (level - line_intercept) / line_slope - 7 * DAY  # the line would have said weeks later
    residuals = [math.log(v) - (slope * t + intercept) for t, v in series]
    sigma = math.sqrt(sum(r * r for r in residuals) / (len(series) - 2))
    assert earliest == pytest.approx((math.log(level) - intercept - BAND_Z * sigma) / slope, abs=3600)


@pytest.mark.unit
def test_a_step_change_is_detected_and_the_recent_regime_used():
    """Traffic doubled 10 days ago: the projection starts at the step, so the old regime cannot pull the trend down."""
    series = [(DAY0 + d * DAY, (200.0 if d >= 18 else 100.0) + (d % 3)) for d in range(28)]
    projection = project(series)
    assert projection.step
    assert projection.regime_start == DAY0 + 18 * DAY
    now = series[-1][0]
    assert projection.fit.value_at(now) == pytest.approx(201.0, abs=1.5)
    whole_line = reference_line([t for t, _ in series], [v for _, v in series])
    assert whole_line[0] * DAY > 3  # one line through both regimes: a steep false trend
    assert abs(projection.fit.slope * DAY * (projection.fit.value_at(now) if projection.fit.model == "compound" else 1)) < 1
    assert not project([(DAY0 + d * DAY, 100.0 + (d % 3)) for d in range(28)]).step  # noise alone is no step


def seed_history(now: float) -> None:
    """Three r6g.large nodes with rising traffic (hourly datapoints), one without data, one of an unknown type."""
    elasticache = boto3.client("elasticache", region_name=REGION)
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    for cluster_id, node_type in (
        ("rising-001", "cache.r6g.large"),
        ("hot-001", "cache.r6g.large"),
        ("calm-001", "cache.r6g.large"),
        ("silent-001", "cache.r6g.large"),
        ("odd-001", "cache.z9.huge"),
    ):
        elasticache.create_cache_cluster(CacheClusterId=cluster_id, CacheNodeType=node_type, Engine="redis", NumCacheNodes=1)
    end = (now - 180) // 60 * 60
    # daily p90 of NetworkBytesOut rises linearly; one datapoint an hour holding the bytes of that hour
    profiles = {
        "rising-001": lambda day: (0.40 + 0.025 * day) * BASELINE,  # 40 % → 72.5 % over 14 days, 80 % in about 3 days
        "hot-001": lambda day: (0.85 + 0.005 * day) * BASELINE,  # already above 90 % at the end
        "calm-001": lambda day: 0.20 * BASELINE,  # flat
        "odd-001": lambda day: 0.5 * BASELINE,
    }
    for cluster_id, profile in profiles.items():
        data = []
        for hour in range(14 * 24):
            stamp = end - (14 * 24 - hour) * 3600 + 1800
            day = hour // 24
            dims = [{"Name": "CacheClusterId", "Value": cluster_id}, {"Name": "CacheNodeId", "Value": "0001"}]
            data.append(
                {
                    "MetricName": "NetworkBytesOut",
                    "Timestamp": datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc),
                    "Value": profile(day) * 3600,
                    "Dimensions": dims,
                }
            )
            data.append(
                {
                    "MetricName": "NetworkBytesIn",
                    "Timestamp": datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc),
                    "Value": profile(day) * 360,
                    "Dimensions": dims,
                }
            )
            data.append(
                {
                    "MetricName": "DatabaseMemoryUsagePercentage",
                    "Timestamp": datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc),
                    "Value": 30.0,
                    "Dimensions": dims,
                }
            )
        for start in range(0, len(data), 500):
            cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data[start : start + 500])


def test_capacity_projection_and_recommendation(aws_credentials, capsys):
    now = time.time()
    with mock_aws():
        seed_history(now)
        assert main(["capacity", "--aws.region", REGION, "--period", "3600s", "--format", "json"], clock=lambda: now) == 0
    reports = {r["node"]: r for r in json.loads(capsys.readouterr().out)}
    assert [r["status"] for r in reports.values()][:1] == ["critical"]  # sorted by urgency
    hot, rising, calm = reports["hot-001"], reports["rising-001"], reports["calm-001"]
    assert hot["status"] == "critical"
    assert hot["percent_of_baseline"] == pytest.approx(91.5, abs=0.6)
    assert hot["recommendation"]["node_type"] == "cache.r6g.xlarge"  # 1.25 Gbit/s carries 0.92 x 0.75 under 80 %
    assert hot["recommendation"]["graviton"] is True
    assert rising["status"] == "watch"
    assert rising["percent_of_baseline"] == pytest.approx(72.5, abs=0.6)
    assert rising["trend_bytes_per_second_per_day"] == pytest.approx(0.025 * BASELINE, rel=0.02)
    reaches_80 = datetime.date.fromisoformat(rising["reaches_80_percent"])
    expected = datetime.datetime.fromtimestamp(now + 3 * DAY, datetime.timezone.utc).date()
    assert abs((reaches_80 - expected).days) <= 1
    assert datetime.date.fromisoformat(rising["reaches_100_percent"]) > reaches_80
    assert rising["recommendation"]["node_type"] == "cache.r6g.2xlarge"  # sized for the trend 30 days on: ~150 % of r6g.large
    assert calm["status"] == "ok"
    assert calm["reaches_80_percent"] is None  # flat traffic never gets there
    assert calm["recommendation"] is None
    assert reports["silent-001"]["status"] == "no data"
    assert reports["silent-001"]["percent_of_baseline"] is None  # "no data", not 0 %
    odd = reports["odd-001"]
    assert odd["status"] == "no baseline"
    assert "cache.z9.huge" in odd["reason"]
    assert odd["recommendation"] is None


def test_capacity_table_and_html(aws_credentials, capsys, tmp_path):
    now = time.time()
    with mock_aws():
        seed_history(now)
        assert main(["capacity", "--aws.region", REGION, "--period", "3600s", "--node", "rising-001", "--node", "silent-001"]) == 0
        table = capsys.readouterr().out
        out = tmp_path / "report.html"
        assert main(["capacity", "--aws.region", REGION, "--period", "3600s", "--format", "html", "--out", str(out)]) == 0
    assert table.splitlines()[2].startswith("rising-001")
    assert "no data" in table
    assert "hot-001" not in table
    html = out.read_text()
    assert "<svg" in html
    assert "http://" not in html.replace("http://www.w3.org", "")  # nothing fetched from elsewhere
    assert "https://" not in html


@pytest.mark.unit
def test_daily_p90_takes_the_ninetieth_percentile_of_each_day():
    now = 1_700_000_000.0
    end = (now - 120) // 60 * 60
    points = [(end - DAY + 60 * i, float(i)) for i in range(100)]
    ((_, p90),) = daily_p90(points, now, 1)
    assert p90 == pytest.approx(89.1)


@pytest.mark.unit
def test_render_text_handles_every_status():
    table = load_table()
    reports = build_reports([], {}, table, 14)
    assert render_text(reports).count("\n") == 2
    assert "<table" in render_html(reports, 14, time.time())


def test_persistent_throttling_ends_in_one_line_and_exit_1(aws_credentials, capsys, monkeypatch):
    """CloudWatch throttles every GetMetricData: retried with backoff, then one line on stderr and exit 1."""
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    real = BaseClient._make_api_call
    throttled = []

    def throttling(self, operation, params):
        if operation == "GetMetricData":
            throttled.append(operation)
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)
        return real(self, operation, params)

    import logging

    monkeypatch.setattr(logging.root, "handlers", [])  # as in a fresh process: handlers other tests left write elsewhere
    with mock_aws():
        seed_history(time.time())
        monkeypatch.setattr(BaseClient, "_make_api_call", throttling)
        assert main(["capacity", "--aws.region", REGION, "--period", "3600s"]) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if not line.startswith("capacity: ")]
    assert len(errors) == 1, err
    assert "throttling" in errors[0]
    assert "Traceback" not in err
    assert len(throttled) >= 2  # retried before giving up


def test_unknown_nodes_name_the_nearest_and_progress_speaks_of_capacity(aws_credentials, capsys):
    with mock_aws():
        seed_history(time.time())
        assert main(["capacity", "--aws.region", REGION, "--period", "3600s", "--node", "risin-001"]) == 2
        err = capsys.readouterr().err
        assert "--node risin-001: no such cache cluster" in err
        assert "nearest: rising-001" in err
        assert main(["capacity", "--aws.region", REGION, "--node", "rising-001", "--days", "60", "--format", "json"]) == 0
        captured = capsys.readouterr()
    assert "benchmark" not in captured.err
    assert "capacity: 100% CloudWatch history" in captured.err
    (report,) = json.loads(captured.out)
    assert report["model"] in ("linear", "compound")  # 60 days read as five-minute data (auto period)
    assert main(["capacity", "--aws.region", REGION, "--days", "500"]) == 2
    assert "455" in capsys.readouterr().err
    assert main(["capacity", "--aws.region", REGION, "--days", "30", "--period", "60s"]) == 2
    assert "300s or more" in capsys.readouterr().err


def test_capacity_uses_aws_share_of_the_baseline_where_the_node_publishes_it(aws_credentials, capsys):
    """A node at 40 % of the table's baseline that AWS counts at 95 % of its own, with bursts to 130 %: AWS's figure
    decides, says so, and its busiest second is beside it."""
    now = time.time()
    with mock_aws():
        seed_history(now)
        boto3.client("elasticache", region_name=REGION).create_cache_cluster(
            CacheClusterId="aws-001", CacheNodeType="cache.r6g.large", Engine="redis", NumCacheNodes=1
        )
        cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        end = (now - 180) // 60 * 60
        dims = [{"Name": "CacheClusterId", "Value": "aws-001"}, {"Name": "CacheNodeId", "Value": "0001"}]
        data = []
        for hour in range(14 * 24):
            stamp = datetime.datetime.fromtimestamp(end - (14 * 24 - hour) * 3600 + 1800, datetime.timezone.utc)
            for metric, value in (
                ("NetworkBytesOut", 0.4 * BASELINE * 3600),
                ("NetworkBaselineUsageOutPercentage", 95.0),
                ("NetworkBaselineMaxUsageOutPercentage", 130.0),
            ):
                data.append({"MetricName": metric, "Timestamp": stamp, "Value": value, "Dimensions": dims})
        for start in range(0, len(data), 500):
            cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data[start : start + 500])
        assert main(["capacity", "--aws.region", REGION, "--period", "3600s", "--format", "json"], clock=lambda: now) == 0
        reports = {r["node"]: r for r in json.loads(capsys.readouterr().out)}
        assert main(["capacity", "--aws.region", REGION, "--period", "3600s", "--node", "aws-001", "--node", "hot-001"], clock=lambda: now) == 0
        table = capsys.readouterr().out
    aws, hot = reports["aws-001"], reports["hot-001"]
    assert (aws["status"], aws["percent_of_baseline"], aws["percent_of_baseline_source"]) == ("critical", 95.0, "aws")
    assert aws["peak_second_percent_of_baseline"] == 130.0
    assert aws["network_out_p90_bytes_per_second"] == pytest.approx(0.4 * BASELINE)  # the table would have said 40 %
    assert (hot["percent_of_baseline_source"], hot["peak_second_percent_of_baseline"]) == ("table", None)
    row = next(line for line in table.splitlines() if line.startswith("aws-001"))
    assert "95 % AWS" in " ".join(row.split())
    assert "130 %" in row
    assert "table" in next(line for line in table.splitlines() if line.startswith("hot-001"))
