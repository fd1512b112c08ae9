"""``demo`` as a newcomer runs it: a throwaway redis-server is started, given the demo's node type and a little traffic,
so the first page shows utilization against a baseline and headroom; it stops with the exporter."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest
from helpers import exact_samples
from servers import free_port, wait_until

from exporter.cli.demo import DEMO_NODE_TYPE, _answers


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
        return reply.read().decode()


def test_the_demo_shows_utilization_against_a_baseline_and_stops_its_server(tmp_path):
    redis_port, http_port = free_port(), free_port()
    config = tmp_path / "demo.yml"
    config.write_text("baselines:\n  window: 3s\n")  # rates over 3 s instead of 5 minutes, for the test
    log = Path(tempfile.mkstemp(prefix="ecx-demo-", suffix=".log")[1])
    with log.open("wb") as out:
        demo = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "demo",
                "--redis.addr",
                f"redis://localhost:{redis_port}",
                "--web.listen-address",
                f"127.0.0.1:{http_port}",
                "--config.file",
                str(config),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "elasticache_network_utilization_ratio" in _metrics(http_port, demo), timeout=30, what="the demo's utilization")

        def utilization() -> float:
            samples = exact_samples(_metrics(http_port, demo))
            return next(
                (
                    value
                    for (name, labels), value in samples.items()
                    if name == "elasticache_network_utilization_ratio"
                    and dict(labels).get("direction") == "out"
                    and dict(labels).get("node_type") == DEMO_NODE_TYPE
                ),
                0.0,
            )

        wait_until(lambda: utilization() > 0.1, timeout=30, what="traffic a visible share of the baseline")
        assert utilization() < 0.5  # a little traffic, not a saturated node
        headroom = [
            value
            for (name, labels), value in exact_samples(_metrics(http_port, demo)).items()
            if name == "elasticache_network_headroom_bytes_per_second" and dict(labels).get("direction") == "out"
        ]
        assert headroom
        assert headroom[0] > 0
        page = get(http_port, "/")
        assert DEMO_NODE_TYPE in page
        assert "no node type" not in page.lower()
        assert "% of the baseline" in page  # a utilization bar
        wait_until(lambda: "render prometheus" in log.read_text(), timeout=30, what="the demo's where-to-look lines")
        printed = log.read_text()
        assert f"http://127.0.0.1:{http_port}/metrics" in printed
        assert "render prometheus" in printed
    finally:
        demo.send_signal(signal.SIGTERM)
        demo.wait(timeout=15)
    assert not _answers(redis_port), "the throwaway redis-server stops with the demo"


def _metrics(port: int, process: subprocess.Popen) -> str:
    if process.poll() is not None:
        raise AssertionError(f"the demo exited with {process.returncode}")
    try:
        return get(port, "/metrics")
    except OSError:
        return ""


def test_the_first_page_after_the_demo_says_where_to_look_shows_a_scraped_node_and_its_traffic(tmp_path):
    """At the default 5-minute window and with nothing scraping /metrics: the first page opened once the demo has printed
    where to look shows the node up and its traffic as a share of the baseline, not "not scraped yet" or "measuring"."""
    redis_port, http_port = free_port(), free_port()
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        demo = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "demo",
                "--redis.addr",
                f"redis://localhost:{redis_port}",
                "--web.listen-address",
                f"127.0.0.1:{http_port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: demo.poll() is not None or "Look at:" in log.read_text(), timeout=30, what="the demo's where-to-look lines")
        assert demo.poll() is None, log.read_text()
        page = get(http_port, "/")
        assert "not scraped yet" not in page
        assert "measuring (" not in page
        assert ">up<" in page
        assert "% of the baseline" in page
    finally:
        demo.send_signal(signal.SIGTERM)
        demo.wait(timeout=15)


@pytest.mark.unit
def test_the_demo_listens_on_loopback_unless_told_where():
    """serve's default listens on every interface; the demo's on 127.0.0.1, so a laptop serves its network nothing.
    An address given (all interfaces included) is kept."""
    from exporter.cli.demo import on_loopback
    from exporter.config import build_config

    assert on_loopback(build_config({}, environ={})).listen_address == "127.0.0.1:9769"
    told = build_config({"web": {"listen_address": "0.0.0.0:9769"}}, environ={})
    assert on_loopback(told).listen_address == "0.0.0.0:9769"
