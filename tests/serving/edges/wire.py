"""Raw HTTP/1.1 over a socket, for what no HTTP client sends: bodies in small chunks with pauses, many connections
at once, headers with odd bytes. Every read and write has REQUEST_BOUND_S as its timeout."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

from edges.measure import REQUEST_BOUND_S


def connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=REQUEST_BOUND_S)


def read_status(sock: socket.socket) -> str:
    """The status code of the answer to a `Connection: close` request (read to the end), or "closed" when the
    server closed the connection without one. A server that does neither within the bound raises TimeoutError."""
    received = bytearray()
    while chunk := sock.recv(65536):
        received += chunk
    if not received:
        return "closed"
    line = bytes(received).partition(b"\r\n")[0].decode("latin-1")
    assert line.startswith("HTTP/1.1 "), line
    return line.split()[1]


def head(method: str, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    lines = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: edge", b"Connection: close"]
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def slow_post(url: str, target: str, body: bytes, piece: int, pause: float, chunked: bool, abandon: bool) -> str:
    """POST `body` `piece` bytes at a time, `pause` seconds apart (the hostile client's pace, not synchronisation);
    `chunked`: as chunked transfer coding, else with Content-Length; `abandon`: close before the last piece."""
    framing = (b"Transfer-Encoding", b"chunked") if chunked else (b"Content-Length", str(len(body)).encode())
    with connect(url) as sock:
        sock.sendall(head("POST", target.encode(), [(b"Content-Type", b"application/json"), framing]))
        pieces = [body[start:start + piece] for start in range(0, len(body), piece)]
        for number, data in enumerate(pieces):
            if abandon and number == len(pieces) - 1:
                return "abandoned"
            sock.sendall(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
            time.sleep(pause)
        if chunked:
            sock.sendall(b"0\r\n\r\n")
        return read_status(sock)


def odd_request(url: str, method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes) -> str:
    """One request whose head holds whatever bytes it was given; its status, or "closed"."""
    with connect(url) as sock:
        framing = [(b"Content-Length", str(len(body)).encode())] if body else []
        try:
            sock.sendall(head(method, target, headers + framing) + body)
        except (BrokenPipeError, ConnectionResetError):
            return "closed"  # refused before it was all sent
        try:
            return read_status(sock)
        except ConnectionResetError:
            return "closed"
