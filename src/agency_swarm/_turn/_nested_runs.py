"""Agent tools (`agent.as_tool(...)`) whose nested run pauses for approval: the calling turn pauses, resume goes on.

An agent tool runs its agent with `agents.Runner`. When that nested run stops for an approval, the SDK keeps its
result in a process-wide store keyed by the tool call (and a scope id the run context carries) and hands the tool
`None` as output; `Runner` then pauses the outer run. We do the same: the outer call gets no output, the nested
run's waiting calls become the turn's interruptions, and the thread stores what resume needs (an
`AWAITING_APPROVAL` mark and a `NESTED_RUN` mark with the waiting calls and the SDK's serialized run state, without
the user's context). Resume rebuilds that state, applies the user's decisions and hands it back to the tool through
the same store, so the nested run continues where it stopped.

Every call gets a scope of its own, and whatever the tool left in the store is taken out when the call ends (also
when it fails): nothing stays behind for another agency, chat or call with the same signature to find.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents import RunContextWrapper, RunResult, RunResultStreaming, RunState, Usage, UserError
from agents.agent_tool_state import (
    consume_agent_tool_run_result,
    peek_agent_tool_run_result,
    record_agent_tool_resume_state,
    set_agent_tool_state_scope,
)
from openai.types.responses import ResponseFunctionToolCall

from .._base import _sdk
from .._base._events import ApprovalRequested
from .._threads._checks import AWAITING_APPROVAL, NESTED_RUN
from .._threads._manager import ConversationThread
from .._threads._store import Item
from .._threads._thread_items import call_mark
from ._channel import EmitEvent
from ._results import Interruption
from ._state import Run, Turn

Waiting = dict[str, str]
"""One call a paused nested run waits for, as its mark stores it: agent, tool, call_id, arguments."""


class NestedRun:
    """One function call's share of the SDK's store of nested agent runs: its scope, the paused run it continues
    (`mark`, on resume, and `state` once every call that run waits for is decided), and what the tool left in the
    store when it returned (`result`)."""

    __slots__ = ("bound", "call", "mark", "result", "run", "scope", "state", "usage")

    def __init__(self, run: Run, call: ResponseFunctionToolCall, mark: Item | None = None) -> None:
        self.run, self.call, self.mark = run, call, mark
        self.scope = f"agency_swarm:{id(run):x}:{call.call_id}"
        """Unique among the runs alive in this process; the call's entries never outlive the call (`take`)."""
        self.bound = False
        self.result: Any = None
        self.state: Any = None
        self.usage: tuple[tuple[str, str], Usage] | None = None
        """An agent tool's (usage key, the usage its nested run adds up): the turn's usage counts it, as `Runner`'s
        run context does."""

    @property
    def continuing(self) -> bool:
        """The call continues a nested run that paused: the tool was started (and its hooks called) before."""
        return self.mark is not None

    def bind(self, context: Any, tool: Any) -> None:
        """Give the call's ToolContext this call's scope, under which an agent tool keeps its nested run; a run to
        continue goes there first, where the tool looks before starting its agent again. An agent tool's nested run
        adds its model calls' usage to a Usage of its own, recorded with the turn's when the call ends (`take`)."""
        set_agent_tool_state_scope(context, self.scope)
        agent = _sdk.agent_of_tool(tool)
        if agent is not None:
            self.usage = ((agent.name, _model_label(agent)), Usage())
            context.usage = self.usage[1]
        self.bound = True
        if self.state is not None:
            record_agent_tool_resume_state(self.call, self.state, scope_id=self.scope)

    def paused(self) -> bool:
        """Did the tool's nested run stop for approvals? (Then, as under `Runner`, its output guardrails and
        on_tool_end do not run yet.)"""
        return self.bound and _paused(peek_agent_tool_run_result(self.call, scope_id=self.scope))

    def take(self) -> None:
        """Take the call's entry out of the SDK's store (kept in `result`): never left for anyone else."""
        if self.bound:
            self.result = consume_agent_tool_run_result(self.call, scope_id=self.scope)
        if self.usage is not None and self.usage[1].requests:
            self.run.record(*self.usage)
            self.usage = None

    async def verdict(self, turn: Turn, tool: Any, emit: EmitEvent | None) -> str:
        """"approved" when the user decided on every call the paused nested run waits for: the run goes on with the
        decisions applied. Else "wait": as under `Runner`, nothing of it runs yet; the decisions made so far are
        stored with it, and the calls still undecided are the turn's interruptions again."""
        run = turn.run
        waiting = waits(self.mark)
        remaining = [
            wait for wait in waiting if wait["call_id"] not in run.approved and wait["call_id"] not in run.rejected
        ]
        if len(remaining) < len(waiting):
            self.state = await self._decided_state(turn, tool)
            if not remaining:
                return "approved"
            await self._store(turn, remaining, _json_of(self.state))
        await announce(turn, remaining, emit)
        return "wait"

    async def _decided_state(self, turn: Turn, tool: Any) -> Any:
        """The paused nested run rebuilt from its mark, with the user's decisions applied."""
        assert self.mark is not None
        agent = _sdk.agent_of_tool(tool)
        if agent is None:
            raise UserError(f"Tool {tool.name!r} paused as an agent tool, but its agent is not known: the paused "
                            "run cannot continue.")
        run = turn.run
        state = await RunState.from_json(
            agent, self.mark["state"], context_override=RunContextWrapper(context=run.user_context)
        )
        rejected: Any = run.rejected
        for item in state.get_interruptions():
            call_id = approval_id(item)
            if call_id in run.approved:
                state.approve(item)
            elif call_id in rejected:
                state.reject(item, rejection_message=rejected.get(call_id) if isinstance(rejected, Mapping) else None)
        return state

    async def pause(self, turn: Turn, emit: EmitEvent | None) -> bool:
        """When the tool's nested run stopped for approvals: store the marks resume needs and report its waiting
        calls as the turn's interruptions. False when it did not stop."""
        result = self.result
        if not _paused(result):
            return False
        waiting = [_waiting(item) for item in result.interruptions]
        await self._store(turn, waiting, _json_of(result.to_state()))
        await announce(turn, waiting, emit)
        return True

    async def _store(self, turn: Turn, waiting: list[Waiting], state: dict[str, Any]) -> None:
        """The call waits (again) for its nested run, which waits for `waiting`: both marks in one append."""
        call_id = self.call.call_id
        mark = {"type": NESTED_RUN, "call_id": call_id, "waiting": waiting, "state": state}
        stored = turn.thread.add([call_mark(AWAITING_APPROVAL, call_id, turn.steps), mark])
        turn.thread.has_marks = True
        if stored is not None:
            await stored


def _model_label(agent: Any) -> str:
    """The model name a usage key carries, as the loop's own (`_prepare`): the name given, or the model's."""
    model = agent.model
    if model is None or isinstance(model, str):
        return model or "default"
    return getattr(model, "model_name", None) or type(model).__name__


def nested_run(turn: Turn, call: ResponseFunctionToolCall, resume: bool) -> NestedRun:
    """The call's NestedRun; on resume, with the mark of the nested run it paused in, if one did."""
    mark = paused_run(turn.thread, call.call_id) if resume else None
    return NestedRun(turn.run, call, mark)


def paused_run(thread: ConversationThread, call_id: str) -> Item | None:
    """The last `NESTED_RUN` mark of `call_id` in the thread: the nested run it waits for, if any."""
    if not thread.has_marks:
        return None
    return thread.paused_run(call_id)


def paused_run_in(items: list[Item], call_id: str) -> Item | None:
    for item in reversed(items):
        if item.get("type") == NESTED_RUN and item.get("call_id") == call_id:
            return item
    return None


def waits(mark: Item | None) -> list[Waiting]:
    """The calls a nested run's mark says it waits for."""
    found = None if mark is None else mark.get("waiting")
    return [wait for wait in found if isinstance(wait, dict)] if isinstance(found, list) else []


def waiting_ids(thread: ConversationThread, call: Item) -> list[str]:
    """The call ids a waiting call stands for: its nested run's waiting calls, or itself (a hosted MCP approval
    request: its id)."""
    call_id = str(call.get("call_id") or call.get("id"))
    mark = thread.paused_run(call_id)
    return [str(wait.get("call_id")) for wait in waits(mark)] if mark is not None else [call_id]


async def announce(turn: Turn, waiting: list[Waiting], emit: EmitEvent | None) -> None:
    """The nested run's waiting calls join the turn's interruptions, one level below the calling agent."""
    run, caller, depth = turn.run, turn.agent.name, turn.depth + 1
    for wait in waiting:
        agent, tool, call_id, arguments = wait["agent"], wait["tool"], wait["call_id"], wait["arguments"]
        run.interruptions.append(Interruption(
            agent=agent, caller=caller, depth=depth, chat_id=run.chat_id, call_id=call_id, tool=tool,
            arguments=arguments,
        ))
        if emit is not None:
            await emit(ApprovalRequested(
                agent=agent, caller=caller, depth=depth, chat_id=run.chat_id, tool=tool, call_id=call_id,
                arguments=arguments,
            ))


def approval_id(item: Any) -> str:
    """The id an interruption is decided by: a function call's call_id, a hosted MCP request's id."""
    raw = item.raw_item
    found = raw.get("call_id") or raw.get("id") if isinstance(raw, dict) else (
        getattr(raw, "call_id", None) or getattr(raw, "id", None)
    )
    return str(found)


def _paused(result: Any) -> bool:
    """A nested run's result that stopped for approvals (a resume checkpoint means the run went on)."""
    return isinstance(result, RunResult | RunResultStreaming) and bool(result.interruptions)


def _waiting(item: Any) -> Waiting:
    raw = item.raw_item
    arguments = raw.get("arguments") if isinstance(raw, dict) else getattr(raw, "arguments", None)
    return {
        "agent": item.agent.name, "tool": str(item.tool_name or item.name), "call_id": approval_id(item),
        "arguments": str(arguments or ""),
    }


def _json_of(state: RunState[Any]) -> dict[str, Any]:
    """The SDK's serialized run state, without the user's context (it may hold secrets; resume passes its own)."""
    data = state.to_json(context_serializer=_no_context)
    entry = data.get("context")
    if isinstance(entry, dict):
        entry["context"] = {}
    return data


def _no_context(_context: Any) -> dict[str, Any]:
    return {}
