"""Helpers for the serving tests: PostgreSQL availability, a real `agency-swarm serve` process, the gate, checks."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import uvicorn

from agency_swarm import Agency, Agent, ThreadStore
from agency_swarm.testing import ScriptedModel
from postgres_support import POSTGRES_URL
from serving_app import GATE_ENV, ceo_answer, ceo_script

SUPPORT_DIR = Path(__file__).resolve().parent
REPO = SUPPORT_DIR.parents[1]
RUN = uuid.uuid4().hex[:10]
"""Every chat id of this test run starts with a prefix holding it: parallel runs share the table, not chats."""
STARTUP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
BOUND = 60  # seconds: a safety net for awaits on events, never a pause


# -- PostgreSQL ----------------------------------------------------------------------------------------------


def _in_own_loop(coroutine: Any) -> Any:
    with ThreadPoolExecutor(1) as pool:  # its own loop: callers may be inside a running one
        return pool.submit(asyncio.run, coroutine).result()


async def _delete_chats(prefix: str) -> int:
    conn = await asyncpg.connect(POSTGRES_URL, timeout=10)
    try:
        if await conn.fetchval("SELECT to_regclass('agency_swarm_items')") is None:
            return 0
        status = await conn.execute("DELETE FROM agency_swarm_items WHERE starts_with(chat_id, $1)", prefix)
        if await conn.fetchval("SELECT to_regclass('agency_swarm_chat_owners')") is not None:
            await conn.execute("DELETE FROM agency_swarm_chat_owners WHERE starts_with(chat_id, $1)", prefix)
        return int(status.split()[-1])
    finally:
        await conn.close()


def delete_chats(prefix: str) -> int:
    """Remove every chat whose id starts with `prefix` (the database outlives the tests)."""
    assert prefix.startswith("srv"), prefix  # never a prefix that could match other runs' or users' chats
    deleted: int = _in_own_loop(_delete_chats(prefix))
    return deleted


def chat_prefix(name: str) -> str:
    return f"srv{RUN}-{name}-{uuid.uuid4().hex[:6]}-"


# -- a real server ----------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Server:
    """`agency-swarm serve` in a child process, its stderr collected line by line."""

    process: subprocess.Popen[str]
    url: str
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    log: list[str] = field(default_factory=list)
    worker_pids: list[int] = field(default_factory=list)
    _reader: threading.Thread | None = None

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def wait_until_started(self, workers: int) -> None:
        """Every worker logs 'Application startup complete.'; read the log until all have (bounded)."""
        started = 0
        while started < workers:
            try:
                line = self.lines.get(timeout=STARTUP_TIMEOUT_S)
            except queue.Empty:
                pytest.fail(f"the server did not start within {STARTUP_TIMEOUT_S} s:\n{''.join(self.log)}")
            if line is None:
                pytest.fail(f"the server exited with {self.process.wait()} while starting:\n{''.join(self.log)}")
            found = re.search(r"Started server process \[(\d+)\]", line)
            if found:
                self.worker_pids.append(int(found.group(1)))
            started += "Application startup complete." in line
        for attempt in range(50):  # workers are up; /healthz answers at once (bounded, no pause needed)
            try:
                if httpx.get(f"{self.url}/healthz", timeout=5).json() == {"status": "ok"}:
                    return
            except httpx.TransportError:
                if attempt == 49:
                    raise

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        if self._reader is not None:
            self._reader.join(STOP_TIMEOUT_S)
        if self.process.stderr is not None:
            self.process.stderr.close()


def start_server(
    *,
    workers: int,
    store: str,
    factory: str = "serving_app:build_agency",
    env: dict[str, str] | None = None,
    auth_token_env: str | None = None,
) -> Server:
    arguments = ["--factory", factory, "--store", store]
    if auth_token_env is not None:
        arguments += ["--auth-token-env", auth_token_env]
    return start_serve(arguments, workers=workers, env=env)


def start_serve(arguments: list[str], *, workers: int = 1, env: dict[str, str] | None = None,
                port: int | None = None, cwd: Path = REPO) -> Server:
    """`agency-swarm serve ARGUMENTS` on 127.0.0.1 (a free port unless given) run in `cwd`, the tests' modules
    importable."""
    port = free_port() if port is None else port
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SUPPORT_DIR), os.environ.get("PYTHONPATH")]))
    command = [
        str(Path(sys.executable).with_name("agency-swarm")), "serve", *arguments, "--workers", str(workers),
        "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
    ]
    process = subprocess.Popen(
        command, cwd=cwd, env=child_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )
    server = Server(process=process, url=f"http://127.0.0.1:{port}")
    server._reader = threading.Thread(target=server._read, daemon=True)
    server._reader.start()
    try:
        server.wait_until_started(workers)
    except BaseException:
        server.stop()
        raise
    return server


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def stalled_reader(
    url: str, path: str, timeout: float, *, message: str | None = None
) -> tuple[socket.socket, http.client.HTTPResponse]:
    """POST `message` to the streaming route `path` (GET it without one), read the response's head (it began: a
    plain turn holds its chat by then), then read no more. A small receive buffer, so that the client's kernel takes
    little of what the server sends. The response, once begun, reads what the server sent (`read()`)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reader.settimeout(timeout)
    reader.connect((host, int(port)))
    body = b"" if message is None else json.dumps({"message": message}).encode()
    method = "GET" if message is None else "POST"
    head = (
        f"{method} {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    reader.sendall(head.encode() + body)
    response = http.client.HTTPResponse(reader)
    response.begin()
    assert response.status == 200, response.status
    return reader, response


# -- uvicorn in the test's own event loop, and a model that waits there --------------------------------------------


@contextlib.asynccontextmanager
async def live(app: Any) -> AsyncIterator[str]:
    """uvicorn serving `app` on 127.0.0.1 in this event loop; the socket listens before it starts, so no wait."""
    sock = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="off", log_level="warning", timeout_graceful_shutdown=BOUND)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


class Blocking(ScriptedModel):
    """Its first streamed call waits for `release`; it records whether it was cancelled while waiting."""

    def __init__(self, script: Any) -> None:
        super().__init__(script)
        self.reached, self.release, self.cancelled = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.blocked = False

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        if not self.blocked:
            self.blocked = True
            self.reached.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        async for event in super().stream_response(*args, **kwargs):
            yield event


def blocking_agency(developer: Blocking) -> Callable[[ThreadStore], Agency]:
    """CEO delegating to a Developer whose model is `developer` (serving_app's scripts)."""

    def build(store: ThreadStore) -> Agency:
        ceo = Agent(name="CEO", description="Talks to the user.", model=ScriptedModel(ceo_script))
        return Agency([ceo, [ceo, Agent(name="Developer", model=developer)]], thread_store=store)

    return build


class StalledClient:
    """Calls the app as a server would, for one streamed POST, with a `send` that blocks on the body until
    `reading` is set (a reader that stops reading); what it was sent is kept."""

    def __init__(self, app: Any, chat_id: str, message: str) -> None:
        self.app, self.chat_id = app, chat_id
        self.body = json.dumps({"message": message}).encode()
        self.reading = asyncio.Event()
        self.received = bytearray()
        self.status: int | None = None

    async def run(self) -> None:
        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": f"/chats/{self.chat_id}/messages:stream", "raw_path": b"",
            "query_string": b"", "root_path": "", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(self.body)).encode())],
        }
        await self.app(scope, self.receive, self.send)

    async def receive(self) -> dict[str, Any]:
        if self.body:
            body, self.body = self.body, b""
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never leaves
        raise AssertionError("unreachable")

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            return
        await self.reading.wait()
        self.received += message.get("body", b"")

    def events(self) -> list[dict[str, Any]]:
        text = self.received.decode()
        return [json.loads(line.removeprefix("data: ")) for line in text.splitlines() if line.startswith("data: ")]


# -- the gate: where a worker's model waits until the test lets it go -------------------------------------------


class Gate:
    """A TCP server on 127.0.0.1; GatedModel connects, sends its process id, and waits for "go".

    While shut, arrivals queue in `arrivals` (pid, connection) for the test to act on; once `open()`, every
    later arrival gets "go" at once (and is listed in `passed`) until `shut()`.
    """

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._socket.getsockname()[1]}"
        self.arrivals: queue.Queue[tuple[int, socket.socket]] = queue.Queue()
        self.passed: list[int] = []
        self._open = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def env(self) -> dict[str, str]:
        return {GATE_ENV: self.address}

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return  # closed
            with conn.makefile("rb") as reader:
                pid = int(reader.readline().strip() or 0)
            if self._open.is_set():
                self.passed.append(pid)
                conn.sendall(b"go\n")
                conn.close()
            else:
                self.arrivals.put((pid, conn))

    def open(self) -> None:
        self._open.set()

    def shut(self) -> None:
        self._open.clear()

    async def next_arrival(self) -> tuple[int, socket.socket]:
        """The next worker waiting here (fails after a minute: a bound, not a pause)."""
        return await asyncio.to_thread(self.arrivals.get, True, 60.0)

    def close(self) -> None:
        self._socket.close()
        self._thread.join(5)


# -- checking threads -------------------------------------------------------------------------------------------


def text_of(item: dict[str, Any]) -> str:
    assert item.get("type") == "message", item
    assert item.get("role") == "assistant", item
    return "".join(part["text"] for part in item["content"])


def assert_complete_turns(threads: dict[str, list[dict[str, Any]]], messages: list[str]) -> None:
    """Each message is one whole turn, in this order, on both threads: nothing lost, doubled or interleaved."""
    ceo, developer = threads.get("user->CEO", []), threads.get("CEO->Developer", [])
    assert len(ceo) == 4 * len(messages), [item.get("content", item.get("type")) for item in ceo]
    assert len(developer) == 2 * len(messages)
    for turn, message in enumerate(messages, start=1):
        asked, call, output, answer = ceo[4 * (turn - 1): 4 * turn]
        assert asked == {"role": "user", "content": message}
        assert call["type"] == "function_call"
        assert call["name"] == "send_message"
        assert json.loads(call["arguments"])["message"] == f"Please do: {message}"
        assert output["type"] == "function_call_output"
        assert output["call_id"] == call["call_id"]
        assert re.fullmatch(ceo_answer(turn, message), text_of(answer)), text_of(answer)
        delegated, reply = developer[2 * (turn - 1): 2 * turn]
        assert delegated == {"role": "user", "content": f"Please do: {message}", "send_call_id": call["call_id"]}
        assert text_of(reply) == output["output"]  # the Developer's answer is what CEO read


def user_messages_in_order(threads: dict[str, list[dict[str, Any]]]) -> list[str]:
    return [
        str(item["content"]) for item in threads.get("user->CEO", [])
        if item.get("role") == "user" and "type" not in item
    ]
