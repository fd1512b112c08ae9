"""The slow log: its length and its newest entry (SLOWLOG LEN, SLOWLOG GET 1), as redis_exporter serves them."""

from __future__ import annotations

from typing import Any

from exporter.common.families import GAUGE, FamilySet

from .command import Doc, ScrapeCommand, Scraped, T, always


def add_length(replies: list[Any], scraped: Scraped, out: FamilySet) -> None:
    for length in replies:
        out.add("redis_slowlog_length", GAUGE, "Entries in the slow log.", scraped.base, float(length))


def add_newest(replies: list[Any], scraped: Scraped, out: FamilySet) -> None:
    """As redis_exporter: both series whenever SLOWLOG GET answered, 0 while the slow log is empty."""
    for reply in replies:
        entry = reply[0] if reply and isinstance(reply[0], list) else []
        last_id = entry[0] if entry and isinstance(entry[0], int) else 0
        duration = entry[2] if len(entry) > 2 and isinstance(entry[2], int) else 0
        base = scraped.base
        out.add("redis_slowlog_last_id", GAUGE, "Id of the newest slow log entry (0 while the log is empty).", base, float(last_id))
        out.add("redis_last_slow_execution_duration_seconds", GAUGE, "Execution time of the newest slow log entry.", base, duration / 1e6)


COMMANDS = (
    ScrapeCommand("slowlog_len", always("SLOWLOG", "LEN"), (int,), gate="slowlog", families=add_length,
                  docs=(Doc("redis_slowlog_length", "gauge", T, "`SLOWLOG LEN`"),)),
    ScrapeCommand("slowlog", always("SLOWLOG", "GET", "1"), (list,), gate="slowlog", families=add_newest,
                  docs=(Doc("redis_slowlog_last_id", "gauge", T, "`SLOWLOG GET 1`", "0 while the log is empty"),
                        Doc("redis_last_slow_execution_duration_seconds", "gauge", T, "`SLOWLOG GET 1`", "0 while the log is empty"))),
)  # fmt: skip
