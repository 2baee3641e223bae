"""THE turn loop: each agent turn is one coroutine that emits events; send_message recurses one level deeper.

Read top-down: the entry points, one agent's turn (model call -> items -> tools and sends -> repeat), how it starts,
how a stored turn resumes, and the guardrails around it. What it calls lives below it: `_entry` (the chat's lock,
load, save, RunResult), `_prepare` (the Setup), `_model_call` (one model call, blocking or streamed), `_steps` (what a
response asks for next), `_calls` (tools and sends). Those that start an agent's turn are handed `run_agent`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Coroutine, Mapping
from typing import Any, assert_never

from agents import (
    InputGuardrailTripwireTriggered,
    ModelSettings,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
    agent_span,
)
from agents.run_context import AgentHookContext
from openai.types.responses import ResponseFunctionToolCall

from .._attachments._incoming import Incoming, message_text
from .._attachments._view import any_attachments, attachment_parts
from .._base._errors import MaxStepsExceeded
from .._base._events import AgentFinished, AgentStarted, ToolCalled, ToolOutput
from .._base._names import SEND_MESSAGE
from .._threads._manager import ConversationThread, ThreadManager, clean_up
from .._threads._thread_items import (
    INTERRUPTED_OUTPUT,
    drop_lost_reasoning,
    ends_with_reasoning,
    interrupted_output,
    steps_before_pause,
    turn_mark,
)
from . import _entry
from ._calls import run_tools
from ._channel import TurnStart
from ._definition import AgentBase, Wiring
from ._mcp_approvals import callback_requests, waiting_requests
from ._model_call import call_model
from ._prepare import prepare, reused_setup
from ._results import ResponseStream, RunResult
from ._setup import Setup
from ._state import SEND_CALL_ID, USER_CALLER, Message, RemoteMember, Turn, incoming, input_list
from ._steps import (
    RUN_AGAIN,
    FinalOutput,
    FunctionToolCall,
    NextStep,
    RunAgain,
    RunTools,
    ToolCallStep,
    answered_results,
    classify,
    next_step,
)
from ._tool_guardrails import AgentInputGuardrailResult
from ._tools import named_tripwire
from ._tracing import finish, started

# -- entry points --------------------------------------------------------------------------------------------


def top_level_turn(
    agent: AgentBase,
    wiring: Wiring,
    message: str | Incoming,
    caller: str,
    chat_id: str,
    context: Any,
    additional_instructions: str | None,
    stream: ResponseStream | None,
    turn_id: str | None = None,
) -> Coroutine[Any, Any, RunResult]:
    """One turn from outside the agency (see `_entry.top_level_turn`), its agents run by `run_agent`."""
    return _entry.top_level_turn(
        agent, wiring, message, caller, chat_id, context, additional_instructions, stream, run_agent, turn_id
    )


def resume_turn(
    entries: Mapping[str, tuple[AgentBase, Wiring]],
    manager: ThreadManager,
    *,
    chat_id: str,
    context: Any,
    approve: frozenset[str],
    reject: Mapping[str, str | None],
    stream: ResponseStream,
    turn_id: str | None = None,
) -> TurnStart:
    """Continue the chat's unfinished top-level turn from its last stored item (see `_entry.resume_turn`)."""
    return _entry.resume_turn(
        entries, manager, chat_id=chat_id, context=context, approve=approve, reject=reject, stream=stream,
        agent_turn=run_agent, turn_id=turn_id,
    )


# -- one agent's turn ----------------------------------------------------------------------------------------


def run_agent(turn: Turn, message: Message | None, additional_instructions: str | None) -> Coroutine[Any, Any, None]:
    """The agent's turn, inside its spans when the turn is traced (an extra layer only then); a member that runs
    elsewhere (`RemoteMember`) runs its own."""
    if isinstance(turn.agent, RemoteMember):
        return turn.agent.remote_turn(turn, message, additional_instructions)
    watch = turn.run.watch
    if watch is not None and watch.spans is not None:  # metrics alone have nothing to do per agent turn
        return _watched_agent_turn(turn, message, additional_instructions)
    if turn.run.trace is None:
        return agent_turn(turn, message, additional_instructions)
    return _traced_agent_turn(turn, message, additional_instructions)


async def _watched_agent_turn(turn: Turn, message: Message | None, additional_instructions: str | None) -> None:
    """The agent's turn inside its OpenTelemetry span (`_telemetry`), and its SDK span when traced."""
    watch = turn.run.watch
    assert watch is not None
    watch.agent_started(turn)
    try:
        if turn.run.trace is None:
            await agent_turn(turn, message, additional_instructions)
        else:
            await _traced_agent_turn(turn, message, additional_instructions)
    except BaseException as error:
        watch.agent_ended(turn, error)
        raise
    watch.agent_ended(turn, None)


async def agent_turn(turn: Turn, message: Message | None, additional_instructions: str | None) -> None:
    """Model call -> items -> tools and sends -> repeat, until a final output, a pause, or max_steps.

    `message=None` resumes the thread's unfinished turn: its calls without outputs run first.
    """
    agent, run, emit = turn.agent, turn.run, turn.emit
    if emit is not None or agent.input_guardrails or (agent.hooks is not None and message is not None):
        await _announce(turn, message)
    if message is not None:
        if turn.arriving is not None:
            await _keep_attachments(turn, turn.arriving)
        stored = turn.thread.add(_arriving(turn, message))
        if stored is not None:
            await stored
    setup = reused_setup(turn, additional_instructions) or await prepare(turn, additional_instructions)
    settings = agent.model_settings
    step, turn.steps = (RUN_AGAIN, 0) if message is not None else await _resumed_step(turn, setup)
    resumed_at = turn.steps
    while not isinstance(step, FinalOutput):
        if isinstance(step, RunTools):
            stop = await run_tools(turn, setup, step, run_agent)
            if turn.paused:
                return
            if stop is not None:
                step = stop
                break
            settings = _after_tools(agent, settings, step)
        elif not isinstance(step, RunAgain):  # RunAgain: the model is called again
            assert_never(step)
        if turn.steps == agent.max_steps:
            raise MaxStepsExceeded(agent=agent.name, chat_id=run.chat_id, depth=turn.depth, max_steps=turn.steps)
        if turn.steps > resumed_at:  # built again per call as `Runner` does (dynamic instructions, tools, MCP)
            if setup.sources is None:
                setup = await prepare(turn, additional_instructions)
        elif message is None and agent.hooks is not None:  # under `Runner` a resume starts its agent again after
            await agent.hooks.on_start(run.context(), agent)  # the calls it resumes with: before its next model call
        step = next_step(turn, setup, await call_model(turn, setup, settings, run.streaming))
        turn.steps += 1
    if emit is not None or agent.output_guardrails or agent.hooks is not None:
        await _finish(turn, step.output)
    else:
        turn.output = step.output


async def _finish(turn: Turn, output: Any) -> None:
    """The on_end hook and the output guardrails, then the output is the turn's, then `agent_finished`."""
    agent = turn.agent
    if agent.output_guardrails or agent.hooks is not None:
        await _before_finishing(turn, output)
    turn.output = output
    if turn.emit is not None:
        await turn.emit(AgentFinished(agent=agent.name, caller=turn.caller, depth=turn.depth,
                                      chat_id=turn.run.chat_id, output=output, send_call_id=turn.sent_by))


def _after_tools(agent: AgentBase, settings: ModelSettings, step: RunTools) -> ModelSettings:
    """The next model call's settings: `reset_tool_choice` clears the tool choice once a tool was used."""
    if agent.reset_tool_choice and settings.tool_choice is not None and step.used_tools:
        return dataclasses.replace(settings, tool_choice=None)
    return settings


def _arriving(turn: Turn, message: Message) -> list[dict[str, Any]]:
    """The message as stored (input items: with references to their images' and files' bytes); a top-level turn
    started with an id is marked first, in the same append."""
    arriving = turn.arriving
    if arriving is None:
        items = [incoming(turn, message)] if isinstance(message, str) else list(message)
        if turn.run.turn_id is None or turn.depth:  # the usual message: not marked
            return items
    elif turn.caller == USER_CALLER:
        items = arriving.items
    else:  # a send's message keeps the call id of its send
        items = [{**item, SEND_CALL_ID: turn.sent_by} if item.get("role") == "user" and "type" not in item else item
                 for item in arriving.items]
    turn_id = turn.run.turn_id
    if turn_id is None or turn.depth:
        return items
    turn.thread.has_marks = True
    return [turn_mark(turn_id), *items]


async def _keep_attachments(turn: Turn, arriving: Incoming) -> None:
    """Before the message is stored: the bytes of its images and files (a reference is never stored before its
    bytes), and a check that references given as input are the chat's own."""
    attachments = turn.wiring.thread_manager.attachments
    if arriving.references:
        await attachments.require(turn.run.chat_id, arriving.references)
    await attachments.keep(turn.run.chat_id, arriving.blobs)
    if any_attachments(arriving.items):
        turn.thread.has_attachments = True


async def _traced_agent_turn(turn: Turn, message: Message | None, additional_instructions: str | None) -> None:
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


# -- how a turn starts, and how a stored one goes on ------------------------------------------------------


async def _announce(turn: Turn, message: Message | None) -> None:
    """`agent_started`, input guardrails and the on_start hook, before the message joins the thread. A resumed
    turn's on_start comes later, as under `Runner`: after the calls it resumes with, before its next model call."""
    agent, emit = turn.agent, turn.emit
    if emit is not None:
        arriving = turn.arriving
        await emit(AgentStarted(
            agent=agent.name, caller=turn.caller, depth=turn.depth, chat_id=turn.run.chat_id,
            message=_last_user_message(turn.thread) if message is None else (
                message if isinstance(message, str) else message_text(arriving.items if arriving else message)),
            attachments=[] if message is None or arriving is None else [
                part for item in arriving.items for part in attachment_parts(item)],
            send_call_id=turn.sent_by,
        ))
    if message is not None and agent.input_guardrails:  # `run_in_parallel=False`: before the start, as `Runner`
        await _check_input_guardrails(turn, message, in_parallel=False)
    if agent.hooks is not None and message is not None:  # resumed: when its next model call starts (agent_turn)
        await agent.hooks.on_start(_start_context(turn, message), agent)
    if message is not None and agent.input_guardrails:  # `Runner` runs these next to the first model call
        await _check_input_guardrails(turn, message, in_parallel=True)


def _start_context(turn: Turn, message: Message | None) -> AgentHookContext[Any]:
    """on_start's context: the run's, its `turn_input` the message that started this agent's turn (as `Runner`'s
    is the run's input); a nested agent gets a copy holding the message it was sent."""
    wrapper = turn.run.context()
    turn_input = input_list(_last_user_message(turn.thread) if message is None else message)
    if turn.depth == 0:
        wrapper.turn_input = turn_input
        return wrapper
    own = copy.copy(wrapper)  # shares usage, context and tool state, as `Runner`'s hook context does
    own.turn_input = turn_input
    return own


def _last_user_message(thread: ConversationThread) -> str:
    for item in reversed(thread.items):
        if item.get("role") == "user" and "type" not in item:
            return message_text([item])
    return ""


async def _resumed_step(turn: Turn, setup: Setup) -> tuple[NextStep, int]:
    """Where a stored, unfinished turn goes on: its sends still open and its calls (and hosted MCP approval requests)
    waiting for approval, else a new model call; and how many model calls it made before it paused (max_steps counts
    them, as `Runner`'s max_turns does). A function call cut short (a crash while it ran) is never run again: it gets
    the "interrupted" output, so no tool runs twice for one call id."""
    thread = turn.thread
    if ends_with_reasoning(thread.items):
        drop_lost_reasoning(thread.writable())  # in place only when needed: the thread's index stays as it is
    items = thread.items
    awaiting, started = thread.call_marks() if thread.has_marks else (set(), set())
    calls: list[ToolCallStep] = []
    cut: list[ToolCallStep] = []
    for item in thread.unanswered_calls():
        step = classify(setup, ResponseFunctionToolCall.model_validate(item), resume=True)
        call_id = step.call.call_id
        if isinstance(step, FunctionToolCall) and (call_id not in awaiting or call_id in started):
            cut.append(step)
        else:
            calls.append(step)
    outputs = {step.call.call_id: INTERRUPTED_OUTPUT for step in cut}
    if cut:
        stored = turn.thread.add([interrupted_output(call_id) for call_id in outputs])
        if stored is not None:
            await stored
    await _report_last_calls(turn, items, outputs, answered=not awaiting)  # approved calls: reported as they run
    requests = [*waiting_requests(thread, awaiting), *callback_requests(items, setup)] if awaiting else []
    if not (calls or requests):
        return RUN_AGAIN, steps_before_pause(items)
    stops = bool(awaiting) and turn.agent.tool_use_behavior != "run_llm_again"
    resumed = {step.call.call_id for step in calls}
    answered, order = answered_results(setup, items, resumed) if stops and resumed else ([], {})
    return RunTools(calls, requests, answered=answered, order=order), steps_before_pause(items)


def _trailing_calls(items: list[dict[str, Any]], outputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The calls among the thread's last items (its last response's, with their outputs) that have an output."""
    last: list[dict[str, Any]] = []
    for item in reversed(items):
        if item.get("type") not in ("function_call", "function_call_output"):
            break
        if item.get("type") == "function_call" and str(item.get("call_id")) in outputs:
            last.insert(0, item)
    return last


async def _report_last_calls(
    turn: Turn, items: list[dict[str, Any]], cut: dict[str, str], *, answered: bool
) -> None:
    """The calls of the thread's last response cut short (given the "interrupted" output just now) and, with
    `answered` (a crash's continuation), those whose output was stored before it, each streamed as called and given
    its output: a run that died between storing an item and streaming it leaves a consumer no call that never ends,
    nor an output without its call (a durable turn's reader leaves out the events it already had). A top-level turn
    with a `turn_id` reports every call it made so far: its events may have been streamed late (a durable turn
    writes them in batches), so a crash can have cut those of an earlier response too."""
    if turn.emit is None:
        return
    begun = turn.thread.turn_begun(turn.run.turn_id) if answered and turn.depth == 0 and turn.run.turn_id else None
    calls = items if begun is None else items[begun:]
    stored = {str(item.get("call_id")): item.get("output") for item in calls
              if answered and item.get("type") == "function_call_output"}
    outputs = stored | cut
    if begun is not None:
        last = [item for item in calls if item.get("type") == "function_call" and str(item.get("call_id")) in outputs]
    else:
        last = _trailing_calls(items, outputs)
    agent, caller, depth, chat_id = turn.agent.name, turn.caller, turn.depth, turn.run.chat_id
    for call in last:
        call_id, tool, output = str(call.get("call_id")), str(call.get("name")), outputs[str(call.get("call_id"))]
        await turn.emit(ToolCalled(
            agent=agent, caller=caller, depth=depth, chat_id=chat_id, tool=tool, call_id=call_id,
            arguments=str(call.get("arguments")),
        ))
        await turn.emit(ToolOutput(
            agent=agent, caller=caller, depth=depth, chat_id=chat_id, tool=tool, call_id=call_id,
            output=output if isinstance(output, str) else json.dumps(output),
        ))


# -- guardrails ----------------------------------------------------------------------------------------------


async def _check_input_guardrails(turn: Turn, message: Message, *, in_parallel: bool) -> None:
    """The agent's input guardrails of one kind, in order; each result is kept for the RunResult."""
    context: RunContextWrapper[Any] = turn.run.context()
    kept = turn.run.guardrail_log.agent_inputs
    for guardrail in turn.agent.input_guardrails:
        if guardrail.run_in_parallel is not in_parallel:
            continue
        result = await guardrail.run(turn.agent, message, context)
        kept.append(AgentInputGuardrailResult(guardrail=result.guardrail, output=result.output, agent=turn.agent))
        if result.output.tripwire_triggered:
            raise named_tripwire(InputGuardrailTripwireTriggered(result), turn.agent.name)


async def _before_finishing(turn: Turn, output: Any) -> None:
    """The on_end hook, then the output guardrails (`Runner`'s order), then what the turn held back stored. A tripwire
    or any failure here stores it as blocked: an answer is dropped, held call outputs are stored withheld (nothing
    the guardrails did not pass joins the thread, and every call keeps an output)."""
    agent = turn.agent
    try:
        if agent.hooks is not None:
            await agent.hooks.on_end(turn.run.context(), agent, output)
        if agent.output_guardrails:
            await _check_output_guardrails(turn, output)
    except BaseException:
        blocked = turn.store_held(blocked=True)
        if blocked is not None:  # stored even when this task is cancelled again (shielded, bounded: clean_up)
            await clean_up(blocked, f"storing {agent.name}'s withheld outputs")
        raise
    stored = turn.store_held()
    if stored is not None:
        await stored


async def _check_output_guardrails(turn: Turn, output: Any) -> None:
    """The agent's output guardrails, in order; each result is kept for the RunResult."""
    agent, context, kept = turn.agent, turn.run.context(), turn.run.guardrail_log.agent_outputs
    for guardrail in agent.output_guardrails:
        result = await guardrail.run(context, agent, output)
        kept.append(result)
        if result.output.tripwire_triggered:
            raise named_tripwire(OutputGuardrailTripwireTriggered(result), agent.name)
