"""Starting and resuming a top-level turn: the chat's lock, loading and saving it, the RunResult; re-entry refused."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from agents import FunctionTool

from .._attachments._incoming import Incoming
from .._base._errors import ChatPaused, ConfigError, NothingToResume, ReentrantTurn, TurnCancelled
from .._base._events import AgentFinished, ToolCalled, ToolOutput
from .._base._sync import INSIDE, Inside
from .._telemetry import _switch
from .._telemetry._watch import watch_turn
from .._threads._manager import ConversationThread, PausedTurn, ThreadManager, clean_up
from .._threads._thread_items import (
    is_cancel_mark,
    is_finished,
    message_text,
    turn_end,
    turn_mark,
    without_call_marks,
)
from ._cancel import cancellable, stopped
from ._channel import HookFailed, TurnStart, channel, to_reader
from ._definition import AgentBase, Wiring
from ._model_call import model_responses
from ._nested_runs import waiting_ids, waits
from ._results import Interruption, ResponseStream, RunResult
from ._state import USER_CALLER, AgentTurn, Message, Run, Turn
from ._tracing import close_trace, open_trace


async def top_level_turn(
    agent: AgentBase,
    wiring: Wiring,
    message: str | Incoming,
    caller: str,
    chat_id: str,
    context: Any,
    additional_instructions: str | None,
    stream: ResponseStream | None,
    agent_turn: AgentTurn,
    turn_id: str | None = None,
) -> RunResult:
    """One turn from outside the agency: load the chat once, run the entry agent (`agent_turn`), save what was
    produced. A turn id the thread already holds is never started again (`_turn_again`).

    A blocking call awaits this coroutine; a stream (`stream` given) runs it through `drive`. A message of input
    items (`Incoming`) stores the bytes of its images and files first, then its items.
    """
    given: Message
    if isinstance(message, Incoming):
        arriving, given = message, message.original
    else:
        arriving, given = None, message
    manager = wiring.thread_manager
    inside = entered(manager, chat_id)
    async with cancellable(manager, chat_id, turn_id, stream, agent.name) as entry, manager.hold(chat_id):
        thread: ConversationThread | None = None
        try:
            if not manager.is_loaded(chat_id):
                await manager.ensure_loaded(chat_id)
            thread = manager.get_thread(chat_id, caller, agent.name)
            run = Run(chat_id, stream is not None and stream.streaming, context, inside=inside, turn_id=turn_id,
                      message=given)
            turn = Turn(agent, wiring, thread, caller, 0, run, arriving=arriving)
            if turn_id is not None:
                begun = _started_before(manager, thread, turn_id)
                if begun is not None:
                    return await _turn_again(manager, turn, begun, stream, agent_turn)
            if manager.has_unanswered_calls(chat_id):
                await _settle_unanswered(manager, agent, wiring, chat_id)
            return await _entry_turn(manager, turn, given, additional_instructions, stream, agent_turn)
        except asyncio.CancelledError:
            raise await stopped(manager, entry, thread) from None


def _started_before(manager: ThreadManager, thread: ConversationThread, turn_id: str) -> int | None:
    """Where the turn `turn_id` began in `thread`, if it did. ConfigError if it began in the chat's thread with
    another entry point: one turn per id and chat, whoever it was addressed to."""
    begun = thread.turn_begun(turn_id)
    if begun is not None:
        return begun
    for other in manager.threads_of(thread.chat_id):
        if other is not thread and other.sender == USER_CALLER and other.turn_begun(turn_id) is not None:
            raise ConfigError(
                f"turn_id {turn_id!r} already names a turn of chat {thread.chat_id!r} addressed to "
                f"{other.recipient!r}; a turn id stands for one turn of a chat."
            )
    return None


async def _turn_again(
    manager: ThreadManager, turn: Turn, begun: int, stream: ResponseStream | None, agent_turn: AgentTurn
) -> RunResult:
    """A turn whose id its thread holds from `begun` on (it was started before: a retry, or a run that crashed).
    Finished, its result is built again from what it stored (usage is not stored: none); unfinished, it goes on
    from its last stored item, as `resume` would."""
    items = turn.thread.items
    end = turn_end(items, begun)
    if end == len(items) and not is_finished(items):
        return await _entry_turn(manager, turn, None, None, stream, agent_turn)
    last = items[end - 1]
    if is_cancel_mark(last):
        raise TurnCancelled(f"Turn {turn.run.turn_id!r} of chat {turn.run.chat_id!r} was cancelled.",
                            chat_id=turn.run.chat_id, turn_id=turn.run.turn_id)
    result = RunResult(
        final_output=message_text(last) if is_finished([last]) else None,
        new_items=without_call_marks(items[begun:end]), chat_id=turn.run.chat_id, agent=turn.agent.name,
        last_agent=turn.agent, _run=turn.run,
    )
    if stream is not None:
        if turn.run.streaming:
            await _report_again(turn, items[begun:end], result.final_output)
        stream._finish(result)
    return result


async def _report_again(turn: Turn, items: list[dict[str, Any]], final_output: Any) -> None:
    """A finished turn streamed again: its calls (each called, then its output) and its end, rebuilt from what it
    stored, without hooks. A run that died after storing them but before streaming them leaves its consumer a
    turn that ends; a durable turn's reader leaves out the events it already had (each call's, and the end's)."""
    agent, caller, chat_id = turn.agent.name, turn.caller, turn.run.chat_id
    outputs = {str(item.get("call_id")): item.get("output") for item in items
               if item.get("type") == "function_call_output"}
    for call in items:
        call_id = str(call.get("call_id"))
        if call.get("type") != "function_call" or call_id not in outputs:
            continue
        tool, output = str(call.get("name")), outputs[call_id]
        await to_reader(ToolCalled(agent=agent, caller=caller, depth=0, chat_id=chat_id, tool=tool,
                                   call_id=call_id, arguments=str(call.get("arguments"))))
        await to_reader(ToolOutput(agent=agent, caller=caller, depth=0, chat_id=chat_id, tool=tool, call_id=call_id,
                                   output=output if isinstance(output, str) else json.dumps(output)))
    await to_reader(AgentFinished(agent=agent, caller=caller, depth=0, chat_id=chat_id, output=final_output))




def resume_turn(
    entries: Mapping[str, tuple[AgentBase, Wiring]],
    manager: ThreadManager,
    *,
    chat_id: str,
    context: Any,
    approve: frozenset[str],
    reject: Mapping[str, str | None],
    stream: ResponseStream,
    agent_turn: AgentTurn,
    turn_id: str | None = None,
) -> TurnStart:
    """Continue the chat's unfinished top-level turn from its last stored item (after a pause or a crash). With a
    `turn_id`, a resume already started with it is not started again (`_turn_again`; its decisions that still
    wait apply)."""

    async def resumed() -> RunResult:
        inside = entered(manager, chat_id)
        where: list[ConversationThread] = []  # the entry agent's thread, once known: the cancel mark's
        async with cancellable(manager, chat_id, turn_id, stream, "") as entry, manager.hold(chat_id):
            try:
                return await _resumed(inside, where)
            except asyncio.CancelledError:
                raise await stopped(manager, entry, where[0] if where else None) from None

    async def _resumed(inside: Inside, where: list[ConversationThread]) -> RunResult:
        await manager.ensure_loaded(chat_id)
        paused = manager.paused_turns.get(chat_id)  # as Runner's RunState: its context and usage go on
        kept = paused.context if context is None and paused is not None else context
        run = Run(chat_id, stream.streaming, kept, approve, reject, inside, turn_id)
        if paused is not None:
            run.usage_records, run.responses = list(paused.usage_records), list(paused.responses)
            run._guardrail_log = None if paused.guardrails is None else paused.guardrails.copy()
        again = None if turn_id is None else _resumed_before(entries, manager, run, turn_id)
        if again is not None:
            return await _turn_again(manager, again[0], again[1], stream, agent_turn)
        agent, wiring = _unfinished_entry(entries, manager, chat_id)
        _check_decisions(manager, chat_id, approve, reject)
        turn = Turn(
            agent=agent, wiring=wiring, thread=manager.get_thread(chat_id, USER_CALLER, agent.name),
            caller=USER_CALLER, depth=0, run=run,
        )
        where.append(turn.thread)
        if turn_id is not None:  # stored first: a crash from here on leaves a resume that is continued, not redone
            turn.thread.has_marks = True
            await turn.thread.extend([turn_mark(turn_id)])
        return await _entry_turn(manager, turn, None, None, stream, agent_turn)

    return resumed


def _check_decisions(
    manager: ThreadManager, chat_id: str, approve: frozenset[str], reject: Mapping[str, str | None]
) -> None:
    pending = _waiting_call_ids(manager, chat_id)
    both = approve & reject.keys()
    unknown = sorted((approve | reject.keys()) - pending)
    if unknown or both:
        raise ConfigError(
            f"resume: call ids {sorted(both) or unknown} are "
            f"{'both approved and rejected' if both else 'not waiting in chat ' + repr(chat_id)}; "
            f"the calls waiting are: {sorted(pending) or 'none'}."
        )


def _resumed_before(
    entries: Mapping[str, tuple[AgentBase, Wiring]], manager: ThreadManager, run: Run, turn_id: str
) -> tuple[Turn, int] | None:
    """The turn, and its mark's index, of a resume that `turn_id` already started, if one did; of the user's
    decisions, those whose calls still wait apply (the others were applied by the resume that started)."""
    threads = {thread.recipient: thread for thread in manager.threads_of(run.chat_id) if thread.sender == USER_CALLER}
    for name, (agent, wiring) in entries.items():
        held = threads.get(name)
        begun = None if held is None else held.turn_begun(turn_id)  # turn marks say where turns begin
        if begun is not None:
            waiting = _waiting_call_ids(manager, run.chat_id)
            run.approved = run.approved & waiting
            run.rejected = {call_id: text for call_id, text in run.rejected.items() if call_id in waiting}
            thread = manager.get_thread(run.chat_id, USER_CALLER, name)
            return Turn(agent, wiring, thread, USER_CALLER, 0, run), begun
    return None


def _waiting_call_ids(manager: ThreadManager, chat_id: str) -> set[str]:
    """The ids a resume may decide on: each waiting call's, or those its agent tool's paused nested run waits for."""
    threads = {thread.key: thread for thread in manager.threads_of(chat_id)}
    return {
        call_id for key, calls in manager.waiting_calls(chat_id).items() for call in calls
        for call_id in waiting_ids(threads[key], call)
    }


def entered(manager: ThreadManager, chat_id: str) -> Inside:
    """What a new top-level turn of `chat_id` runs inside, itself included. ReentrantTurn when the code starting it
    runs inside a turn of that chat: the new turn would wait for the chat's lock, held by the turn that waits for
    this code (a tool) to finish."""
    outer = INSIDE.get()
    if manager.store_turn_lock is None:
        keys: Inside = ((manager, chat_id),)
    else:  # the store is shared by other managers too
        keys = ((manager, chat_id), (manager.store, chat_id))
    if outer and any(key in outer for key in keys):
        raise ReentrantTurn(
            f"Chat {chat_id!r} is running the turn this call comes from: a tool cannot start a turn of the chat it "
            "runs in (that turn would wait for the running one, which waits for the tool). Use another chat_id, or "
            "let the agent message another agent with send_message.",
            chat_id=chat_id,
        )
    return outer + keys


async def _entry_turn(
    manager: ThreadManager,
    turn: Turn,
    message: Message | None,
    additional_instructions: str | None,
    stream: ResponseStream | None,
    agent_turn: AgentTurn,
) -> RunResult:
    """Under the chat's lock, with the chat loaded: run the entry agent's turn, save, and build the RunResult."""
    run, thread, chat_id = turn.run, turn.thread, turn.run.chat_id
    start = len(thread.items)
    began = start if message is not None else _turn_began(thread.items, run)
    run.trace = open_trace(turn.agent.name, chat_id)  # the turn's SDK trace, and its spans and metrics (`_telemetry`)
    if run.trace is not None:
        turn.parent_span = run.trace.trace
    if _switch.ACTIVE is not None:
        run.watch = watch_turn(_switch.ACTIVE, turn.agent.name, chat_id)
    hooks = turn.wiring.hooks
    if hooks is not None or run.streaming:
        turn.emit = channel(hooks, run.streaming)
    finished, error = False, None  # type: bool, BaseException | None
    try:
        await agent_turn(turn, message, additional_instructions)
        finished = True
    except HookFailed as failed:
        error = failed.error
        raise failed.error from None  # the hook's own error, as the caller would expect it
    except BaseException as failure:
        error = failure
        raise
    finally:
        if run.watch is not None:  # first: nothing below can leave the turn counted as running
            run.watch.end(error, turn.paused)
        if turn.paused or not finished:  # calls wait for approval, or a failed append left one without its output
            manager.mark_unanswered(chat_id)
            manager.paused_turns[chat_id] = PausedTurn(run.user_context, run.usage_records, run.responses,
                                                       run._guardrail_log)
        else:
            manager.paused_turns.pop(chat_id, None)
        if run.trace is not None:
            close_trace(run.trace)
        if manager.saves_turns:
            if finished:
                await manager.save(chat_id)
            else:  # saved even when this task is cancelled again meanwhile (shielded, bounded: clean_up)
                await clean_up(manager.save(chat_id), f"saving chat {chat_id!r}")
    result = _result(turn, start, began)
    if stream is not None:
        stream._finish(result)
    return result


def _result(turn: Turn, start: int, began: int) -> RunResult:
    """The entry agent's turn as a RunResult: the items since `start` (all of the turn since `began`, for a resumed
    one's `to_input_list()`)."""
    run, thread, agent = turn.run, turn.thread, turn.agent
    return RunResult(
        final_output=turn.output, new_items=_shown(thread, start),
        turn_items=None if began == start else _shown(thread, began), chat_id=run.chat_id, agent=agent.name,
        usage_records=run.usage_records, interruptions=run.interruptions, tool_guardrails=run._guardrail_log,
        last_agent=agent, _run=run, _responses_of=model_responses,
    )


def _shown(thread: ConversationThread, start: int) -> list[dict[str, Any]]:
    return without_call_marks(thread.items[start:]) if thread.has_marks else thread.items[start:]


def _turn_began(items: list[dict[str, Any]], run: Run) -> int:
    """Where a resumed turn began in the entry agent's thread (its user message), as `Runner`'s resumed result
    starts from the run's input: `to_input_list()` and the context's `turn_input` cover the whole turn."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item.get("role") == "user" and "type" not in item:
            content = item.get("content")
            run.message = content if isinstance(content, str) else [dict(item)]
            return index
    return len(items)


def _unfinished_entry(
    entries: Mapping[str, tuple[AgentBase, Wiring]], manager: ThreadManager, chat_id: str
) -> tuple[AgentBase, Wiring]:
    prefix = USER_CALLER + "->"
    unfinished = [
        key[len(prefix):] for key, items in manager.held_items(chat_id).items()
        if key.startswith(prefix) and key[len(prefix):] in entries and not is_finished(items)
    ]
    if not unfinished:
        raise NothingToResume(
            f"Chat {chat_id!r} has no unfinished turn to resume: its last turn ended with a final answer (or it "
            "has no turn yet). Send a new message instead.",
            chat_id=chat_id,
        )
    if len(unfinished) > 1:
        raise ConfigError(
            f"Chat {chat_id!r} has unfinished turns with {', '.join(unfinished)}; pass recipient_agent= to say which "
            "one to resume."
        )
    return entries[unfinished[0]]


async def _settle_unanswered(manager: ThreadManager, agent: AgentBase, wiring: Wiring, chat_id: str) -> None:
    """Before a new message: calls waiting for approval stop it; calls a crash cut short get "interrupted" outputs."""
    agents = _reachable(agent, wiring)
    threads = {thread.key: thread for thread in manager.threads_of(chat_id)}
    depths = _thread_depths(list(threads))
    waiting: list[Interruption] = []
    for key, calls in manager.waiting_calls(chat_id).items():
        sender, recipient = key.split("->", 1)
        tools = {tool.name: tool for tool in agents[recipient].tools} if recipient in agents else {}
        where = Interruption(agent=recipient, caller=sender, depth=depths.get(key, 0), chat_id=chat_id, call_id="",
                             tool="", arguments="")
        for call in calls:
            waiting += _interruptions(threads[key], call, tools, where)
    if waiting:
        listing = ", ".join(f"{item.call_id} ({item.agent}.{item.tool})" for item in waiting)
        raise ChatPaused(
            f"Chat {chat_id!r} is waiting for approval of {listing}; {ChatPaused.RESUME_HINT}",
            chat_id=chat_id, interruptions=waiting,
        )
    await manager.repair_chat(chat_id)


def _interruptions(
    thread: ConversationThread, call: dict[str, Any], tools: Mapping[str, Any], where: Interruption
) -> list[Interruption]:
    """What a waiting call of a thread (agent, caller, depth and chat in `where`) stands for: the calls its agent
    tool's paused nested run waits for, a hosted MCP approval request (named by its id), or the call itself while
    its agent still has the tool."""
    call_id = str(call.get("call_id") or call.get("id"))
    nested = waits(thread.paused_run(call_id))
    if nested:
        return [dataclasses.replace(
            where, agent=wait["agent"], caller=where.agent, depth=where.depth + 1, call_id=wait["call_id"],
            tool=wait["tool"], arguments=wait["arguments"],
        ) for wait in nested]
    name = str(call.get("name"))
    if call.get("type") != "mcp_approval_request" and not isinstance(tools.get(name), FunctionTool):
        return []
    return [dataclasses.replace(
        where, call_id=call_id, tool=name, arguments=str(call.get("arguments") or ""),
        namespace=call.get("namespace") or None,
    )]


def _reachable(agent: AgentBase, wiring: Wiring) -> dict[str, AgentBase]:
    found = {agent.name: agent}
    todo = [wiring]
    while todo:
        current = todo.pop()
        for name, recipient in current.recipients.items():
            if name not in found:
                found[name] = recipient
                todo.append(current.recipient_wirings.get(name) or recipient.wiring)
    return found


def _thread_depths(keys: list[str]) -> dict[str, int]:
    """A thread's depth is how many sends separate it from a user: user->CEO is 0, CEO->Developer 1."""
    depth = {key: 0 for key in keys if key.startswith(USER_CALLER + "->")}
    frontier = list(depth)
    while frontier:
        key = frontier.pop(0)
        recipient = key.split("->", 1)[1]
        for other in keys:
            if other not in depth and other.split("->", 1)[0] == recipient:
                depth[other] = depth[key] + 1
                frontier.append(other)
    return depth
