"""An HTTP/1.1 request head: its parsing and bounds (pure, no sockets)."""

from __future__ import annotations

from exporter.common.urltext import unquote

MAX_HEAD_BYTES = 16384
MAX_HEADERS = 100
MAX_BODY_BYTES = 65536


class Request:
    __slots__ = ("body", "headers", "keep_alive", "method", "path", "query", "version")

    def __init__(self, method: str, target: str, version: str, headers: dict[str, str]) -> None:
        self.method = method
        path, _, self.query = target.partition("?")
        self.path = unquote(path)
        self.version = version
        self.headers = headers
        connection = headers.get("connection", "").lower()
        self.keep_alive = ("close" not in connection) if version == "HTTP/1.1" else ("keep-alive" in connection)
        self.body = b""


class BadRequest(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


def parse_head(head: bytes) -> Request:
    """The request line and headers (names lower-cased); :class:`BadRequest` for anything else."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as err:  # pragma: no cover - latin-1 decodes every byte
        raise BadRequest(400, "undecodable head") from err
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
        raise BadRequest(400, "malformed request line")
    if len(lines) - 1 > MAX_HEADERS:
        raise BadRequest(431, "too many headers")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest(400, "malformed header line")
        headers[name.lower()] = value.strip()
    return Request(parts[0], parts[1], parts[2], headers)


def body_length(request: Request) -> int:
    if "transfer-encoding" in request.headers:
        raise BadRequest(400, "request bodies are not taken in chunks")
    text = request.headers.get("content-length", "0") or "0"
    if not (text.isascii() and text.isdigit()):
        raise BadRequest(400, "bad Content-Length")
    length = int(text)
    if length > MAX_BODY_BYTES:
        raise BadRequest(413, "request body too large")
    return length
