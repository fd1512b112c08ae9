"""The C allocator's settings of the long-running exporter: glibc's malloc reads them from the environment once, when
the process starts, so ``serve`` and ``demo``, started from the console script or ``python -m exporter``, run
themselves again with them where they are not set.

glibc's defaults give each thread that meets contention an arena of its own (up to eight a core) and raise the size
above which a block is mapped on its own each time such a block is freed: the answering threads' and scrape workers'
bodies and replies then stay in several heaps whose freed parts are not given back. Two arenas and a fixed threshold of
256 KiB, what the container image sets, keep the RSS of a soak flat sooner (docs/operations.md). The settings are left
to whoever sets either of them or a ``glibc.malloc`` tunable, or preloads another allocator; with another C library
nothing is set."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

SETTINGS = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "262144"}  # as the Dockerfile sets them
# set with them: a process that finds it never runs again (a loader that drops MALLOC_* for a privileged program would
# otherwise have it run again and again)
RAN_AGAIN = "_ELASTICACHE_EXPORTER_RAN_AGAIN"
_LONG_RUNNING = ("serve", "demo")


def settings_to_add(command: str, environ: Mapping[str, str], libc: str) -> dict[str, str]:
    """The environment to run ``command`` again with: none but for a long-running command under glibc (``libc`` as
    ``os.confstr("CS_GNU_LIBC_VERSION")`` gives it) whose environment sets none of malloc's settings."""
    if command not in _LONG_RUNNING or not libc.startswith("glibc"):
        return {}
    if any(name in environ for name in (*SETTINGS, RAN_AGAIN)) or "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        return {}
    if "malloc" in environ.get("LD_PRELOAD", ""):  # jemalloc, tcmalloc, mimalloc: not glibc's malloc
        return {}
    return {**SETTINGS, RAN_AGAIN: "1"}


def libc_version() -> str:
    """``glibc 2.36`` and the like; empty where the C library is another."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):  # not a name this system knows (musl, macOS, Windows)
        return ""


def run_again_with_settings(command: str) -> None:
    """Replaces this process by the same command line with the allocator's settings, where they are to be added;
    returns where they are not, or where the interpreter cannot be run again (then with glibc's defaults)."""
    added = settings_to_add(command, os.environ, libc_version())
    argv = sys.orig_argv
    if not added or not sys.executable or not argv:
        return
    try:
        os.execve(sys.executable, argv, {**os.environ, **added})  # noqa: S606 - this command line again, no shell
    except OSError:
        return
