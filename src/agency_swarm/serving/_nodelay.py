"""uvicorn's HTTP protocol with Nagle's algorithm off on every connection, as it is with one worker.

With `--workers N > 1` uvicorn binds the listening socket itself (`socket.socket(family)`, protocol number 0), and
asyncio turns Nagle off only for sockets whose protocol number says TCP: every keep-alive response then waited for
the client's delayed ACK (~40 ms on Linux) between its header and body writes. Imported only by `serve`, in every
worker process (uvicorn pickles the class by its module path).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

try:  # the protocol uvicorn's "auto" would pick
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Protocol
except ImportError:
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Protocol  # type: ignore[assignment]


def no_delay(transport: asyncio.BaseTransport) -> None:
    """Send small writes at once on a TCP connection (TCP_NODELAY); other transports are left as they are."""
    sock: Any = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayHTTP(_Protocol):
    """uvicorn's HTTP protocol, with `no_delay` applied to each connection it accepts."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        no_delay(transport)
        super().connection_made(transport)
