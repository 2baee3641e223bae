"""Kill -9 a process in the middle of turns, many times: a fresh process loads every committed item, repairs
what the kill cut short, and continues the chat."""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agency_swarm import Agency, Agent
from agency_swarm._threads._thread_items import repair, unanswered_calls
from agency_swarm.testing import ScriptedModel

REPO = Path(__file__).resolve().parents[2]
KILLS_PER_STORE = 5

CHILD = textwrap.dedent(
    """
    import asyncio, os, random, signal, sys, threading
    import agents
    agents.set_tracing_disabled(True)
    from agency_swarm import Agency, Agent, function_tool
    from agency_swarm.testing import ScriptedModel, ToolCall, send_message

    kind, where, first_turn, delay = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

    @function_tool
    async def build(page: str) -> str:
        '''Builds a page.'''
        await asyncio.sleep(0)
        return f"built {page}"

    def store():
        if kind == "file":
            from agency_swarm import FileThreadStore
            return FileThreadStore(where)
        from agency_swarm import SQLiteThreadStore
        return SQLiteThreadStore(where)

    async def main():
        ceo = Agent(name="CEO", model=ScriptedModel.each_turn([send_message("Developer", "build it"), "shipped"]))
        dev = Agent(name="Developer", tools=[build],
                    model=ScriptedModel.each_turn([ToolCall("build", {"page": "home"}), "built"]))
        agency = Agency([ceo, [ceo, dev]], thread_store=store())
        for turn in range(first_turn, first_turn + 400):
            await agency.get_response(f"turn {turn}", chat_id="crash")
            print(f"committed {turn}", flush=True)
            if turn == first_turn + 9:  # ten turns in, however slow the machine: then a kill at a random moment
                # from another thread: mid-write, mid-tool, mid-send, anywhere
                threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
    """
)


def make_store(kind: str, where: Path) -> Any:
    if kind == "file":
        from agency_swarm import FileThreadStore

        return FileThreadStore(where)
    from agency_swarm import SQLiteThreadStore

    return SQLiteThreadStore(where)


def user_messages(items: list[dict[str, Any]]) -> list[str]:
    return [item["content"] for item in items if item.get("role") == "user"]


def check_valid_for_the_model(threads: dict[str, list[dict[str, Any]]]) -> None:
    for key, items in threads.items():
        calls = [item["call_id"] for item in items if item.get("type") == "function_call"]
        outputs = [item["call_id"] for item in items if item.get("type") == "function_call_output"]
        assert sorted(calls) == sorted(outputs), f"{key}: calls and outputs differ"
        for index, item in enumerate(items):
            if item.get("type") == "function_call_output":
                assert item["call_id"] in {i.get("call_id") for i in items[:index]}, f"{key}: output before call"


@pytest.mark.parametrize("kind", ["file", "sqlite"])
async def test_kill_9_at_random_points_loses_nothing_committed(kind: str, tmp_path: Path) -> None:
    where = tmp_path / ("threads" if kind == "file" else "threads.db")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    rng = random.Random(f"{kind}-{os.getpid()}")
    committed: list[int] = []
    next_turn = 0
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("OPENAI_API_KEY", None)
    for _ in range(KILLS_PER_STORE):
        delay = rng.uniform(0.05, 0.3)
        child = await asyncio.create_subprocess_exec(
            sys.executable, str(script), kind, str(where), str(next_turn), f"{delay:.3f}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )
        stdout, stderr = await asyncio.wait_for(child.communicate(), timeout=120)
        assert child.returncode == -9, stderr.decode()[-2000:]
        done = [int(line.split()[1]) for line in stdout.decode().splitlines() if line.startswith("committed ")]
        committed += done
        next_turn = (done[-1] + 1) if done else next_turn + 1000  # a run killed before its first turn skips ahead

        # a fresh store (as a fresh process would open it) holds every committed turn, repaired and valid
        ceo = Agent(name="CEO", model=ScriptedModel(["still here"]))
        dev = Agent(name="Developer", model=ScriptedModel([]))
        agency = Agency([ceo, [ceo, dev]], thread_store=make_store(kind, where))
        await agency.thread_manager.ensure_loaded("crash")
        threads = agency.thread_manager.get_threads("crash")
        for items in threads.values():  # calls a kill cut short belong to the last turn, nothing older
            last_user = max(i for i, item in enumerate(items) if item.get("role") == "user")
            assert all(items.index(call) > last_user for call in unanswered_calls(items))
        check_valid_for_the_model({key: repair(items) for key, items in threads.items()})  # what the next turn sends
        seen = user_messages(threads["user->CEO"])
        for turn in committed:
            assert f"turn {turn}" in seen
        await agency.aclose()

    assert len(committed) >= 10 * KILLS_PER_STORE  # each run commits ten turns before its kill can come
    # and the chat continues
    ceo = Agent(name="CEO", model=ScriptedModel(["continued"]))
    dev = Agent(name="Developer", model=ScriptedModel([]))
    async with Agency([ceo, [ceo, dev]], thread_store=make_store(kind, where)) as agency:
        result = await agency.get_response("after the crashes", chat_id="crash")
    assert result.final_output == "continued"
    sent = ceo.model.calls[0].input  # type: ignore[union-attr]
    assert sent[-1] == {"role": "user", "content": "after the crashes"}
    check_valid_for_the_model({"user->CEO": sent})
    json.dumps(sent)
