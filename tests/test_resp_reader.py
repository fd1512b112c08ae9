"""The RESP reader reads the common items (integers, bulk strings, array starts) whole from its buffer and everything
else, or anything cut short, item by item: a reply must read the same, and be refused at the same size, whether it
arrives in one piece or a byte at a time."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from exporter.redis.resp import ErrorReply, RespConnection, RespFailure

pytestmark = pytest.mark.unit

REPLIES = [
    b":0\r\n",
    b":-42\r\n",
    b"$5\r\nhello\r\n",
    b"$0\r\n\r\n",
    b"$-1\r\n",
    b"*-1\r\n",
    b"*0\r\n",
    b"+OK\r\n",
    b"-ERR wrong\r\n",
    b"$12\r\nline\r\nbreaks\r\n",  # a bulk string holds CRLF
    b"*2\r\n$5\r\ncalls\r\n:7\r\n",
    # LATENCY HISTOGRAM's shape: a map of commands to [calls, n, histogram_usec, [bound, count, ...]]
    b"*2\r\n$4\r\ninfo\r\n*4\r\n$5\r\ncalls\r\n:9\r\n$14\r\nhistogram_usec\r\n*4\r\n:8\r\n:3\r\n:16\r\n:9\r\n",
    b"*3\r\n*1\r\n*1\r\n:1\r\n$-1\r\n*0\r\n",
    b":00012\r\n",
]


def read(reply: bytes, *, trickle: bool, max_reply_bytes: int = 1 << 20) -> object:
    ours, theirs = socket.socketpair()

    def send() -> None:
        with contextlib.suppress(OSError):  # a refused reply's connection is closed before the rest is sent
            if trickle:
                for i in range(len(reply)):
                    theirs.send(reply[i : i + 1])
                    time.sleep(0.0005)
            else:
                theirs.sendall(reply)

    sender = threading.Thread(target=send)
    sender.start()
    connection = RespConnection(ours, max_reply_bytes)
    try:
        return connection.call([("PING",)], time.monotonic() + 10)[0]
    except RespFailure as failure:
        return ("refused", failure.kind)
    finally:
        sender.join()
        connection.close()
        theirs.close()


@pytest.mark.parametrize("reply", REPLIES)
def test_a_reply_reads_the_same_whole_or_trickled(reply):
    whole, trickled = read(reply, trickle=False), read(reply, trickle=True)
    assert whole == trickled
    assert whole != ("refused", "protocol")


def test_values():
    assert read(REPLIES[11], trickle=False) == [b"info", [b"calls", 9, b"histogram_usec", [8, 3, 16, 9]]]
    assert read(b"-ERR wrong\r\n", trickle=False) == ErrorReply("ERR wrong")


@pytest.mark.parametrize(
    ("reply", "limit"),
    [
        (b"$10\r\n0123456789\r\n", 16),  # 17 bytes: one over
        (b"$10\r\n0123456789\r\n", 17),  # exactly the limit
        (b"*5\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n", 18),  # an array announcing more than the limit can hold
        (b"*5\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n", 24),
    ],
)
def test_an_announced_size_is_bounded_the_same_whole_or_trickled(reply, limit):
    whole = read(reply, trickle=False, max_reply_bytes=limit)
    assert whole == read(reply, trickle=True, max_reply_bytes=limit)
    assert (whole == ("refused", "reply_too_large")) == (limit in (16, 18))


def test_nesting_past_the_bound_is_refused_either_way():
    reply = b"*1\r\n" * 9 + b":1\r\n"
    assert read(reply, trickle=False) == read(reply, trickle=True) == ("refused", "protocol")
