"""The HTML capacity report and the live status page, opened in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
from moto import mock_aws
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from servers import start_exporter
from tools import require

from exporter.cli.main import main

DOCS = Path(__file__).parent.parent / "docs"


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = require("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(require("chromedriver")), options=options)
    yield driver
    driver.quit()


def keep_screenshot(driver, tmp_path: Path, name: str) -> Path:
    """Saved with the test's files; copied to docs/ when ELASTICACHE_EXPORTER_SCREENSHOTS=docs (to refresh those docs/operations.md shows)."""
    path = tmp_path / name
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000
    if os.environ.get("ELASTICACHE_EXPORTER_SCREENSHOTS") == "docs":
        shutil.copy(path, DOCS / name)
    return path


def test_capacity_report_in_chromium(browser, tmp_path, monkeypatch):
    import test_capacity

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-west-1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    report = tmp_path / "capacity.html"
    with mock_aws():
        test_capacity.seed_history(time.time())
        assert main(["capacity", "--aws.region", "eu-west-1", "--period", "3600s", "--format", "html", "--out", str(report)]) == 0
    browser.get(report.as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "#summary tbody tr")
    cells = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")] for row in rows]
    assert [row[0] for row in cells] == ["hot-001", "rising-001", "calm-001", "odd-001", "silent-001"]
    assert cells[0][2] == "critical"
    assert cells[0][9].startswith("cache.r6g.xlarge (4 vCPU, 26.32 GiB, Graviton)")
    assert cells[1][6] in ("linear", "compound") or cells[1][6].startswith("compound (+")
    assert cells[1][2] == "watch"
    assert cells[3][2] == "no baseline"
    assert "not in the baseline table" in cells[3][9]
    assert cells[4][2] == "no data"
    assert cells[4][4] == "-"
    charts = browser.find_elements(By.CSS_SELECTOR, "section.node svg.chart")
    assert len(charts) == 5
    # out and in for the four nodes with data, and the growth model of the three with a baseline and a trend
    assert len(browser.find_elements(By.CSS_SELECTOR, "section.node polyline:not(.model)")) == 8
    assert len(browser.find_elements(By.CSS_SELECTOR, "section.node polyline.model")) == 3
    # labelled axes: dates (UTC) along x, MB/s up y, the baseline levels drawn as lines; all rendered with a size
    first = charts[0]
    dates = [tick.text for tick in first.find_elements(By.CSS_SELECTOR, "text.xtick")]
    assert len(dates) >= 4
    assert all(re.fullmatch(r"20\d\d-\d\d-\d\d", date) for date in dates)
    assert dates == sorted(dates)
    assert "date (UTC)" in first.text
    assert "MB/s" in first.text
    assert len(first.find_elements(By.CSS_SELECTOR, "line.ytick")) >= 3
    assert len(first.find_elements(By.CSS_SELECTOR, "line.baseline")) == 2
    assert first.size["width"] >= 600
    assert first.size["height"] >= 200
    keep_screenshot(browser, tmp_path, "capacity-report.png")


def test_status_page_in_chromium(browser, tmp_path, plain_redis):
    from servers import free_port

    config = tmp_path / "config.yml"
    config.write_text(
        f"""
targets:
  - name: cache-a
    addr: {plain_redis.addr}
    node_type: cache.t3.micro
  - name: cache-b
    addr: redis://127.0.0.1:{free_port()}
    node_type: cache.r6g.large
    password: never-shown-pw
    timeout: 500ms
  - name: cache-c
    addr: {plain_redis.addr.replace("127.0.0.1", "localhost")}
    node_type: cache.z9.huge
baselines:
  window: 10s
"""
    )
    exporter = start_exporter("--config.file", str(config))
    try:
        client = plain_redis.client()
        # six scrapes 0.3 s apart: the 10 s window still holds them when the page is rendered, however slowly Chromium
        # gets to it (a 3 s window needed the page within about 2 s of the last scrape, or the bar read "measuring")
        for _ in range(6):
            client.set("k", "v" * 50_000)
            client.get("k")
            exporter.get("/metrics")
            time.sleep(0.3)
        browser.get(exporter.url + "/")
        rows = {row.get_attribute("data-target"): row for row in browser.find_elements(By.CSS_SELECTOR, "#targets tbody tr")}
        assert set(rows) == {"cache-a", "cache-b", "cache-c"}
        a = [cell.text for cell in rows["cache-a"].find_elements(By.TAG_NAME, "td")]
        assert a[2] == "up"
        assert a[3] == "master"
        assert a[4] == "cache.t3.micro"
        assert a[5].endswith("%")  # a utilization bar with its percentage
        assert a[8] == "-"  # no AWS here: no share of AWS's baseline
        assert rows["cache-a"].find_elements(By.CSS_SELECTOR, ".bar > span")
        b = [cell.text for cell in rows["cache-b"].find_elements(By.TAG_NAME, "td")]
        assert b[2] == "down"
        assert b[10] == "refused"
        c = [cell.text for cell in rows["cache-c"].find_elements(By.TAG_NAME, "td")]
        assert c[5] == "no baseline"
        assert "never-shown-pw" not in browser.page_source
        assert browser.find_element(By.ID, "cloudwatch").text == "CloudWatch: not configured"
        refresh = browser.find_element(By.CSS_SELECTOR, 'meta[http-equiv="refresh"]').get_attribute("content")
        assert refresh == "15"
        keep_screenshot(browser, tmp_path, "status-page.png")
    finally:
        exporter.stop()
