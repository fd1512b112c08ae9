"""The project's own contracts: CI runs exactly the README's test command; docs name every command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parent.parent


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.+?)\n```", setup)
    assert len(commands) == 2, commands
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci_lines[-1] == commands[1]
    assert "bash .ci/install" in ci_lines
    assert commands[0].startswith("bash .ci/install && ")


def test_every_subcommand_is_documented():
    from exporter.cli.main import build_parser

    readme = (ROOT / "README.md").read_text()
    subcommands = re.findall(r"^    (\w+)", build_parser().format_help(), re.MULTILINE)
    assert len(subcommands) >= 8, subcommands
    for name in subcommands:
        assert f"elasticache-exporter {name}" in readme, name
