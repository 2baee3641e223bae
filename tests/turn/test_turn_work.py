"""A turn's work does not grow with the chat's length, in any shape: counted, not timed. The lines of agency_swarm
that one turn runs (line events of the interpreter's trace hook: a loop over a thread's items is one per item) are
the same, within a small margin, on a chat whose threads hold 20 items and one whose threads hold 20,000."""

from __future__ import annotations

import itertools
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import agency_swarm
from agency_swarm import Agency, Agent, MemoryThreadStore, function_tool
from agency_swarm.testing import ScriptedModel, ToolCall, send_message

PACKAGE = str(Path(agency_swarm.__file__).parent)
TESTING = str(Path(agency_swarm.__file__).parent / "testing.py")  # the scripted model copies its input: not ours
SHORT, LONG = 20, 20_000
MARGIN = 200  # lines: what may differ between two turns of one shape (ids, a store's bookkeeping), far below LONG


def counted(frame: FrameType) -> bool:
    name = frame.f_code.co_filename
    return name.startswith(PACKAGE) and name != TESTING


async def lines_run(turn: Callable[[], Awaitable[Any]]) -> int:
    """The line events of agency_swarm's code while `turn()` runs (this thread: the turn's tasks run here)."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if counted(frame) else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        await turn()
    finally:
        sys.settrace(before)
    return count


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploy to a target."""
    return f"deployed {target}"


def history(length: int, marked: bool, sent: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for number in range(length // 2):
        if marked:
            items.append({"type": "agency_swarm.turn_started", "turn_id": f"filled-{number}"})
        message: dict[str, Any] = {"role": "user", "content": f"message {number}"}
        if sent:
            message["send_call_id"] = f"call_filled_{number}"
        items.append(message)
        items.append({"id": f"msg_{number}", "type": "message", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": f"answer {number}", "annotations": []}]})
    return items


def chain(names: list[str], store: MemoryThreadStore) -> Agency:
    members = [Agent(name=name, model=ScriptedModel.each_turn([send_message(names[index + 1], "your part"),
                                                               f"{name}: done"]))
               for index, name in enumerate(names[:-1])]
    members.append(Agent(name=names[-1], model=ScriptedModel.each_turn([f"{names[-1]}: done"])))
    return Agency(members[0], *[list(pair) for pair in itertools.pairwise(members)], thread_store=store)


SHAPES: dict[str, list[str]] = {"W1": ["Solo"], "W3": ["CEO", "Developer"], "W4": ["A1", "A2", "A3", "A4", "A5"]}


def build(shape: str, store: MemoryThreadStore) -> Agency:
    if shape == "approval":
        model = ScriptedModel.each_turn([ToolCall("deploy", {"target": "prod"}), "deployed"])
        return Agency(Agent(name="Solo", model=model, tools=[deploy]), thread_store=store)
    return chain(SHAPES[shape], store)


async def filled(shape: str, length: int, marked: bool) -> tuple[MemoryThreadStore, str]:
    store, chat = MemoryThreadStore(), f"work-{uuid.uuid4().hex[:8]}"
    names = SHAPES.get(shape, ["Solo"])
    await store.append(chat, f"user->{names[0]}", history(length, marked, sent=False))
    for sender, recipient in itertools.pairwise(names):
        await store.append(chat, f"{sender}->{recipient}", history(length, marked=False, sent=True))
    return store, chat


async def one_turn(agency: Agency, chat: str, streamed: bool, marked: bool, approval: bool) -> None:
    turn_id = uuid.uuid4().hex if marked else None
    if streamed:
        async for _ in agency.get_response_stream("go", chat_id=chat, turn_id=turn_id):
            pass
        return
    result = await agency.get_response("go", chat_id=chat, turn_id=turn_id)
    if approval:
        approve = [interruption.call_id for interruption in result.interruptions]
        assert approve, "the call paused for approval"
        await agency.resume(chat, approve=approve, turn_id=turn_id)


async def turn_lines(shape: str, length: int, streamed: bool, marked: bool, elsewhere: bool) -> int:
    store, chat = await filled(shape, length, marked)
    agencies = [build(shape, store) for _ in range(2 if elsewhere else 1)]
    approval = shape == "approval"
    for each in agencies:  # the chat loaded and held by each before counting
        await one_turn(each, chat, streamed, marked, approval)
    counts = []
    for each in agencies:  # each in turn: with two, each turn first reads what the other added
        counts.append(await lines_run(lambda each=each: one_turn(each, chat, streamed, marked, approval)))
    return max(counts)


CASES = [
    pytest.param("W1", False, False, False, id="W1"),
    pytest.param("W1", False, True, False, id="W1-turn-ids"),
    pytest.param("W1", False, False, True, id="W1-changed-elsewhere"),
    pytest.param("W3", False, False, False, id="W3"),
    pytest.param("W3", True, False, False, id="W3-streamed"),
    pytest.param("W3", False, True, True, id="W3-turn-ids-changed-elsewhere"),
    pytest.param("W4", False, False, False, id="W4"),
    pytest.param("W4", True, False, False, id="W4-streamed"),
    pytest.param("approval", False, True, False, id="approval-turn-ids"),
]


@pytest.mark.parametrize(("shape", "streamed", "marked", "elsewhere"), CASES)
async def test_a_turn_runs_as_many_lines_on_a_long_chat_as_on_a_short_one(
    shape: str, streamed: bool, marked: bool, elsewhere: bool
) -> None:
    short = await turn_lines(shape, SHORT, streamed, marked, elsewhere)
    long = await turn_lines(shape, LONG, streamed, marked, elsewhere)
    assert short > 100, "the count sees the turn"
    assert long <= short + MARGIN, f"{shape}: {short} lines at {SHORT} items, {long} at {LONG}"


async def test_the_count_sees_a_scan_of_the_thread() -> None:
    """The guard can fail: a turn that visits every item of its thread counts them."""
    store, chat = await filled("W1", LONG, marked=False)
    agency = build("W1", store)
    await one_turn(agency, chat, streamed=False, marked=False, approval=False)

    async def scanning() -> None:
        await agency.get_response("go", chat_id=chat)
        agency.thread_manager.get_threads(chat)  # copies every thread, leaving out marks: a loop over each item

    assert await lines_run(scanning) > LONG
