"""Generated turns cancelled at a random point (after k of their events): the stored threads keep the invariants of
the fault suite (every call has one output, nothing is stored twice), every model input is well-formed, and the
chat's next turn works."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agency_swarm import Agency, Agent, TurnCancelled, TurnNotRunning, function_tool
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message
from faults.harness import check_threads, input_problems


@function_tool
async def fast(note: str) -> str:
    """Answers at once."""
    return f"fast {note}"


@function_tool
async def yielding(note: str) -> str:
    """Gives the event loop a turn before it answers (a point where a cancel can land inside the tool)."""
    await asyncio.sleep(0)
    return f"yielding {note}"


TOOLS = {"fast": lambda n: ToolCall("fast", {"note": n}), "yielding": lambda n: ToolCall("yielding", {"note": n}),
         "send": lambda n: send_message("Developer", f"work {n}")}
steps_strategy = st.lists(st.lists(st.sampled_from(sorted(TOOLS)), min_size=1, max_size=3), max_size=4)


def ceo_script(plan: list[list[str]]) -> Any:
    """Each response of a turn: the plan's next group of calls (the calls made so far say which), then an answer."""

    def step(call: ModelCall) -> Step:
        since_user: list[dict[str, Any]] = []
        for item in reversed(call.input):
            if item.get("role") == "user" and "type" not in item:
                break
            since_user.append(item)
        made = sum(1 for item in since_user if item.get("type") == "function_call")
        done = 0
        for number, group in enumerate(plan):
            if done == made:
                return [TOOLS[name](f"{number}.{index}") for index, name in enumerate(group)]
            done += len(group)
        return f"answer to {call.last_user_message}"

    return step


def build(plan: list[list[str]]) -> tuple[Agency, list[ScriptedModel]]:
    ceo_model = ScriptedModel(ceo_script(plan))
    dev_model = ScriptedModel.each_turn([ToolCall("yielding", {"note": "dev"}), "dev done"])
    ceo = Agent(name="CEO", model=ceo_model, tools=[fast, yielding])
    developer = Agent(name="Developer", model=dev_model, tools=[fast, yielding])
    return Agency([ceo, [ceo, developer]]), [ceo_model, dev_model]


async def cancelled_after(plan: list[list[str]], k: int, streaming: bool) -> None:
    agency, models = build(plan)
    chat_id = "generated"
    stream = agency.get_response_stream("first", chat_id=chat_id)
    cancel: asyncio.Task[None] | None = None
    seen = 0
    async for _ in stream:
        seen += 1
        if seen == k and cancel is None:  # from another task: the turn stops at its next await
            cancel = asyncio.create_task(agency.cancel(chat_id))
    if cancel is not None:
        with contextlib.suppress(TurnNotRunning):  # it had no await left: it finished first
            await cancel
    if stream.cancelled:
        assert seen >= k
    else:
        assert stream.result.final_output == "answer to first"
    threads = await agency.get_threads(chat_id)
    assert check_threads(threads, final=True) == []
    marks = await agency.get_threads(chat_id, include_marks=True)
    assert sum(1 for item in marks["user->CEO"] if item.get("type") == "agency_swarm.turn_cancelled") == int(
        stream.cancelled
    )
    if streaming:
        again = agency.get_response_stream("second", chat_id=chat_id)
        async for _ in again:
            pass
        assert again.result.final_output == "answer to second"
    else:
        assert (await agency.get_response("second", chat_id=chat_id)).final_output == "answer to second"
    assert check_threads(await agency.get_threads(chat_id), final=True) == []
    for model in models:
        for call in model.calls:
            assert input_problems(call.input) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps_strategy, k=st.integers(min_value=1, max_value=40), streaming=st.booleans())
def test_a_turn_cancelled_after_k_events_leaves_a_valid_chat(plan: list[list[str]], k: int, streaming: bool) -> None:
    asyncio.run(cancelled_after(plan, k, streaming))


async def test_a_blocking_turn_cancelled_at_once_raises_and_leaves_a_valid_chat() -> None:
    agency, _ = build([["yielding", "send"], ["fast"]])
    running = asyncio.create_task(agency.get_response("first", chat_id="c"))
    await asyncio.sleep(0)  # the turn starts (a yield to the loop, not a wait for time)
    with contextlib.suppress(TurnNotRunning):
        await agency.cancel("c")
    with contextlib.suppress(TurnCancelled):
        await running
    assert check_threads(await agency.get_threads("c"), final=True) == []
    assert (await agency.get_response("second", chat_id="c")).final_output == "answer to second"
