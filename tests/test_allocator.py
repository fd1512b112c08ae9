"""``serve`` runs itself again with malloc's settings where none is set, and so keeps to one arena beside the main one
however many threads answer (docs/operations.md)."""

from __future__ import annotations

import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from servers import free_port, start_exporter, start_redis, wait_until

from exporter.cli.allocator import RAN_AGAIN, SETTINGS, libc_version, settings_to_add

GLIBC = "glibc 2.36"
HEAP_ALIGNMENT = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: each arena but the main one is a heap of this alignment


@pytest.mark.unit
@pytest.mark.parametrize("command", ["serve", "demo"])
def test_a_long_running_command_under_glibc_gets_the_settings(command: str) -> None:
    added = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "262144", RAN_AGAIN: "1"}
    assert settings_to_add(command, {"PATH": "/usr/bin"}, GLIBC) == added
    assert settings_to_add(command, {"GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=2048"}, GLIBC) == added
    assert settings_to_add(command, {"MALLOC_TRIM_THRESHOLD_": "131072"}, GLIBC) == added  # not one of the two


@pytest.mark.unit
@pytest.mark.parametrize(
    ("command", "environ", "libc"),
    [
        ("render", {}, GLIBC),  # a command that ends: the defaults do
        ("baseline", {}, GLIBC),
        ("serve", {}, ""),  # not glibc (musl's Alpine, macOS): nothing to set
        ("serve", {"MALLOC_ARENA_MAX": "8"}, GLIBC),  # whoever sets one of them chose: all left to them
        ("serve", {"MALLOC_MMAP_THRESHOLD_": "131072"}, GLIBC),
        ("serve", {"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"}, GLIBC),
        ("serve", {"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}, GLIBC),  # another allocator
        ("serve", {RAN_AGAIN: "1"}, GLIBC),  # run again already, whatever its environment lost on the way: never twice
    ],
)
def test_left_alone(command: str, environ: dict[str, str], libc: str) -> None:
    assert settings_to_add(command, environ, libc) == {}


def _environ(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(entry.split("=", 1) for entry in entries if "=" in entry)


def _arenas_beside_the_main_one(pid: int) -> int:
    heaps = 0
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) == 5 and int(fields[0].split("-")[0], 16) % HEAP_ALIGNMENT == 0:  # anonymous, heap-aligned
            heaps += 1
    return heaps


def _scrape_from_threads(url: str, clients: int = 8, requests: int = 25) -> None:
    errors: list[BaseException] = []

    def client() -> None:
        try:
            for _ in range(requests):
                with urllib.request.urlopen(url, timeout=10) as response:
                    response.read()
        except BaseException as err:  # reported by the test's thread
            errors.append(err)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors


@pytest.mark.skipif(not libc_version().startswith("glibc"), reason="glibc's malloc only")
def test_serve_keeps_one_arena_beside_the_main_one_under_concurrent_scrapes(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*SETTINGS, RAN_AGAIN, "GLIBC_TUNABLES", "LD_PRELOAD"):
        monkeypatch.delenv(name, raising=False)
    server = start_redis()
    exporter = start_exporter("--redis.addr", server.addr)
    try:
        pid = exporter.process.pid
        assert {name: _environ(pid).get(name) for name in (*SETTINGS, RAN_AGAIN)} == {**SETTINGS, RAN_AGAIN: "1"}  # the same process, run again
        _scrape_from_threads(exporter.url + "/metrics")
        assert _arenas_beside_the_main_one(pid) <= 1
        assert exporter.get("/-/healthy")[0] == 200
    finally:
        exporter.stop()
        server.stop()


def test_settings_of_its_own_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    server = start_redis()
    exporter = start_exporter("--redis.addr", server.addr, env={"MALLOC_ARENA_MAX": "4"})
    try:
        seen = _environ(exporter.process.pid)
        assert seen.get("MALLOC_ARENA_MAX") == "4"
        assert "MALLOC_MMAP_THRESHOLD_" not in seen
    finally:
        exporter.stop()
        server.stop()


def test_main_called_from_python_never_runs_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only the console script and ``python -m exporter`` run again: a program that calls main() itself (read from
    stdin here, which a second run could not read again) keeps its process and its environment."""
    for name in (*SETTINGS, RAN_AGAIN, "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    server = start_redis()
    port = free_port()
    wrapper = "import sys; from exporter.cli.main import main; sys.exit(main())\n"
    log = (tmp_path / "log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-", "serve", "--web.listen-address", f"127.0.0.1:{port}", "--redis.addr", server.addr],
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        assert process.stdin is not None
        process.stdin.write(wrapper.encode())
        process.stdin.close()

        def healthy() -> bool:
            assert process.poll() is None, (tmp_path / "log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/healthy", timeout=1) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_until(healthy, what="the wrapped exporter's health")
        assert not set(_environ(process.pid)) & {*SETTINGS, RAN_AGAIN}
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
        server.stop()
