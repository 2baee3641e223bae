"""A turn's events as AG-UI events: one lane per agent invocation, its text, tool calls, hosted items and sub-agents."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ag_ui.core import (
    PROTOCOL_VERSION,
    ActivitySnapshotEvent,
    BaseEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from fastapi.encoders import jsonable_encoder

META = "agency_swarm"
"""The key of our own fields in an event's or an interrupt's `metadata` (AG-UI keeps `ag-ui` for itself)."""
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "true runs the call; false refuses it."},
        "message": {
            "type": "string",
            "description": 'With approved false: what the model reads instead of "Tool execution was not approved."',
        },
    },
    "required": ["approved"],
}
SUBAGENT_FAILED = "This agent's turn failed; its caller read why and carried on."
RUN_FAILED_FIRST = "The run failed before this agent's turn finished."


@dataclass(eq=False, slots=True)
class Lane:
    """One agent's invocation in the run: the root (the entry agent, no sub-agent id) or a recipient's turn."""

    agent: str
    caller: str
    depth: int
    subagent_run_id: str | None
    send_call_id: str | None = None
    parent: Lane | None = None
    text_id: str | None = None
    """The text message open now, if any."""
    said: bool = False
    """Text was streamed since the lane's last tool call, output or hosted item."""
    children: list[Lane] = field(default_factory=list)


class Translator:
    """Turns our events (their `to_dict()` form, as plain and durable streams both have them) into AG-UI events.

    Deterministic: the same events give the same AG-UI events with the same ids, so a durable stream read again from
    its start gives the same sequence (a reconnecting client skips what it had by position). Calls and results the
    client already holds (`known_calls`, `known_results`: ids from the input's messages) are not announced again:
    a resumed turn reports the calls of its paused responses once more, and AG-UI clients append arguments. Message
    ids start with `id_prefix` (default: the run id); a stream that is not read again gives each attempt its own,
    so a retry's messages never merge into those of the attempt before it.
    """

    def __init__(
        self, thread_id: str, run_id: str, *, known_calls: frozenset[str] = frozenset(),
        known_results: frozenset[str] = frozenset(), descriptions: Mapping[str, str] | None = None,
        id_prefix: str | None = None,
    ) -> None:
        self.thread_id, self.run_id = thread_id, run_id
        self._prefix = run_id if id_prefix is None else id_prefix
        self._known_calls, self._known_results = known_calls, known_results
        self._descriptions = dict(descriptions or {})
        self._lanes: dict[tuple[str, str], Lane] = {}
        """The invocations under way, by (caller, agent): a pair is never open twice at once (a send to an agent
        whose turn with that caller is under way is refused)."""
        self._root: Lane | None = None
        self._call_lanes: dict[str, Lane] = {}
        """Each call id seen, with the lane that made the call (a recipient's parent is the lane of its send)."""
        self._send_lanes: dict[str, Lane] = {}
        """The open recipient lane of each send call id."""
        self._announced: set[str] = set()
        self._resulted: set[str] = set()
        self._subagent_ids: set[str] = set()
        self._counter = 0

    # -- the run's ends ----------------------------------------------------------------------------------------

    def started(self) -> list[BaseEvent]:
        return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION)]

    def finished(self, result: Any) -> list[BaseEvent]:
        """The end of a turn that returned: RUN_FINISHED with its result, or with interrupts when it paused."""
        out = self._close_texts()
        interruptions = list(getattr(result, "interruptions", None) or [])
        if getattr(result, "paused", False) and interruptions:
            interrupts = [self._interrupt(item) for item in interruptions]
            out += self._close_lanes(lambda lane: self._suspended(lane, interrupts))
            outcome: Any = RunFinishedInterruptOutcome(interrupts=interrupts)
            return [*out, RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)]
        out += self._close_lanes(lambda lane: SubagentFinishedEvent(subagent_run_id=lane.subagent_run_id or ""))
        meta = {META: {"chat_id": getattr(result, "chat_id", self.thread_id), "agent": getattr(result, "agent", None)}}
        return [*out, RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id, result=jsonable_encoder(result.final_output),
            outcome=RunFinishedSuccessOutcome(), usage=token_usage(getattr(result, "usage_records", None)) or None,
            metadata=meta,
        )]

    def failed(self, code: str, message: str) -> list[BaseEvent]:
        """The end of a turn that raised: every open message and sub-agent closed, then RUN_ERROR (no internals:
        `message` is what the HTTP API would answer)."""
        out = self._close_texts()
        out += self._close_lanes(lambda lane: SubagentErrorEvent(
            subagent_run_id=lane.subagent_run_id or "", message=RUN_FAILED_FIRST, code=code
        ))
        return [*out, RunErrorEvent(message=message, code=code)]

    # -- each event --------------------------------------------------------------------------------------------

    def event(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        """The AG-UI events of one of ours (none for those AG-UI has no place for, such as `raw`)."""
        kind = data.get("type")
        handler = self._handlers.get(str(kind))
        if handler is None:
            return []
        return handler(self, data)

    def _agent_started(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        agent, caller, depth = str(data.get("agent")), str(data.get("caller")), int(data.get("depth") or 0)
        if depth == 0:
            if self._root is None:
                self._root = Lane(agent, caller, 0, None)
            self._lanes.setdefault((caller, agent), self._root)
            return []
        send = data.get("send_call_id")
        send_call_id = send if isinstance(send, str) else None
        current = self._lanes.get((caller, agent))
        if current is not None and current.send_call_id == send_call_id:
            return []  # the same invocation again (a durable turn's next attempt goes on with it)
        out = [] if current is None else self._close_tree(current, failed=True)
        parent = self._parent_of(caller, send_call_id)
        lane = Lane(agent, caller, depth, self._new_subagent_id(send_call_id), send_call_id, parent)
        self._lanes[(caller, agent)] = lane
        if parent is not None:
            parent.children.append(lane)
        if send_call_id is not None:
            self._send_lanes[send_call_id] = lane
        out += self._close_text(parent) if parent is not None else []
        meta = {META: {"caller": caller, "depth": depth, "message": data.get("message")}}
        out.append(SubagentStartedEvent(
            subagent_run_id=lane.subagent_run_id or "", name=agent, description=self._descriptions.get(agent) or None,
            parent_subagent_run_id=None if parent is None else parent.subagent_run_id,
            parent_tool_call_id=send_call_id, metadata=meta,
        ))
        return out

    def _text_delta(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        lane = self._lane(data)
        out: list[BaseEvent] = []
        if lane.text_id is None:
            lane.text_id = self._new_id("m")
            out.append(TextMessageStartEvent(
                message_id=lane.text_id, role="assistant", name=lane.agent, subagent_run_id=lane.subagent_run_id
            ))
        lane.said = True
        out.append(TextMessageContentEvent(
            message_id=lane.text_id, delta=str(data.get("delta", "")), subagent_run_id=lane.subagent_run_id
        ))
        return out

    def _tool_called(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        lane = self._lane(data)
        out = self._close_text(lane)
        lane.said = False
        call_id = str(data.get("call_id"))
        self._call_lanes.setdefault(call_id, lane)
        if call_id in self._announced or call_id in self._known_calls:
            return out
        self._announced.add(call_id)
        sub = lane.subagent_run_id
        out += [
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=str(data.get("tool")), subagent_run_id=sub),
            ToolCallArgsEvent(tool_call_id=call_id, delta=str(data.get("arguments", "")), subagent_run_id=sub),
            ToolCallEndEvent(tool_call_id=call_id, subagent_run_id=sub),
        ]
        return out

    def _message_sent(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        self._call_lanes.setdefault(str(data.get("call_id")), self._lane(data))
        return []

    def _tool_output(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        lane = self._lane(data)
        out = self._close_text(lane)
        lane.said = False
        call_id = str(data.get("call_id"))
        recipient = self._send_lanes.pop(call_id, None)
        if recipient is not None and self._lanes.get((recipient.caller, recipient.agent)) is recipient:
            out += self._close_tree(recipient, failed=True)  # the send answered without its recipient finishing
        if call_id in self._resulted or call_id in self._known_results:
            return out
        self._resulted.add(call_id)
        out.append(ToolCallResultEvent(
            message_id=f"{call_id}:result", tool_call_id=call_id, content=str(data.get("output", "")), role="tool",
            subagent_run_id=lane.subagent_run_id,
        ))
        return out

    def _hosted_item(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        lane = self._lane(data)
        out = self._close_text(lane)
        lane.said = False
        item = data.get("item")
        out.append(ActivitySnapshotEvent(
            message_id=self._new_id("a"), activity_type=str(data.get("kind")),
            content=dict(item) if isinstance(item, Mapping) else {"item": item}, subagent_run_id=lane.subagent_run_id,
        ))
        return out

    def _approval_requested(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        return self._close_text(self._lane(data))  # the interrupt itself ends the run (`finished`)

    def _agent_finished(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        lane = self._lane(data)
        out = self._close_text(lane)
        output = data.get("output")
        if not lane.said and isinstance(output, str) and output:  # a reply nobody streamed (a finished turn again)
            text_id = self._new_id("m")
            sub = lane.subagent_run_id
            out += [
                TextMessageStartEvent(message_id=text_id, role="assistant", name=lane.agent, subagent_run_id=sub),
                TextMessageContentEvent(message_id=text_id, delta=output, subagent_run_id=sub),
                TextMessageEndEvent(message_id=text_id, subagent_run_id=sub),
            ]
        lane.said = True
        if lane.subagent_run_id is None:
            return out
        self._forget(lane)
        out.append(SubagentFinishedEvent(subagent_run_id=lane.subagent_run_id, result=jsonable_encoder(output)))
        return out

    def _attempt(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        return self._close_texts()  # a durable turn's next attempt does not continue the text the last one began

    _handlers: ClassVar[dict[str, Callable[[Translator, Mapping[str, Any]], list[BaseEvent]]]] = {
        "agent_started": _agent_started, "text_delta": _text_delta, "tool_called": _tool_called,
        "message_sent": _message_sent, "tool_output": _tool_output, "hosted_item": _hosted_item,
        "approval_requested": _approval_requested, "agent_finished": _agent_finished, "turn_attempt": _attempt,
    }

    # -- lanes -------------------------------------------------------------------------------------------------

    def _lane(self, data: Mapping[str, Any]) -> Lane:
        """The lane an event belongs to: the invocation of its (caller, agent) under way, else the root."""
        key = (str(data.get("caller")), str(data.get("agent")))
        lane = self._lanes.get(key)
        if lane is not None:
            return lane
        if self._root is None:
            self._root = Lane(key[1], key[0], 0, None)
        return self._root

    def _parent_of(self, caller: str, send_call_id: str | None) -> Lane | None:
        if send_call_id is not None and send_call_id in self._call_lanes:
            return self._call_lanes[send_call_id]
        found = [lane for lane in self._lanes.values() if lane.agent == caller]  # a stream written before send ids
        return found[0] if len(found) == 1 else self._root

    def _new_subagent_id(self, send_call_id: str | None) -> str:
        """The send's call id (each invocation has its own send, and a resumed run goes on with the same
        invocation under the same id), made unique in the run if it must be."""
        base = send_call_id or self._new_id("s")
        candidate, number = base, 1
        while candidate in self._subagent_ids:
            number += 1
            candidate = f"{base}:{number}"
        self._subagent_ids.add(candidate)
        return candidate

    def _new_id(self, kind: str) -> str:
        self._counter += 1
        return f"{self._prefix}:{kind}{self._counter}"

    def _forget(self, lane: Lane) -> None:
        if self._lanes.get((lane.caller, lane.agent)) is lane:
            del self._lanes[(lane.caller, lane.agent)]
        if lane.send_call_id is not None and self._send_lanes.get(lane.send_call_id) is lane:
            del self._send_lanes[lane.send_call_id]

    def _open_subtree(self, lane: Lane) -> list[Lane]:
        """`lane` and its open descendants, innermost first."""
        found: list[Lane] = []
        for child in lane.children:
            if self._lanes.get((child.caller, child.agent)) is child:
                found += self._open_subtree(child)
        return [*found, lane]

    def _close_tree(self, lane: Lane, *, failed: bool) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        for open_lane in self._open_subtree(lane):
            out += self._close_text(open_lane)
            self._forget(open_lane)
            sub = open_lane.subagent_run_id or ""
            out.append(
                SubagentErrorEvent(subagent_run_id=sub, message=SUBAGENT_FAILED, code="agent_failed") if failed
                else SubagentFinishedEvent(subagent_run_id=sub)
            )
        return out

    def _close_lanes(self, closing: Any) -> list[BaseEvent]:
        """Every open sub-agent lane, innermost (deepest, latest) first, with the event `closing(lane)` gives."""
        out: list[BaseEvent] = []
        lanes = [lane for lane in self._lanes.values() if lane.subagent_run_id is not None]
        for lane in sorted(lanes, key=lambda lane: lane.depth, reverse=True):
            self._forget(lane)
            out.append(closing(lane))
        return out

    def _close_text(self, lane: Lane) -> list[BaseEvent]:
        if lane.text_id is None:
            return []
        text_id, lane.text_id = lane.text_id, None
        return [TextMessageEndEvent(message_id=text_id, subagent_run_id=lane.subagent_run_id)]

    def _close_texts(self) -> list[BaseEvent]:
        lanes = [*self._lanes.values(), *([self._root] if self._root is not None else [])]
        out: list[BaseEvent] = []
        for lane in dict.fromkeys(lanes):  # the root may be in both
            out += self._close_text(lane)
        return out

    # -- interrupts --------------------------------------------------------------------------------------------

    def _interrupt(self, item: Any) -> Interrupt:
        lane = self._lanes.get((str(item.caller), str(item.agent)))
        sub = None if lane is None else lane.subagent_run_id
        meta = {META: {"agent": item.agent, "caller": item.caller, "depth": item.depth, "tool": item.tool,
                       "arguments": item.arguments}}
        return Interrupt(
            id=item.call_id, reason="tool_call", message=f"{item.agent} asks to run {item.tool}.",
            tool_call_id=item.call_id, response_schema=APPROVAL_SCHEMA, subagent_run_id=sub, metadata=meta,
        )

    @staticmethod
    def _suspended(lane: Lane, interrupts: list[Interrupt]) -> SubagentFinishedEvent:
        own = [interrupt.id for interrupt in interrupts if interrupt.subagent_run_id == lane.subagent_run_id]
        outcome = SubagentFinishedSuspendedOutcome(interrupt_ids=own or None)
        return SubagentFinishedEvent(subagent_run_id=lane.subagent_run_id or "", outcome=outcome)


def token_usage(records: Any) -> list[TokenUsage]:
    """A turn's usage per model, in AG-UI's accounting (cached and reasoning tokens are parts of the totals, as in
    the Responses API's)."""
    totals: dict[str, list[int]] = {}
    for (_, model), usage in records or ():
        counts = totals.setdefault(str(model), [0, 0, 0, 0])
        counts[0] += int(getattr(usage, "input_tokens", 0) or 0)
        counts[1] += int(getattr(usage, "output_tokens", 0) or 0)
        counts[2] += int(getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", 0) or 0)
        counts[3] += int(getattr(getattr(usage, "output_tokens_details", None), "reasoning_tokens", 0) or 0)
    return [
        TokenUsage(
            model=model, input_tokens=inputs, output_tokens=outputs, total_tokens=inputs + outputs,
            cached_input_tokens=cached, reasoning_tokens=reasoning,
        )
        for model, (inputs, outputs, cached, reasoning) in totals.items()
    ]
