"""Generated agencies and scripts (hypothesis) through `POST /ag-ui`: every run, its resumes included, is a well-formed
AG-UI sequence of valid events; and the sequence check itself refuses malformed ones."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    BaseEvent,
    EventType,
    RunFinishedEvent,
    RunStartedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
)
from agents import function_tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ag_ui_support import check_well_formed, client_messages, events_of, of_type, run_input
from agency_swarm import Agency, Agent
from agency_swarm.serving import create_app
from agency_swarm.testing import Fail, ModelCall, ScriptedModel, Step, ToolCall, send_message

MAX_RESUMES = 4


@function_tool
def ok(note: str) -> str:
    """Works."""
    return f"ok {note}"


@function_tool
def fails(note: str) -> str:
    """Fails."""
    raise ValueError(note)


@function_tool(needs_approval=True)
def gated(note: str) -> str:
    """Works once approved."""
    return f"gated {note}"


def responses_so_far(call: ModelCall) -> int:
    """How many of this agent's responses in this turn asked for tools: each one's outputs are stored together."""
    count, in_block = 0, False
    for item in reversed(call.input):
        if item.get("role") == "user":
            break
        block = item.get("type") == "function_call_output"
        count += block and not in_block
        in_block = block
    return count


def scripted(steps: list[Any]) -> ScriptedModel:
    def script(call: ModelCall) -> Step:
        index = responses_so_far(call)
        return steps[index] if index < len(steps) else f"answer {index}"

    return ScriptedModel(script)


@st.composite
def agencies(draw: st.DrawFn) -> tuple[Callable[[Any], Agency], list[str]]:
    """Up to four agents, flows only from an agent to later ones; each agent's script a few responses of text,
    tool calls (working, failing, needing approval), sends (one or two at once) or a model failure."""
    count = draw(st.integers(1, 4))
    names = [f"A{n}" for n in range(count)]
    flows = [(a, b) for a, b in itertools.combinations(names, 2) if draw(st.booleans())]
    scripts: dict[str, list[Any]] = {}
    for name in names:
        recipients = [b for a, b in flows if a == name]
        single = [
            st.just("text"), st.builds(lambda n: ToolCall("ok", {"note": n}), st.sampled_from("xyz")),
            st.just(ToolCall("fails", {"note": "boom"})), st.just(ToolCall("gated", {"note": "g"})),
            st.just(Fail(RuntimeError("model down"), partial_text="half")),
            *([st.sampled_from(recipients).map(lambda r: send_message(r, "do it"))] if recipients else []),
        ]
        step = st.one_of(*single)
        scripts[name] = draw(st.lists(st.one_of(step, st.lists(step, min_size=2, max_size=2)), max_size=3))
    script_list = {name: [s for s in steps if s != "text"] + ["done"] for name, steps in scripts.items()}

    def factory(store: Any) -> Agency:
        agents = {name: Agent(name=name, model=scripted(script_list[name]), tools=[ok, fails, gated])
                  for name in names}
        return Agency([agents[names[0]], *[[agents[a], agents[b]] for a, b in flows]], thread_store=store)

    return factory, [str(script_list)]


async def run_all(factory: Callable[[Any], Agency], decisions: list[str]) -> list[list[BaseEvent]]:
    """The first run and its resumes (each interrupt answered as `decisions` say, in turn), every run checked."""
    app = create_app(factory, store="memory", ag_ui=True)
    runs: list[list[BaseEvent]] = []
    answers = itertools.cycle(decisions)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as client:
        body = run_input("gen", "run-0", "go")
        user = body["messages"][0]
        for number in range(1, MAX_RESUMES + 2):
            events = events_of((await client.post("/ag-ui", json=body)).text)
            check_well_formed(events)
            runs.append(events)
            end = events[-1]
            if end.type != EventType.RUN_FINISHED or end.outcome.type != "interrupt":
                break
            entries = [_entry(interrupt.id, next(answers)) for interrupt in end.outcome.interrupts]
            history = [message for past in runs for message in client_messages(past)]
            body = run_input("gen", f"run-{number}", messages=[user, *history], resume=entries)
    return runs


def _entry(interrupt_id: str, decision: str) -> dict[str, Any]:
    if decision == "cancel":
        return {"interruptId": interrupt_id, "status": "cancelled"}
    return {"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": decision == "approve"}}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agencies(), st.lists(st.sampled_from(["approve", "reject", "cancel"]), min_size=1, max_size=3))
def test_generated_turns_give_well_formed_runs(agency: tuple[Callable[[Any], Agency], list[str]],
                                               decisions: list[str]) -> None:
    factory, _ = agency
    runs = asyncio.run(run_all(factory, decisions))
    for events in runs:
        for start in of_type(events, EventType.SUBAGENT_STARTED):
            assert start.parent_tool_call_id is not None  # every recipient's turn hangs under the send that made it
        announced = [e.tool_call_id for e in of_type(events, EventType.TOOL_CALL_START)]
        assert len(announced) == len(set(announced))
    every_result = [e.tool_call_id for events in runs for e in of_type(events, EventType.TOOL_CALL_RESULT)]
    assert len(every_result) == len(set(every_result))  # a result the client holds is not sent again


def _broken(events: list[BaseEvent]) -> str:
    try:
        check_well_formed(events)
    except AssertionError as error:
        return str(error)
    return ""


def test_the_sequence_check_refuses_what_ag_ui_clients_refuse() -> None:
    start, end = RunStartedEvent(thread_id="t", run_id="r"), RunFinishedEvent(thread_id="t", run_id="r")
    sub = SubagentStartedEvent(subagent_run_id="s", name="Dev")
    text = TextMessageStartEvent(message_id="m")
    assert _broken([start, end]) == ""
    assert "never closed" in _broken([start, sub, end])
    assert "RUN_STARTED" in _broken([end])
    assert "not open" in _broken([start, TextMessageContentEvent(message_id="m", delta="x"), end])
    assert _broken([start, text, end])  # a text message left open
    attributed = TextMessageStartEvent(message_id="m", subagent_run_id="nobody")
    assert "not open" in _broken([start, attributed, end])


@pytest.mark.parametrize("decision", ["approve", "reject", "cancel"])
def test_a_gated_call_in_a_recipient_resumes_to_the_end(decision: str) -> None:
    def factory(store: Any) -> Agency:
        boss = Agent(name="Boss", model=scripted([send_message("Worker", "go")]))
        both = [ToolCall("gated", {"note": "a"}), ToolCall("ok", {"note": "b"})]
        worker = Agent(name="Worker", model=scripted([both]), tools=[ok, gated])
        return Agency([boss, [boss, worker]], thread_store=store)

    runs = asyncio.run(run_all(factory, [decision]))
    assert [events[-1].outcome.type for events in runs] == ["interrupt", "success"]
    [resumed_start] = of_type(runs[1], EventType.SUBAGENT_STARTED)
    assert resumed_start.subagent_run_id == of_type(runs[0], EventType.SUBAGENT_STARTED)[0].subagent_run_id
