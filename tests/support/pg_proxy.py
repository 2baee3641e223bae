"""A TCP proxy on 127.0.0.1 that counts round trips: each time a client speaks again after the server answered.

Put it between a store and PostgreSQL (`proxy.url(POSTGRES_URL)`) and read `proxy.round_trips`. Counting at the
socket, not in the driver, sees every exchange: queries, prepares, transaction statements, pool resets.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit


class CountingProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.round_trips = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def url(self, postgres_url: str) -> str:
        parts = urlsplit(postgres_url)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    async def _connected(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(*self.target)
        turn = {"last": "server"}  # who spoke last on this connection

        async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, side: str) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await reader.read(65536):
                    if side == "client" and turn["last"] == "server":
                        self.round_trips += 1
                    turn["last"] = side
                    writer.write(data)
                    await writer.drain()
            writer.close()

        tasks = [asyncio.create_task(pump(client_reader, server_writer, "client")),
                 asyncio.create_task(pump(server_reader, client_writer, "server"))]
        self._tasks.update(tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.difference_update(tasks)

    async def aclose(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
