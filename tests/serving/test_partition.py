"""A network partition in the middle of a turn (partitions, not only crashes).

Worker A runs in a network namespace (tests/support/partition_worker.py), reaching PostgreSQL through a link the test
cuts while A's tool runs (tests/support/netns_support.py: the worker's link goes down and the server's packets to it are
dropped, so neither end hears a reset). Worker B, this test, then takes the chat: the server ended A's silent lock
session within A's `lock_session_timeout` and so freed A's turn lock. B resumes the chat and finishes the turn; the
link comes back; A must not write anything to the chat from then on, and the stored chat must read as one turn
after another: A's start, B's finish, then A's next turn.

- `fence`: a worker that does not notice the cut (its socket options left out). Its tool returns after the heal,
  and the fencing token makes the database refuse the tool's output: the turn fails with TurnLockLost.
- `watch`: the worker as shipped. It notices the cut at half its bound, before B can take the chat, and stops its
  turn (the tool is cancelled) with TurnLockLost; its clean-up writes, sent into the cut, are refused on arrival.

Skipped, saying why, where network namespaces cannot be made (not root, no iproute2).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from agency_swarm import Agency, Agent, SQLThreadStore, function_tool
from agency_swarm._threads._thread_items import INTERRUPTED_OUTPUT
from agency_swarm.testing import ModelCall, ScriptedModel, Step
from netns_support import Forwarder, Link, Unavailable, why_not
from postgres_support import require_postgres
from serving_support import chat_prefix, delete_chats

WORKER = Path(__file__).parents[1] / "support" / "partition_worker.py"
LOCK_SESSION_TIMEOUT = 4  # seconds: A's bound, small to keep the test short (the default is 10)
BOUND = 30  # seconds: a safety net for each wait below, never a pause


@pytest.fixture(scope="module")
def link() -> Iterator[Link]:
    reason = why_not()
    if reason is not None:
        pytest.skip(f"the partition tests build network namespaces, and {reason}")
    url = urlsplit(require_postgres())
    if url.hostname not in ("127.0.0.1", "localhost"):
        pytest.skip("the partition tests cut the forwarder's packets on the loopback: PostgreSQL must be local")
    made = Link()
    try:
        made.open()
    except Unavailable as error:
        made.close()
        pytest.skip(f"the partition tests cannot build a network namespace here: {error}")
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
async def forwarder(link: Link) -> AsyncIterator[Forwarder]:
    url = urlsplit(require_postgres())
    started = Forwarder(link.host_ip, ("127.0.0.1", url.port or 5432))
    await started.start()
    try:
        yield started
    finally:
        await started.aclose()


@pytest.fixture
def prefix() -> Iterator[str]:
    value = chat_prefix("partition")
    yield value
    delete_chats(value)


class WorkerA:
    """Worker A's process in the namespace: its reports, read as they come, and the commands it obeys."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process, self.log = process, log

    @classmethod
    async def start(cls, link: Link, forwarder: Forwarder, chat_id: str, mode: str, log: Path) -> WorkerA:
        url = urlsplit(require_postgres())
        user = url.netloc.rpartition("@")[0]
        address = f"{link.host_ip}:{forwarder.port}"
        through = urlunsplit(url._replace(netloc=f"{user}@{address}" if user else address))
        command = link.worker_command(sys.executable, str(WORKER), through, chat_id, mode, str(LOCK_SESSION_TIMEOUT))
        with log.open("w") as errors:
            process = await asyncio.create_subprocess_exec(
                *command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, cwd=WORKER.parent
            )
        return cls(process, log)

    async def expect(self, event: str) -> dict[str, Any]:
        """The next report, which must be `event`."""
        assert self.process.stdout is not None
        async with asyncio.timeout(BOUND):
            line = await self.process.stdout.readline()
        assert line, f"worker A ended before {event!r}; its log:\n{self.log.read_text()[-3000:]}"
        report: dict[str, Any] = json.loads(line)
        assert report["event"] == event, f"{report}; its log:\n{self.log.read_text()[-3000:]}"
        return report

    def tell(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{command}\n".encode())

    async def finish(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        async with asyncio.timeout(BOUND):
            code = await self.process.wait()
        assert code == 0, self.log.read_text()[-3000:]

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            async with asyncio.timeout(BOUND):
                await self.process.wait()


class WorkerB:
    """The worker that takes the chat over: an agency in this test, on the same database, with its own sessions."""

    def __init__(self) -> None:
        self.first_call: float | None = None

        @function_tool
        async def wait_for_go() -> str:
            """Waits until the test says go."""
            return "B ran it"

        self.agency = Agency(Agent(name="Helper", model=ScriptedModel(self.reply), tools=[wait_for_go]),
                             thread_store=SQLThreadStore(require_postgres()))

    def reply(self, call: ModelCall) -> Step:
        if self.first_call is None:
            self.first_call = time.monotonic()  # B holds the chat's turn lock by now
        return f"B: finished after {call.tool_outputs[-1] if call.tool_outputs else 'nothing'}"


def text(item: dict[str, Any]) -> str:
    content = item.get("content", item.get("output", ""))
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


def check_one_turn_after_another(items: list[dict[str, Any]]) -> None:
    """A's start, B's finish (the call cut short answered as interrupted), then A's next turn; nothing of A's
    cut-off turn after B took over, and every call with exactly one output."""
    shape = [(item.get("role") or item.get("type"), text(item)) for item in items]
    assert shape == [
        ("user", "start"),
        ("function_call", ""),
        ("function_call_output", INTERRUPTED_OUTPUT),
        ("assistant", f"B: finished after {INTERRUPTED_OUTPUT}"),
        ("user", "again"),
        ("assistant", "A: again"),
    ], shape
    calls = Counter(item["call_id"] for item in items if item.get("type") == "function_call")
    outputs = Counter(item["call_id"] for item in items if item.get("type") == "function_call_output")
    assert calls == outputs
    assert set(calls.values()) == {1}


async def partition(link: Link, forwarder: Forwarder, prefix: str, mode: str, tmp_path: Path) -> dict[str, Any]:
    chat_id = f"{prefix}{mode}"
    a = await WorkerA.start(link, forwarder, chat_id, mode, tmp_path / f"worker-a-{mode}.log")
    b = WorkerB()
    try:
        await a.expect("tool_started")  # A holds the chat's turn lock, its call stored, its tool waiting
        link.cut(forwarder.server_ports, urlsplit(require_postgres()).port or 5432)
        cut_at = time.monotonic()
        try:
            if mode == "watch":
                await a.expect("tool_cancelled")  # A noticed, while cut off, and stopped its turn
            async with asyncio.timeout(BOUND):
                result = await b.agency.resume(chat_id)  # waits for A's lock, which the server frees
            assert result.final_output == f"B: finished after {INTERRUPTED_OUTPUT}"
        finally:
            link.heal()
        if mode == "fence":
            a.tell("go")  # A's tool returns now, long after B took over, and A stores its output: refused
            await a.expect("tool_returned")
        failed = await a.expect("turn_failed")
        assert (failed["error"], failed["chat_id"]) == ("TurnLockLost", chat_id)
        why = "nothing of this append was stored" if mode == "fence" else "the turn was stopped"
        assert why in failed["message"]

        a.tell("again")  # A's next turn: a new lock, and what B did
        model_input = (await a.expect("model_input"))["input"]
        assert f"B: finished after {INTERRUPTED_OUTPUT}" in json.dumps(model_input)
        await a.expect("again_done")
        await a.finish()

        store = SQLThreadStore(require_postgres())
        try:
            threads = await store.load(chat_id)
        finally:
            await store.aclose()
        assert list(threads) == ["user->Helper"]
        check_one_turn_after_another(threads["user->Helper"])
        assert b.first_call is not None
        return {"mode": mode, "seconds_until_b_held_the_chat": round(b.first_call - cut_at, 2)}
    finally:
        await a.kill()
        await b.agency.aclose()


async def test_a_cut_off_worker_that_does_not_notice_cannot_write(
    link: Link, forwarder: Forwarder, prefix: str, tmp_path: Path, record_property: Any
) -> None:
    measured = await partition(link, forwarder, prefix, "fence", tmp_path)
    record_property("partition", measured)
    print(measured)


async def test_a_cut_off_worker_stops_its_turn_and_another_finishes_it(
    link: Link, forwarder: Forwarder, prefix: str, tmp_path: Path, record_property: Any
) -> None:
    measured = await partition(link, forwarder, prefix, "watch", tmp_path)
    record_property("partition", measured)
    print(measured)
