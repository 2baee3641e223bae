"""Hostile connections against a real server per store: bodies sent slowly in small chunks (some abandoned), bursts of
new connections that do all sorts (a request, nothing, half a request), heads with odd bytes. Each is answered (or
closed) in time, never with a 5xx, while /healthz keeps answering and the worker's peak memory stays bounded.

Stalled readers of event streams are not here: a stream whose client stops reading is its own subject (the SSE
routes' back-pressure), tested with those routes."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

from hypothesis import example, given
from hypothesis import strategies as st

from edges.measure import hostile
from edges.strategies import EDGE_SETTINGS
from edges.wire import connect, head, odd_request, read_status, slow_post
from serving_support import Server


def chat_path(prefix: str, shape: str) -> str:
    return f"/chats/{prefix}{shape}-{uuid.uuid4().hex[:8]}/messages"


@EDGE_SETTINGS
@given(
    message=st.text(max_size=40), lone=st.booleans(), piece=st.integers(1, 16),
    pause=st.sampled_from([0.0, 0.005, 0.02]), chunked=st.booleans(), abandon=st.booleans(),
)
@example(message="x" * 40, lone=False, piece=1, pause=0.02, chunked=True, abandon=False)
@example(message="x" * 40, lone=True, piece=1, pause=0.02, chunked=False, abandon=True)
def test_slow_bodies(
    edge_server: tuple[str, Server], edge_prefix: str, message: str, lone: bool, piece: int, pause: float,
    chunked: bool, abandon: bool,
) -> None:
    store, server = edge_server
    body = json.dumps({"message": message + ("\udfff" if lone else "")}).encode()
    target = chat_path(edge_prefix, "slow")

    def send() -> str:
        return slow_post(server.url, target, body, piece, pause, chunked, abandon)

    status = hostile(server, store, "slow body", send, str)
    if abandon:
        return
    lone_anywhere = lone or any("\ud800" <= char <= "\udfff" for char in message)
    assert status == ("422" if lone_anywhere else "200"), (status, body)


BEHAVIOURS = st.sampled_from(["request", "turn", "nothing", "half a request", "hold open"])
TURN_BODY = b'{"message": "burst"}'


def burst(url: str, prefix: str, behaviours: list[str]) -> str:
    """Open one connection per behaviour at once, act, and read every answer (a health check, or a turn of its own
    chat): each must be 200."""
    sockets = [connect(url) for _ in behaviours]
    try:
        for number, (sock, behaviour) in enumerate(zip(sockets, behaviours, strict=True)):
            if behaviour == "request":
                sock.sendall(head("GET", b"/healthz", []))
            elif behaviour == "turn":
                target = f"/chats/{prefix}burst-{uuid.uuid4().hex[:8]}-{number}/messages".encode()
                framing = [(b"Content-Type", b"application/json"), (b"Content-Length", b"%d" % len(TURN_BODY))]
                sock.sendall(head("POST", target, framing) + TURN_BODY)
            elif behaviour == "half a request":
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHo")
            elif behaviour == "nothing":
                sock.close()
        answered = [
            sock for sock, behaviour in zip(sockets, behaviours, strict=True) if behaviour in ("request", "turn")
        ]
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(read_status, answered))
    finally:
        for sock in sockets:
            sock.close()
    assert statuses == ["200"] * len(answered), statuses
    return "every answer 200"


@EDGE_SETTINGS
@given(behaviours=st.lists(BEHAVIOURS, min_size=10, max_size=300))
@example(behaviours=["request"] * 300)
@example(behaviours=["turn"] * 100)  # 100 chats' turns at once
@example(behaviours=["hold open"] * 150 + ["request"] * 150)
def test_bursts_of_new_connections(
    edge_server: tuple[str, Server], edge_prefix: str, behaviours: list[str]
) -> None:
    store, server = edge_server
    hostile(server, store, "connection burst", lambda: burst(server.url, edge_prefix, behaviours), str)


ODD_BYTES = st.binary(min_size=1, max_size=64) | st.sampled_from(
    [b"\x00", b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\x7f", b"\x1b[31m", b"a\r\nInjected: yes", b" \t"],
)
HEADERS = st.lists(st.tuples(ODD_BYTES | st.just(b"X-Edge"), ODD_BYTES | st.binary(max_size=8192)), max_size=8)
TARGETS = st.sampled_from([b"/healthz", b"/chats/odd/threads", b"/chats/odd/messages", b"/chats/\xff\xfe/threads"])


@EDGE_SETTINGS
@given(headers=HEADERS, target=TARGETS, method=st.sampled_from(["GET", "POST"]))
@example(headers=[(b"X-Edge", b"\x80" * 8192)] * 8, target=b"/chats/odd/messages", method="POST")
@example(headers=[(b"Content-Type", b"application/json\xff"), (b"Authorization", b"Bearer \x00\xff")],
         target=b"/chats/odd/messages", method="POST")
def test_heads_with_odd_bytes(
    edge_server: tuple[str, Server], edge_prefix: str, headers: list[tuple[bytes, bytes]], target: bytes, method: str
) -> None:
    store, server = edge_server
    target = target.replace(b"/odd/", f"/{edge_prefix}odd/".encode())
    body = b'{"message": "hi"}' if method == "POST" else b""
    status = hostile(
        server, store, "odd header bytes", lambda: odd_request(server.url, method, target, headers, body), str,
    )
    assert status == "closed" or int(status) < 500, status
