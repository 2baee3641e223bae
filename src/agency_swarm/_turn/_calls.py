"""Running one response's tool calls and sends: approvals, outputs stored in call order, concurrent calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any, assert_never

from agents import AgentsException, FunctionTool, UserError, custom_span, function_span
from openai.types.responses import ResponseFunctionToolCall

from .._attachments._incoming import Incoming, forwarded
from .._attachments._view import by_id
from .._base import _sdk
from .._base._errors import ItemTooLarge
from .._base._events import ApprovalRequested, Event, MessageSent, ToolCalled, ToolOutput
from .._base._names import SEND_MESSAGE
from .._base._sync import INSIDE
from .._threads._checks import APPROVED_RUN, AWAITING_APPROVAL
from .._threads._manager import ConversationThread, clean_up
from .._threads._thread_items import call_mark, interrupted_output, is_finished, message_text, too_large_output
from ._channel import EmitEvent
from ._mcp_approvals import answer_mcp_approvals
from ._nested_runs import NestedRun, nested_run
from ._results import Interruption
from ._send_message import (
    depth_refusal,
    failure_output,
    parse_send_request,
    reentry_refusal,
    unknown_attachments,
)
from ._setup import Setup
from ._state import SEND_CALL_ID, AgentTurn, Run, Turn
from ._steps import (
    FinalOutput,
    FunctionToolCall,
    RunTools,
    SendMessage,
    ToolCallStep,
    ToolResult,
    UnknownTool,
    stop_after_tools,
)
from ._tool_keys import qualified_call_name, trace_name
from ._tools import output_item, run_function_tool, unknown_tool_output
from ._tracing import current, finish, started


async def run_tools(turn: Turn, setup: Setup, step: RunTools, agent_turn: AgentTurn) -> FinalOutput | None:
    """A response's calls and MCP approvals; a final output when tool_use_behavior says the tools ended the turn.

    Calls (and MCP approval requests) waiting for approval pause the turn (`turn.paused`): they stay without outputs
    until resume decides. A send runs its recipient's whole turn with `agent_turn` (the loop's, handed down: this
    module sits below it).
    """
    if turn.held is not None:  # the response these calls came in, stored before any of them runs
        stored = turn.store_held()
        if stored is not None:
            await stored
    calls = step.calls
    hold = bool(turn.agent.output_guardrails) and _may_end_the_turn(turn, step)
    state = Calls(turn.thread, calls, agent_turn, hold=hold)
    if calls:
        try:
            if len(calls) == 1:
                await _run_call(turn, setup, state, 0, turn.emit)
            else:
                await _run_parallel(turn, setup, state)
        except BaseException:  # failure or cancellation: every function_call still gets its output, stored even
            if len(state.items) < len(calls) or state.held:  # when this task is cancelled again (clean_up)
                stored = state.settle(final=True, release=True)
                await clean_up(stored, f"storing the outputs of {turn.agent.name}'s calls")
            if turn.emit is not None and state.failed and not _resumed(calls):  # the siblings that finished, as
                await _emit_outputs(turn, state)  # `Runner`'s stream reports them (its resumed stream does not)
            raise
        stored = state.store_ready(final=True)
        if stored is not None:
            await stored
        if turn.emit is not None:
            await _emit_outputs(turn, state)
    paused_calls = _AWAITING in state.outputs  # a server's callback then decides when the turn goes on
    waiting = bool(step.mcp_approvals) and await answer_mcp_approvals(
        turn, setup, step.mcp_approvals, ask=not paused_calls
    )
    found = None
    if waiting or paused_calls:
        turn.paused = True
    elif turn.agent.tool_use_behavior != "run_llm_again" and (state.results or step.answered):
        found = await stop_after_tools(turn, _all_results(step, state))
    if state.held is not None:
        if found is not None:  # the outputs ended the turn: stored once the output guardrails decide
            turn.release = state.release
        else:
            stored = state.release()
            if stored is not None:
                await stored
    return found


def _all_results(step: RunTools, state: Calls) -> list[ToolResult]:
    """The response's results for tool_use_behavior: on resume, those of the calls answered before the pause too,
    each at its place in the response."""
    order = step.order
    results = [(order.get(call.call_id, index), tool, call, out) for index, tool, call, out in state.results]
    return [*step.answered, *results]


def _resumed(calls: list[ToolCallStep]) -> bool:
    """Calls of a stored turn that goes on (they waited for approval)."""
    return any(not isinstance(step, UnknownTool) and step.resume for step in calls)


def _may_end_the_turn(turn: Turn, step: RunTools) -> bool:
    """Hold the outputs of an agent with output guardrails back (`Calls.hold`)? When they may become its final
    output."""
    return turn.agent.tool_use_behavior != "run_llm_again" and not step.mcp_approvals


_PENDING: Any = object()
_AWAITING: Any = object()  # waits for approval: no output is stored until resume decides


class Calls:
    """One response's calls while they run: their outputs, stored in call order, each as early as that order
    allows, and the results tool_use_behavior reads.

    A crash while a slow call runs then loses only the outputs that did not exist yet. It lives for one response;
    the agent's turn is `Turn`'s, the run's `Run`'s.

    With `hold` (an agent with output guardrails whose tools may end its turn) the outputs are stored together by
    `release`, after the output guardrails passed, or as `Runner`'s withheld text when they blocked the output: a
    blocked output never joins the thread. A crash meanwhile leaves the calls "interrupted" outputs.

    `held`: the settled outputs not stored yet (None: each is stored as soon as call order allows). `items`: one per
    call settled so far, in call order; None for a call waiting for approval. `results`: (call index, tool, call,
    output) of the function tools that ran or were refused, for tool_use_behavior. `failed`: calls run side by side
    that failed, ending the turn (their outputs are stored, never emitted).
    """

    __slots__ = ("agent_turn", "calls", "failed", "held", "items", "outputs", "results", "thread")

    def __init__(
        self, thread: ConversationThread, calls: list[ToolCallStep], agent_turn: AgentTurn, *, hold: bool = False
    ) -> None:
        self.thread, self.calls, self.agent_turn = thread, calls, agent_turn
        self.held: list[dict[str, Any]] | None = [] if hold else None
        self.outputs: list[Any] = [_PENDING] * len(calls)
        self.items: list[dict[str, Any] | None] = []
        self.results: list[ToolResult] = []
        self.failed: set[int] = set()

    async def settle(self, *, final: bool = False, release: bool = False) -> None:
        """Store the outputs that are next in call order (and, with `release`, those held back). Only the turn's
        own task settles (calls running in tasks of their own report to it), so one settle never overlaps another."""
        stored = self.store_ready(final)
        if stored is not None:
            await stored
        if release and self.held is not None:
            stored = self.release()
            if stored is not None:
                await stored

    def release(self, replacement: str | None = None) -> Awaitable[None] | None:
        """Store the outputs held back: as they are, or each with `replacement` as its output (a blocked final
        output)."""
        ready, self.held = self.held or [], None
        if replacement is not None:
            for item in ready:  # the settled items themselves: what `items` holds stays what was stored
                item["output"] = replacement
        stored = self.thread.add(ready)
        return None if stored is None else self._written(ready, stored)

    def store_ready(self, final: bool) -> Awaitable[None] | None:
        """Add the outputs that are next in call order; returns the store's append to await, if any."""
        ready: list[dict[str, Any]] = []
        items, calls, outputs = self.items, self.calls, self.outputs
        while len(items) < len(calls):
            index = len(items)
            call, out = calls[index].call, outputs[index]
            if out is _PENDING and not final:
                break
            if out is _AWAITING:
                items.append(None)
                continue
            item = interrupted_output(call.call_id) if out is _PENDING else output_item(call, out)
            items.append(item)
            ready.append(item)
        if self.held is not None:
            self.held += ready
            return None
        stored = self.thread.add(ready)
        return None if stored is None else self._written(ready, stored)

    async def _written(self, ready: list[dict[str, Any]], stored: Awaitable[None]) -> None:
        """Await the store's append; an output it refuses as too large is stored (and handed to the model) as
        "Error: output too large: N bytes, limit M" instead, and the append is tried again."""
        replaced: list[dict[str, Any]] = []
        while True:
            try:
                await stored
                return
            except ItemTooLarge as error:
                index = error.index if error.index is not None else (0 if len(ready) == 1 else -1)
                if not 0 <= index < len(ready) or ready[index].get("type") != "function_call_output" or any(
                    ready[index] is item for item in replaced  # even the error output is too large
                ):
                    raise
                item = too_large_output(str(ready[index].get("call_id")), error)
                position = next(n for n, settled in enumerate(self.items) if settled is ready[index])
                self.items[position] = ready[index] = item
                replaced.append(item)
                retried = self.thread.add(ready)
                if retried is None:
                    return
                stored = retried


async def _emit_outputs(turn: Turn, state: Calls) -> None:
    """A `tool_output` for each call that got its output, in call order: not for those waiting for approval, nor,
    when a call's failure ended the turn, for it, the calls it interrupted and unknown tools (`Runner` answers
    those after the tools it runs: a failure ends its turn first)."""
    emit = turn.emit
    assert emit is not None
    name, caller, depth, chat_id = turn.agent.name, turn.caller, turn.depth, turn.run.chat_id
    for index, (step, item) in enumerate(zip(state.calls, state.items, strict=True)):
        if item is None or (state.failed and _unreported_after_failure(state, index)):
            continue
        text = item["output"] if isinstance(item["output"], str) else json.dumps(item["output"])
        await emit(ToolOutput(
            agent=name, caller=caller, depth=depth, chat_id=chat_id, tool=step.call.name,
            call_id=step.call.call_id, output=text,
        ))


def _unreported_after_failure(state: Calls, index: int) -> bool:
    return index in state.failed or state.outputs[index] is _PENDING or isinstance(state.calls[index], UnknownTool)


async def _run_call(turn: Turn, setup: Setup, state: Calls, index: int, emit: EmitEvent | None) -> None:
    """Call `index` of the response: a send, a function tool (after its approval) or an unknown tool's answer."""
    agent, run, step, outputs = turn.agent, turn.run, state.calls[index], state.outputs
    call = step.call
    if emit is not None:  # every call has its tool_called, so consumers can pair it with its tool_output
        await emit(ToolCalled(
            agent=agent.name, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, tool=call.name,
            call_id=call.call_id, arguments=call.arguments,
        ))
    match step:
        case SendMessage():
            await _send(turn, step, state, index, emit)
        case FunctionToolCall(tool=tool, resume=resume):
            nested = nested_run(turn, call, resume)  # an agent tool's nested run, paused before, may go on
            verdict = await nested.verdict(turn, tool, emit) if nested.continuing else _decided(run, step)
            if verdict is None:  # needs_approval is a function: it decides for each call
                try:
                    verdict = await _asked(run, tool, call)
                except Exception as error:  # the policy failed: the turn ends, as under `Runner`
                    raise _tool_failure(error, tool, outputs, index) from error
            if verdict == "wait":
                outputs[index] = _AWAITING
                if not nested.continuing:  # (a nested run's waiting calls are announced by its verdict)
                    await _wait_for_approval(turn, call, emit)
                return
            if verdict == "reject":
                outputs[index] = rejected_output(run.rejected[call.call_id])
            else:
                if verdict == "approved":  # marked first: after a crash from here on, it is never run again
                    await _mark(turn, APPROVED_RUN, call.call_id)
                output = await _invoke(turn, tool, call, nested, outputs, index)
                if await nested.pause(turn, emit):  # its nested run waits for approvals: so does this call
                    outputs[index] = _AWAITING
                    return
                outputs[index] = output
            state.results.append((index, tool, call, outputs[index]))
        case UnknownTool():
            available = [tool.qualified_name for tool in setup.function_tools.values()]
            outputs[index] = unknown_tool_output(qualified_call_name(call), [
                *dict.fromkeys(available), *([SEND_MESSAGE] if setup.can_send else []),
            ])
        case _:
            assert_never(step)


async def _invoke(
    turn: Turn, tool: FunctionTool, call: ResponseFunctionToolCall, nested: NestedRun, outputs: list[Any], index: int
) -> Any:
    """Run the function tool (traced when the turn is); whatever it left in the SDK's store of nested runs is taken
    out, even when it fails."""
    run = turn.run
    outer = INSIDE.get()
    INSIDE.set(run.inside)  # a turn of this chat that the tool starts raises ReentrantTurn
    try:
        if run.watch is not None:
            return await _watched_tool(turn, tool, call, nested)
        if turn.span is None:
            return await run_function_tool(turn.agent, tool, call, run, turn.wiring, nested)
        return await _traced_tool(turn, tool, call, nested)
    except Exception as error:  # a tripped tool guardrail, or a tool with failure_error_function=None
        raise _tool_failure(error, tool, outputs, index) from error
    finally:
        INSIDE.set(outer)  # not reset(token): an abandoned stream may be closed from another context
        nested.take()


async def _wait_for_approval(turn: Turn, call: ResponseFunctionToolCall, emit: EmitEvent | None) -> None:
    """The call joins the turn's interruptions (and `approval_requested` is emitted): resume decides. The thread marks
    the call as waiting, so a later process knows it never ran, with the model calls the turn made so far, which its
    resume goes on counting towards max_steps."""
    await _mark(turn, AWAITING_APPROVAL, call.call_id, turn.steps)
    run = turn.run
    run.interruptions.append(Interruption(
        agent=turn.agent.name, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id,
        call_id=call.call_id, tool=call.name, arguments=call.arguments, namespace=call.namespace or None,
    ))
    if emit is not None:
        await emit(ApprovalRequested(
            agent=turn.agent.name, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, tool=call.name,
            call_id=call.call_id, arguments=call.arguments,
        ))


async def _mark(turn: Turn, kind: str, call_id: str, steps: int | None = None) -> None:
    stored = turn.thread.add([call_mark(kind, call_id, steps)])
    turn.thread.has_marks = True
    if stored is not None:
        await stored


def _tool_failure(error: Exception, tool: FunctionTool, outputs: list[Any], index: int) -> Exception:
    """What ends the turn when a tool call raises, as under `Runner`: the SDK's own exceptions as they are, any
    other wrapped in `UserError`. The call's output (the thread keeps it) says why."""
    failure = error if isinstance(error, AgentsException) else UserError(f"Error running tool {tool.name}: {error}")
    outputs[index] = f"Error: {failure}"
    return failure


def _decided(run: Run, step: FunctionToolCall) -> str | None:
    """"reject", "approved", "run" or "wait": the user's decision from resume; a call that already waited and is
    still undecided waits again (its policy is not asked again, as under `Runner`); else the tool's fixed
    `needs_approval`; None when `needs_approval` is not a bool: a function (`_asked`)."""
    call_id = step.call.call_id
    if call_id in run.rejected:
        return "reject"
    if call_id in run.approved:
        return "approved"
    if step.resume:
        return "wait"
    needs = step.tool.needs_approval
    if not isinstance(needs, bool):  # a function; anything else is refused by the SDK's check as by `Runner`
        return None
    return "wait" if needs else "run"


async def _asked(run: Run, tool: FunctionTool, call: ResponseFunctionToolCall) -> str:
    """"wait" or "run", as `Runner` decides it with the tool's `needs_approval` function: arguments that are not a
    JSON object, or that the tool's validation would change, wait without the function being asked (`_sdk`)."""
    wants = await _sdk.policy_wants_approval(tool, run.context(), call.arguments, call.call_id)
    return "wait" if wants else "run"


async def _traced_tool(turn: Turn, tool: FunctionTool, call: ResponseFunctionToolCall, nested: NestedRun) -> Any:
    span = started(function_span(name=trace_name(call), input=call.arguments, parent=turn.span))
    assert turn.run.trace is not None  # only traced turns get here
    try:
        with current(turn.run.trace, span):  # the SDK attaches a handled tool error to the current span
            output = await run_function_tool(turn.agent, tool, call, turn.run, turn.wiring, nested)
        span.span_data.output = output if isinstance(output, str) else _as_text(output)
        return output
    finally:
        finish(span)


async def _watched_tool(
    turn: Turn, tool: FunctionTool, call: ResponseFunctionToolCall, nested: NestedRun
) -> Any:
    """The function tool inside its OpenTelemetry span (`_telemetry`), and its SDK span when traced."""
    assert turn.run.watch is not None
    with turn.run.watch.tool_call(turn, call.name, call.call_id, call.arguments) as span:
        if turn.span is None:
            output = await run_function_tool(turn.agent, tool, call, turn.run, turn.wiring, nested)
        else:
            output = await _traced_tool(turn, tool, call, nested)
        if span is not None and turn.run.watch.content:
            span.set_attribute("gen_ai.tool.call.result", output if isinstance(output, str) else _as_text(output))
        return output


REJECTION_MESSAGE = "Tool execution was not approved."
"""What the model reads for a rejected call without a message of its own (the SDK's text)."""


def rejected_output(message: str | None) -> str:
    """The output of a call the user rejected: the message given with the rejection, else `REJECTION_MESSAGE`."""
    return REJECTION_MESSAGE if message is None else message


async def _send(turn: Turn, step: SendMessage, state: Calls, index: int, emit: EmitEvent | None) -> None:
    """Check chart, depth and re-entry; then run the recipient one level deeper. Refusals become outputs."""
    wiring, run, sender, call, outputs = turn.wiring, turn.run, turn.agent.name, step.call, state.outputs
    request = parse_send_request(call.arguments, wiring.recipients)
    sharing = None if isinstance(request, str) or not request.attachments else _shared(
        turn, request.message, request.attachments)
    if isinstance(request, str) or isinstance(sharing, str):
        outputs[index] = request if isinstance(request, str) else sharing
        return
    recipient = wiring.recipients[request.recipient]
    depth = turn.depth + 1
    if depth + run.depth_base > wiring.max_depth:
        outputs[index] = depth_refusal(recipient.name, wiring.max_depth)
        return
    pair, open_pairs = (sender, recipient.name), run.open_pairs
    if open_pairs is None:
        open_pairs = run.open_pairs = set()
    elif pair in open_pairs:
        outputs[index] = reentry_refusal(sender, recipient.name)
        return
    thread = wiring.thread_manager.get_thread(run.chat_id, sender, recipient.name)
    continuing = step.resume and delivered(thread, call.call_id, request.message)
    if continuing and is_finished(thread.items):  # the reply exists; a crash came before it reached the caller
        outputs[index] = message_text(thread.items[-1])
        return
    sub_wiring = wiring.recipient_wirings.get(recipient.name) or recipient.wiring
    sub = Turn(recipient, sub_wiring, thread, sender, depth, run, emit=emit, sent_by=call.call_id, arriving=sharing)
    sending = None if turn.span is None and run.watch is None else _send_spans(turn, sub, request.message)
    open_pairs.add(pair)  # before the first yield: a concurrent send on the same pair must see it
    failed: Exception | None = None
    try:
        if emit is not None:
            await emit(MessageSent(
                agent=sender, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, recipient=recipient.name,
                message=request.message, call_id=call.call_id, attachments=request.attachments,
            ))
        await state.agent_turn(sub, None if continuing else request.message, request.additional_instructions)
        output = sub.output
        outputs[index] = _AWAITING if sub.paused else output if isinstance(output, str) else _as_text(output)
    except Exception as error:  # the recipient failed: its caller reads why and carries on
        failed = error
        outputs[index] = failure_output(recipient.name, error)
    finally:
        open_pairs.discard(pair)
        if sub.parent_span is not None:
            finish(sub.parent_span, failed)
        if run.watch is not None:
            run.watch.sent(sending, failed)


def _send_spans(turn: Turn, sub: Turn, message: str) -> Any:
    """A send's spans, the recipient's turn under them: the SDK's (`sub.parent_span`) when traced, and the
    OpenTelemetry one (returned, None when the turn is not watched)."""
    run, call_id = turn.run, sub.sent_by or ""
    if turn.span is not None:
        sub.parent_span = started(custom_span(name=SEND_MESSAGE, parent=turn.span, data={
            "caller": turn.agent.name, "recipient": sub.agent.name, "depth": sub.depth, "chat_id": run.chat_id,
            "call_id": call_id,
        }))
    return None if run.watch is None else run.watch.send(turn, sub, sub.agent.name, call_id, message)


def _shared(turn: Turn, text: str, ids: list[str]) -> Incoming | str:
    """The message of a send that passes attachments on, by the ids the sender's model named: each one must be in
    the sender's own thread (what it has seen); else the text that tells the model which ids it may use."""
    known = by_id(turn.thread.items)
    unknown = [name for name in ids if name not in known]
    if unknown:
        return unknown_attachments(unknown, known)
    limit = turn.wiring.thread_manager.attachments.limits.max_parts
    if len(ids) > limit:
        return f"Error: at most {limit} attachments go with one message; you named {len(ids)}."
    return forwarded(text, [known[name] for name in ids])


def _as_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    dump = getattr(output, "model_dump_json", None)
    if callable(dump):
        text: str = dump()
        return text
    return json.dumps(output, default=str)


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_DONE: Any = object()


async def _run_parallel(turn: Turn, setup: Setup, state: Calls) -> None:
    """Several calls at once, each in a task; their events reach this task's channel in the order they happen, but
    for `approval_requested`: as `Runner` reports interruptions only with a paused result, those come once every
    call is done (a call that fails instead ends the turn without them)."""
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def queued(event: Event) -> None:
        queue.put_nowait(event)

    job_emit = None if turn.emit is None else queued

    async def job(index: int) -> None:
        try:
            await _run_call(turn, setup, state, index, job_emit)
        except Exception as error:
            state.failed.add(index)
            queue.put_nowait(_Failed(error))
        finally:
            queue.put_nowait(_DONE)

    tasks = [asyncio.create_task(job(index)) for index in range(len(state.calls))]
    remaining = len(tasks)
    waiting: list[Event] = []  # approval requests: reported once no sibling's failure can end the turn instead
    try:
        while remaining:
            item = await queue.get()
            if item is _DONE:
                remaining -= 1
                await state.settle()  # this call's output, if it is next in call order
            elif isinstance(item, _Failed):
                await _announce_started(turn, queue)
                raise item.error
            elif isinstance(item, ApprovalRequested):
                waiting.append(item)
            elif turn.emit is not None:
                await turn.emit(item)
        for event in waiting:
            assert turn.emit is not None
            await turn.emit(event)
    finally:
        if remaining:  # failed or cancelled: stop the calls still running
            for index, task in enumerate(tasks):
                if state.outputs[index] is _PENDING:
                    task.cancel()
            await clean_up(asyncio.gather(*tasks, return_exceptions=True), "stopping the parallel calls")
        else:
            await asyncio.gather(*tasks, return_exceptions=True)


async def _announce_started(turn: Turn, queue: asyncio.Queue[Any]) -> None:
    """Before a failed call ends the turn: the `tool_called` of each call that started meanwhile (every call has
    started: each task ran up to its first pause), so the stream announces every call of the response, as `Runner`'s
    does. Their other events are dropped with the calls."""
    if turn.emit is None:
        return
    while not queue.empty():
        event = queue.get_nowait()
        if isinstance(event, ToolCalled):
            await turn.emit(event)


def delivered(thread: ConversationThread, call_id: str, message: str) -> bool:
    """Did the message of send `call_id` reach the recipient before the turn stopped (a crash, a pause)?

    The recipient's last incoming message tells by the call id stored with it. One stored without it (by a
    version before call ids were kept) is matched by its text, as those versions did.
    """
    for item in reversed(thread.items):
        if item.get("role") == "user" and "type" not in item:
            if SEND_CALL_ID in item:
                return bool(item[SEND_CALL_ID] == call_id)
            content = item.get("content")
            return (content if isinstance(content, str) else json.dumps(content)) == message
    return False


