"""One turn of a RemoteAgent: the pair thread's message sent as an A2A message, its progress streamed, its answer (or
its INPUT_REQUIRED, as a pause for approval) stored in the pair thread like any recipient's."""

from __future__ import annotations

import json
import uuid
from typing import Any

from .._base._errors import RemoteAgentError
from .._base._events import AgentFinished, AgentStarted, ApprovalRequested
from .._threads._checks import AWAITING_APPROVAL, NESTED_RUN
from .._threads._store import Item
from .._threads._thread_items import call_mark
from .._turn._nested_runs import waits
from .._turn._results import Interruption
from .._turn._state import Message, Turn, incoming
from ._exchange import Outcome, exchange
from ._protocol import DEPTH, META, Remote, derived_id

CONTEXT_ID = "a2a_context_id"
MESSAGE_ID = "a2a_message_id"
"""Keys the pair thread's messages keep (no model reads a remote member's thread): the A2A context of the pair, and
the id each message was sent with, sent again with it when a crash or a broken stream cut its answer short."""
INPUT_TOOL = "a2a_input_required"
"""The name of the call a pair thread stores for a remote task that waits for input: its marks make it wait for
approval like a local call, so `resume` decides it and a new message meanwhile gets ChatPaused."""


async def remote_turn(
    agent: Remote, turn: Turn, given: Message | None, additional_instructions: str | None
) -> None:
    run, thread = turn.run, turn.thread
    message = None if given is None else _text_of(agent, turn, given)
    if turn.emit is not None:
        await turn.emit(AgentStarted(agent=agent.name, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id,
                                     message=message if message is not None else _last_message(thread.items)[0]))
    if message is not None:
        text = message if not additional_instructions else f"{message}\n\n(Instructions: {additional_instructions})"
        item = {**incoming(turn, message), CONTEXT_ID: _context_of(thread.items), MESSAGE_ID: uuid.uuid4().hex}
        await _add(turn, [item])
        request = _request(turn, text, item[CONTEXT_ID], item[MESSAGE_ID], None)
    else:
        waiting = thread.unanswered_calls()
        if waiting:
            request = await _decided(agent, turn, waiting[-1])
            if request is None:
                return
        else:  # the answer never arrived (a crash): the same message again, which the remote answers once
            text, item = _last_message(thread.items)
            request = _request(turn, text, str(item.get(CONTEXT_ID)), str(item.get(MESSAGE_ID)), None)
    outcome = await exchange(agent, turn, request)
    await _settle(agent, turn, outcome)


def _text_of(agent: Remote, turn: Turn, message: Message) -> str:
    """The text a remote member is sent: a message of input items is sent as its text parts; images and files do not
    cross to another service, and saying so beats sending the text without them."""
    if isinstance(message, str):
        return message
    texts: list[str] = []
    for item in message:
        content = item.get("content") if isinstance(item, dict) else None
        parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content or []
        for part in parts:
            if not (isinstance(part, dict) and part.get("type") in ("input_text", "output_text")):
                raise _no_attachments(agent, turn)
            texts.append(str(part.get("text", "")))
    return "\n".join(texts)


def _no_attachments(agent: Remote, turn: Turn) -> RemoteAgentError:
    return RemoteAgentError(
        f"Remote agent {agent.name!r} is sent text only: send it the message without attachments.",
        agent=agent.name, chat_id=turn.run.chat_id, depth=turn.depth,
    )


async def _settle(agent: Remote, turn: Turn, outcome: Outcome) -> None:
    """The pair thread gets the answer, or the call the remote's INPUT_REQUIRED waits on (the turn pauses)."""
    if outcome.input_required:
        call_id = f"a2a_{uuid.uuid4().hex}"
        waiting = outcome.waiting or [{
            "agent": agent.name, "caller": turn.caller, DEPTH: turn.depth, "call_id": call_id, "tool": INPUT_TOOL,
            "arguments": json.dumps({"message": outcome.text}),
        }]
        call = {"type": "function_call", "call_id": call_id, "name": INPUT_TOOL,
                "arguments": json.dumps({"task_id": outcome.task_id, "message": outcome.text})}
        mark = {"type": NESTED_RUN, "call_id": call_id, "waiting": waiting, "task_id": outcome.task_id,
                CONTEXT_ID: outcome.context_id}
        turn.thread.has_marks = True
        await _add(turn, [call, call_mark(AWAITING_APPROVAL, call_id, 0), mark])
        await _announce(turn, waiting)
        return
    answer = {
        "id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": outcome.text, "annotations": []}],
    }
    await _add(turn, [answer])
    turn.output = outcome.text
    if turn.emit is not None:
        await turn.emit(AgentFinished(agent=agent.name, caller=turn.caller, depth=turn.depth,
                                      chat_id=turn.run.chat_id, output=outcome.text))


async def _decided(agent: Remote, turn: Turn, call: Item) -> Any:
    """The A2A message answering the remote task the pair thread's `call` waits on, once the user decided on some of
    its calls (the call then gets its output); None when nothing is decided yet: the turn pauses again."""
    call_id = str(call.get("call_id"))
    mark = turn.thread.paused_run(call_id) or {}
    waiting = waits(mark)
    run = turn.run
    approve = [str(wait["call_id"]) for wait in waiting if wait["call_id"] in run.approved]
    reject = {
        str(wait["call_id"]): run.rejected[wait["call_id"]] for wait in waiting if wait["call_id"] in run.rejected
    }
    if not approve and not reject:
        await _announce(turn, waiting)
        return None
    own = [wait for wait in waiting if wait.get("tool") == INPUT_TOOL]  # an agent that only asks for input
    if own:
        text = "approve" if approve else next(iter(reject.values())) or "reject"
        data = None
    else:
        text = "approve" if approve and not reject else "reject" if reject and not approve else "decisions"
        data = {"approve": approve, "reject": reject}
    decided = json.dumps({"approve": approve, "reject": reject})
    await _add(turn, [{"type": "function_call_output", "call_id": call_id, "output": decided}])
    message_id = derived_id("a2a-decision", call_id, decided)
    return _request(turn, text, str(mark.get(CONTEXT_ID)), message_id, str(mark.get("task_id")), data)


async def _announce(turn: Turn, waiting: list[dict[str, Any]]) -> None:
    """The remote's waiting calls become the turn's interruptions (and `approval_requested` events)."""
    run = turn.run
    turn.paused = True
    for wait in waiting:
        depth = wait.get(DEPTH)
        interruption = Interruption(
            agent=str(wait["agent"]), caller=str(wait.get("caller") or turn.caller),
            depth=depth if isinstance(depth, int) else turn.depth, chat_id=run.chat_id,
            call_id=str(wait["call_id"]), tool=str(wait["tool"]), arguments=str(wait["arguments"]),
        )
        run.interruptions.append(interruption)
        if turn.emit is not None:
            await turn.emit(ApprovalRequested(
                agent=interruption.agent, caller=interruption.caller, depth=interruption.depth, chat_id=run.chat_id,
                tool=interruption.tool, call_id=interruption.call_id, arguments=interruption.arguments,
            ))


def _request(
    turn: Turn, text: str, context_id: str, message_id: str, task_id: str | None, data: Any = None
) -> Any:
    """The A2A Message to send: our depth travels with it, so the remote refuses past the depth limit."""
    from a2a.types.a2a_pb2 import Message, Part, Role
    from google.protobuf.json_format import ParseDict
    from google.protobuf.struct_pb2 import Struct, Value

    parts = [Part(text=text)]
    if data is not None:
        parts.append(Part(data=ParseDict(data, Value()), media_type="application/json"))
    metadata = Struct()
    metadata.update({META: {DEPTH: turn.depth + turn.run.depth_base}})
    return Message(role=Role.ROLE_USER, message_id=message_id, context_id=context_id, task_id=task_id or "",
                   parts=parts, metadata=metadata)


async def _add(turn: Turn, items: list[Item]) -> None:
    stored = turn.thread.add(items)
    if stored is not None:
        await stored


def _context_of(items: list[Item]) -> str:
    """The pair's A2A context: the one its earlier messages went in, else a new one."""
    for item in reversed(items):
        found = item.get(CONTEXT_ID)
        if isinstance(found, str) and found:
            return found
    return uuid.uuid4().hex


def _last_message(items: list[Item]) -> tuple[str, Item]:
    for item in reversed(items):
        if item.get("role") == "user" and "type" not in item:
            content = item.get("content")
            return (content if isinstance(content, str) else json.dumps(content)), item
    return "", {}
