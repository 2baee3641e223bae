"""A durable worker killed with -9 mid-turn: its turn is finished by another worker, or by itself restarted, with no
client action; the tool call cut short is never run again, and nothing is stored twice."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from dbos import DBOSClient

from agency_swarm import SQLThreadStore
from agency_swarm._threads._thread_items import INTERRUPTED_OUTPUT
from postgres_support import require_postgres

WORKER = Path(__file__).parents[1] / "support" / "durable_worker.py"
EXPIRE = 1.0


class Worker:
    def __init__(self, url: str, executor: str, queue: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(WORKER.parent), *sys.path])}
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), url, executor, queue, str(EXPIRE)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, env=env,
        )
        assert self.read() == "ready"

    def read(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the worker exited ({self.process.wait()})"
        return line.strip()

    def submit(self, chat_id: str, key: str, message: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(f"submit {chat_id} {key} {message}\n")
        self.process.stdin.flush()
        kind, turn_id = self.read().split(" ", 1)
        assert kind == "turn"
        return turn_id

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.kill()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


async def finished(url: str, turn_id: str) -> tuple[Any, str]:
    client = DBOSClient(system_database_url=url)
    try:
        handle = await client.retrieve_workflow_async(turn_id)
        result = await asyncio.wait_for(handle.get_result(polling_interval_sec=0.05), 60)
        status = await handle.get_status()
        return result, status.executor_id
    finally:
        client.destroy()


async def forget_queue(url: str, queue: str) -> None:
    """The database outlives the tests: leave no queue behind."""
    client = DBOSClient(system_database_url=url)
    try:
        await client.delete_queue_async(queue)
    finally:
        client.destroy()


async def side_effects(url: str, call_id: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        return int(await connection.fetchval("SELECT count(*) FROM durable_side_effects WHERE call_id = $1", call_id))
    finally:
        await connection.close()


async def check_the_chat(url: str, chat_id: str, call_id: str) -> None:
    store = SQLThreadStore(url)
    try:
        thread = (await store.load(chat_id))["user->A"]
    finally:
        await store.aclose()
    messages = [item for item in thread if item.get("role") == "user" and "type" not in item]
    outputs = [item for item in thread if item.get("type") == "function_call_output"]
    assert len(messages) == 1
    assert [output["call_id"] for output in outputs] == [call_id]
    assert outputs[0]["output"] == INTERRUPTED_OUTPUT  # cut short by the kill: never run a second time
    assert await side_effects(url, call_id) == 1


@pytest.mark.parametrize("who", ["another worker", "the same worker restarted"])
async def test_a_turn_killed_mid_tool_is_finished_without_the_client(workers: list[Worker], who: str) -> None:
    url = require_postgres()
    run = uuid.uuid4().hex[:8]
    queue, chat_id = f"recovery_{run}", f"recovery-{run}"
    first = Worker(url, f"rec-{run}-a", queue)
    workers.append(first)
    turn_id = first.submit(chat_id, "k1", f"block {run}")
    blocked, call_id = first.read().split(" ", 1)
    assert blocked == "blocked"
    first.kill()
    executor = f"rec-{run}-b" if who == "another worker" else f"rec-{run}-a"
    workers.append(Worker(url, executor, queue))
    try:
        result, ran_on = await finished(url, turn_id)
    finally:
        await forget_queue(url, queue)
    assert result.final_output == f"done: block {run}"
    assert ran_on == executor
    await check_the_chat(url, chat_id, call_id)
