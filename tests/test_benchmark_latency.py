"""Benchmark latency kept in the table: redis-benchmark's report (HDR and older form) and its CSV latency columns,
memtier_benchmark's percentiles; repeated passes averaged; a rate that is the client's limit told apart from the node's.
The figures are those the benchmark outputs of ../shared/seeds/002 print (copied into tests/data as they were output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from exporter.baselines.derive import derive, read_rows, render_table, with_published
from exporter.baselines.table import BaselineError, load_table, parse_table

DATA = Path(__file__).parent / "data"


def figures(table, node_type: str) -> dict[str, object]:
    return {figure.command: figure for figure in table.get(node_type).latency}


@pytest.mark.unit
def test_the_hdr_report_gives_the_rate_and_percentiles_it_prints():
    rows = read_rows(DATA / "redis_benchmark_report_hdr.txt", None, "cache.r6g.large", None)
    (set_figure,) = figures(derive(rows), "cache.r6g.large").values()
    assert (set_figure.command, set_figure.rps, set_figure.p50_ms, set_figure.p99_ms) == ("SET", 132802.12, 0.175, 0.631)
    assert set_figure.p99_9_ms == 1.103  # the first line of the percentile distribution at or past 99.9 %
    assert (set_figure.data_size, set_figure.clients, set_figure.tool) == (3, 50, "redis-benchmark")  # from the report itself


@pytest.mark.unit
def test_the_older_report_is_read_from_its_percent_list():
    rows = read_rows(DATA / "redis_benchmark_report_old.txt", None, "cache.r6g.large", None)
    (set_figure,) = figures(derive(rows), "cache.r6g.large").values()
    assert (set_figure.rps, set_figure.p50_ms, set_figure.p99_ms, set_figure.p99_9_ms) == (93984.96, 0.3, 0.4, 0.6)


@pytest.mark.unit
def test_a_report_without_get_keeps_latency_and_takes_the_published_bandwidth(tmp_path):
    table = with_published(derive(read_rows(DATA / "redis_benchmark_report_hdr.txt", None, "cache.r6g.large", None)), load_table())
    node = table.get("cache.r6g.large")
    assert node.measured is None  # a SET rate says nothing of the bandwidth out
    assert node.published is not None
    again = parse_table(yaml.safe_load(render_table(table)), "derived.yml")  # the table keeps the figures
    assert again.get("cache.r6g.large").latency == node.latency


@pytest.mark.unit
def test_the_csv_latency_columns_are_kept_and_get_estimates_the_bandwidth():
    table = derive(read_rows(DATA / "redis_benchmark_latency.csv", None, "cache.r6g.large", 3))
    kept = figures(table, "cache.r6g.large")
    assert len(kept) == 10
    assert (kept["GET"].rps, kept["GET"].p50_ms, kept["GET"].p99_ms) == (141242.94, 0.175, 0.375)
    assert (kept["LPOP"].rps, kept["LPOP"].p99_ms) == (159489.64, 0.551)
    assert table.get("cache.r6g.large").measured.bytes_per_second[100] == pytest.approx(141242.94 * (3 + 1 + 5), abs=2)


@pytest.mark.unit
def test_the_hdr_report_given_as_csv_says_what_to_do(tmp_path):
    with pytest.raises(BaselineError, match="redis-benchmark-report"):
        read_rows(DATA / "redis_benchmark_report_hdr.txt", "redis-benchmark-csv", "cache.r6g.large", 3)


def memtier(get_ops: float, hits: float, p99: float) -> dict:
    def stats(ops: float, p50: float, p99_value: float, hits_per_second: float) -> dict:
        return {
            "Ops/sec": ops,
            "Hits/sec": hits_per_second,
            "Misses/sec": ops - hits_per_second if hits_per_second else 0.0,
            "Latency": p50,
            "KB/sec": 0.0,
            "Percentile Latencies": {"p50.00": p50, "p99.00": p99_value, "p99.90": p99_value * 2},
        }

    return {
        "ALL STATS": {"Sets": stats(get_ops / 4, 0.4, p99 * 1.2, 0.0), "Gets": stats(get_ops, 0.3, p99, hits), "Totals": {"Ops/sec": get_ops * 1.25}}
    }


@pytest.mark.unit
def test_memtier_percentiles_and_hits_shape_the_figures(tmp_path):
    source = tmp_path / "memtier.json"
    source.write_text(json.dumps(memtier(get_ops=80_000, hits=60_000, p99=1.1)))
    table = derive(read_rows(source, None, "cache.r6g.2xlarge", 2560))
    kept = figures(table, "cache.r6g.2xlarge")
    assert (kept["GET"].rps, kept["GET"].p50_ms, kept["GET"].p99_ms, kept["GET"].p99_9_ms) == (80_000, 0.3, 1.1, 2.2)
    assert kept["SET"].rps == 20_000
    # only hits carry the value back; a miss is a 5-byte nil
    expected = 60_000 * (2560 + 4 + 5) + 20_000 * 5
    assert table.get("cache.r6g.2xlarge").measured.bytes_per_second[100] == pytest.approx(expected, abs=2)


@pytest.mark.unit
def test_passes_are_averaged_not_maxed(tmp_path):
    sources = []
    for index, (ops, p99) in enumerate([(70_000, 1.0), (80_000, 1.2), (90_000, 1.4)]):
        source = tmp_path / f"pass{index}.json"
        source.write_text(json.dumps(memtier(get_ops=ops, hits=ops, p99=p99)))
        sources.append(source)
    table = derive([row for source in sources for row in read_rows(source, None, "cache.r6g.2xlarge", 2560)])
    node = table.get("cache.r6g.2xlarge")
    assert node.measured.bytes_per_second[100] == pytest.approx(80_000 * (2560 + 4 + 5), rel=1e-6)
    assert node.measured.runs == 3
    get = figures(table, "cache.r6g.2xlarge")["GET"]
    assert (get.rps, get.p99_ms, get.passes) == (80_000, 1.2, 3)


def test_a_rate_that_is_the_same_on_two_node_types_is_the_clients_limit(tmp_path):
    """The seed's redis-benchmark runs topped out near 100,000 requests/s on r5.2xlarge and r6g.2xlarge alike: a single
    client process's ceiling, which must not become either node's bandwidth."""
    csv = '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
    r5, r6g = tmp_path / "r5.csv", tmp_path / "r6g.csv"
    r5.write_text(csv + '"GET","99512.44","0.4","0.1","0.4","0.6","0.9","3.1"\n"SET","98000.00","0.4","0.1","0.4","0.6","0.9","3.1"\n')
    r6g.write_text(csv + '"GET","101214.58","0.3","0.1","0.3","0.5","0.7","2.9"\n"SET","137000.00","0.3","0.1","0.3","0.5","0.7","2.9"\n')
    out = tmp_path / "table.yml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "baseline",
            "derive",
            "--from",
            str(r5),
            "--node-type",
            "cache.r5.2xlarge",
            "--data-size",
            "4096",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = read_rows(r5, None, "cache.r5.2xlarge", 4096) + read_rows(r6g, None, "cache.r6g.2xlarge", 4096)
    table = derive(rows)
    assert table.get("cache.r5.2xlarge").measured is None  # GET was client-bound on both: no bandwidth from it
    assert figures(table, "cache.r5.2xlarge")["GET"].client_bound
    assert not figures(table, "cache.r6g.2xlarge")["SET"].client_bound  # SET differs by 40 %: the nodes'
    assert any("client-bound" in note for note in table.extra["notes"])


def test_a_mixed_cluster_run_is_credited_to_each_shard(tmp_path):
    """Seed 004's memtier run: --cluster-mode --ratio=1:4 --data-size-range=1024-4096 against a 3-shard cluster. The
    rate is the cluster's; each node carried a third, with values of 2,560 bytes on average."""
    source = tmp_path / "cluster.json"
    source.write_text(json.dumps(memtier(get_ops=240_000, hits=240_000, p99=1.5)))
    out = tmp_path / "table.yml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "baseline",
            "derive",
            "--from",
            str(source),
            "--node-type",
            "cache.r6g.2xlarge",
            "--data-size",
            "1024-4096",
            "--shards",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    node = load_table(out).get("cache.r6g.2xlarge")
    assert node.measured.data_size == 2560
    assert node.measured.bytes_per_second[100] == pytest.approx(240_000 * (2560 + 4 + 5) / 3, abs=2)
    assert "3 shards" in node.measured.method
    get = figures(load_table(out), "cache.r6g.2xlarge")["GET"]
    assert (get.rps, get.shards) == (240_000, 3)  # the tool's own figure, with the cluster it was measured on
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "baseline",
            "derive",
            "--from",
            str(source),
            "--node-type",
            "cache.r6g.2xlarge",
            "--data-size",
            "4096-1024",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert "--data-size" in bad.stderr


@pytest.mark.unit
def test_the_quiet_form_gives_one_pass_per_line_averaged():
    """redis-benchmark -q against a cache.m1.small (seed 001): eight GET passes, one line each; their mean is the
    node's rate, with the passes counted."""
    with pytest.raises(BaselineError, match="--data-size"):
        read_rows(DATA / "redis_benchmark_quiet_m1_small.txt", None, "cache.m1.small", None)
    table = derive(read_rows(DATA / "redis_benchmark_quiet_m1_small.txt", None, "cache.m1.small", 3))
    get = figures(table, "cache.m1.small")["GET"]
    rates = [12482.84, 10188.49, 11746.74, 14409.22, 6359.71, 7206.17, 8850.34, 13363.62]
    assert get.passes == 8
    assert get.rps == pytest.approx(sum(rates) / 8, abs=0.001)
    assert table.get("cache.m1.small").measured.bytes_per_second[100] == pytest.approx(sum(rates) / 8 * (3 + 1 + 5), abs=2)
