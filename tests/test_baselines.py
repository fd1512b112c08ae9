"""The baseline table and `baseline derive`, on inputs written from the formats of the seeds."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from exporter.baselines.derive import derive, mapping_levels, read_rows, render_mapping
from exporter.baselines.table import BaselineError, load_table

DATA = Path(__file__).parent / "data"
HEADER = (
    '"instancetype","dataSize","mbps_p90","mbps_p70","test_passes","cpuutilization_90","enginecpuutilization_90",'
    '"cpuutilization_50","enginecpuutilization_50","BytePerMinP90"'
)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "exporter", *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.unit
def test_shipped_table_defaults_to_the_lower_of_measured_and_published():
    table = load_table()
    r4 = table.get("cache.r4.large")
    assert r4.measured.bytes_per_second == {100: 672111997, 90: 604900797, 80: 537689598}
    assert r4.published.baseline_gbps == 0.75
    assert r4.levels("lower") == {100: 93_750_000, 90: 84_375_000, 80: 75_000_000}
    assert r4.levels("measured") == {100: 672111997, 90: 604900797, 80: 537689598}
    assert table.get("r6g.large").levels() == {100: 93_750_000, 90: 84_375_000, 80: 75_000_000}
    assert table.get("cache.t3.micro").levels()[100] == 8_000_000
    m3 = table.get("cache.m3.medium")
    assert m3.levels() == {100: 36644223, 90: 32979801, 80: 29315378}  # measured only: "Moderate" has no figure
    assert table.get("cache.r4.16xlarge").full_bandwidth() == (1385483993.0, "measured")
    for family in ("t3", "t4g", "m5", "m6g", "m7g", "r5", "r6g", "r7g"):
        assert table.get(f"cache.{family}.large" if family not in ("t3", "t4g") else f"cache.{family}.medium") is not None
    assert load_table(basis="measured").basis == "measured"


def _seed_rows() -> list[str]:
    """Athena rows that reproduce the seed's mapping: for each node type a p90 that gives its three integers."""
    mapping = json.loads((DATA / "seed_mapping.json").read_text())
    rows = []
    for node_type, levels in mapping.items():
        full = levels["100"]
        for step in range(100):
            mbps = (full + step / 100) * 8 / 1024 / 1024
            if mapping_levels(mbps) == {100: full, 90: levels["90"], 80: levels["80"]}:
                break
        else:
            raise AssertionError(f"no p90 reproduces {node_type}")
        rows.append(f'"{node_type}","100000","{mbps!r}","{mbps * 0.97!r}","5","10.0","40.0","8.0","35.0","{mbps * 60 * 1024 * 1024 / 8!r}"')
        rows.append(f'"{node_type}","1000","{mbps * 0.8!r}","{mbps * 0.7!r}","3","20.0","60.0","18.0","55.0","1.0e9"')
    return rows


def test_mapping_output_is_the_seed_notebooks(tmp_path):
    source = tmp_path / "athena.csv"
    source.write_text("\n".join([HEADER, *_seed_rows()]) + "\n")
    result = run_cli("baseline", "derive", "--from", str(source), "--format", "mapping")
    assert result.returncode == 0, result.stderr
    expected = (DATA / "seed_mapping.json").read_text()
    # the seed's copy lost its indentation on the way; the keys, their order and the integers are the notebook's
    assert [line.strip() for line in result.stdout.splitlines()] == [line.strip() for line in expected.splitlines()]
    assert result.stdout.startswith('{\n  "cache.m3.2xlarge": {\n    "80": 49835910,')


@pytest.mark.unit
def test_athena_rows_of_the_seed():
    source = DATA / "athena_seed_rows.csv"
    table = derive(read_rows(source, None, None, None))
    m4 = table.get("cache.m4.xlarge")
    assert m4.measured.data_size == 100000
    assert m4.measured.runs == 5
    assert m4.measured.engine_cpu_utilization_p90 == pytest.approx(28.711346)
    assert m4.measured.bytes_per_second[100] == 96320631
    assert table.get("cache.r4.16xlarge").measured.bytes_per_second == {100: 1385483993, 90: 1246935593, 80: 1108387194}


def _record(benchmark_id: str, instance_type: str, size: int, p90: float, cpu: float) -> str:
    return json.dumps(
        {
            "NetworkBytesOut": {"p50": p90 * 0.9, "p70": p90 * 0.95, "p90": p90, "p95": p90 * 1.01, "p99": p90 * 1.02},
            "CPUUtilization": {"p50": cpu / 2, "p70": cpu * 0.8, "p90": cpu, "p95": cpu, "p99": cpu},
            "EngineCPUUtilization": {"p50": cpu, "p70": cpu, "p90": cpu * 2, "p95": cpu * 2, "p99": cpu * 2},
            "benchmarkId": benchmark_id,
            "dataSize": size,
            "instanceCount": 1,
            "instanceType": instance_type,
            "instanceTypeClient": "c5.18xlarge",
            "region": "eu-west-1",
            "stamp": 1550000000,
            "testDuration": 300,
            "testElapsed": 300,
        }
    )


@pytest.mark.unit
@pytest.mark.parametrize("compress", [False, True])
def test_json_lines_of_the_ec2_network_benchmark_tooling(tmp_path, compress):
    lines = [
        _record("a", "cache.r6g.large", 100000, 6.0e9, 10.0),
        _record("b", "cache.r6g.large", 100000, 5.4e9, 12.0),
        _record("c", "cache.r6g.large", 1000, 1.2e9, 30.0),
    ]
    data = ("\n".join(lines) + "\n").encode()
    source = tmp_path / ("results.json.gz" if compress else "results.jsonl")
    source.write_bytes(gzip.compress(data) if compress else data)
    table = derive(read_rows(source, None, None, None))
    node = table.get("cache.r6g.large")
    assert node.measured.data_size == 100000
    assert node.measured.runs == 2
    assert node.measured.cpu_utilization_p90 == pytest.approx(11.0)
    assert node.measured.bytes_per_second[100] == pytest.approx(5.7e9 / 60, abs=1)


OLD_CSV = '"PING_INLINE","94161.95"\n"SET","93720.71"\n"GET","94339.62"\n"LRANGE_100 (first 100 elements)","60753.34"\n'
NEW_CSV = (
    '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
    '"SET","135501.36","0.191","0.104","0.191","0.247","0.359","1.655"\n'
    '"GET","141242.94","0.182","0.112","0.175","0.231","0.375","1.207"\n'
)


@pytest.mark.parametrize(("text", "rps"), [(OLD_CSV, 94339.62), (NEW_CSV, 141242.94)])
def test_redis_benchmark_csv_is_estimated_from_requests_and_reply_size(tmp_path, text, rps):
    source = tmp_path / "bench.csv"
    source.write_text(text)
    table = derive(read_rows(source, None, "cache.r6g.large", 1000))
    measured = table.get("cache.r6g.large").measured
    assert measured.estimated
    assert "estimated" in measured.method
    assert measured.bytes_per_second[100] == pytest.approx(rps * (1000 + 4 + 5), abs=2)
    result = run_cli("baseline", "derive", "--from", str(source))
    assert result.returncode == 2
    assert "--node-type" in result.stderr


@pytest.mark.unit
def test_memtier_json(tmp_path):
    source = tmp_path / "memtier.json"
    source.write_text(json.dumps({"ALL STATS": {"Gets": {"Ops/sec": 50000.0, "Latency": 0.5}, "Totals": {"Ops/sec": 60000.0}}}))
    table = derive(read_rows(source, None, "cache.m6g.large", 10000))
    assert table.get("cache.m6g.large").measured.bytes_per_second[100] == pytest.approx(50000 * (10000 + 5 + 5), abs=2)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty file"),
        ('"instancetype","mbps_p90"\n"cache.r4.large","1"\n', "line 1: missing column 'datasize'"),
        (HEADER + '\n"cache.r4.large","100000","fast","1","1","1","1","1","1","1"\n', "line 2 column 'mbps_p90': not a number: 'fast'"),
        (HEADER + '\n"cache.r4.large","100000"\n', "line 2: 2 columns, the header has 10"),
        (HEADER + "\n", "no data rows"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, content, message):
    source = tmp_path / "bad.csv"
    source.write_text(content)
    out = tmp_path / "out.yml"
    out.write_text("previous\n")
    result = run_cli("baseline", "derive", "--from", str(source), "--input-format", "athena-csv", "--out", str(out))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert str(source) in result.stderr
    assert message in result.stderr
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "out.yml"]


@pytest.mark.unit
def test_broken_json_lines_name_the_line(tmp_path):
    source = tmp_path / "r.jsonl"
    source.write_text(_record("a", "cache.r6g.large", 1000, 1e9, 1) + "\n{not json\n")
    with pytest.raises(BaselineError, match=r"r.jsonl line 2 column 2: invalid JSON"):
        read_rows(source, None, None, None)


def test_out_file_is_written(tmp_path):
    out = tmp_path / "baselines.yml"
    result = run_cli("baseline", "derive", "--from", str(DATA / "athena_seed_rows.csv"), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    table = load_table(out)
    assert table.get("cache.r4.4xlarge").measured.runs == 5


def test_a_derived_table_reaches_the_alarm_template_measured_and_in_its_units(tmp_path):
    """derive writes a table; render cloudformation takes it with the basis asked for, in bytes per minute (the
    NetworkBytesOut Sum over 60 s): the seed's measured m4.10xlarge figure, not the published one in bytes per second."""
    table = tmp_path / "derived.yml"
    derive_cli = [sys.executable, "-m", "exporter", "baseline", "derive", "--from", str(DATA / "athena_seed_rows.csv"), "--out", str(table)]
    assert subprocess.run(derive_cli, capture_output=True, text=True, timeout=60, check=False).returncode == 0
    rendered = subprocess.run(
        [sys.executable, "-m", "exporter", "render", "cloudformation", "--baselines", str(table), "--basis", "measured"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    mapping = yaml.load(rendered, Loader=_IgnoreTags)["Mappings"]["BaselineThresholds"]["cache.m4.10xlarge"]  # noqa: S506 (a SafeLoader)
    assert mapping["NetworkBaseline"] == "benchmarked"
    assert mapping["NetworkBytesPerMinute80"] == pytest.approx(1_117_082_615 * 0.8 * 60, rel=1e-6)
    refused = subprocess.run([*derive_cli[:-2], "--format", "cloudformation"], capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0
    assert "invalid choice: 'cloudformation'" in refused.stderr


class _IgnoreTags(yaml.SafeLoader):
    pass


_IgnoreTags.add_multi_constructor("!", lambda loader, suffix, node: None)


@pytest.mark.unit
def test_mapping_renderer_sorts_levels_as_numbers():
    table = derive(read_rows(DATA / "athena_seed_rows.csv", None, None, None))
    lines = render_mapping(table).splitlines()
    assert lines[1:5] == ['  "cache.m4.10xlarge": {', '    "80": 893666092,', '    "90": 1005374354,', '    "100": 1117082615']
