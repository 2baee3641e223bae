"""A turn's own work has a budget: counted, not timed. The lines of agency_swarm and the calls into it that one turn
on a new chat runs (the interpreter's trace hook, as tests/turn/test_turn_work.py counts them) stay under a ceiling
per shape: one agent, a send, the same send streamed, a chain of five. Each ceiling is about a tenth above what the
shape runs now and far below what it ran before the hot path was trimmed (docs/design/performance.md, "A turn's
fixed work"): work that creeps back into every turn fails here, on any machine, whatever its speed. A change that
adds work to every turn on purpose raises the ceiling it needs, in the same commit, saying why."""

from __future__ import annotations

import itertools
import sys
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import agency_swarm
from agency_swarm import Agency, Agent
from agency_swarm.testing import ScriptedModel, send_message

PACKAGE = str(Path(agency_swarm.__file__).parent)
TESTING = str(Path(agency_swarm.__file__).parent / "testing.py")  # the scripted model: not the turn's own work

# (lines, calls) per turn on a new chat: the ceiling; now about (271, 43), (626, 91), (1304, 483), (1763, 244);
# before the trim (393, 59), (893, 132), (1796, 519), (2450, 354). CPython 3.12 and 3.13 count the same within 1 %.
CEILINGS: dict[str, tuple[int, int]] = {
    "one agent": (300, 48),
    "a send": (700, 100),
    "a send, streamed": (1430, 530),
    "a chain of five": (1960, 270),
}
SHAPES: dict[str, tuple[list[str], bool]] = {
    "one agent": (["Solo"], False),
    "a send": (["CEO", "Developer"], False),
    "a send, streamed": (["CEO", "Developer"], True),
    "a chain of five": (["A1", "A2", "A3", "A4", "A5"], False),
}


async def work_of(turn: Callable[[], Awaitable[Any]]) -> tuple[int, int]:
    """(line events, calls) of agency_swarm's own code while `turn()` runs (its tasks run in this thread)."""
    lines = calls = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return local

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal calls
        name = frame.f_code.co_filename
        if not name.startswith(PACKAGE) or name == TESTING:
            return None
        if event == "call":  # a coroutine resumed is a call too: each step of a turn's tasks counts
            calls += 1
        return local

    before = sys.gettrace()
    sys.settrace(on_call)
    try:
        await turn()
    finally:
        sys.settrace(before)
    return lines, calls


def chain(names: list[str]) -> Agency:
    members = [Agent(name=name, model=ScriptedModel.each_turn([send_message(names[index + 1], "your part"),
                                                               f"{name}: done"]))
               for index, name in enumerate(names[:-1])]
    members.append(Agent(name=names[-1], model=ScriptedModel.each_turn([f"{names[-1]}: done"])))
    return Agency(members[0], *[list(pair) for pair in itertools.pairwise(members)])


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_a_turn_on_a_new_chat_stays_within_its_budget(shape: str) -> None:
    names, streamed = SHAPES[shape]
    agency = chain(names)
    chats = (f"budget-{number}" for number in itertools.count())

    async def turn() -> None:
        chat = next(chats)
        if streamed:
            async for _ in agency.get_response_stream("go", chat_id=chat):
                pass
            return
        result = await agency.get_response("go", chat_id=chat)
        assert result.final_output == f"{names[0]}: done"

    for _ in range(3):  # setups built and kept, imports done: what every later turn does is what is counted
        await turn()
    lines, calls = await work_of(turn)
    ceiling_lines, ceiling_calls = CEILINGS[shape]
    assert lines > 100, "the count sees the turn"
    assert lines <= ceiling_lines, f"{shape}: {lines} lines of agency_swarm per turn, the budget is {ceiling_lines}"
    assert calls <= ceiling_calls, f"{shape}: {calls} calls into agency_swarm per turn, the budget is {ceiling_calls}"


async def test_the_budget_sees_work_added_to_every_turn() -> None:
    """The guard can fail: a turn that also reads its chat's threads back runs more than its budget allows."""
    agency = chain(["Solo"])
    chats = (f"budget-{number}" for number in itertools.count())
    await agency.get_response("go", chat_id=next(chats))

    async def heavier() -> None:
        chat = next(chats)
        await agency.get_response("go", chat_id=chat)
        for _ in range(10):
            await agency.thread_manager.read_threads(chat)

    lines, _ = await work_of(heavier)
    assert lines > CEILINGS["one agent"][0]


async def test_a_model_that_keeps_nothing_costs_its_thread_no_copy() -> None:
    """The thread's list is lent to the model: with nobody else holding it after the call, the thread goes on with
    the same list, turn after turn (no copy per model call)."""
    agency = Agency(Agent(name="Solo", model=ScriptedModel.each_turn(["done"])))
    thread = agency.thread_manager.get_thread("lent", "user", "Solo")
    thread.items = Watched()  # a list the test can follow without holding it (a copy would be a plain list)
    lent = weakref.ref(thread.items)
    for message in ("one", "two", "three"):
        await agency.get_response(message, chat_id="lent")
    assert thread.items is lent()
    assert [item.get("content") for item in thread.items if item.get("role") == "user"] == ["one", "two", "three"]


class Watched(list[dict[str, Any]]):
    """A list that a weak reference can follow."""
