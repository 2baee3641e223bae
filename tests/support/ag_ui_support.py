"""Helpers for the AG-UI tests: reading `POST /ag-ui` streams into validated `ag_ui.core` events, and the checks every
run's sequence must pass (one RUN_STARTED first, balanced starts and ends, every sub-agent closed, one terminal)."""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import BaseEvent, Event, EventType
from pydantic import TypeAdapter

EVENT = TypeAdapter(Event)
TERMINAL = {EventType.RUN_FINISHED, EventType.RUN_ERROR}


def sse_blocks(text: str) -> list[tuple[str | None, str]]:
    """Each SSE block of a response body as (id or None, data); comment lines are skipped."""
    blocks: list[tuple[str | None, str]] = []
    for block in text.split("\n\n"):
        event_id, data = None, []
        for line in block.splitlines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            assert len(data) == 1, f"one event per data: line, got {data}"
            blocks.append((event_id, data[0]))
    return blocks


def events_of(text: str) -> list[BaseEvent]:
    """The body's events, each validated by ag_ui.core's types (a malformed one fails the test here)."""
    return [EVENT.validate_json(data) for _, data in sse_blocks(text)]


def of_type(events: list[BaseEvent], kind: EventType) -> list[Any]:
    return [event for event in events if event.type == kind]


def check_well_formed(events: list[BaseEvent]) -> None:
    """One run: RUN_STARTED first and once, one terminal event last; every text message and tool call started once,
    continued and ended while open, by the same sub-agent; every sub-agent started once under an open parent and
    closed before the end; nothing attributed to a sub-agent that is not open."""
    assert events, "no events"
    assert events[0].type == EventType.RUN_STARTED, f"the first event is {events[0].type.value}, not RUN_STARTED"
    assert len(of_type(events, EventType.RUN_STARTED)) == 1
    assert events[-1].type in TERMINAL, events[-1]
    assert sum(event.type in TERMINAL for event in events) == 1
    state = _State()
    for index, event in enumerate(events):
        try:
            state.take(event)
        except AssertionError as error:
            raise AssertionError(f"event {index} {event.model_dump(by_alias=True)}: {error}") from None
    assert not state.texts, f"text messages never ended: {state.texts}"
    assert not state.calls, f"tool calls never ended: {state.calls}"
    assert not state.open_subagents, f"sub-agents never closed: {state.open_subagents}"


class _State:
    def __init__(self) -> None:
        self.texts: dict[str, str | None] = {}
        self.calls: dict[str, str | None] = {}
        self.started_calls: set[str] = set()
        self.open_subagents: dict[str, str | None] = {}
        self.closed_subagents: set[str] = set()
        self.suspended: dict[str, list[str]] = {}

    def take(self, event: Any) -> None:
        kind = event.type
        sub = getattr(event, "subagent_run_id", None)
        if kind not in (EventType.SUBAGENT_STARTED, EventType.SUBAGENT_FINISHED, EventType.SUBAGENT_ERROR):
            assert sub is None or sub in self.open_subagents, f"attributed to {sub!r}, which is not open"
        if kind in (EventType.TEXT_MESSAGE_START, EventType.TOOL_CALL_START):
            self._open(event, sub)
        elif kind in (EventType.TEXT_MESSAGE_CONTENT, EventType.TOOL_CALL_ARGS):
            self._continue(event, sub)
        elif kind in (EventType.TEXT_MESSAGE_END, EventType.TOOL_CALL_END):
            self._continue(event, sub)
            opened = self.texts if kind == EventType.TEXT_MESSAGE_END else self.calls
            del opened[event.message_id if kind == EventType.TEXT_MESSAGE_END else event.tool_call_id]
        elif kind == EventType.SUBAGENT_STARTED:
            self._subagent_started(event)
        elif kind in (EventType.SUBAGENT_FINISHED, EventType.SUBAGENT_ERROR):
            self._subagent_closed(event)
        elif kind in TERMINAL:
            self._terminal(event)

    def _open(self, event: Any, sub: str | None) -> None:
        if event.type == EventType.TEXT_MESSAGE_START:
            assert event.message_id not in self.texts, "started twice"
            self.texts[event.message_id] = sub
        else:
            assert event.tool_call_id not in self.started_calls, "the same tool call started twice in one run"
            self.started_calls.add(event.tool_call_id)
            self.calls[event.tool_call_id] = sub

    def _continue(self, event: Any, sub: str | None) -> None:
        text = event.type in (EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END)
        opened, key = (self.texts, event.message_id) if text else (self.calls, event.tool_call_id)
        assert key in opened, "not open"
        assert opened[key] == sub, f"opened by {opened[key]!r}, continued by {sub!r}"

    def _subagent_started(self, event: Any) -> None:
        run_id = event.subagent_run_id
        assert run_id not in self.open_subagents, "started while open"
        assert run_id not in self.closed_subagents, "started again after it closed"
        parent = event.parent_subagent_run_id
        assert parent is None or parent in self.open_subagents, f"parent {parent!r} is not open"
        self.open_subagents[run_id] = parent

    def _subagent_closed(self, event: Any) -> None:
        run_id = event.subagent_run_id
        assert run_id in self.open_subagents, "closed but not open"
        children = [child for child, parent in self.open_subagents.items() if parent == run_id]
        assert not children, f"closed before its sub-agents {children}"
        assert not [key for key, owner in {**self.texts, **self.calls}.items() if owner == run_id], "left open"
        del self.open_subagents[run_id]
        self.closed_subagents.add(run_id)
        outcome = getattr(event, "outcome", None)
        if outcome is not None and outcome.type == "suspended":
            self.suspended[run_id] = list(outcome.interrupt_ids or [])

    def _terminal(self, event: Any) -> None:
        outcome = getattr(event, "outcome", None)
        if outcome is None or outcome.type != "interrupt":
            assert not self.suspended, "a sub-agent suspended in a run that did not pause"
            return
        ids = {interrupt.id for interrupt in outcome.interrupts}
        for interrupt in outcome.interrupts:
            assert interrupt.subagent_run_id is None or interrupt.subagent_run_id in self.suspended
        for run_id, owned in self.suspended.items():
            assert set(owned) <= ids, (run_id, owned, ids)


def client_messages(events: list[BaseEvent], user: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The messages an AG-UI client keeps from a run (as its reducer builds them): the user's, each assistant text,
    each tool call in an assistant message, each tool result. Sent back with the next input, as clients do."""
    messages: list[dict[str, Any]] = [] if user is None else [user]
    texts: dict[str, dict[str, Any]] = {}
    for event in events:
        data = json.loads(event.model_dump_json(by_alias=True))
        if event.type == EventType.TEXT_MESSAGE_START:
            texts[data["messageId"]] = {"id": data["messageId"], "role": "assistant", "content": ""}
            messages.append(texts[data["messageId"]])
        elif event.type == EventType.TEXT_MESSAGE_CONTENT:
            texts[data["messageId"]]["content"] += data["delta"]
        elif event.type == EventType.TOOL_CALL_START:
            call = {"id": data["toolCallId"], "type": "function",
                    "function": {"name": data["toolCallName"], "arguments": ""}}
            messages.append({"id": f"holder-{data['toolCallId']}", "role": "assistant", "toolCalls": [call]})
        elif event.type == EventType.TOOL_CALL_ARGS:
            holder = next(m for m in messages if m.get("id") == f"holder-{data['toolCallId']}")
            holder["toolCalls"][0]["function"]["arguments"] += data["delta"]
        elif event.type == EventType.TOOL_CALL_RESULT:
            messages.append({"id": data["messageId"], "role": "tool", "toolCallId": data["toolCallId"],
                             "content": data["content"]})
    return messages


def run_input(thread_id: str, run_id: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    """A RunAgentInput body: the user's new message `text` (after `messages`, when given)."""
    messages = list(extra.pop("messages", []))
    if text is not None:
        messages.append({"id": f"user-{run_id}", "role": "user", "content": text})
    return {"threadId": thread_id, "runId": run_id, "messages": messages, **extra}
