"""A program the tests need and do not find: a skip that names it outside CI, a failure under CI."""

from __future__ import annotations

import pytest
from tools import HOW, require

pytestmark = pytest.mark.unit


def test_a_missing_program_is_skipped_with_its_install_step_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PROMTOOL", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.skip.Exception, match=r"promtool is not installed: apt-get install prometheus \(bash \.ci/install\)"):
        require("promtool")


def test_a_missing_program_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("HELM", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception, match="helm is not installed: go install"):
        require("helm")


def test_every_program_named_has_an_install_step():
    assert all("install" in how for how in HOW.values())
