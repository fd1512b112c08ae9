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


class ProcessMetrics(FamilyCollector):
    def __init__(self) -> None:
        self._boot = _boot_time()

    def build(self) -> FamilySet:
        out = FamilySet()
        try:
            with open("/proc/self/stat", encoding="ascii") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            return out  # not Linux: no process metrics, as prometheus_client does
        # fields[0] is the state (field 3 of proc(5)); utime is field 14, so index 11
        utime, stime, start, vsize, rss = (float(fields[i]) for i in (11, 12, 19, 20, 21))
        out.add("process_cpu_seconds_total", COUNTER, "Total user and system CPU time spent in seconds.", {}, (utime + stime) / _TICKS)
        out.add("process_virtual_memory_bytes", GAUGE, "Virtual memory size in bytes.", {}, vsize)
        out.add("process_resident_memory_bytes", GAUGE, "Resident memory size in bytes.", {}, rss * _PAGE)
        if self._boot is not None:
            out.add("process_start_time_seconds", GAUGE, "Start time of the process since unix epoch in seconds.", {}, self._boot + start / _TICKS)
        with contextlib.suppress(OSError):
            out.add("process_open_fds", GAUGE, "Number of open file descriptors.", {}, float(len(os.listdir("/proc/self/fd"))))
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        out.add("process_max_fds", GAUGE, "Maximum number of open file descriptors.", {}, float(soft))
        return out
