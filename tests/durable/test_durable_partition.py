"""A durable worker cut off from PostgreSQL mid-turn (partitions, not only crashes).

Worker A (tests/support/durable_partition_worker.py) runs in a network namespace: everything it sends to PostgreSQL (its
store and lock session, DBOS, its heartbeat, its tool's connection) crosses a link the test cuts while A's tool
waits (tests/support/netns_support.py). Worker B, another process on this host on the same queue, does the rest with no
client action: its supervisor sees A's heartbeat expire and puts A's turn back on the queue, B takes it, its step
waits for the chat's turn lock until the server ends A's silent lock session, and continues the turn (the call cut
short gets the "interrupted" output, the model answers). Then the link comes back and A's tool's gate opens:

- `fence`: A does not notice the cut (its lock session's socket options left out). Its tool returns, and its
  store's write of the output is refused by the fencing token (TurnLockLost).
- `watch`: A as shipped. It notices the cut at half its bound and stops its turn (TurnLockLost, tool cancelled).

Either way A's step runs the turn again, and DBOS, which lets only the workflow's current owner record a step or
the outcome, refuses A's: A parks and adopts B's result. The workflow stays SUCCESS with B's result, its rows and
stream untouched by A, and the chat holds the turn once: message, call, one output, one answer.

Skipped, saying why, where network namespaces cannot be made (not root, no iproute2).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from dbos import DBOSClient

from agency_swarm import SQLThreadStore
from agency_swarm._threads._checks import TURN_STARTED
from agency_swarm._threads._thread_items import INTERRUPTED_OUTPUT
from durable_app import make_side_effects_table
from netns_support import Forwarder, Link, Unavailable, why_not
from postgres_support import require_postgres
from serving_support import chat_prefix, delete_chats

WORKER = Path(__file__).parents[1] / "support" / "durable_partition_worker.py"
EXPIRE = 2.0  # seconds: a worker silent this long has its turns queued again (heartbeat every EXPIRE / 4)
LOCK_SESSION_TIMEOUT = 4.0  # seconds: the server ends a silent lock session after this long
BOUND = 30.0  # seconds: a safety net for each wait below, never a pause


@pytest.fixture(scope="module")
def link() -> Iterator[Link]:
    reason = why_not()
    if reason is not None:
        pytest.skip(f"the durable partition test builds network namespaces, and {reason}")
    if urlsplit(require_postgres()).hostname not in ("127.0.0.1", "localhost"):
        pytest.skip("the durable partition test cuts the forwarder's packets on the loopback: PostgreSQL must be local")
    made = Link()
    try:
        made.open()
    except Unavailable as error:
        made.close()
        pytest.skip(f"the durable partition test cannot build a network namespace here: {error}")
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
async def forwarder(link: Link) -> AsyncIterator[Forwarder]:
    started = Forwarder(link.host_ip, ("127.0.0.1", urlsplit(require_postgres()).port or 5432))
    await started.start()
    try:
        yield started
    finally:
        await started.aclose()


@pytest.fixture
def prefix() -> Iterator[str]:
    value = chat_prefix("dpart")
    yield value
    delete_chats(value)


class Worker:
    """A worker process: its report lines, read as they come (in a task, so this loop, which also runs the
    forwarder, never blocks), its log, and the turns it is told to submit."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process, self.log = process, log
        self.lines: list[str] = []
        self._seen, self._ended = 0, False
        self._changed = asyncio.Condition()
        self._reading = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, command: list[str], log: Path) -> Worker:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(WORKER.parent), *sys.path])}
        with log.open("w") as errors:
            process = await asyncio.create_subprocess_exec(
                *command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, cwd=WORKER.parent, env=env
            )
        return cls(process, log)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        try:
            while line := await self.process.stdout.readline():
                async with self._changed:
                    self.lines.append(line.decode().rstrip("\n"))
                    self._changed.notify_all()
        finally:
            async with self._changed:
                self._ended = True
                self._changed.notify_all()

    async def expect(self, start: str, containing: str = "") -> str:
        """The first report after the last one expected that starts with `start` (and holds `containing`)."""

        def found() -> bool:
            return any(line.startswith(start) and containing in line for line in self.lines[self._seen:])

        async with asyncio.timeout(BOUND), self._changed:
            await self._changed.wait_for(lambda: found() or self._ended)
        if not found():
            pytest.fail(f"the worker ended before {start!r}: {self.lines}; its log:\n{self.log.read_text()[-3000:]}")
        index = next(i for i in range(self._seen, len(self.lines))
                     if self.lines[i].startswith(start) and containing in self.lines[i])
        self._seen = index + 1
        return self.lines[index]

    async def submit(self, chat_id: str, key: str, message: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(f"submit {chat_id} {key} {message}\n".encode())
        return (await self.expect("turn ")).split(" ", 1)[1]

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            async with asyncio.timeout(BOUND):
                await self.process.wait()
        await self._reading


def through(link: Link, forwarder: Forwarder, url: str) -> str:
    """`url` as a worker in the namespace reaches it: through the forwarder on this host's end of the link."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    address = f"{link.host_ip}:{forwarder.port}"
    return urlunsplit(parts._replace(netloc=f"{user}@{address}" if user else address))


def worker_command(url: str, executor: str, queue: str, mode: str) -> list[str]:
    return [sys.executable, str(WORKER), url, executor, queue, str(EXPIRE), str(LOCK_SESSION_TIMEOUT), mode]


async def recorded(url: str, turn_id: str) -> dict[str, Any]:
    """What DBOS holds of the turn: its status row, its steps' rows and its stream."""
    connection = await asyncpg.connect(url)
    try:
        status = await connection.fetchrow(
            "SELECT status, executor_id, output, error, owner_xid, updated_at, completed_at FROM dbos.workflow_status "
            "WHERE workflow_uuid = $1", turn_id)
        steps = await connection.fetch(
            "SELECT function_id, function_name, output, error, completed_at_epoch_ms FROM dbos.operation_outputs "
            "WHERE workflow_uuid = $1 ORDER BY function_id", turn_id)
        stream = await connection.fetch(
            'SELECT key, "offset", value FROM dbos.streams WHERE workflow_uuid = $1 ORDER BY key, "offset"', turn_id)
        return {"status": dict(status or {}), "steps": [dict(row) for row in steps],
                "stream": [dict(row) for row in stream]}
    finally:
        await connection.close()


async def open_gate(url: str, gate: str) -> None:
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("SELECT pg_notify('durable_gate', $1)", gate)
    finally:
        await connection.close()


async def check_the_chat(url: str, chat_id: str, turn_id: str, call_id: str, answer: str) -> None:
    """The turn once: its mark, the user's message, the call, its one ("interrupted") output, one answer; and the
    tool's side effect recorded once (A ran it; nobody ran it again)."""
    store = SQLThreadStore(url)
    try:
        threads = await store.load(chat_id)
    finally:
        await store.aclose()
    assert list(threads) == ["user->A"]
    marks = [item for item in threads["user->A"] if str(item.get("type", "")).startswith("agency_swarm.")]
    assert marks == [{"type": TURN_STARTED, "turn_id": turn_id}]
    thread = [item for item in threads["user->A"] if item not in marks]
    shape = [(item.get("role") or item.get("type"), item.get("call_id"), item.get("output")) for item in thread]
    assert shape == [
        ("user", None, None),
        ("function_call", call_id, None),
        ("function_call_output", call_id, INTERRUPTED_OUTPUT),
        ("assistant", None, None),
    ], shape
    assert thread[-1]["content"][0]["text"] == answer
    connection = await asyncpg.connect(url)
    try:
        assert await connection.fetchval("SELECT count(*) FROM durable_side_effects WHERE call_id = $1", call_id) == 1
    finally:
        await connection.close()


async def wait_for_result(client: DBOSClient, turn_id: str) -> tuple[Any, Any]:
    handle = await client.retrieve_workflow_async(turn_id)
    async with asyncio.timeout(BOUND):
        result = await handle.get_result(polling_interval_sec=0.05)
    return result, await handle.get_status()


@pytest.mark.parametrize("mode", ["fence", "watch"])
async def test_a_cut_off_durable_worker_s_turn_is_finished_by_another_and_its_late_outcome_refused(
    link: Link, forwarder: Forwarder, prefix: str, tmp_path: Path, mode: str, record_property: Any
) -> None:
    url = require_postgres()
    run = uuid.uuid4().hex[:8]
    queue, chat_id, gate = f"dpart_{run}", f"{prefix}{mode}", f"dpart{run}"
    a_id, b_id = f"dpart-{run}-a", f"dpart-{run}-b"
    await make_side_effects_table()
    client = DBOSClient(system_database_url=url)
    a: Worker | None = None
    b: Worker | None = None
    try:
        a = await Worker.start(link.worker_command(*worker_command(through(link, forwarder, url), a_id, queue, mode)),
                               tmp_path / "worker-a.log")
        await a.expect("ready")
        turn_id = await a.submit(chat_id, "k1", f"block {gate}")
        call_id = (await a.expect("blocked ")).split(" ", 1)[1]  # A holds the chat, its call stored, its tool waits
        b = await Worker.start(worker_command(url, b_id, queue, "watch"), tmp_path / "worker-b.log")
        await b.expect("ready")  # started only now, so that A, alone on the queue, took the turn

        link.cut(forwarder.server_ports, urlsplit(url).port or 5432)
        cut_at = time.monotonic()
        try:
            result, status = await wait_for_result(client, turn_id)  # no client action: B's supervisor and step
            takeover = time.monotonic() - cut_at
            assert (status.status, status.executor_id) == ("SUCCESS", b_id)
            assert result.final_output == f"done: block {gate}"
            await b.expect("run_returned", turn_id)
            before = await recorded(url, turn_id)
        finally:
            link.heal()
        await open_gate(url, gate)
        await a.expect("unblocked" if mode == "fence" else "cancelled", call_id)
        await a.expect("lock_lost", turn_id)  # the fence refused A's write, or A stopped its turn
        ended = await a.expect("run_", turn_id)  # A's step ran the turn again: B's result, or it was stopped
        assert ended in (f"run_returned {turn_id} {result.final_output}",
                         f"run_raised {turn_id} DBOSWorkflowConflictIDError"), ended
        await a.expect("dbos_warning", "no longer owned by this execution")  # and DBOS refused to record it

        after, (late_result, late_status) = await recorded(url, turn_id), await wait_for_result(client, turn_id)
        assert after == before, "A wrote to the workflow after B took it over"
        assert (late_status.status, late_status.executor_id) == ("SUCCESS", b_id)
        assert late_result.final_output == result.final_output
        await check_the_chat(url, chat_id, turn_id, call_id, f"done: block {gate}")
        assert not [line for line in b.lines if line.startswith(("lock_lost", "run_raised", "dbos_warning"))]
        measured = {"mode": mode, "takeover_seconds": round(takeover, 2), "a_run_again": ended.split(" ")[0]}
        record_property("durable_partition", measured)
        print(measured)
    finally:
        link.heal()
        for name, worker in (("A", a), ("B", b)):
            if worker is not None:
                await worker.stop()
                print(f"worker {name}: {worker.lines}\n{worker.log.read_text()[-3000:]}")  # shown if the test fails
        await client.delete_queue_async(queue)
        client.destroy()
