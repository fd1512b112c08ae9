"""The exporter's own process metrics (``process_*``, as every Prometheus client library serves them), read from
/proc without loading prometheus_client."""

from __future__ import annotations

import contextlib
import os
import resource

from exporter.common.families import COUNTER, GAUGE, FamilyCollector, FamilySet

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = resource.getpagesize()


def _boot_time() -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def _start_time(boot: float | None) -> float | None:
    """When this process started: its start in ticks since boot (field 22 of /proc/self/stat), read once."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if boot is None else boot + float(fields[19]) / _TICKS


class ProcessMetrics(FamilyCollector):
    """Each scrape costs one times() call, one read of /proc/self/statm and the listing of /proc/self/fd: reading
    /proc/self/stat instead, as prometheus_client does, costs a walk over every thread of the process."""

    def __init__(self) -> None:
        self._start = _start_time(_boot_time())

    def write(self, out: FamilySet) -> None:
        try:
            fd = os.open("/proc/self/statm", os.O_RDONLY)
            try:
                vsize_pages, rss_pages = os.read(fd, 128).split()[:2]
            finally:
                os.close(fd)
        except (OSError, ValueError):
            return  # not Linux: no process metrics, as prometheus_client does
        times = os.times()
        out.add("process_cpu_seconds_total", COUNTER, "Total user and system CPU time spent in seconds.", {}, times.user + times.system)
        out.add("process_virtual_memory_bytes", GAUGE, "Virtual memory size in bytes.", {}, float(int(vsize_pages) * _PAGE))
        out.add("process_resident_memory_bytes", GAUGE, "Resident memory size in bytes.", {}, float(int(rss_pages) * _PAGE))
        if self._start is not None:
            out.add("process_start_time_seconds", GAUGE, "Start time of the process since unix epoch in seconds.", {}, self._start)
        with contextlib.suppress(OSError):
            out.add("process_open_fds", GAUGE, "Number of open file descriptors.", {}, float(len(os.listdir("/proc/self/fd"))))
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        out.add("process_max_fds", GAUGE, "Maximum number of open file descriptors.", {}, float(soft))
