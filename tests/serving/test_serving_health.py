"""/healthz reflects the store: 503 naming the problem while it is unreachable or cannot
write (a full disk), never its address; one check a second at most, whoever polls; HEAD; a probe chat no client
reaches. Real PostgreSQL: healthy, at a closed port, and cut mid-life behind a proxy; a real full disk (a small
tmpfs) where mounting one is allowed. The one-second cache runs on an injected clock: nothing here waits for time
to pass."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from agency_swarm import FileThreadStore, MemoryThreadStore, SQLThreadStore, StoreError, ThreadStore
from agency_swarm.serving import _health as serving
from agency_swarm.serving import create_app
from agency_swarm.serving._health import HEALTH_PROBE_CHAT
from postgres_support import require_postgres
from serving_app import build_agency

PASSWORD = "hunter2-not-real"


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def closed_port() -> int:
    with socket.socket() as probe:  # bound, never listening, then closed: connecting is refused
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def healthy(response: httpx.Response) -> bool:
    if response.status_code == 200:
        assert response.json() == {"status": "ok"}
        return True
    assert response.status_code == 503, response.text
    assert set(response.json()["error"]) == {"type", "message"}
    assert response.json()["error"]["type"] == "store_unavailable"
    return False


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_healthz_is_ok_while_the_store_answers(kind: str, tmp_path: Path) -> None:
    urls = {"memory": "memory", "sqlite": f"sqlite:///{tmp_path / 'chats.db'}"}
    app = create_app(build_agency, store=urls[kind] if kind in urls else require_postgres())
    async with client_for(app) as client:
        assert healthy(await client.get("/healthz"))
        assert (await client.post("/chats/c/messages", json={"message": "hi"})).status_code == 200
        assert healthy(await client.get("/healthz"))
    assert HEALTH_PROBE_CHAT not in await app.state.store.list_chats()  # the probe only reads
    await app.state.agency.aclose()


async def test_healthz_is_503_while_postgres_is_unreachable(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    port = closed_port()
    app = create_app(build_agency, store=f"postgresql://app:{PASSWORD}@127.0.0.1:{port}/secretdb")
    async with client_for(app) as client:
        response = await client.get("/healthz")
        assert not healthy(response)
        assert response.json()["error"]["message"] == "The thread store is unavailable (ConnectionRefusedError)."
        turn = await client.post("/chats/c/messages", json={"message": "hi"})
        assert turn.status_code == 503  # what health announces is what a turn meets
    health_log = [record.getMessage() for record in caplog.records if "Health check" in record.getMessage()]
    assert health_log == ["Health check: The thread store is unavailable (ConnectionRefusedError)."]
    for secret in (PASSWORD, str(port), "secretdb", "app@"):
        assert secret not in response.text
        assert secret not in turn.text
    assert PASSWORD not in caplog.text  # the failed turn's log names the database (redacted URL), never the password
    await app.state.agency.aclose()


class Counting(MemoryThreadStore):
    """Counts health probes; fails them while `down` is set, or never answers while `stuck` is."""

    def __init__(self) -> None:
        super().__init__()
        self.probes = 0
        self.down: Exception | None = None
        self.stuck = False
        self.reached = asyncio.Event()

    async def load(self, chat_id: str) -> dict[str, list[dict[str, Any]]]:
        if chat_id == HEALTH_PROBE_CHAT:
            self.probes += 1
            self.reached.set()
            if self.stuck:
                await asyncio.Event().wait()
            if self.down is not None:
                raise self.down
        return await super().load(chat_id)


async def test_one_check_a_second_whoever_polls(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agency_swarm.serving")
    store, clock = Counting(), Clock()
    app = create_app(build_agency, store=store)
    app.state.health.clock = clock
    async with client_for(app) as client:
        answers = await asyncio.gather(*(client.get("/healthz") for _ in range(20)))
        assert all(healthy(answer) for answer in answers)
        assert store.probes == 1  # twenty at once share one check

        store.down = ConnectionResetError("db.internal:5432 went away")
        clock.now += 0.999
        assert healthy(await client.get("/healthz"))  # still the answer of 0.999 s ago
        assert store.probes == 1
        clock.now += 0.001
        for _ in range(5):
            response = await client.get("/healthz")
            assert not healthy(response)
        assert store.probes == 2
        assert response.json()["error"]["message"] == "The thread store is unavailable (ConnectionResetError)."
        assert "db.internal" not in response.text

        store.down = None
        clock.now += 1.0
        assert healthy(await client.get("/healthz"))
        assert store.probes == 3
    transitions = [record.getMessage() for record in caplog.records if record.name == "agency_swarm.serving"]
    assert transitions == [  # one line per change, not one per poll
        "Health check: the thread store answers.",
        "Health check: The thread store is unavailable (ConnectionResetError).",
        "Health check: the thread store answers.",
    ]
    assert "db.internal" not in caplog.text


async def test_a_store_that_does_not_answer_fails_the_check_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serving, "HEALTH_TIMEOUT_SECONDS", 0.01)
    store = Counting()
    store.stuck = True
    app = create_app(build_agency, store=store)
    async with client_for(app) as client, asyncio.timeout(60):
        response = await client.get("/healthz")
    assert not healthy(response)
    assert response.json()["error"]["message"] == "The thread store did not answer within 0.01 s."


async def test_a_client_leaving_does_not_cancel_the_shared_check() -> None:
    store, clock = Counting(), Clock()
    store.stuck = True
    app = create_app(build_agency, store=store)
    app.state.health.clock = clock
    async with client_for(app) as client:
        first = asyncio.create_task(client.get("/healthz"))
        await asyncio.wait_for(store.reached.wait(), 60)
        first.cancel()  # the client leaves while the check runs
        with contextlib.suppress(asyncio.CancelledError):
            await first
        store.stuck = False
        running = app.state.health._check
        assert running is not None
        assert not running.done()  # still running for whoever asks next
        running.cancel()


# -- a real PostgreSQL, cut and restored behind a proxy --------------------------------------------------------


class Proxy:
    """TCP between the store and PostgreSQL; `cut()` drops every connection and refuses new ones until `restore()`."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.up = True
        self.links: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._link(reader, writer))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            writer.transport.abort()
            return
        upstream_reader, upstream = await asyncio.open_connection(*self.target)
        self.links |= {writer, upstream}
        await asyncio.gather(self._pipe(reader, upstream), self._pipe(upstream_reader, writer))
        self.links -= {writer, upstream}

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        sink.transport.abort()

    def cut(self) -> None:
        self.up = False
        for writer in list(self.links):
            writer.transport.abort()

    def restore(self) -> None:
        self.up = True

    async def close(self) -> None:
        self.cut()
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[Proxy, str]]:
    url = urlsplit(require_postgres())
    made = Proxy(url.hostname or "127.0.0.1", url.port or 5432)
    port = await made.start()
    yield made, url._replace(netloc=f"{url.username}@127.0.0.1:{port}").geturl()
    await made.close()


async def test_postgres_cut_mid_life_turns_health_503_and_back(proxy: tuple[Proxy, str]) -> None:
    cuttable, url = proxy
    store: ThreadStore = SQLThreadStore(url)
    clock = Clock()
    app = create_app(build_agency, store=store)
    app.state.health.clock = clock
    async with client_for(app) as client:
        assert healthy(await client.get("/healthz"))
        cuttable.cut()  # the pool's open connection dies; new ones are refused
        assert healthy(await client.get("/healthz"))  # the answer of less than a second ago
        clock.now += 1.0
        response = await client.get("/healthz")
        assert not healthy(response)
        assert str(urlsplit(url).port) not in response.text
        cuttable.restore()
        assert not healthy(await client.get("/healthz"))
        clock.now += 1.0
        assert healthy(await client.get("/healthz"))  # the pool reconnects
    await app.state.agency.aclose()


# -- /healthz: reads and writes, a probe chat no client reaches, HEAD ----------------------------------------------


def disk_full(store: FileThreadStore, monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_space(file: Any, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "_write", no_space)


async def test_healthz_is_503_while_the_store_cannot_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agency_swarm.serving")
    store, clock = FileThreadStore(tmp_path / "chats"), Clock()
    app = create_app(build_agency, store=store)
    app.state.health.clock = clock
    async with client_for(app) as client:
        assert (await client.get("/healthz")).status_code == 200
        disk_full(store, monkeypatch)
        clock.now += 1.0
        health = await client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["error"] == {
            "type": "store_unavailable", "message": "The thread store cannot write (OSError ENOSPC).",
        }
        assert (await client.head("/healthz")).status_code == 503
        turn = await client.post("/chats/c/messages", json={"message": "hi"})
        assert turn.status_code == 503  # what health announces is what a turn meets
        assert (await client.get("/chats/c/threads")).status_code == 200  # reads still work
        monkeypatch.undo()
        clock.now += 1.0
        assert (await client.get("/healthz")).status_code == 200
    assert "Health check: The thread store cannot write (OSError ENOSPC)." in caplog.text
    assert HEALTH_PROBE_CHAT not in await store.list_chats()
    await app.state.agency.aclose()


class Unwritable(MemoryThreadStore):
    async def append(self, chat_id: str, thread_key: str, items: list[dict[str, Any]]) -> None:
        raise StoreError("Thread store db.internal:5432 could not append") from PermissionError(
            errno.EROFS, "Read-only file system"
        )


async def test_healthz_names_the_kind_of_write_failure_never_the_store() -> None:
    app = create_app(build_agency, store=Unwritable())
    async with client_for(app) as client:
        health = await client.get("/healthz")
    assert health.status_code == 503
    assert health.json()["error"]["message"] == "The thread store cannot write (PermissionError)."
    assert "db.internal" not in health.text


async def test_head_healthz_answers_without_a_body() -> None:
    app = create_app(build_agency, store=MemoryThreadStore(), auth_token="t0ken")
    async with client_for(app) as client:
        head = await client.head("/healthz")
        assert (head.status_code, head.content) == (200, b"")
        assert head.headers["content-type"] == "application/json"
        assert (await client.get("/healthz")).json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/messages"), ("POST", "/messages:stream"), ("POST", "/resume"), ("POST", "/resume:stream"),
        ("GET", "/threads"), ("DELETE", ""),
    ],
)
async def test_the_health_probe_chat_is_not_addressable(method: str, path: str) -> None:
    store = MemoryThreadStore()
    app = create_app(build_agency, store=store)
    async with client_for(app) as client:
        for chat in (HEALTH_PROBE_CHAT, HEALTH_PROBE_CHAT.replace("a", "%61", 1)):
            body = {"message": "x" * 1000} if path.startswith("/messages") else None
            response = await client.request(method, f"/chats/{chat}{path}", json=body)
            assert response.status_code == 400, response.text
            assert response.json()["error"]["type"] == "invalid_chat_id"
            assert "reserved" in response.json()["error"]["message"]
        assert (await client.get("/healthz")).status_code == 200
    assert await store.list_chats() == []


def _can_mount_tmpfs(target: Path) -> bool:
    import subprocess

    target.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(target)], capture_output=True)
    return mounted.returncode == 0


def fill(path: Path) -> None:
    """Write to `path` until the disk is full."""
    with path.open("wb", buffering=0) as filler, pytest.raises(OSError, match="No space left"):
        write_until_full(filler)


def write_until_full(filler: Any) -> None:
    while True:
        filler.write(b"\0" * 4096)


async def test_healthz_on_a_real_full_disk(tmp_path: Path) -> None:
    import subprocess

    disk = tmp_path / "disk"
    if not _can_mount_tmpfs(disk):
        pytest.skip("needs permission to mount a small tmpfs")
    store, clock = FileThreadStore(disk / "chats"), Clock()
    try:
        app = create_app(build_agency, store=store)
        app.state.health.clock = clock
        async with client_for(app) as client:
            assert (await client.get("/healthz")).status_code == 200
            fill(disk / "filler")
            clock.now += 1.0
            health = await client.get("/healthz")
            assert (health.status_code, health.json()["error"]["message"]) == (
                503, "The thread store cannot write (OSError ENOSPC).",
            )
            assert (await client.post("/chats/c/messages", json={"message": "hi"})).status_code == 503
            (disk / "filler").unlink()
            clock.now += 1.0
            assert (await client.get("/healthz")).status_code == 200
    finally:
        await store.aclose()
        await asyncio.to_thread(subprocess.run, ["umount", "--lazy", str(disk)], check=True)
