"""What a failed scrape was, as a small fixed set of kinds safe as label values; error replies classed by their prefix."""

from __future__ import annotations

import re
from typing import Any

from .resp import ErrorReply, RespFailure, is_ssl_error

# the connection is not authenticated (any command fails so): the scrape fails
NOT_AUTHENTICATED = ("NOAUTH", "WRONGPASS")
# credentials refused, or a user denied a command: classed as an authentication failure
AUTH_FAILURES = (*NOT_AUTHENTICATED, "NOPERM", "invalid password", "invalid username", "ERR invalid password", "ERR AUTH")
LOADING = ("LOADING",)

_INFO_LINE = re.compile(rb"^[A-Za-z0-9_.\-]+:", re.M)


def classify(err: BaseException) -> str:
    """A small fixed set of error kinds, safe as a label value."""
    if isinstance(err, RespFailure):
        return err.kind
    if isinstance(err, TimeoutError):
        return "timeout"
    if is_ssl_error(err):
        return "tls"
    if isinstance(err, ConnectionRefusedError):
        return "refused"
    if isinstance(err, OSError):
        return "connection"
    return "internal"


def reply_failure(reply: ErrorReply, what: str) -> RespFailure:
    """The failure an error reply to a command the scrape cannot do without stands for."""
    if reply.message.startswith(AUTH_FAILURES):
        return RespFailure("auth", f"{what}: {reply.message[:200]}")
    if reply.message.startswith(LOADING):
        return RespFailure("loading", f"{what}: the node is loading its dataset")
    return RespFailure("error_reply", f"{what}: {reply.message[:200]}")


def looks_like_info(text: bytes) -> bool:
    """INFO text has ``key:value`` lines (a few odd lines are counted, not fatal); a status, an empty reply or
    binary noise is not INFO."""
    return b"\x00" not in text and _INFO_LINE.search(text) is not None


def kind_of(reply: Any) -> str:
    if reply is None:
        return "nil"
    if isinstance(reply, bytes):
        return "a string"
    if isinstance(reply, int):
        return "an integer"
    if isinstance(reply, list):
        return "an array"
    return type(reply).__name__
