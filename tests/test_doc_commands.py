"""Every shell block of the README and of the pages it moved its reference to runs as pasted, with `bash -euo pipefail
-c`, from a directory holding the files the pages write (a YAML block whose first line is `# NAME.yml`): `helm install`
as `helm template`, AWS commands against moto (AWS_ENDPOINT_URL), `serve` and `demo` started, asked /-/healthy and
stopped. A block that cannot run here says so in an HTML comment right before it, with its reason:

- `<!-- not run: REASON -->`: listed, not run;
- `<!-- run after: PREFIX (REASON) -->`: the block is `PREFIX && ...`; the rest runs (PREFIX is CI's own step);
- `<!-- given: NAME = PATH, ... -->`: the repository's PATH is copied to NAME first (an input the reader brings)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from servers import free_port, wait_until
from tools import beside_python, helm, require

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/overview.md", "docs/configuration.md", "docs/aws.md", "docs/operations.md", "docs/development.md")
SHELL_FENCES = ("```sh", "```bash", "```shell", "```console")
MARKER = re.compile(r"^<!-- (not run|run after|given): (.+?) -->$")
NAMED_FILE = re.compile(r"^# ([\w.-]+\.ya?ml)$")
LONG_RUNNING = re.compile(r"(^|&& )elasticache-exporter (serve|demo)\b")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    text: str
    not_run: str = ""
    run_after: str = ""
    given: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def parse(page: str, text: str) -> tuple[list[Block], dict[str, str]]:
    """The page's shell blocks with their markers, and the files its named YAML blocks write."""
    blocks: list[Block] = []
    files: dict[str, str] = {}
    lines = text.splitlines()
    markers: dict[str, str] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        marker = MARKER.match(line)
        if marker:
            assert marker.group(1) not in markers, f"{page}:{index + 1}: {marker.group(1)} twice before one block"
            markers[marker.group(1)] = marker.group(2).strip()
            index += 1
            continue
        if line.startswith("```") and line != "```":
            end = lines.index("```", index + 1)
            body = "\n".join(lines[index + 1 : end])
            if line in SHELL_FENCES:
                blocks.append(_block(page, index + 2, body, markers))
            else:
                assert not markers, f"{page}:{index + 1}: a marker before a block that is not a shell block"
                named = NAMED_FILE.match(lines[index + 1]) if line.startswith("```yaml") and end > index + 1 else None
                if named:
                    files[named.group(1)] = body + "\n"
            markers = {}
            index = end + 1
            continue
        assert not markers or not line.strip(), f"{page}:{index + 1}: a marker not right before a shell block"
        index += 1
    return blocks, files


def _block(page: str, line: int, body: str, markers: dict[str, str]) -> Block:
    given = {}
    for pair in filter(None, (part.strip() for part in markers.get("given", "").split(","))):
        name, _, path = (part.strip() for part in pair.partition("="))
        assert name, f"{page}:{line}: given {pair!r} names no file to write"
        assert (ROOT / path).is_file(), f"{page}:{line}: given {pair!r} names no file of the repository"
        given[name] = path
    return Block(page, line, body, not_run=markers.get("not run", ""), run_after=markers.get("run after", ""), given=given)


def documented() -> tuple[list[Block], dict[str, str]]:
    blocks: list[Block] = []
    files: dict[str, str] = {}
    for page in PAGES:
        page_blocks, page_files = parse(page, (ROOT / page).read_text())
        blocks += page_blocks
        for name, content in page_files.items():
            assert files.get(name, content) == content, f"{page}: {name} is written differently by two pages"
            files[name] = content
    return blocks, files


BLOCKS, FILES = documented()
RUN = [block for block in BLOCKS if not block.not_run]


def command_of(block: Block) -> str:
    """What runs: the block, or what follows its `run after` prefix."""
    if not block.run_after:
        return block.text
    prefix = block.run_after.split(" (", 1)[0]
    assert block.text.startswith(prefix + " && "), f"{block.name}: the block does not start with {prefix} &&"
    return block.text[len(prefix) + len(" && ") :]


@pytest.mark.unit
def test_every_block_not_run_says_why_and_the_rest_is_most_of_them():
    not_run = [block for block in BLOCKS if block.not_run]
    for block in not_run:
        assert len(block.not_run.split()) >= 4, f"{block.name}: 'not run' needs a reason"
    for block in BLOCKS:
        if block.run_after:
            assert " (" in block.run_after, f"{block.name}: 'run after' needs a reason in parentheses"
            command_of(block)
    assert len(RUN) > len(not_run), [block.name for block in not_run]
    assert any(block.page == "README.md" and "helm install" in block.text for block in RUN)


@pytest.mark.unit
def test_the_parser_finds_markers_files_and_stray_markers():
    text = "<!-- not run: needs a registry to push to -->\n```sh\ndocker push x\n```\n\n```yaml\n# a.yml\nk: 1\n```\n```sh\ntrue\n```\n"
    blocks, files = parse("page.md", text)
    assert [(block.line, block.text, block.not_run) for block in blocks] == [(3, "docker push x", "needs a registry to push to"), (11, "true", "")]
    assert files == {"a.yml": "# a.yml\nk: 1\n"}
    with pytest.raises(AssertionError, match="not right before"):
        parse("page.md", "<!-- not run: why not -->\ntext\n```sh\ntrue\n```\n")


@pytest.fixture(scope="module")
def moto_endpoint():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    request = urllib.request.Request(f"{url}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.status == 200
    yield url
    server.stop()


@pytest.fixture(scope="module")
def shims(tmp_path_factory) -> Path:
    """`helm install` runs as `helm template`; every other helm command as it is."""
    directory = tmp_path_factory.mktemp("shims")
    real = helm()
    script = f'if [ "${{1:-}}" = install ]; then shift; exec {real} template "$@"; fi\nexec {real} "$@"\n'
    (directory / "helm").write_text("#!/usr/bin/env bash\n" + script)
    (directory / "helm").chmod(0o755)
    return directory


def environment(shims: Path, moto: str, listen: str) -> dict[str, str]:
    exporter = Path(require("elasticache-exporter", beside_python("elasticache-exporter"))).parent
    env = {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "ELASTICACHE_EXPORTER_", "REDIS_"))}
    path = os.pathsep.join([str(shims), str(Path(sys.executable).parent), str(exporter), env.get("PATH", "")])
    return env | {
        "PATH": path,
        "AWS_ENDPOINT_URL": moto,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "ELASTICACHE_EXPORTER_WEB_LISTEN_ADDRESS": listen,
    }


def workdir(tmp_path: Path, block: Block) -> Path:
    """The reader's directory: the files the pages write, the inputs the block is given, the repository's deploy/."""
    for name, content in FILES.items():
        (tmp_path / name).write_text(content)
    for name, path in block.given.items():
        shutil.copyfile(ROOT / path, tmp_path / name)
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")
    return tmp_path


@pytest.mark.parametrize("block", RUN, ids=[block.name for block in RUN])
def test_the_documented_command_runs(block: Block, tmp_path, shims, moto_endpoint):
    command = command_of(block)
    port = free_port()
    env = environment(shims, moto_endpoint, f"127.0.0.1:{port}")
    (tmp_path / "cwd").mkdir()
    cwd = workdir(tmp_path / "cwd", block)
    argv = ["bash", "-euo", "pipefail", "-c", command]
    last_line = command.replace("\\\n", " ").strip().splitlines()[-1]
    if not LONG_RUNNING.search(last_line):
        result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, f"{block.name}: exit {result.returncode}\n{command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        return
    if "elasticache-exporter demo" in command:
        env["ELASTICACHE_EXPORTER_REDIS_ADDR"] = f"redis://localhost:{free_port()}"  # its throwaway server, on a free port
    log = tmp_path / "output.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: process.poll() is not None or healthy(port), timeout=30, what=f"{block.name} serving")
        assert process.poll() is None, f"{block.name}: exit {process.returncode}\n{command}\n{log.read_text()[-2000:]}"
        if "elasticache-exporter demo" in command:
            wait_until(lambda: "Look at:" in log.read_text(), timeout=30, what="the demo saying where to look")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        returncode = process.wait(timeout=20)
    assert returncode == 0, f"{block.name}: exit {returncode} after SIGINT\n{log.read_text()[-2000:]}"


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/healthy", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False
