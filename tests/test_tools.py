"""A program the tests need and do not find: a skip that names it outside CI, a failure under CI."""

from __future__ import annotations

import pytest
from tools import HOW, prometheus_3, require

pytestmark = pytest.mark.unit


def test_a_missing_program_is_skipped_with_its_install_step_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PROMTOOL", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.skip.Exception, match=r"redis-cli is not installed: apt-get install redis-tools \(bash \.ci/install\)"):
        require("redis-cli")


def test_prometheus_is_the_one_ci_builds_never_an_older_one_on_path(monkeypatch, tmp_path):
    """Debian's promtool (2.x) on PATH is not taken for Prometheus 3's: only PROMTOOL or the Go-built one count."""
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("PROMTOOL", raising=False)
    monkeypatch.setenv("GOPATH", str(tmp_path))
    old = tmp_path / "old"
    old.mkdir()
    (old / "promtool").write_text("#!/bin/sh\n")
    (old / "promtool").chmod(0o755)
    monkeypatch.setenv("PATH", f"{old}:/usr/bin:/bin")
    with pytest.raises(pytest.fail.Exception, match=r"promtool is not installed: go install -tags remove_all_sd"):
        prometheus_3("promtool")
    monkeypatch.setenv("PROMTOOL", "/opt/promtool")
    assert prometheus_3("promtool") == "/opt/promtool"


def test_a_missing_program_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("HELM", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception, match="helm is not installed: go install"):
        require("helm")


def test_every_program_named_has_an_install_step():
    assert all("install" in how for how in HOW.values())
