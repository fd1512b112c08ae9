"""What the logs tell on-call: a target's failure and its recovery, each once; JSON lines stamped in RFC 3339 with
their zone; a start-up line of bounded length whatever the fleet."""

from __future__ import annotations

import datetime
import json
import logging

import pytest
from helpers import call, make_app
from servers import start_redis


@pytest.mark.unit
def test_a_json_line_is_stamped_in_rfc_3339_with_its_zone():
    from exporter.cli.main import _JsonFormatter, rfc3339

    assert rfc3339(1796300268.175) == "2026-12-03T12:17:48.175Z"
    record = logging.LogRecord("exporter", logging.WARNING, __file__, 1, "target %s down", ("a",), None)
    line = json.loads(_JsonFormatter().format(record))
    stamp = datetime.datetime.fromisoformat(line["time"].replace("Z", "+00:00"))
    assert stamp.tzinfo is not None
    assert line["msg"] == "target a down"


@pytest.mark.unit
def test_the_start_up_line_names_a_fleet_by_its_count_and_first_few():
    from exporter.cli.serve import targets_summary
    from exporter.config import build_config

    fleet = build_config({"targets": [{"addr": f"node-{i:03d}.cache.amazonaws.com:6379"} for i in range(200)]}, environ={})
    line = targets_summary(fleet.targets)
    assert line.startswith("200 configured target(s): node-000.cache.amazonaws.com:6379")
    assert line.endswith("and 195 more (/discovery lists them)")
    assert len(line) < 600


def test_a_target_that_fails_and_recovers_is_said_once_each_way(caplog):
    server = start_redis()
    try:
        app = make_app({"targets": [{"addr": server.addr, "name": "cache-1"}]})
        caplog.set_level(logging.INFO, logger="exporter.service.collectors.redis")
        assert call(app, "/metrics").code == 200
        server.stop()
        for _ in range(3):
            call(app, "/metrics")
        server.start()
        for _ in range(2):
            call(app, "/metrics")
        app.close()
    finally:
        server.stop()
    said = [record.getMessage() for record in caplog.records if "cache-1" in record.getMessage()]
    failed = [line for line in said if "scrape failed" in line]
    # each kind of failure once (a stopped server first closes the connection, then refuses it), and the end once
    assert len(failed) == len({line.split("scrape failed ")[1].split(":")[0] for line in failed}) >= 1, said
    assert said[-1].endswith("scrape succeeds again (after refused)"), said
    assert sum("succeeds again" in line for line in said) == 1
