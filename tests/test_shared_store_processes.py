"""Two real processes on one shared store take turns in one chat: every model sees every earlier message.

Each process keeps the chat in memory between its turns, so this fails if a process trusts what it holds after
another process wrote (the SQLite bug of issue 20), and passes only if each turn reads what changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from postgres_support import require_postgres

WORKER = Path(__file__).with_name("shared_store_worker.py")


class Worker:
    def __init__(self, url: str, name: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), url, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            cwd=WORKER.parent,
        )

    def turn(self, chat: str, message: str) -> list[str]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(f"{chat} {message}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the worker died (exit code {self.process.wait()})"
        answer: list[str] = json.loads(line)
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=30)
        self.process.stdout.close()
        assert code == 0


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return require_postgres()


@pytest.fixture
def workers(store_url: str) -> Iterator[tuple[Worker, Worker]]:
    pair = (Worker(store_url, "A"), Worker(store_url, "B"))
    try:
        yield pair
    finally:
        for worker in pair:
            worker.close()


def test_interleaved_turns_of_one_chat_see_every_earlier_message(workers: tuple[Worker, Worker]) -> None:
    a, b = workers
    chat = f"shared-{uuid.uuid4().hex[:12]}"
    order = [a, b, a, a, b, b, a, b]
    for turn, worker in enumerate(order):
        assert worker.turn(chat, f"m{turn}") == [f"m{earlier}" for earlier in range(turn + 1)]


def test_a_chat_deleted_elsewhere_starts_again_empty(workers: tuple[Worker, Worker], store_url: str) -> None:
    import asyncio

    from agency_swarm import SQLThreadStore

    a, b = workers
    chat = f"deleted-{uuid.uuid4().hex[:12]}"
    assert a.turn(chat, "old") == ["old"]

    async def delete() -> None:
        store = SQLThreadStore(store_url)
        await store.delete(chat)
        await store.aclose()

    asyncio.run(delete())
    assert b.turn(chat, "new") == ["new"]
    assert a.turn(chat, "again") == ["new", "again"]  # A held "old": the delete makes it read the chat anew
