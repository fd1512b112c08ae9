"""The Dockerfile's build stage, replayed without a container engine: the build context as .dockerignore leaves
it (from the tracked files, as a clean checkout has them), each WORKDIR, COPY and RUN into a temporary root with a
fresh venv; then the installed entry point, run as the image's non-root user from outside the source tree:
--version, both renders, baseline derive, serve against a real redis-server, and the HEALTHCHECK command."""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from servers import free_port, serving, start_redis
from tools import require

ROOT = Path(__file__).parent.parent


def build_context() -> list[str]:
    """Tracked files minus what .dockerignore excludes (its patterns as Docker reads them: paths, globs, **/)."""
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")]
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()

    def excluded(path: str) -> bool:
        parts = path.split("/")
        for raw in patterns:
            pattern = raw.rstrip("/")
            prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
            if pattern.startswith("**/"):
                if any(fnmatch.fnmatch(part, pattern[3:]) for part in parts):
                    return True
            elif any(fnmatch.fnmatch(prefix, pattern) for prefix in prefixes):
                return True
        return False

    return [path for path in files if not excluded(path)]


def build_stage() -> list[tuple[str, str]]:
    """(instruction, arguments) of the first stage, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stage, seen_from = [], 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, arguments = line.partition(" ")
        if instruction.upper() == "FROM":
            seen_from += 1
            if seen_from > 1:
                break
            continue
        stage.append((instruction.upper(), arguments.strip()))
    return stage


def image_value(instruction: str) -> str:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    final = text.split("\nFROM ")[-1]
    return next(line.split(None, 1)[1] for line in final.splitlines() if line.startswith(instruction + " "))


def open_directory(prefix: str) -> Path:
    """A directory the image's user can reach (pytest's own are private to root)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o755)  # noqa: S103 - the image's non-root user reads the venv here, as in the image
    return path


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    root = open_directory("ecx-image-")
    context = tmp_path_factory.mktemp("context")
    for path in build_context():
        (context / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, context / path)
    workdir = root
    for instruction, arguments in build_stage():
        if instruction == "WORKDIR":
            workdir = root / arguments.lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
        elif instruction == "COPY":
            *sources, destination = shlex.split(arguments)
            target = workdir / destination
            for source in sources:
                origin = context / source
                assert origin.exists(), f"COPY {source}: not in the build context .dockerignore leaves"
                if origin.is_dir():
                    shutil.copytree(origin, target, dirs_exist_ok=True)
                else:
                    (target if destination.endswith("/") else target.parent).mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, target / source if destination.endswith("/") else target)
        elif instruction == "RUN":
            command = arguments.replace("/opt/", f"{root}/opt/").replace("python -m venv", f"{sys.executable} -m venv")
            result = subprocess.run(["bash", "-c", command], cwd=workdir, capture_output=True, text=True, timeout=900, check=False)
            assert result.returncode == 0, f"RUN {arguments}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    # COPY --from=build copies the venv to the same path in the final stage, without the sources
    shutil.rmtree(workdir)
    for directory in (root / "opt", root / "opt" / "elasticache-exporter"):
        os.chmod(directory, 0o755)  # noqa: S103 - as in the image
    yield root / "opt" / "elasticache-exporter"
    shutil.rmtree(root, ignore_errors=True)


def as_image_user(argv: list[str]) -> list[str]:
    """``argv`` run as the image's USER (the tests run as root in CI)."""
    if os.geteuid() != 0:
        return argv
    require("setpriv")  # runs the image's commands as its non-root user
    uid, _, gid = image_value("USER").partition(":")
    return ["setpriv", f"--reuid={uid}", f"--regid={gid or uid}", "--clear-groups", *argv]


def image_command(image: Path, *args: str) -> list[str]:
    """The image's entry point with ``args``, as its user."""
    entrypoint = json.loads(image_value("ENTRYPOINT"))
    return as_image_user([*(part.replace("/opt/elasticache-exporter", str(image)) for part in entrypoint), *args])


def image_environment(home: Path) -> dict[str, str]:
    """The final stage's ENV (glibc's malloc settings) over a plain PATH and the user's HOME."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ").split("\nFROM ")[-1]
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(pair.split("=", 1) for pair in shlex.split(line[4:]))
    return env


def run_as_image_user(image: Path, *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        image_command(image, *args), cwd=cwd, capture_output=True, text=True, timeout=timeout, env=image_environment(cwd), check=False
    )


def test_the_built_image_renders_derives_and_serves_as_its_user(image):
    outside = open_directory("ecx-outside-")
    os.chmod(outside, 0o777)  # noqa: S103 - a working directory of the image's user
    version = run_as_image_user(image, "--version", cwd=outside)
    assert version.returncode == 0, version.stderr
    rules = run_as_image_user(image, "render", "prometheus", cwd=outside)
    assert rules.returncode == 0, rules.stderr
    assert rules.stdout == (ROOT / "rules" / "prometheus" / "elasticache-exporter.rules.yml").read_text()
    template = run_as_image_user(image, "render", "cloudformation", cwd=outside)
    assert template.returncode == 0, template.stderr
    assert template.stdout == (ROOT / "rules" / "cloudformation" / "elasticache-alarms.yaml").read_text()
    seed = outside / "seed.csv"
    shutil.copy(ROOT / "tests" / "data" / "athena_seed_rows.csv", seed)
    os.chmod(seed, 0o644)
    mapping = run_as_image_user(image, "baseline", "derive", "--from", str(seed), "--format", "mapping", cwd=outside)
    assert mapping.returncode == 0, mapping.stderr
    derived, reference = json.loads(mapping.stdout), json.loads((ROOT / "tests" / "data" / "seed_mapping.json").read_text())
    assert derived
    assert derived == {node_type: reference[node_type] for node_type in derived}

    assert image_environment(outside)["MALLOC_ARENA_MAX"] == "2"  # what mallopt through ctypes did at start-up before
    redis = start_redis()
    port = free_port()
    command = image_command(image, *json.loads(image_value("CMD")), "--redis.addr", redis.addr, "--web.listen-address", f"127.0.0.1:{port}")
    try:
        with serving(command, port, what="the image's serve answering", cwd=outside, env=image_environment(outside)) as body:
            assert 'redis_up{instance="' in body
            assert "} 1" in body.split("redis_up{", 1)[1].split("\n", 1)[0]
            healthcheck = image_value("HEALTHCHECK").split("CMD", 1)[1].strip()
            argv = [part.replace("/opt/elasticache-exporter", str(image)) for part in json.loads(healthcheck)]
            # the health check shares the container's environment: there the listen address a variable gives serve
            env = {**image_environment(outside), "ELASTICACHE_EXPORTER_WEB_LISTEN_ADDRESS": f"127.0.0.1:{port}"}
            assert subprocess.run(as_image_user(argv), cwd=outside, timeout=30, check=False, env=env).returncode == 0
    finally:
        redis.stop()
        shutil.rmtree(outside, ignore_errors=True)
