"""`agency-swarm serve` turns Nagle's algorithm off on every connection, with one worker or many.

With several workers uvicorn binds the listening socket itself with protocol number 0, and asyncio then leaves
Nagle on for the connections it accepts: each keep-alive response waited for the client's delayed ACK between its
header and body writes (~40 ms a request, measured: 25 ms turns became 68 ms with 2 workers).
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

import pytest
import uvicorn

from agency_swarm.serving import ServeSettings
from agency_swarm.serving import _serve as serving
from agency_swarm.serving._nodelay import NoDelayHTTP, no_delay


async def accepted_nodelay(apply: bool) -> int:
    """TCP_NODELAY of a connection accepted on a listening socket made as uvicorn's workers make theirs."""
    listener = socket.socket(socket.AF_INET)  # protocol number 0, like uvicorn's Config.bind_socket
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    found: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            if apply:
                no_delay(transport)
            sock = transport.get_extra_info("socket")
            found.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
    _reader, writer = await asyncio.open_connection(*listener.getsockname())
    try:
        return await found
    finally:
        writer.close()
        server.close()
        await server.wait_closed()


async def test_a_connection_on_a_worker_style_socket_gets_no_delay_only_from_us() -> None:
    assert await accepted_nodelay(apply=False) == 0  # what asyncio alone leaves on such a socket
    assert await accepted_nodelay(apply=True) != 0


def test_no_delay_leaves_other_transports_alone() -> None:
    class Pipe(asyncio.BaseTransport):
        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return None

    no_delay(Pipe())  # nothing to set, nothing raised


def test_serve_hands_uvicorn_the_no_delay_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: seen.update(kwargs))
    monkeypatch.setattr(os, "environ", os.environ.copy())  # serve() exports the workers' settings: not to later tests
    serving.serve(ServeSettings(factory="serving_app:build_agency"))
    assert seen["http"] is NoDelayHTTP
    assert issubclass(NoDelayHTTP, asyncio.Protocol)
