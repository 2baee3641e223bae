"""THE turn loop: each agent turn is one coroutine that emits events; send_message recurses one level deeper.

Blocking and streaming share every line: a stream runs the turn through `drive` (see _channel), which yields its
events; a blocking call awaits the same turn (it emits nothing `drive` would hand out), and the model is then
called with `get_response` instead of `stream_response`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any, assert_never

from agents import (
    AgentOutputSchema,
    AgentOutputSchemaBase,
    AgentsException,
    FunctionTool,
    FunctionToolResult,
    InputGuardrailTripwireTriggered,
    ItemHelpers,
    Model,
    ModelBehaviorError,
    ModelRefusalError,
    ModelResponse,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
    Tool,
    ToolsToFinalOutputResult,
    Usage,
    UserError,
    agent_span,
    custom_span,
    function_span,
)
from agents.items import ToolCallOutputItem
from agents.models.interface import ModelTracing
from agents.run_context import AgentHookContext
from openai.types.responses import ResponseFunctionToolCall

from .._base._errors import (
    ChatPaused,
    ConfigError,
    ItemTooLarge,
    MaxStepsExceeded,
    ModelError,
    NothingToResume,
    OutputValidationError,
    ReentrantTurn,
)
from .._base._events import (
    AgentFinished,
    AgentStarted,
    ApprovalRequested,
    Event,
    HostedItem,
    MessageSent,
    ToolCalled,
    ToolOutput,
    raw_model_event,
    text_delta,
)
from .._base._items import stored_item
from .._base._names import SEND_MESSAGE
from .._base._sync import INSIDE, Inside
from .._model._retry import StreamCall
from .._model._usage import UsageTotals, requests_of
from .._threads._manager import (
    APPROVED_RUN,
    AWAITING_APPROVAL,
    ConversationThread,
    ThreadManager,
    call_mark,
    call_marks,
    clean_up,
    drop_lost_reasoning,
    interrupted_output,
    is_finished,
    too_large_output,
    unanswered_calls,
    without_call_marks,
)
from ._channel import EmitEvent, HookFailed, TurnStart, channel
from ._definition import AgentBase, Wiring
from ._outputs import HOSTED_ACTIVITY, mcp_approval_responses, refused_tool, unusual_items
from ._results import Interruption, ResponseStream, RunResult
from ._send_message import (
    depth_refusal,
    failure_output,
    parse_send_request,
    reentry_refusal,
)
from ._setup import Setup
from ._tool_guardrails import GuardrailLog
from ._tools import named_tripwire, output_item, run_function_tool, unknown_tool_output
from ._tracing import TurnTrace, close_trace, current, finish, open_trace, started

# -- the next step after a model response ------------------------------------------------------------


@dataclass(slots=True)
class FinalOutput:
    output: Any


@dataclass(slots=True)
class RunAgain:
    """No tool calls and no usable final output yet (e.g. a structured output still to come)."""


RUN_AGAIN = RunAgain()  # it carries nothing, so one instance serves every turn


@dataclass(slots=True)
class FunctionToolCall:
    call: ResponseFunctionToolCall
    tool: FunctionTool


@dataclass(slots=True)
class SendMessage:
    call: ResponseFunctionToolCall
    resume: bool = False
    """Resuming a stored turn: the recipient may already have this message, or even have answered it."""


@dataclass(slots=True)
class UnknownTool:
    call: ResponseFunctionToolCall


ToolCallStep = FunctionToolCall | SendMessage | UnknownTool

ToolResult = tuple[int, FunctionTool, ResponseFunctionToolCall, Any]
"""(call index, tool, call, output) of a function tool call that ran or was refused: what tool_use_behavior reads."""


@dataclass(slots=True)
class RunTools:
    calls: list[ToolCallStep]
    mcp_approvals: Sequence[Any] = ()
    """Hosted MCP approval requests, answered by their server's on_approval_request after the calls ran."""


NextStep = FinalOutput | RunAgain | RunTools

# -- state of one top-level turn and of each agent turn inside it --------------------------------------


class _Run:
    """Shared by every agent of one top-level turn: context, usage budget, sends still waiting for replies."""

    __slots__ = (
        "_guardrail_log", "_wrapper", "approved", "chat_id", "inside", "interruptions", "open_pairs", "rejected",
        "streaming", "trace", "usage_records", "user_context",
    )

    def __init__(
        self,
        chat_id: str,
        streaming: bool,
        user_context: Any,
        approved: frozenset[str] = frozenset(),
        rejected: frozenset[str] = frozenset(),
        inside: Inside = (),
    ) -> None:
        self.chat_id = chat_id
        self.inside = inside
        """This turn's chat and the turns whose tools started it: what its tools run inside (`INSIDE`)."""
        self.streaming = streaming
        self.user_context = user_context
        self.usage_records: list[tuple[tuple[str, str], Any]] = []
        """((agent, model name), usage) of each model call: every total is summed from these when asked."""
        self.open_pairs: set[tuple[str, str]] = set()
        self._wrapper: AgentHookContext[Any] | None = None
        self.approved, self.rejected = approved, rejected
        """Call ids the user decided on in `resume`."""
        self.interruptions: list[Interruption] = []
        self.trace: TurnTrace | None = None
        """None when tracing is off: then no span is made anywhere in the turn."""
        self._guardrail_log: GuardrailLog | None = None

    def context(self) -> AgentHookContext[Any]:
        """The SDK's run context (built on first use: most turns of plain agents never need it)."""
        if self._wrapper is None:
            totals = UsageTotals()  # every agent's and model's usage in one sum: no per-model totals needed here
            for _, usage in self.usage_records:
                totals.add(usage)
            self._wrapper = AgentHookContext(context=self.user_context, usage=totals.to_usage())
        return self._wrapper

    @property
    def guardrail_log(self) -> GuardrailLog:
        """Every tool guardrail result of the turn (made when the first guarded tool runs)."""
        if self._guardrail_log is None:
            self._guardrail_log = GuardrailLog()
        return self._guardrail_log

    def record(self, key: tuple[str, str], usage: Any) -> None:
        """Keep one model response's usage under (agent, model name); it is summed only when someone asks."""
        self.usage_records.append((key, usage))
        if self._wrapper is not None:  # keep the SDK context's usage current for tools and hooks
            live = self._wrapper.usage
            live.requests += requests_of(usage)
            if usage is not None:
                live.input_tokens += usage.input_tokens or 0
                live.output_tokens += usage.output_tokens or 0
                live.total_tokens += usage.total_tokens or 0


@dataclass(slots=True, eq=False)
class _Turn:
    agent: AgentBase
    wiring: Wiring
    thread: ConversationThread
    caller: str
    depth: int
    run: _Run
    output: Any = None
    paused: bool = False
    """The turn stopped to wait for tool approvals (its own or a nested agent's)."""
    parent_span: Any = None
    """Where this agent's span hangs when tracing: the trace (top level) or the caller's send_message span."""
    span: Any = None
    emit: EmitEvent | None = None
    """Where this turn's events go; None when nobody reads them (then none is built)."""
    sent_by: str | None = None
    """The call id of the send_message call that delivered this turn's message (None: not a send)."""




# -- entry point ---------------------------------------------------------------------------------------


async def top_level_turn(
    agent: AgentBase,
    wiring: Wiring,
    message: str,
    caller: str,
    chat_id: str,
    context: Any,
    additional_instructions: str | None,
    stream: ResponseStream | None,
) -> RunResult:
    """One turn from outside the agency: load the chat once, run the entry agent, save what was produced.

    A blocking call awaits this coroutine; a stream (`stream` given) runs it through `drive`.
    """
    manager = wiring.thread_manager
    inside = entered(manager, chat_id)
    async with manager.hold(chat_id):
        if not manager.is_loaded(chat_id):
            await manager.ensure_loaded(chat_id)
        if manager.has_unanswered_calls(chat_id):
            await _settle_unanswered(manager, agent, wiring, chat_id)
        thread = manager.get_thread(chat_id, caller, agent.name)
        run = _Run(chat_id, stream is not None and stream.streaming, context, inside=inside)
        turn = _Turn(agent, wiring, thread, caller, 0, run)
        return await _entry_turn(manager, turn, message, additional_instructions, stream)


def resume_turn(
    entries: Mapping[str, tuple[AgentBase, Wiring]],
    manager: ThreadManager,
    *,
    chat_id: str,
    context: Any,
    approve: frozenset[str],
    reject: frozenset[str],
    stream: ResponseStream,
) -> TurnStart:
    """Continue the chat's unfinished top-level turn from its last stored item (after a pause or a crash)."""

    async def resumed() -> RunResult:
        inside = entered(manager, chat_id)
        async with manager.hold(chat_id):
            await manager.ensure_loaded(chat_id)
            agent, wiring = _unfinished_entry(entries, manager, chat_id)
            pending = {str(call.get("call_id")) for calls in manager.waiting_calls(chat_id).values() for call in calls}
            unknown = sorted((approve | reject) - pending)
            if unknown or approve & reject:
                raise ConfigError(
                    f"resume: call ids {sorted(approve & reject) or unknown} are "
                    f"{'both approved and rejected' if approve & reject else 'not waiting in chat ' + repr(chat_id)}; "
                    f"the calls waiting are: {sorted(pending) or 'none'}."
                )
            turn = _Turn(
                agent=agent, wiring=wiring, thread=manager.get_thread(chat_id, USER_CALLER, agent.name),
                caller=USER_CALLER, depth=0, run=_Run(chat_id, stream.streaming, context, approve, reject, inside),
            )
            return await _entry_turn(manager, turn, None, None, stream)

    return resumed


USER_CALLER = "user"



def entered(manager: ThreadManager, chat_id: str) -> Inside:
    """What a new top-level turn of `chat_id` runs inside, itself included. ReentrantTurn when the code starting it
    runs inside a turn of that chat: the new turn would wait for the chat's lock, held by the turn that waits for
    this code (a tool) to finish."""
    outer = INSIDE.get()
    store = manager.store
    keys: Inside = ((manager, chat_id),)
    if store is not None and getattr(store, "turn_lock", None) is not None:  # shared by other managers too
        keys = ((manager, chat_id), (store, chat_id))
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
    turn: _Turn,
    message: str | None,
    additional_instructions: str | None,
    stream: ResponseStream | None,
) -> RunResult:
    """Under the chat's lock, with the chat loaded: run the entry agent's turn, save, and build the RunResult."""
    run, thread, chat_id = turn.run, turn.thread, turn.run.chat_id
    start = len(thread.items)
    run.trace = open_trace(turn.agent.name, chat_id)
    if run.trace is not None:
        turn.parent_span = run.trace.trace
    hooks = turn.wiring.hooks
    if hooks is not None or run.streaming:
        turn.emit = channel(hooks, run.streaming)
    finished = False
    try:
        await run_agent(turn, message, additional_instructions)
        finished = True
    except HookFailed as failed:
        raise failed.error from None  # the hook's own error, as the caller would expect it
    finally:
        if turn.paused or not finished:  # calls wait for approval, or a failed append left one without its output
            manager.mark_unanswered(chat_id)
        if run.trace is not None:
            close_trace(run.trace)
        if manager.saves_turns:
            if finished:
                await manager.save(chat_id)
            else:  # saved even when this task is cancelled again meanwhile (shielded, bounded: clean_up)
                await clean_up(manager.save(chat_id), f"saving chat {chat_id!r}")
    result = RunResult(
        final_output=turn.output,
        new_items=without_call_marks(thread.items[start:]) if thread.has_marks else thread.items[start:],
        chat_id=chat_id,
        agent=turn.agent.name,
        usage_records=run.usage_records,
        interruptions=run.interruptions,
    )
    if run._guardrail_log is not None:
        result.tool_guardrails = run._guardrail_log
    if stream is not None:
        stream._finish(result)
    return result


def _unfinished_entry(
    entries: Mapping[str, tuple[AgentBase, Wiring]], manager: ThreadManager, chat_id: str
) -> tuple[AgentBase, Wiring]:
    prefix = USER_CALLER + "->"
    unfinished = [
        key[len(prefix):] for key, items in manager.get_threads(chat_id).items()
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
    depths = _thread_depths(list(manager.get_threads(chat_id)))
    waiting: list[Interruption] = []
    for key, calls in manager.waiting_calls(chat_id).items():
        sender, recipient = key.split("->", 1)
        tools = {tool.name: tool for tool in agents[recipient].tools} if recipient in agents else {}
        for call in calls:
            tool = tools.get(str(call.get("name")))
            if isinstance(tool, FunctionTool):
                waiting.append(Interruption(
                    agent=recipient, caller=sender, depth=depths.get(key, 0), chat_id=chat_id,
                    call_id=str(call.get("call_id")), tool=tool.name, arguments=str(call.get("arguments", "")),
                ))
    if waiting:
        listing = ", ".join(f"{item.call_id} ({item.agent}.{item.tool})" for item in waiting)
        raise ChatPaused(
            f"Chat {chat_id!r} is waiting for approval of {listing}; call resume(chat_id, approve=[...], "
            "reject=[...]) before sending a new message.",
            chat_id=chat_id, interruptions=waiting,
        )
    await manager.repair_chat(chat_id)


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


# -- one agent's turn ------------------------------------------------------------------------------


def run_agent(turn: _Turn, message: str | None, additional_instructions: str | None) -> Coroutine[Any, Any, None]:
    """The agent's turn, inside an agent span when the turn is traced (an extra layer only then)."""
    if turn.run.trace is None:
        return agent_turn(turn, message, additional_instructions)
    return _traced_agent_turn(turn, message, additional_instructions)


async def _traced_agent_turn(turn: _Turn, message: str | None, additional_instructions: str | None) -> None:
    agent = turn.agent
    output_type = agent.output_type
    turn.span = span = started(agent_span(
        name=agent.name, handoffs=[], tools=[getattr(tool, "name", type(tool).__name__) for tool in agent.tools]
        + ([SEND_MESSAGE] if turn.wiring.send_tool is not None else []),
        output_type=None if output_type is None else getattr(output_type, "__name__", str(output_type)),
        parent=turn.parent_span,
    ))
    error: BaseException | None = None
    try:
        await agent_turn(turn, message, additional_instructions)
    except BaseException as failure:
        error = failure
        raise
    finally:
        finish(span, error)


async def agent_turn(turn: _Turn, message: str | None, additional_instructions: str | None) -> None:
    """Model call -> items -> tools and sends -> repeat, until a final output, a pause, or max_steps.

    `message=None` resumes the thread's unfinished turn: its calls without outputs run first.
    """
    agent, run, emit = turn.agent, turn.run, turn.emit
    name, caller, depth, chat_id = agent.name, turn.caller, turn.depth, run.chat_id
    if emit is not None or agent.input_guardrails or agent.hooks is not None:
        await _start(turn, message)
    elif message is not None:  # the plain agent: its message joins the thread, nothing else to tell
        stored = turn.thread.add([_incoming(turn, message)])
        if stored is not None:
            await stored
    setup = _reused_setup(turn, additional_instructions) or await _prepare(turn, additional_instructions)
    model_settings = agent.model_settings
    step: NextStep = RUN_AGAIN if message is not None else await _resumed_step(turn, setup)
    steps = 0
    while True:
        match step:
            case FinalOutput():
                break
            case RunAgain():
                pass
            case RunTools():
                stop = await _run_tools(turn, setup, step)
                if turn.paused:
                    return
                if stop is not None:
                    step = stop
                    break
                if agent.reset_tool_choice and model_settings.tool_choice is not None:
                    model_settings = dataclasses.replace(model_settings, tool_choice=None)
            case _:
                assert_never(step)
        if steps and setup.sources is None:  # built per call, as `Runner` does: dynamic instructions, tools, MCP
            setup = await _prepare(turn, additional_instructions)
        step = await _model_step(turn, setup, model_settings, steps)
        steps += 1
    if agent.output_guardrails or agent.hooks is not None:
        await _before_finishing(turn, step.output)
    turn.output = step.output
    if emit is not None:
        await emit(AgentFinished(agent=name, caller=caller, depth=depth, chat_id=chat_id, output=step.output))


async def _run_tools(turn: _Turn, setup: Setup, step: RunTools) -> FinalOutput | None:
    """A response's calls and MCP approvals; a final output when tool_use_behavior says the tools ended the turn.

    Calls waiting for approval pause the turn (`turn.paused`): they stay without outputs until resume decides.
    """
    calls = step.calls
    state = _Calls(turn.thread, calls)
    if calls:
        try:
            if len(calls) == 1:
                await _run_call(turn, setup, calls[0], state.outputs, 0, state.results, turn.emit)
            else:
                await _run_parallel(turn, setup, state)
        except BaseException:  # failure or cancellation: every function_call still gets its output, stored even
            if len(state.items) < len(calls):  # when this task is cancelled again (shielded, bounded: clean_up)
                await clean_up(state.settle(final=True), f"storing the outputs of {turn.agent.name}'s calls")
            raise
        await state.settle(final=True)
        if turn.emit is not None:
            await _emit_outputs(turn, state)
    if step.mcp_approvals:
        await _answer_mcp_approvals(turn, setup, step.mcp_approvals)
    if _AWAITING in state.outputs:
        turn.paused = True
        return None
    if turn.agent.tool_use_behavior == "run_llm_again" or not state.results:
        return None
    return await _stop_after_tools(turn, state.results)


async def _model_step(turn: _Turn, setup: Setup, model_settings: Any, steps: int) -> NextStep:
    """One model call (unless the agent made `max_steps` already): its usage counted, its output items stored, and
    what they ask for next."""
    agent = turn.agent
    if steps == agent.max_steps:
        raise MaxStepsExceeded(agent=agent.name, chat_id=turn.run.chat_id, depth=turn.depth, max_steps=steps)
    if turn.run.streaming:
        output, usage = await _stream_model(turn, setup, model_settings)
    else:
        plain = agent.hooks is None and agent.prompt is None and turn.span is None
        direct = setup.model.direct if plain else None  # then the loop calls the model itself (see _after_failure)
        try:
            if direct is None:
                response = await _call_model(turn, setup, model_settings)
            else:
                response = await _plain_call(turn, setup, model_settings, direct)
        except Exception as error:
            response = await _after_failure(turn, setup, model_settings, direct, error)
        output, usage = response.output, response.usage
    turn.run.record(setup.usage_key, usage)
    usual = len(output) == 1 and output[0].type in _USUAL
    items = [stored_item(output[0])] if usual else unusual_items(output, setup.tools)
    stored = turn.thread.add(items)
    if stored is not None:
        await stored
    if not usual and turn.emit is not None:
        await _emit_hosted(turn, items)
    return _next_step(turn, setup, output)


async def _emit_hosted(turn: _Turn, items: list[dict[str, Any]]) -> None:
    """A `hosted_item` event for each hosted tool item of a response, or answer to an MCP approval request."""
    emit = turn.emit
    assert emit is not None
    for item in items:
        kind = item.get("type")
        if kind in HOSTED_ACTIVITY or kind in _MCP_APPROVAL_KINDS:
            await emit(HostedItem(
                agent=turn.agent.name, caller=turn.caller, depth=turn.depth, chat_id=turn.run.chat_id,
                kind=str(kind), item=item,
            ))


_MCP_APPROVAL_KINDS = frozenset({"mcp_approval_request", "mcp_approval_response"})


async def _start(turn: _Turn, message: str | None) -> None:
    """`agent_started`, input guardrails and the on_start hook; then the message joins the thread."""
    agent, emit = turn.agent, turn.emit
    if emit is not None:
        await emit(AgentStarted(
            agent=agent.name, caller=turn.caller, depth=turn.depth, chat_id=turn.run.chat_id,
            message=_last_user_message(turn.thread) if message is None else message,
        ))
    if agent.input_guardrails or agent.hooks is not None:
        await _begin(turn, message)
    if message is not None:
        stored = turn.thread.add([_incoming(turn, message)])
        if stored is not None:
            await stored


SEND_CALL_ID = "send_call_id"
"""Key of the call id that an agent's incoming message keeps in its thread: `{"role": "user", "content": ...,
"send_call_id": "call_..."}`, or None when no send delivered it (a direct `agent.get_response(sender_name=...)`).
Only threads between agents have it; resume matches a send by it (`_delivered`). The model never sees it: the
Responses API rejects unknown fields, and the SDK's Chat Completions converter rejects such an item
(`_model_input`)."""


def _incoming(turn: _Turn, message: str) -> dict[str, Any]:
    """The item a turn's message is stored as: from another agent, with the call id of the send that carried it."""
    if turn.caller == USER_CALLER:
        return {"role": "user", "content": message}
    return {"role": "user", "content": message, SEND_CALL_ID: turn.sent_by}


def _delivered(thread: ConversationThread, call_id: str, message: str) -> bool:
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


async def _begin(turn: _Turn, message: str | None) -> None:
    """Input guardrails and the on_start hook, before the message joins the thread."""
    agent = turn.agent
    if message is not None and agent.input_guardrails:
        await _check_input_guardrails(turn, message)
    if agent.hooks is not None:
        await agent.hooks.on_start(turn.run.context(), agent)


def _last_user_message(thread: ConversationThread) -> str:
    for item in reversed(thread.items):
        if item.get("role") == "user" and "type" not in item:
            content = item.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


async def _resumed_step(turn: _Turn, setup: Setup) -> NextStep:
    """Where a stored, unfinished turn goes on: its sends still open and its calls waiting for approval, else a new
    model call. A function call cut short (a crash while it ran) is never run again: it gets the "interrupted"
    output, so no tool runs twice for one call id."""
    items = turn.thread.items
    drop_lost_reasoning(items)
    awaiting, started = call_marks(items) if turn.thread.has_marks else (set(), set())
    calls: list[ToolCallStep] = []
    cut: list[dict[str, Any]] = []
    for item in unanswered_calls(items):
        step = _classify(setup, ResponseFunctionToolCall.model_validate(item), resume=True)
        call_id = step.call.call_id
        if isinstance(step, FunctionToolCall) and (call_id not in awaiting or call_id in started):
            cut.append(interrupted_output(call_id))
        else:
            calls.append(step)
    if cut:
        stored = turn.thread.add(cut)
        if stored is not None:
            await stored
    return RunTools(calls) if calls else RUN_AGAIN


async def _prepare(turn: _Turn, additional_instructions: str | None) -> Setup:
    agent, wiring = turn.agent, turn.wiring
    instructions = agent.instructions
    if not isinstance(instructions, str) and instructions is not None:
        instructions = await agent.get_system_prompt(turn.run.context())
    tools: list[Tool] = []
    if agent.tools:
        tools = [tool for tool in agent.tools if getattr(tool, "is_enabled", True) is True]
        if len(tools) != len(agent.tools):  # some are disabled or decided per run
            tools = [tool for tool in agent.tools if await _enabled(tool, turn)]
    if agent.mcp_servers:
        tools = [*await agent.get_mcp_tools(turn.run.context()), *tools]
    refused_tool(agent.name, tools)  # tools assigned after the agent was built are checked here
    function_tools = {tool.name: tool for tool in tools if isinstance(tool, FunctionTool)} if tools else {}
    if wiring.send_tool is not None:
        tools.append(wiring.send_tool)
    model = wiring.resolve_model(agent)
    system_prompt = _system_prompt(agent, wiring, instructions, additional_instructions)
    setup = Setup(
        model=model,
        instructions=system_prompt,
        tools=tools,
        function_tools=function_tools,
        schema=_output_schema(agent),
        can_send=wiring.send_tool is not None,
        usage_key=(agent.name, getattr(model, "model_name", None) or type(model).__name__),
    )
    reusable = (
        additional_instructions is None and not agent.mcp_servers and len(tools) == len(agent.tools) + setup.can_send
        and (system_prompt is None or "{{" not in (wiring.shared_instructions or "") + (instructions or ""))
        and (agent.instructions is None or isinstance(agent.instructions, str))
    )
    if reusable:
        setup.sources, setup.tool_list = _setup_sources(agent, wiring), list(agent.tools)
        wiring.setups[agent] = setup
    return setup


def _setup_sources(agent: AgentBase, wiring: Wiring) -> tuple[Any, ...]:
    """Everything a setup (and the agent's wrapped model) is built from, compared by identity in `_reused_setup`."""
    return (
        agent.name, agent.instructions, agent.output_type, agent.model, agent.retry, agent.timeout,
        wiring.send_tool, wiring.shared_instructions, wiring.retry,
    )


def _reused_setup(turn: _Turn, additional_instructions: str | None) -> Setup | None:
    """The agent's last setup when nothing it was built from has changed: no per-turn rebuild (~1 µs)."""
    agent, wiring = turn.agent, turn.wiring
    setup = wiring.setups.get(agent)
    if setup is None or additional_instructions is not None or agent.mcp_servers:
        return None
    was = setup.sources
    assert was is not None  # only setups with sources are kept
    if not (  # attribute by attribute, without building a tuple to compare: this runs once per agent turn
        was[0] is agent.name and was[1] is agent.instructions and was[2] is agent.output_type
        and was[3] is agent.model and was[4] is agent.retry and was[5] is agent.timeout
        and was[6] is wiring.send_tool and was[7] is wiring.shared_instructions and was[8] is wiring.retry
        and setup.tool_list == agent.tools
    ):
        return None
    for tool in agent.tools:
        if getattr(tool, "is_enabled", True) is not True:  # switched off (or made conditional) since
            return None
    return setup


def _system_prompt(agent: AgentBase, wiring: Wiring, own: str | None, additional: str | None) -> str | None:
    """Shared, own and additional instructions, in that order; placeholders ({{date}}...) expand per turn."""
    shared = wiring.shared_instructions
    if shared or additional:
        parts = [part for part in (shared, own, additional) if part]
    elif own and "{{" not in own:
        return own  # the common case: the agent's own instructions as they are
    else:
        parts = [own] if own else []
    if not parts:
        return None
    if any("{{" in part for part in parts):
        from .._base._placeholders import render

        parts = [render(part, agent_name=agent.name, recipients=wiring.recipients) for part in parts]
    return "\n\n".join(parts)


async def _enabled(tool: Tool, turn: _Turn) -> bool:
    flag = getattr(tool, "is_enabled", True)
    if isinstance(flag, bool):
        return flag
    result = flag(turn.run.context(), turn.agent)
    if not isinstance(result, bool):
        result = await result
    return bool(result)


def _output_schema(agent: AgentBase) -> AgentOutputSchemaBase | None:
    output_type = agent.output_type
    if output_type is None or output_type is str:
        return None
    if isinstance(output_type, AgentOutputSchemaBase):
        return output_type
    cached = agent.__dict__.get("_output_schema")
    if cached is None or cached[0] is not output_type:  # built once per output_type: schema building is slow
        cached = (output_type, AgentOutputSchema(output_type))
        agent.__dict__["_output_schema"] = cached
    schema: AgentOutputSchemaBase = cached[1]
    return schema


# -- calling the model ---------------------------------------------------------------------------------


def _plain_call(turn: _Turn, setup: Setup, settings: Any, model: Model) -> Awaitable[ModelResponse]:
    """`model`'s response, with no hook, prompt or span involved (and no coroutine of its own)."""
    thread = turn.thread
    history: Any = (
        thread.items[:] if turn.agent.history_window is None and turn.caller == USER_CALLER and not thread.has_marks
        else _history(turn)
    )
    return model.get_response(
        setup.instructions, history, settings, setup.tools, setup.schema, [], _UNTRACED,
        previous_response_id=None, conversation_id=None, prompt=None,
    )


async def _after_failure(
    turn: _Turn, setup: Setup, settings: Any, direct: Model | None, error: Exception
) -> ModelResponse:
    """A failed model call: retried by the agent's policy if the loop called the model directly; a ModelError
    gets the chat id and depth (the retry wrapper knows only the agent)."""
    try:
        if direct is None:
            raise error
        return await setup.model.retry_after(error, partial(_plain_call, turn, setup, settings, direct))
    except ModelError as failure:
        failure.chat_id, failure.depth = turn.run.chat_id, turn.depth
        raise


def _call_model(turn: _Turn, setup: Setup, settings: Any) -> Awaitable[ModelResponse]:
    """The model's response through the retry wrapper, with hooks, prompt and span when the agent has them."""
    agent = turn.agent
    if agent.hooks is not None or agent.prompt is not None or turn.span is not None:
        return _call_model_fully(turn, setup, settings)
    return _plain_call(turn, setup, settings, setup.model)


async def _call_model_fully(turn: _Turn, setup: Setup, settings: Any) -> ModelResponse:
    """With the agent's on_llm_start/on_llm_end hooks, its prompt, and its span made current."""
    agent = turn.agent
    history: Any = _history(turn)  # plain dicts in Responses-API input shape
    if agent.hooks is not None:
        await agent.hooks.on_llm_start(turn.run.context(), agent, setup.instructions, history)
    request = setup.model.get_response(
        setup.instructions, history, settings, setup.tools, setup.schema, [], _model_tracing(turn),
        previous_response_id=None, conversation_id=None,
        prompt=None if agent.prompt is None else await _prompt(turn),
    )
    with _current_span(turn):
        response = await request
    if agent.hooks is not None:
        await agent.hooks.on_llm_end(turn.run.context(), agent, response)
    return response


_UNTRACED, _TRACED = ModelTracing.DISABLED, ModelTracing.ENABLED  # a module global is read faster than an Enum member


def _model_tracing(turn: _Turn) -> ModelTracing:
    return _UNTRACED if turn.span is None else _TRACED


def _current_span(turn: _Turn) -> AbstractContextManager[None]:
    """The agent span as the parent of the model's own spans (a no-op when the turn is not traced)."""
    if turn.run.trace is None or turn.span is None:
        return nullcontext()
    return current(turn.run.trace, turn.span)


def _history(turn: _Turn) -> list[dict[str, Any]]:
    """What the model reads: a list of its own, so items the turn adds later never appear in what it was given;
    in a thread between agents, without the send call ids kept with incoming messages."""
    thread = turn.thread
    items = without_call_marks(thread.items) if thread.has_marks else thread.items  # bookkeeping is not the model's
    window = turn.agent.history_window
    if window is not None and len(items) > window + 1:
        items = window_of(items, window)
    if turn.caller != USER_CALLER:
        return _model_input(items)  # a new list
    return items[:] if items is thread.items else items  # copied once, whichever step made it


def _model_input(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of `items` whose incoming messages leave out their send call id (`SEND_CALL_ID`)."""
    return [item if SEND_CALL_ID not in item else _without_call_id(item) for item in items]


def _without_call_id(item: dict[str, Any]) -> dict[str, Any]:
    plain = item.copy()
    del plain[SEND_CALL_ID]
    return plain


def window_of(items: list[dict[str, Any]], window: int) -> list[dict[str, Any]]:
    """The first item and the last `window` items, widened so no call loses its output or reasoning its follower."""
    start = len(items) - window
    while start > 1 and _splits(items[start - 1], items[start]):
        start -= 1
    return [items[0], *items[start:]]


def _splits(before: dict[str, Any], first: dict[str, Any]) -> bool:
    """Would a cut between these two items orphan something the model API insists on keeping together?"""
    return (
        first.get("type") == "function_call_output"  # its call would be cut off
        or before.get("type") in ("reasoning", "function_call")  # reasoning + follower; parallel calls
    )


async def _stream_model(turn: _Turn, setup: Setup, settings: Any) -> tuple[Sequence[Any], Any]:
    agent, run, emit = turn.agent, turn.run, turn.emit
    name, caller, depth, chat_id = agent.name, turn.caller, turn.depth, run.chat_id
    history: Any = _history(turn)
    if agent.hooks is not None:
        await agent.hooks.on_llm_start(run.context(), agent, setup.instructions, history)
    stream = StreamCall(setup.model, (
        setup.instructions, history, settings, setup.tools, setup.schema, [], _model_tracing(turn),
    ), {
        "previous_response_id": None, "conversation_id": None,
        "prompt": None if turn.agent.prompt is None else await _prompt(turn),
    })
    completed = None
    with _current_span(turn):  # the model's response span nests under this agent's span
        try:
            while True:  # attempts: the model's own stream, retried until its first event
                started = False
                try:
                    async for event in stream.open():
                        if not started:
                            started = True
                            stream.began()
                        if emit is not None:
                            await emit(raw_model_event(name, caller, depth, chat_id, event))
                        kind = event.type
                        if kind == "response.output_text.delta" and emit is not None:
                            await emit(text_delta(name, caller, depth, chat_id, event.delta))
                        elif kind == "response.completed" or kind == "response.incomplete":
                            completed = event.response
                        elif kind == "response.failed" or kind == "error":
                            raise ModelError(_stream_failure(event), agent=name, chat_id=chat_id, depth=depth)
                    break
                except Exception as error:
                    await stream.failed(error, started)  # raises what it means, or returns to try again
        except ModelError as error:  # the retry wrapper knows the agent, not the chat or depth
            error.chat_id, error.depth = chat_id, depth
            raise
        finally:
            await stream.aclose()
    if completed is None:
        raise ModelError(
            "The model's stream ended before response.completed.", agent=name, chat_id=chat_id, depth=depth
        )
    if agent.hooks is not None:
        usage = Usage(requests=1) if completed.usage is None else Usage(
            requests=1, input_tokens=completed.usage.input_tokens, output_tokens=completed.usage.output_tokens,
            total_tokens=completed.usage.total_tokens,
        )
        await agent.hooks.on_llm_end(run.context(), agent, ModelResponse(
            output=list(completed.output), usage=usage, response_id=completed.id,
        ))
    return completed.output, completed.usage


def _stream_failure(event: Any) -> str:
    error = getattr(getattr(event, "response", None), "error", None) or event
    message = getattr(error, "message", None) or str(error)
    return f"The model failed while streaming: {message}"


async def _prompt(turn: _Turn) -> Any:
    if turn.agent.prompt is None:
        return None
    return await turn.agent.get_prompt(turn.run.context())


def _classify(setup: Setup, call: ResponseFunctionToolCall, *, resume: bool = False) -> ToolCallStep:
    if call.name == SEND_MESSAGE and setup.can_send:
        return SendMessage(call, resume)
    tool = setup.function_tools.get(call.name)
    return UnknownTool(call) if tool is None else FunctionToolCall(call, tool)


_USUAL = frozenset({"message", "function_call"})


def _next_step(turn: _Turn, setup: Setup, output: Sequence[Any]) -> NextStep:
    """As `Runner` decides: calls to run; else the last message's text (a refusal raises); a response of hosted tool
    calls only runs the model again."""
    if len(output) == 1:  # the common cases: one call, or one plain-text answer
        item = output[0]
        kind = item.type
        if kind == "function_call":
            return RunTools([_classify(setup, item)])
        if kind == "message" and setup.schema is None and len(item.content) == 1:
            part = item.content[0]
            if part.type == "output_text":
                return FinalOutput(part.text or "")
    calls: list[ToolCallStep] = []
    approvals: list[Any] = []
    last_message = None
    hosted = False
    for item in output:
        kind = item.type
        if kind == "function_call":
            calls.append(_classify(setup, item))
        elif kind == "message":
            last_message = item
        elif kind == "mcp_approval_request":
            approvals.append(item)
        elif kind in HOSTED_ACTIVITY:
            hosted = True
    if calls or approvals:
        return RunTools(calls, approvals)
    if last_message is None:
        return RunTools([]) if hosted else _final_text_output(turn, setup, "")
    refusal = ItemHelpers.extract_refusal(last_message)
    if refusal:
        raise ModelRefusalError(refusal)
    return _final_text_output(turn, setup, ItemHelpers.extract_text(last_message) or "")


def _final_text_output(turn: _Turn, setup: Setup, text: str) -> NextStep:
    if setup.schema is None:
        return FinalOutput(text)
    if not text:
        return RUN_AGAIN
    try:
        return FinalOutput(setup.schema.validate_json(text))
    except ModelBehaviorError as error:
        raise OutputValidationError(
            f"Agent {turn.agent.name!r} answered with output that does not match its output_type: {error}",
            agent=turn.agent.name, chat_id=turn.run.chat_id, depth=turn.depth,
        ) from error


async def _stop_after_tools(turn: _Turn, results: list[ToolResult]) -> FinalOutput | None:
    """`tool_use_behavior` as in the SDK: a function tool's output may end the turn; with no `output_type` (or
    `str`) that output becomes its `str()`, as under `Runner`."""
    agent = turn.agent
    behavior = agent.tool_use_behavior
    if behavior == "run_llm_again" or not results:
        return None
    results = sorted(results, key=lambda result: result[0])  # call order, whatever finished first
    found: FinalOutput | None = None
    if behavior == "stop_on_first_tool":
        found = FinalOutput(results[0][3])
    elif isinstance(behavior, dict):
        names = behavior.get("stop_at_tool_names", [])
        for _, tool, _, output in results:
            if tool.name in names or tool.qualified_name in names:
                found = FinalOutput(output)
                break
    elif callable(behavior):
        found = await _decided_by(turn, behavior, results)
    else:
        raise ConfigError(f"Agent {agent.name!r}: invalid tool_use_behavior {behavior!r}.")
    if found is not None and (agent.output_type is None or agent.output_type is str):
        found.output = str(found.output)
    return found


async def _decided_by(turn: _Turn, behavior: Any, results: list[ToolResult]) -> FinalOutput | None:
    """A custom `tool_use_behavior` function, given the SDK's `FunctionToolResult`s."""
    agent = turn.agent
    tool_results = [
        FunctionToolResult(tool=tool, output=output, run_item=ToolCallOutputItem(
            agent=agent, raw_item=output_item(call, output), output=output,
        ))
        for _, tool, call, output in results
    ]
    decided = behavior(turn.run.context(), tool_results)
    if inspect.isawaitable(decided):
        decided = await decided
    if not isinstance(decided, ToolsToFinalOutputResult):
        raise UserError(
            f"Agent {agent.name!r}: a tool_use_behavior callable must return ToolsToFinalOutputResult."
        )
    return FinalOutput(decided.final_output) if decided.is_final_output else None


async def _answer_mcp_approvals(turn: _Turn, setup: Setup, requests: Sequence[Any]) -> None:
    """Each hosted MCP approval request answered by its server's callback; the answers join the thread."""
    responses = await mcp_approval_responses(requests, setup.tools, turn.run.context())
    stored = turn.thread.add(responses)
    if stored is not None:
        await stored
    if turn.emit is not None:
        await _emit_hosted(turn, responses)


# -- tools and sends ------------------------------------------------------------------------------


_PENDING: Any = object()
_AWAITING: Any = object()  # waits for approval: no output is stored until resume decides


class _Calls:
    """One response's calls: their outputs, stored in call order, each as early as that order allows.

    A crash while a slow call runs then loses only the outputs that did not exist yet.
    """

    __slots__ = ("calls", "items", "lock", "outputs", "results", "thread")

    def __init__(self, thread: ConversationThread, calls: list[ToolCallStep]) -> None:
        self.thread, self.calls = thread, calls
        self.outputs: list[Any] = [_PENDING] * len(calls)
        self.items: list[dict[str, Any] | None] = []
        """One per call settled so far, in call order; None for a call waiting for approval."""
        self.results: list[ToolResult] = []
        """(call index, tool, call, output) of the function tools that ran or were refused, for
        tool_use_behavior."""
        self.lock = asyncio.Lock() if len(calls) > 1 else None  # only parallel calls settle from several tasks

    async def settle(self, *, final: bool = False) -> None:
        if self.lock is None:
            stored = self._store(final)
            if stored is not None:
                await stored
            return
        async with self.lock:
            stored = self._store(final)
            if stored is not None:
                await stored

    def _store(self, final: bool) -> Awaitable[None] | None:
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


async def _emit_outputs(turn: _Turn, state: _Calls) -> None:
    """A `tool_output` for each call that got its output (not those waiting for approval), in call order."""
    emit = turn.emit
    assert emit is not None
    name, caller, depth, chat_id = turn.agent.name, turn.caller, turn.depth, turn.run.chat_id
    for step, item in zip(state.calls, state.items, strict=True):
        if item is None:
            continue  # waiting for approval
        text = item["output"] if isinstance(item["output"], str) else json.dumps(item["output"])
        await emit(ToolOutput(
            agent=name, caller=caller, depth=depth, chat_id=chat_id, tool=step.call.name,
            call_id=step.call.call_id, output=text,
        ))


async def _run_call(
    turn: _Turn,
    setup: Setup,
    step: ToolCallStep,
    outputs: list[Any],
    index: int,
    results: list[ToolResult],
    emit: EmitEvent | None,
) -> None:
    agent, run = turn.agent, turn.run
    call = step.call
    if emit is not None:  # every call has its tool_called, so consumers can pair it with its tool_output
        await emit(ToolCalled(
            agent=agent.name, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, tool=call.name,
            call_id=call.call_id, arguments=call.arguments,
        ))
    match step:
        case SendMessage():
            await _send(turn, step, outputs, index, emit)
        case FunctionToolCall(tool=tool):
            if tool.needs_approval is False and not run.rejected:  # the usual tool: no decision to wait for
                verdict = "run"
            else:
                verdict = await _approval(turn, tool, call)
            if verdict == "wait":
                outputs[index] = _AWAITING
                await _wait_for_approval(turn, call, emit)
                return
            if verdict == "reject":
                outputs[index] = rejected_output(call.name)
            else:
                if verdict == "approved":  # marked first: after a crash from here on, it is never run again
                    await _mark(turn, APPROVED_RUN, call.call_id)
                outer = INSIDE.get()
                INSIDE.set(run.inside)  # a turn of this chat that the tool starts raises ReentrantTurn
                try:
                    if turn.span is None:
                        outputs[index] = await run_function_tool(agent, tool, call, run, turn.wiring)
                    else:
                        outputs[index] = await _traced_tool(turn, tool, call)
                except Exception as error:  # a tripped tool guardrail, or a tool with failure_error_function=None
                    raise _tool_failure(error, tool, outputs, index) from error
                finally:
                    INSIDE.set(outer)  # not reset(token): an abandoned stream may be closed from another context
            results.append((index, tool, call, outputs[index]))
        case UnknownTool():
            available = [*setup.function_tools, *([SEND_MESSAGE] if setup.can_send else [])]
            outputs[index] = unknown_tool_output(call.name, available)
        case _:
            assert_never(step)


async def _wait_for_approval(turn: _Turn, call: ResponseFunctionToolCall, emit: EmitEvent | None) -> None:
    """The call joins the turn's interruptions (and `approval_requested` is emitted): resume decides. The thread marks
    the call as waiting, so a later process knows it never ran."""
    await _mark(turn, AWAITING_APPROVAL, call.call_id)
    run = turn.run
    run.interruptions.append(Interruption(
        agent=turn.agent.name, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id,
        call_id=call.call_id, tool=call.name, arguments=call.arguments,
    ))
    if emit is not None:
        await emit(ApprovalRequested(
            agent=turn.agent.name, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, tool=call.name,
            call_id=call.call_id, arguments=call.arguments,
        ))


async def _mark(turn: _Turn, kind: str, call_id: str) -> None:
    stored = turn.thread.add([call_mark(kind, call_id)])
    turn.thread.has_marks = True
    if stored is not None:
        await stored


def _tool_failure(error: Exception, tool: FunctionTool, outputs: list[Any], index: int) -> Exception:
    """What ends the turn when a tool call raises, as under `Runner`: the SDK's own exceptions as they are, any
    other wrapped in `UserError`. The call's output (the thread keeps it) says why."""
    failure = error if isinstance(error, AgentsException) else UserError(f"Error running tool {tool.name}: {error}")
    outputs[index] = f"Error: {failure}"
    return failure


async def _approval(turn: _Turn, tool: FunctionTool, call: ResponseFunctionToolCall) -> str:
    """"run", "reject" or "wait": the user's decision from resume, else the tool's `needs_approval`."""
    run = turn.run
    if run.rejected and call.call_id in run.rejected:
        return "reject"
    needs = tool.needs_approval
    if run.approved and call.call_id in run.approved:
        return "approved"
    if needs is False:
        return "run"
    if callable(needs):
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = {}
        decided = needs(run.context(), arguments if isinstance(arguments, dict) else {}, call.call_id)
        needs = await decided if inspect.isawaitable(decided) else decided
    return "wait" if needs else "run"


async def _traced_tool(turn: _Turn, tool: FunctionTool, call: ResponseFunctionToolCall) -> Any:
    span = started(function_span(name=call.name, input=call.arguments, parent=turn.span))
    assert turn.run.trace is not None  # only traced turns get here
    try:
        with current(turn.run.trace, span):  # the SDK attaches a handled tool error to the current span
            output = await run_function_tool(turn.agent, tool, call, turn.run, turn.wiring)
        span.span_data.output = output if isinstance(output, str) else _as_text(output)
        return output
    finally:
        finish(span)


def rejected_output(tool_name: str) -> str:
    return f"The user rejected this call to {tool_name!r}; it did not run. Do not call it again unless asked."


async def _send(turn: _Turn, step: SendMessage, outputs: list[Any], index: int, emit: EmitEvent | None) -> None:
    """Check chart, depth and re-entry; then run the recipient one level deeper. Refusals become outputs."""
    wiring, run, sender, call = turn.wiring, turn.run, turn.agent.name, step.call
    request = parse_send_request(call.arguments, wiring.recipients)
    if isinstance(request, str):
        outputs[index] = request
        return
    recipient = wiring.recipients[request.recipient]
    depth = turn.depth + 1
    if depth > wiring.max_depth:
        outputs[index] = depth_refusal(recipient.name, wiring.max_depth)
        return
    pair = (sender, recipient.name)
    if pair in run.open_pairs:
        outputs[index] = reentry_refusal(sender, recipient.name)
        return
    thread = wiring.thread_manager.get_thread(run.chat_id, sender, recipient.name)
    continuing = step.resume and _delivered(thread, call.call_id, request.message)
    if continuing and is_finished(thread.items):  # the reply exists; a crash came before it reached the caller
        outputs[index] = _final_text(thread.items[-1])
        return
    sub_wiring = wiring.recipient_wirings.get(recipient.name) or recipient.wiring
    sub = _Turn(recipient, sub_wiring, thread, sender, depth, run, emit=emit, sent_by=call.call_id)
    if turn.span is not None:
        sub.parent_span = started(custom_span(name=SEND_MESSAGE, parent=turn.span, data={
            "caller": sender, "recipient": recipient.name, "depth": depth, "chat_id": run.chat_id,
            "call_id": call.call_id,
        }))
    run.open_pairs.add(pair)  # before the first yield: a concurrent send on the same pair must see it
    failed: Exception | None = None
    try:
        if emit is not None:
            await emit(MessageSent(
                agent=sender, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, recipient=recipient.name,
                message=request.message, call_id=call.call_id,
            ))
        await run_agent(sub, None if continuing else request.message, request.additional_instructions)
        outputs[index] = _AWAITING if sub.paused else _as_text(sub.output)
    except Exception as error:  # the recipient failed: its caller reads why and carries on
        failed = error
        outputs[index] = failure_output(recipient.name, error)
    finally:
        run.open_pairs.discard(pair)
        if sub.parent_span is not None:
            finish(sub.parent_span, failed)


def _final_text(item: dict[str, Any]) -> str:
    return "".join(
        part.get("text", "") or part.get("refusal", "") for part in item.get("content", []) if isinstance(part, dict)
    )


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


async def _run_parallel(turn: _Turn, setup: Setup, state: _Calls) -> None:
    """Several calls at once, each in a task; their events reach this task's channel in the order they happen."""
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def queued(event: Event) -> None:
        queue.put_nowait(event)

    job_emit = None if turn.emit is None else queued

    async def job(index: int, step: ToolCallStep) -> None:
        try:
            await _run_call(turn, setup, step, state.outputs, index, state.results, job_emit)
            await state.settle()
        except Exception as error:
            queue.put_nowait(_Failed(error))
        finally:
            queue.put_nowait(_DONE)

    tasks = [asyncio.create_task(job(index, step)) for index, step in enumerate(state.calls)]
    remaining = len(tasks)
    try:
        while remaining:
            item = await queue.get()
            if item is _DONE:
                remaining -= 1
            elif isinstance(item, _Failed):
                raise item.error
            elif turn.emit is not None:
                await turn.emit(item)
    finally:
        if remaining:  # failed or cancelled: stop the calls still running; one storing its output finishes that
            for index, task in enumerate(tasks):
                if state.outputs[index] is _PENDING:
                    task.cancel()
            await clean_up(asyncio.gather(*tasks, return_exceptions=True), "stopping the parallel calls")
        else:
            await asyncio.gather(*tasks, return_exceptions=True)


# -- guardrails -----------------------------------------------------------------------------------


async def _check_input_guardrails(turn: _Turn, message: str) -> None:
    context: RunContextWrapper[Any] = turn.run.context()
    for guardrail in turn.agent.input_guardrails:
        result = await guardrail.run(turn.agent, message, context)
        if result.output.tripwire_triggered:
            raise named_tripwire(InputGuardrailTripwireTriggered(result), turn.agent.name)


async def _before_finishing(turn: _Turn, output: Any) -> None:
    """Output guardrails, then the on_end hook."""
    agent, context = turn.agent, turn.run.context()
    for guardrail in agent.output_guardrails:
        result = await guardrail.run(context, agent, output)
        if result.output.tripwire_triggered:
            raise named_tripwire(OutputGuardrailTripwireTriggered(result), agent.name)
    if agent.hooks is not None:
        await agent.hooks.on_end(context, agent, output)
