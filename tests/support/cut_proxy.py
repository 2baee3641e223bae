"""A TCP proxy in front of a test server whose open connections the test can cut: a network loss mid-stream, as a
browser sees it (its response ends before its end), while the server goes on. New connections pass at once."""

from __future__ import annotations

import contextlib
import socket
import threading


class CutProxy:
    """Listens on 127.0.0.1 (`url`), forwards each connection to `upstream` ("host:port"); `cut()` closes every
    connection open now. Threads block on their sockets (no polling); `close()` ends them all."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").rpartition(":")
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._start(self._accept)

    def _start(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self._upstream, timeout=30)
            server.settimeout(None)
            with self._lock:
                self._open.update((client, server))
            self._start(self._pipe, client, server)
            self._start(self._pipe, server, client)

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        self._drop(source, sink)

    def _drop(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with self._lock:
                self._open.discard(sock)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def cut(self) -> int:
        """Close every connection open now (both ends); how many sockets were open."""
        with self._lock:
            now = list(self._open)
        self._drop(*now)
        return len(now)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread in accept() (closing alone does not)
        self._listener.close()
        self.cut()
        for thread in self._threads:
            thread.join(30)
