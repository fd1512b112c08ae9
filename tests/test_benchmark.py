"""`elasticache-exporter benchmark` end to end against a real local redis-server."""

from __future__ import annotations

import csv
import signal
import subprocess
import sys

import pytest
from servers import wait_until
from tools import require

from exporter.baselines.benchmark import percentile
from exporter.baselines.table import load_table


@pytest.mark.unit
def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4, 5], 0.5) == 3
    assert percentile([1, 2, 3, 4, 5], 0.9) == 4.6
    assert percentile([7], 0.9) == 7


def test_benchmark_measures_bandwidth_that_grows_with_data_size(fresh_redis, tmp_path):
    out, table = tmp_path / "results.csv", tmp_path / "table.yml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "benchmark",
            "--target",
            fresh_redis.addr,
            "--node-type",
            "r6g.large",
            "--data-sizes",
            "100,1000,10000",
            "--duration",
            "2s",
            "--clients",
            "20",
            "--out",
            str(out),
            "--table-out",
            str(table),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(out.open()))
    assert [row["dataSize"] for row in rows] == ["100", "1000", "10000"]
    bandwidth = [float(row["mbps_p90"]) for row in rows]
    assert all(value > 0 for value in bandwidth)
    assert bandwidth == sorted(bandwidth), bandwidth
    assert all(float(row["enginecpuutilization_90"]) > 0 for row in rows)
    node = load_table(table).get("cache.r6g.large")
    assert node.measured.data_size == 10000
    # redis-benchmark's own rate and percentiles of GET at each size, kept in the table and printed
    gets = sorted((figure for figure in node.latency if figure.command == "GET"), key=lambda figure: figure.data_size)
    assert [figure.data_size for figure in gets] == [100, 1000, 10000]
    assert all(figure.rps > 0 and 0 < figure.p50_ms <= figure.p99_ms and figure.clients == 20 for figure in gets)
    assert "p99" in result.stdout
    assert node.published.baseline_gbps == 0.75  # published facts joined from the shipped table
    derived = subprocess.run(
        [sys.executable, "-m", "exporter", "baseline", "derive", "--from", str(out), "--format", "mapping"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert derived.returncode == 0, derived.stderr
    assert '"cache.r6g.large"' in derived.stdout


INTERRUPTIBLE = "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); from exporter.cli.main import main; sys.exit(main())"


def test_interrupt_keeps_what_was_measured(fresh_redis, tmp_path):
    out = tmp_path / "results.csv"
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",  # with Python's SIGINT handler, as a terminal starts it: a test run started in the background (a shell
            # without job control) has SIGINT ignored, which a child inherits, and Python then installs none
            INTERRUPTIBLE,
            "benchmark",
            "--target",
            fresh_redis.addr,
            "--node-type",
            "t3.micro",
            "--data-sizes",
            "100,1000",
            "--duration",
            "30s",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    polls = [0]

    def calls(command: str) -> int:  # the server's count of a command, less the INFO calls of this test's own polls
        polls[0] += 1
        stats = fresh_redis.client().info("commandstats")
        return stats.get(f"cmdstat_{command}", {}).get("calls", 0) - (polls[0] if command == "info" else 0)

    wait_until(lambda: calls("get") > 0, timeout=30, interval=0.1, what="the GET load under way")
    under_load = calls("info")
    wait_until(lambda: calls("info") >= under_load + 2, timeout=30, interval=0.2, what="two samples under load")
    process.send_signal(signal.SIGINT)
    _stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert "interrupted" in stderr
    rows = list(csv.DictReader(out.open()))
    assert rows[0]["dataSize"] == "100"
    assert float(rows[0]["mbps_p90"]) > 0


def test_unreachable_target_is_one_line_exit_2(tmp_path):
    from servers import free_port

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "benchmark",
            "--target",
            f"127.0.0.1:{free_port()}",
            "--node-type",
            "t3.micro",
            "--duration",
            "1s",
            "--out",
            str(tmp_path / "x.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()


def test_cluster_mode_spreads_the_load_over_the_shards(tmp_path):

    from servers import start_redis, wait_until

    nodes = [start_redis("--cluster-enabled", "yes") for _ in range(3)]
    try:
        subprocess.run(
            [require("redis-cli"), "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes), "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        for node in nodes:
            wait_until(lambda node=node: b"cluster_state:ok" in node.client().execute_command("CLUSTER", "INFO"), timeout=30, what="cluster ok")
        before = [node.info()["total_net_output_bytes"] for node in nodes]
        table = tmp_path / "table.yml"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "exporter",
                "benchmark",
                "--target",
                nodes[0].addr,
                "--node-type",
                "r6g.large",
                "--data-sizes",
                "1000",
                "--duration",
                "2s",
                "--clients",
                "20",
                "--cluster",
                "--out",
                str(tmp_path / "r.csv"),
                "--table-out",
                str(table),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        grown = [node.info()["total_net_output_bytes"] - start for node, start in zip(nodes, before, strict=True)]
        assert min(grown) > 0.2 * max(grown), grown  # every shard served its share of the GETs
        node = load_table(table).get("cache.r6g.large")
        assert node.measured.bytes_per_second[100] > 0  # the target node's own share, sampled from its INFO
        refused = subprocess.run(
            [sys.executable, "-m", "exporter", "benchmark", "--target", nodes[0].addr, "--node-type", "r6g.large", "--ratio", "1:4"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert refused.returncode == 2
        assert "memtier_benchmark" in refused.stderr
    finally:
        for node in nodes:
            node.stop()
