"""The wheel and the sdist, built from a clean checkout (the tracked files only) with the project's own build
backend: the sdist rebuilds the same wheel, and the wheel installed into a fresh venv runs from outside the source
tree: render (both), baseline derive, and serve against a real redis-server."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from servers import free_port, serving, start_redis

ROOT = Path(__file__).parent.parent


def clean_checkout(destination: Path) -> Path:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for path in files:
        (destination / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, destination / path)
    return destination


def build(source: Path, outdir: Path, *kinds: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "build", *kinds, "--outdir", str(outdir), str(source)], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def wheel_contents(wheel: Path) -> dict[str, str]:
    """member -> sha256 of its bytes (zip timestamps aside)."""
    with zipfile.ZipFile(wheel) as archive:
        return {name: hashlib.sha256(archive.read(name)).hexdigest() for name in archive.namelist()}


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    source = clean_checkout(tmp_path_factory.mktemp("checkout"))
    direct, via_sdist = tmp_path_factory.mktemp("direct"), tmp_path_factory.mktemp("via-sdist")
    build(source, direct, "--wheel")
    build(source, via_sdist)  # sdist first, then the wheel from the unpacked sdist
    return next(direct.glob("*.whl")), next(via_sdist.glob("*.whl")), next(via_sdist.glob("*.tar.gz"))


def test_the_sdist_rebuilds_the_same_wheel(artifacts):
    direct, via_sdist, sdist = artifacts
    assert direct.name == via_sdist.name
    assert wheel_contents(direct) == wheel_contents(via_sdist)
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    missing = [path for path in package_files() if path not in names]
    assert missing == []


def package_files() -> list[str]:
    """Tracked files the installed package is made of: exporter/, and the top level of rules/ and templates/
    (setup.cfg maps both into the package; the rendered outputs under rules/ are not package data)."""
    tracked = subprocess.run(["git", "ls-files", "exporter", "rules", "templates"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [path for path in tracked.stdout.split() if path.startswith("exporter/") or path.count("/") == 1]


def test_the_wheel_carries_every_module_and_data_file(artifacts):
    members = wheel_contents(artifacts[0])
    expected = [path if path.startswith("exporter/") else "exporter/" + path for path in package_files()]
    assert len(expected) > 60
    assert [path for path in expected if path not in members] == []
    assert not any(name.startswith(("tests/", "bench/", "rules/", "templates/")) for name in members)


def test_the_installed_wheel_runs_from_outside_the_source_tree(artifacts, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(artifacts[0])],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    cli = str(venv / "bin" / "elasticache-exporter")
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(outside)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([cli, *args], cwd=outside, env=environment, capture_output=True, text=True, timeout=120, check=False)

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import exporter; print(exporter.__file__)"],
        cwd=outside,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(venv))
    rules = run("render", "prometheus")
    assert rules.returncode == 0, rules.stderr
    assert rules.stdout == (ROOT / "rules" / "prometheus" / "elasticache-exporter.rules.yml").read_text()
    template = run("render", "cloudformation")
    assert template.returncode == 0, template.stderr
    assert template.stdout == (ROOT / "rules" / "cloudformation" / "elasticache-alarms.yaml").read_text()
    seed = outside / "seed.csv"
    shutil.copy(ROOT / "tests" / "data" / "athena_seed_rows.csv", seed)
    mapping = run("baseline", "derive", "--from", str(seed), "--format", "mapping")
    assert mapping.returncode == 0, mapping.stderr
    reference = json.loads((ROOT / "tests" / "data" / "seed_mapping.json").read_text())
    derived = json.loads(mapping.stdout)
    assert derived
    assert derived == {node_type: reference[node_type] for node_type in derived}

    redis = start_redis()
    port = free_port()
    argv = [cli, "serve", "--redis.addr", redis.addr, "--web.listen-address", f"127.0.0.1:{port}"]
    try:
        with serving(argv, port, what="the installed wheel's serve answering", cwd=outside, env=environment) as body:
            up = [line for line in body.splitlines() if line.startswith("redis_up{")]
            assert up
            assert up[0].endswith(" 1.0")
    finally:
        redis.stop()
