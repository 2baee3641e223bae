"""A streamed model call read by the stream's own generator (`Relay`): the reader gets what the per-event path
gives it, the model's stream is closed however the turn ends, and its events do not climb the turn's stack."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseFailedEvent

from agency_swarm import Agency, AgencyHooks, Agent, AgentStarted, Event, RawModelEvent, RetryPolicy, TextDelta
from agency_swarm.testing import ScriptedModel, send_message
from test_streaming import SaveRecorder, other_tasks, unanswered_calls

ENDINGS = ("completed", "failed_event", "raises", "ends_early", "waits")


@dataclass
class Plan:
    """How the deepest agent's stream goes: its reply's words, then how the stream ends."""

    words: int
    ending: str
    depth: int
    leave_after: int | None  # the reader breaks out after this many events; None: reads to the end


class PlannedModel(ScriptedModel):
    """Streams a scripted reply, then ends as the plan says; records how its stream was left and at which stack
    depth each of its events was read."""

    def __init__(self, plan: Plan) -> None:
        super().__init__([" ".join(f"w{i}" for i in range(plan.words))])
        self.plan = plan
        self.opened = self.closed = False
        self.left_by: str | None = None
        self.stack_depths: list[int] = []
        self.waiting = asyncio.Event()

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        ending = self.plan.ending
        self.opened = True
        try:
            async for event in super().stream_response(*args, **kwargs):
                self.stack_depths.append(_stack_depth())
                if event.type == "response.completed":
                    if ending == "failed_event":
                        yield _failed(event)
                        continue
                    if ending == "raises":
                        raise ConnectionError("the connection dropped")
                    if ending == "ends_early":
                        return
                    if ending == "waits":
                        self.waiting.set()
                        await asyncio.Event().wait()
                yield event
        except BaseException as error:
            self.left_by = type(error).__name__
            raise
        finally:
            self.closed = True


def _stack_depth() -> int:
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1  # type: ignore[assignment]
    return depth


def _failed(completed: Any) -> ResponseFailedEvent:
    response = completed.response.model_dump()
    response.update(status="failed", error={"code": "server_error", "message": "overloaded"})
    return ResponseFailedEvent(type="response.failed", sequence_number=completed.sequence_number, response=response)


class NoticingHooks(AgencyHooks):
    """Any hook sends every event through the per-event path (hooks see each one before the reader does)."""

    async def on_agent_start(self, event: AgentStarted) -> None:
        return None


def build(plan: Plan, hooks: AgencyHooks | None) -> tuple[Agency, PlannedModel, SaveRecorder]:
    """A chain of `plan.depth + 1` agents, each sending to the next; the last one streams as planned."""
    deepest = PlannedModel(plan)
    agents = [
        Agent(name=f"A{i}", model=ScriptedModel([send_message(f"A{i + 1}", "go on"), f"A{i} done"]))
        for i in range(plan.depth)
    ] + [Agent(name=f"A{plan.depth}", model=deepest)]
    save = SaveRecorder()
    chart: list[Any] = [agents[0], *[[agents[i], agents[i + 1]] for i in range(plan.depth)]]
    return Agency(chart, hooks=hooks, save_threads_callback=save), deepest, save


def seen(event: Event) -> tuple[Any, ...]:
    if isinstance(event, RawModelEvent):
        return ("raw", event.agent, event.depth, event.data.type)
    if isinstance(event, TextDelta):
        return ("text_delta", event.agent, event.depth, event.delta)
    return (event.type, event.agent, event.depth, event.caller)


async def run(plan: Plan, hooks: AgencyHooks | None) -> dict[str, Any]:
    agency, deepest, save = build(plan, hooks)
    events: list[tuple[Any, ...]] = []
    stream = agency.get_response_stream("start", chat_id="relay", turn_id="relay-turn")

    async def read() -> None:
        async for event in stream:
            events.append(seen(event))
            if plan.leave_after is not None and len(events) >= plan.leave_after:
                break

    reading = asyncio.ensure_future(read())
    if plan.ending == "waits" and plan.leave_after is None:
        await asyncio.wait_for(deepest.waiting.wait(), timeout=10)
        await asyncio.wait_for(agency.cancel("relay", "relay-turn"), timeout=10)
    outcome: Any = None
    try:
        await asyncio.wait_for(reading, timeout=10)
        outcome = stream.result.final_output if stream.done and plan.leave_after is None else "left"
    except Exception as error:  # the turn's own error, raised to the reader
        outcome = (type(error).__name__, str(error))
    await asyncio.wait_for(stream.aclose(), timeout=10)
    threads = {key: [item.get("type", item.get("role")) for item in items] for key, items in save.last.items()}
    assert unanswered_calls(save.last) == []
    assert other_tasks() == set()
    assert deepest.closed == deepest.opened  # however the turn ended, a stream opened was closed
    return {"events": events, "outcome": outcome, "threads": threads, "opened": deepest.opened,
            "calls": len(deepest.calls),
            "left_by": deepest.left_by, "depths": deepest.stack_depths}


plans = st.builds(
    Plan, words=st.integers(1, 6), ending=st.sampled_from(ENDINGS), depth=st.integers(0, 2),
    leave_after=st.none() | st.integers(1, 45),
).filter(lambda plan: plan.ending != "waits" or plan.leave_after is None or plan.leave_after <= 3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans)
async def test_a_relayed_stream_gives_the_reader_what_the_per_event_path_gives(plan: Plan) -> None:
    relayed = await run(plan, hooks=None)
    per_event = await run(plan, hooks=NoticingHooks())
    assert relayed["events"] == per_event["events"]
    assert relayed["outcome"] == per_event["outcome"]
    assert relayed["threads"] == per_event["threads"]
    assert relayed["left_by"] == per_event["left_by"]
    assert relayed["opened"] == per_event["opened"]


async def test_a_failed_response_reaches_the_reader_before_its_error() -> None:
    for hooks in (None, NoticingHooks()):
        outcome = await run(Plan(words=2, ending="failed_event", depth=0, leave_after=None), hooks)
        assert outcome["events"][-1] == ("raw", "A0", 0, "response.failed")
        assert outcome["outcome"] == ("ModelError", "The model failed while streaming: overloaded")
        # a recipient's failure is its sender's tool output: the failed event, then the sender goes on
        nested = await run(Plan(words=2, ending="failed_event", depth=1, leave_after=None), hooks)
        failed = nested["events"].index(("raw", "A1", 1, "response.failed"))
        assert nested["events"][failed + 1][:3] == ("tool_output", "A0", 0)
        assert nested["outcome"] == "A0 done"


async def test_a_stream_that_drops_after_its_first_event_is_not_retried() -> None:
    outcome = await run(Plan(words=3, ending="raises", depth=0, leave_after=None), hooks=None)
    kind, message = outcome["outcome"]
    assert (kind, outcome["calls"]) == ("ModelUnavailable", 1)
    assert "ConnectionError: the connection dropped" in message
    assert [event for event in outcome["events"] if event[0] == "text_delta"] == [
        ("text_delta", "A0", 0, "w0 "), ("text_delta", "A0", 0, "w1 "), ("text_delta", "A0", 0, "w2")]


async def test_a_cancel_while_the_model_streams_reaches_the_model_and_ends_the_stream_with_cancelled() -> None:
    outcome = await run(Plan(words=2, ending="waits", depth=2, leave_after=None), hooks=None)
    assert outcome["left_by"] == "CancelledError"
    assert outcome["opened"]
    assert outcome["events"][-1] == ("cancelled", "A0", 0, "user")
    assert outcome["outcome"][0] == "TurnCancelled"


async def test_a_reader_leaving_mid_stream_closes_the_model_stream_where_the_turn_waits() -> None:
    outcome = await run(Plan(words=5, ending="completed", depth=2, leave_after=23), hooks=None)
    assert outcome["outcome"] == "left"
    assert outcome["opened"]
    assert outcome["left_by"] == "GeneratorExit"
    assert outcome["events"][-1] == ("raw", "A2", 2, "response.output_text.delta")  # left before its text_delta


async def test_a_model_stream_is_read_at_the_same_stack_depth_at_any_depth_of_the_chart() -> None:
    """Counted, not timed: each event's path from the model to the reader does not grow with the nesting."""
    depths = {}
    for depth in (0, 3):
        outcome = await run(Plan(words=3, ending="completed", depth=depth, leave_after=None), hooks=None)
        assert len(set(outcome["depths"])) == 1
        depths[depth] = outcome["depths"][0]
    assert depths[0] == depths[3]
    # the per-event path (hooks on) climbs one more frame per agent, call and send: the count can tell
    nested = await run(Plan(words=3, ending="completed", depth=3, leave_after=None), hooks=NoticingHooks())
    flat = await run(Plan(words=3, ending="completed", depth=0, leave_after=None), hooks=NoticingHooks())
    assert nested["depths"][0] > flat["depths"][0]


async def test_a_stream_failing_before_its_first_event_is_retried_through_the_relay() -> None:
    class FlakyOnce(ScriptedModel):
        def __init__(self) -> None:
            super().__init__(["fine now"])
            self.failures = 0

        async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
            if self.failures == 0:
                self.failures += 1
                raise ConnectionError("refused")
            async for event in super().stream_response(*args, **kwargs):
                yield event

    async def no_wait(_seconds: float) -> None:
        return None

    agent = Agent(name="Solo", model=FlakyOnce(), retry=RetryPolicy(max_attempts=2, sleep=no_wait))
    stream = agent.get_response_stream("go")
    events = [event async for event in stream]
    assert stream.result.final_output == "fine now"
    assert [event.type for event in events if not isinstance(event, RawModelEvent | TextDelta)] == [
        "agent_started", "agent_finished"]

