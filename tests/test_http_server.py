"""The bounded HTTP front end on a real socket: heads, keep-alive, pipelining, timeouts and eviction."""

from __future__ import annotations

import io
import select
import socket
import threading
import time
from types import SimpleNamespace

import pytest
from servers import wait_until

from exporter.service import poller
from exporter.service.http import HttpServer, Request

pytestmark = pytest.mark.unit


def _echo(request: Request, peer) -> tuple[int, list[tuple[str, str]], bytes]:
    return 200, [("Content-Type", "text/plain")], f"{request.method} {request.path} {request.query} {len(request.body)}".encode()


@pytest.fixture(params=["epoll", "selectors"])
def server(request, monkeypatch):
    """Every test runs on both pollers: epoll's one-shot watching and the selectors stand-in of other systems."""
    if request.param == "selectors":
        monkeypatch.setattr(poller, "select", SimpleNamespace(**{k: v for k, v in vars(select).items() if k != "epoll"}))
    http = HttpServer(("127.0.0.1", 0), _echo, head_timeout=0.5, idle_timeout=1.0, max_connections=20, workers=2)
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield http
    http.shutdown()
    thread.join(timeout=5)
    http.server_close()


def _connect(http: HttpServer) -> socket.socket:
    return socket.create_connection(http.server_address[:2], timeout=5)


def _read_reply(reader: io.BufferedReader) -> tuple[int, dict[str, str], bytes]:
    """One reply from ``sock.makefile("rb")``: a buffered reader keeps the bytes of a pipelined next reply that arrive
    with this one (reading the socket directly would drop them and wait for a reply already received)."""
    lines = []
    while (line := reader.readline()) not in (b"\r\n", b""):
        lines.append(line.decode().rstrip("\r\n"))
    if not lines:
        raise ConnectionError("closed")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, reader.read(int(headers["content-length"]))


def test_keep_alive_and_pipelined_requests(server):
    sock = _connect(server)
    reader = sock.makefile("rb")
    sock.sendall(b"GET /a?x=1 HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n")
    assert _read_reply(reader)[2] == b"GET /a x=1 0"
    assert _read_reply(reader)[2] == b"GET /b  0"
    sock.sendall(b"POST /c HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")
    status, headers, body = _read_reply(reader)
    assert (status, headers["connection"], body) == (200, "keep-alive", b"POST /c  5")
    sock.close()


def test_http_1_0_closes_and_head_has_no_body(server):
    sock = _connect(server)
    sock.sendall(b"HEAD /x HTTP/1.0\r\n\r\n")
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    assert data.startswith(b"HTTP/1.1 200")
    assert data.endswith(b"\r\n\r\n")
    assert b"Connection: close" in data


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nX: " + b"a" * 20000, 431),
        (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nContent-Length: 999999\r\n\r\n", 413),
    ],
)
def test_bad_requests_get_a_status_and_a_close(server, request_bytes, status):
    sock = _connect(server)
    sock.sendall(request_bytes)
    assert _read_reply(sock.makefile("rb"))[0] == status
    assert sock.recv(10) == b""


def test_a_head_that_never_ends_is_closed(server):
    sock = _connect(server)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n")
    started = time.monotonic()
    sock.settimeout(5)
    assert sock.recv(10) == b""
    assert 0.4 < time.monotonic() - started < 2.0
    assert server.timed_out == 1


def test_a_trickled_head_is_bounded_by_one_timeout(server):
    sock = _connect(server)
    started = time.monotonic()
    closed = False
    for byte in b"GET / HTTP/1.1\r\nHost: a-very-long-host-name\r\n":
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            closed = True
            break
        time.sleep(0.05)
    sock.settimeout(2)
    try:
        closed = closed or sock.recv(10) == b""
    except OSError:
        closed = True
    assert closed
    assert time.monotonic() - started < 3.0


def test_idle_connections_are_closed_and_the_oldest_makes_room(server):
    idle = [_connect(server) for _ in range(20)]
    wait_until(lambda: server.open_connections == 20, what="20 connections")
    fresh = _connect(server)  # the 21st: the longest-idle one is closed for it
    fresh.sendall(b"GET /ok HTTP/1.1\r\n\r\n")
    assert _read_reply(fresh.makefile("rb"))[2] == b"GET /ok  0"
    assert server.evicted >= 1
    assert idle[0].recv(10) == b""
    wait_until(lambda: server.open_connections <= 1, timeout=5, what="idle connections closed")
    for sock in idle:
        sock.close()


def test_a_pipelined_request_is_answered_without_waiting_for_the_poll_timeout():
    http = HttpServer(("127.0.0.1", 0), _echo, workers=2)
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 5.0}, daemon=True)
    thread.start()
    try:
        sock = _connect(http)
        reader = sock.makefile("rb")
        started = time.monotonic()
        sock.sendall(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n")
        assert _read_reply(reader)[2] == b"GET /a  0"
        assert _read_reply(reader)[2] == b"GET /b  0"
        assert time.monotonic() - started < 1.0  # the loop is woken, not left waiting out its 5 s poll
        sock.close()
    finally:
        http.shutdown()
        thread.join(timeout=10)
        http.server_close()


def test_an_answer_that_raises_is_logged_once_and_the_server_goes_on(caplog):
    """A bug while answering (here: in writing the reply) closes that connection, is logged once with its traceback,
    and costs no thread: the next request is answered, and the pool counts exactly the threads that run."""
    http = HttpServer(("127.0.0.1", 0), _echo, workers=2, worker_linger=0.2)
    respond = http._respond
    failures = []

    def fails_once(conn, request):
        if not failures:
            failures.append(request.path)
            raise RuntimeError("a bug in answering")
        return respond(conn, request)

    http._respond = fails_once  # type: ignore[method-assign]
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        broken = _connect(http)
        broken.sendall(b"GET /first HTTP/1.1\r\n\r\n")
        assert broken.recv(100) == b""  # closed without a reply
        sock = _connect(http)
        sock.sendall(b"GET /second HTTP/1.1\r\n\r\n")
        assert _read_reply(sock.makefile("rb"))[2] == b"GET /second  0"
        sock.close()
        broken.close()
        errors = [record for record in caplog.records if record.levelname == "ERROR"]
        assert len(errors) == 1
        assert "/first" in errors[0].getMessage()
        assert errors[0].exc_info is not None
        running = lambda: sum(1 for t in threading.enumerate() if t.name.startswith("http-"))  # noqa: E731
        assert http.worker_threads == running() <= 2
        wait_until(lambda: http.worker_threads == running() == 0, timeout=5, what="idle answering threads to end")
        assert http.busy_workers == 0
    finally:
        http.shutdown()
        thread.join(timeout=10)
        http.server_close()


def test_a_kept_alive_client_asking_again_at_once_is_answered_by_one_thread():
    """The connection goes back to the loop only once its answering thread is idle again: a client that asks the
    moment it has its reply never makes the pool start a second thread."""
    http = HttpServer(("127.0.0.1", 0), _echo, workers=8)
    started: list[str] = []
    answer = http._answer

    def counting(item):
        started.append(threading.current_thread().name)
        return answer(item)

    http._answering._handle = counting
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        sock = _connect(http)
        replies = sock.makefile("rb")
        for i in range(2_000):
            sock.sendall(f"GET /{i} HTTP/1.1\r\n\r\n".encode())
            assert _read_reply(replies)[2] == f"GET /{i}  0".encode()
        sock.close()
        assert set(started) == {"http-0"}
        assert http.worker_threads == 1
    finally:
        http.shutdown()
        thread.join(timeout=10)
        http.server_close()


def test_a_large_body_follows_its_head_whole_and_the_connection_stays_usable():
    """A body past LARGE_BODY (a fleet's /metrics, a bytearray the encoder fills) is sent after its head rather than
    copied behind it: every byte arrives, once, with the length the head says, and the next request is answered."""
    from exporter.service.http import LARGE_BODY

    large = bytearray(bytes(range(256)) * ((3 * LARGE_BODY) // 256 + 7))

    def answer(request: Request, peer) -> tuple[int, list[tuple[str, str]], bytes | bytearray]:
        return 200, [("Content-Type", "application/octet-stream")], large if request.path == "/large" else b"small"

    http = HttpServer(("127.0.0.1", 0), answer, head_timeout=0.5, idle_timeout=5.0, max_connections=4, workers=2)
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        sock = _connect(http)
        reader = sock.makefile("rb")
        sock.sendall(b"GET /large HTTP/1.1\r\nHost: t\r\n\r\nGET /small HTTP/1.1\r\nHost: t\r\n\r\nHEAD /large HTTP/1.1\r\nHost: t\r\n\r\n")
        status, headers, body = _read_reply(reader)
        assert (status, int(headers["content-length"]), body == large) == (200, len(large), True)
        assert _read_reply(reader)[2] == b"small"
        sock.sendall(b"GET /small HTTP/1.1\r\nHost: t\r\n\r\n")
        lines = []
        while (line := reader.readline()) not in (b"\r\n", b""):
            lines.append(line)
        assert f"Content-Length: {len(large)}\r\n".encode() in lines  # HEAD: the length, no body
        assert _read_reply(reader)[2] == b"small"
        sock.close()
    finally:
        http.shutdown()
        thread.join(timeout=5)
        http.server_close()
