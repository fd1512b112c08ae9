"""COMMANDLOG (Valkey 8.1+): the length of each of its three logs and their thresholds from CONFIG, as redis_exporter
serves them, and the newest entry of the large-request and large-reply logs. Sent only where COMMAND INFO shows
COMMANDLOG (and, for the thresholds, CONFIG). The slow log's newest entry is SLOWLOG GET 1's: on these servers SLOWLOG
reads the same log."""

from __future__ import annotations

from typing import Any

from exporter.common.families import GAUGE, FamilySet
from exporter.common.labels import with_label

from .command import Doc, NodeView, ScrapeCommand, Scraped, T
from .config_get import REFRESH, settings
from .info import parse_number

LOGS = (  # COMMANDLOG LEN <log>, in the order sent, and the family of its length
    ("slow", "redis_commandlog_slow_length", "Total entries in the slow command log."),
    ("large-request", "redis_commandlog_large_request_length", "Total entries in the large-request command log."),
    ("large-reply", "redis_commandlog_large_reply_length", "Total entries in the large-reply command log."),
)
THRESHOLDS = (  # CONFIG GET commandlog-*: parameter, family, help
    ("commandlog-execution-slower-than", "redis_commandlog_execution_slower_than",
     "Execution time threshold in microseconds for the slow command log (CONFIG GET)."),
    ("commandlog-slow-execution-max-len", "redis_commandlog_slow_execution_max_len",
     "Maximum number of entries retained in the slow command log (CONFIG GET)."),
    ("commandlog-request-larger-than", "redis_commandlog_request_larger_than",
     "Request size threshold in bytes for the large-request command log (CONFIG GET)."),
    ("commandlog-large-request-max-len", "redis_commandlog_large_request_max_len",
     "Maximum number of entries retained in the large-request command log (CONFIG GET)."),
    ("commandlog-reply-larger-than", "redis_commandlog_reply_larger_than",
     "Reply size threshold in bytes for the large-reply command log (CONFIG GET)."),
    ("commandlog-large-reply-max-len", "redis_commandlog_large_reply_max_len",
     "Maximum number of entries retained in the large-reply command log (CONFIG GET)."),
)  # fmt: skip


def add_lengths(replies: list[Any], scraped: Scraped, out: FamilySet) -> None:
    for (_, name, help_), length in zip(LOGS, replies, strict=False):
        out.add(name, GAUGE, help_, scraped.base, float(length))


SIZE_LOGS = ("large-request", "large-reply")  # COMMANDLOG GET 1 <log>, in the order sent


def add_newest(replies: list[Any], scraped: Scraped, out: FamilySet) -> None:
    """The newest entry's id (0 while the log is empty, as SLOWLOG's) and its request or reply size. A log keeps at most
    its max-len entries, so its length stops at that; the id keeps counting, and its rate is entries logged per second."""
    for log, reply in zip(SIZE_LOGS, replies, strict=False):
        entry = reply[0] if reply and isinstance(reply[0], list) else []
        last_id = entry[0] if entry and isinstance(entry[0], int) else 0
        size = entry[2] if len(entry) > 2 and isinstance(entry[2], int) else 0
        labels = with_label(scraped.base, "log", log)
        out.add("elasticache_commandlog_last_id", GAUGE, ID_HELP, labels, float(last_id))
        out.add("elasticache_commandlog_last_entry_bytes", GAUGE, SIZE_HELP, labels, float(size))


ID_HELP = "Id of the newest entry of a command log (0 while it is empty); its rate is entries logged per second."
SIZE_HELP = "Size in bytes of the request or reply of the newest entry of a command log (0 while it is empty)."


def add_thresholds(replies: list[Any], scraped: Scraped, out: FamilySet) -> None:
    config = settings(replies)
    for parameter, name, help_ in THRESHOLDS:
        value = parse_number(config.get(parameter, ""))
        if value is not None:
            out.add(name, GAUGE, help_, scraped.base, value)


def _threshold_args(node: NodeView) -> list[tuple[str, ...]]:
    return [("CONFIG", "GET", "commandlog-*")] if node.allows("commandlog", known_only=True) else []


COMMANDS = (
    ScrapeCommand("commandlog", lambda _node: [("COMMANDLOG", "LEN", log) for log, _, _ in LOGS], (int,), gate="commandlog",
                  known_only=True, families=add_lengths,
                  docs=tuple(Doc(name, "gauge", T, f"`COMMANDLOG LEN {log}` (Valkey 8.1+, where `COMMAND INFO` shows it)")
                             for log, name, _ in LOGS)),
    ScrapeCommand("commandlog_newest", lambda _node: [("COMMANDLOG", "GET", "1", log) for log in SIZE_LOGS], (list,),
                  gate="commandlog", known_only=True, families=add_newest,
                  docs=(Doc("elasticache_commandlog_last_id", "gauge", f"{T}, `log`", "`COMMANDLOG GET 1 large-request|large-reply`",
                            "0 while the log is empty; rate() of it: entries logged per second"),
                        Doc("elasticache_commandlog_last_entry_bytes", "gauge", f"{T}, `log`",
                            "`COMMANDLOG GET 1 large-request|large-reply`", "the newest entry's request or reply size"))),
    ScrapeCommand("commandlog_config", _threshold_args, (list,), gate="config", known_only=True, refresh=REFRESH,
                  families=add_thresholds,
                  docs=tuple(Doc(name, "gauge", T, f"`CONFIG GET {parameter}`, where COMMANDLOG and CONFIG are known",
                                 "re-read once a minute") for parameter, name, _ in THRESHOLDS)),
)  # fmt: skip
