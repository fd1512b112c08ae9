"""The capacity report: 14 days of rising traffic in moto, projection and recommendation."""

from __future__ import annotations

import datetime
import json
import time

import boto3
import pytest
from moto import mock_aws

from exporter.baselines.table import load_table
from exporter.capacity.report import DAY, build_reports, daily_p90, linear_fit, plan_calls, projected_time, render_html, render_text
from exporter.cli.main import main

REGION = "eu-west-1"
BASELINE = 93_750_000  # cache.r6g.large: 0.75 Gbit/s


@pytest.fixture
def aws_credentials(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


def test_plan_calls_respects_the_datapoint_limit():
    # 14 days of one-minute data is 20,160 datapoints a series: 5 series a call
    assert plan_calls(15, 14) == [5, 5, 5]
    assert plan_calls(1, 1) == [1]
    assert sum(plan_calls(1000, 1)) == 1000
    assert max(plan_calls(1000, 1)) <= 70


def test_fit_and_projection():
    day0 = 1_700_000_000.0
    series = [(day0 + d * DAY, 100.0 + 10.0 * d) for d in range(14)]
    slope, intercept = linear_fit(series)
    assert slope * DAY == pytest.approx(10.0)
    now = day0 + 13 * DAY
    assert projected_time((slope, intercept), 300.0, now) == pytest.approx(day0 + 20 * DAY)
    assert projected_time((slope, intercept), 100.0, now) == now  # already above
    assert projected_time((-slope, intercept), 10_000, now) is None  # falling: never


def seed_history(now: float) -> None:
    """Three r6g.large nodes with rising traffic (hourly datapoints), one without data, one of an unknown type."""
    elasticache = boto3.client("elasticache", region_name=REGION)
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    for cluster_id, node_type in (("rising-001", "cache.r6g.large"), ("hot-001", "cache.r6g.large"), ("calm-001", "cache.r6g.large"),
                                  ("silent-001", "cache.r6g.large"), ("odd-001", "cache.z9.huge")):  # fmt: skip
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
            data.append({"MetricName": "NetworkBytesOut", "Timestamp": datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc),
                         "Value": profile(day) * 3600, "Dimensions": dims})  # fmt: skip
            data.append({"MetricName": "NetworkBytesIn", "Timestamp": datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc),
                         "Value": profile(day) * 360, "Dimensions": dims})  # fmt: skip
            data.append({"MetricName": "DatabaseMemoryUsagePercentage",
                         "Timestamp": datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc), "Value": 30.0, "Dimensions": dims})  # fmt: skip
        for start in range(0, len(data), 500):
            cloudwatch.put_metric_data(Namespace="AWS/ElastiCache", MetricData=data[start : start + 500])


def test_capacity_projection_and_recommendation(aws_credentials, capsys):
    now = time.time()
    with mock_aws():
        seed_history(now)
        assert main(["capacity", "--aws.region", REGION, "--period", "3600s", "--format", "json"]) == 0
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


def test_daily_p90_takes_the_ninetieth_percentile_of_each_day():
    now = 1_700_000_000.0
    end = (now - 120) // 60 * 60
    points = [(end - DAY + 60 * i, float(i)) for i in range(100)]
    ((_, p90),) = daily_p90(points, now, 1)
    assert p90 == pytest.approx(89.1)


def test_render_text_handles_every_status():
    table = load_table()
    reports = build_reports([], {}, table, 14)
    assert render_text(reports).count("\n") == 2
    assert "<table" in render_html(reports, 14, time.time())
