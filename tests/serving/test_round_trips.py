"""PostgreSQL round trips per turn, counted at the socket by a proxy on 127.0.0.1 (tests/support/pg_proxy.py).

The budget: a one-call turn of a chat this worker already holds costs at most 5 round trips (turn lock
with the chat's version, the user's message, the answer, unlock); each further stored item costs at most one, and
items that exist together (parallel tool calls, their outputs) are stored together. A chat that another process
changed costs one more round trip (what changed), never a read of the whole chat.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from agency_swarm import Agency, Agent, SQLThreadStore, function_tool
from agency_swarm.testing import ScriptedModel, ToolCall
from pg_proxy import CountingProxy
from postgres_support import require_postgres

ONE_CALL_BUDGET = 5


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[CountingProxy, str]]:
    url = require_postgres()
    parts = urlsplit(url)
    counting = CountingProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await counting.start()
    yield counting, counting.url(url)
    await counting.aclose()


async def trips_of_turns(proxy: CountingProxy, agency: Agency, chat: str, turns: int) -> list[int]:
    counts = []
    for number in range(turns):
        before = proxy.round_trips
        await agency.get_response(f"message {number}", chat_id=chat)
        counts.append(proxy.round_trips - before)
    return counts


async def test_a_one_call_turn_of_a_held_chat_stays_within_the_budget(proxy: tuple[CountingProxy, str]) -> None:
    counting, url = proxy
    agency = Agency(Agent(name="Helper", model=ScriptedModel(lambda call: "ok")), thread_store=SQLThreadStore(url))
    chat = f"trips-{uuid.uuid4().hex[:12]}"
    async with agency:
        await trips_of_turns(counting, agency, chat, 2)  # connections, schema check, statement preparation
        counts = await trips_of_turns(counting, agency, chat, 5)
    assert max(counts) <= ONE_CALL_BUDGET, counts


async def test_each_further_item_costs_at_most_one_round_trip(proxy: tuple[CountingProxy, str]) -> None:
    counting, url = proxy
    calls = [ToolCall("add", {"a": 1, "b": 2}), ToolCall("add", {"a": 3, "b": 4})]
    model = ScriptedModel(lambda call: "done" if call.tool_outputs else calls)  # two parallel calls, then the answer
    agency = Agency(Agent(name="Helper", model=model, tools=[add]), thread_store=SQLThreadStore(url))
    chat = f"trips-{uuid.uuid4().hex[:12]}"
    async with agency:
        await trips_of_turns(counting, agency, chat, 2)
        counts = await trips_of_turns(counting, agency, chat, 3)
    # user message, both calls (one append), both outputs (one append), the answer: 4 appends, plus lock and unlock
    assert max(counts) <= ONE_CALL_BUDGET + 2, counts


async def test_a_chat_changed_elsewhere_costs_one_more_round_trip(proxy: tuple[CountingProxy, str]) -> None:
    counting, url = proxy
    chat = f"trips-{uuid.uuid4().hex[:12]}"
    here = Agency(Agent(name="Helper", model=ScriptedModel(lambda call: "here")), thread_store=SQLThreadStore(url))
    model = ScriptedModel(lambda call: "there")
    there = Agency(Agent(name="Helper", model=model), thread_store=SQLThreadStore(url))
    async with here, there:
        await trips_of_turns(counting, here, chat, 2)
        for number in range(40):  # a long chat: reading all of it would show in the answer below
            await there.get_response(f"elsewhere {number}", chat_id=chat)
        await trips_of_turns(counting, here, chat, 1)  # reads what changed: statement preparation on first use
        await there.get_response("once more", chat_id=chat)
        (count,) = await trips_of_turns(counting, here, chat, 1)
        assert count <= ONE_CALL_BUDGET + 1
        seen = [item["content"] for item in model.calls[-1].input if item.get("role") == "user"]
        assert seen[-1] == "once more"
        assert len(seen) == 2 + 40 + 1 + 1
