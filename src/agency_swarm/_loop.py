"""THE turn loop: each agent turn is one async generator of events; send_message recurses one level deeper.

Blocking and streaming share every line; blocking callers only drain the events, and the model is then
called with `get_response` instead of `stream_response`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, assert_never

from agents import (
    AgentOutputSchema,
    AgentOutputSchemaBase,
    FunctionTool,
    InputGuardrailTripwireTriggered,
    Model,
    ModelBehaviorError,
    ModelResponse,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
    StopAtTools,
    Tool,
    Usage,
)
from agents.models.interface import ModelTracing
from agents.run_context import AgentHookContext
from openai.types.responses import ResponseFunctionToolCall

if TYPE_CHECKING:  # _agent imports this module; at run time the loop needs no name from it
    from ._agent import Agent, Wiring

from ._errors import ConfigError, MaxStepsExceeded, ModelError, OutputValidationError
from ._events import (
    AgentFinished,
    AgentStarted,
    Event,
    MessageSent,
    RawModelEvent,
    TextDelta,
    ToolCalled,
    ToolOutput,
)
from ._results import ResponseStream, RunResult, UsageTotals
from ._send_message import (
    SEND_MESSAGE,
    depth_refusal,
    failure_output,
    parse_send_request,
    reentry_refusal,
)
from ._threads import ConversationThread, interrupted_output
from ._tools import output_item, run_function_tool, unknown_tool_output

# -- the next step after a model response ------------------------------------------------------------


@dataclass(slots=True)
class FinalOutput:
    output: Any


@dataclass(slots=True)
class RunAgain:
    """No tool calls and no usable final output yet (e.g. a structured output still to come)."""


@dataclass(slots=True)
class FunctionToolCall:
    call: ResponseFunctionToolCall
    tool: FunctionTool


@dataclass(slots=True)
class SendMessage:
    call: ResponseFunctionToolCall


@dataclass(slots=True)
class UnknownTool:
    call: ResponseFunctionToolCall


ToolCallStep = FunctionToolCall | SendMessage | UnknownTool


@dataclass(slots=True)
class RunTools:
    calls: list[ToolCallStep]


NextStep = FinalOutput | RunAgain | RunTools

# -- state of one top-level turn and of each agent turn inside it --------------------------------------


class _Run:
    """Shared by every agent of one top-level turn: context, usage budget, sends still waiting for replies."""

    __slots__ = ("_wrapper", "chat_id", "open_pairs", "streaming", "usage_by_agent", "user_context")

    def __init__(self, chat_id: str, streaming: bool, user_context: Any) -> None:
        self.chat_id = chat_id
        self.streaming = streaming
        self.user_context = user_context
        self.usage_by_agent: dict[str, UsageTotals] = {}
        self.open_pairs: set[tuple[str, str]] = set()
        self._wrapper: AgentHookContext[Any] | None = None

    def context(self) -> AgentHookContext[Any]:
        """The SDK's run context (built on first use: most turns of plain agents never need it)."""
        if self._wrapper is None:
            usage = UsageTotals.sum(self.usage_by_agent.values()).to_usage()
            self._wrapper = AgentHookContext(context=self.user_context, usage=usage)
        return self._wrapper

    def record(self, agent: str, usage: Any) -> None:
        requests = max(1, getattr(usage, "requests", 1) or 1)
        per_agent = self.usage_by_agent.get(agent)
        if per_agent is None:
            per_agent = self.usage_by_agent[agent] = UsageTotals()
        per_agent.add(requests, usage)
        if self._wrapper is not None:  # keep the SDK context's usage current for tools and hooks
            live = self._wrapper.usage
            live.requests += requests
            if usage is not None:
                live.input_tokens += usage.input_tokens or 0
                live.output_tokens += usage.output_tokens or 0
                live.total_tokens += usage.total_tokens or 0


@dataclass(slots=True, eq=False)
class _Turn:
    agent: Agent
    wiring: Wiring
    thread: ConversationThread
    caller: str
    depth: int
    run: _Run
    output: Any = None


@dataclass(slots=True, eq=False)
class _Setup:
    """What stays fixed across one agent turn's model calls."""

    model: Model
    instructions: str | None
    tools: list[Tool]
    function_tools: dict[str, FunctionTool]
    schema: AgentOutputSchemaBase | None
    can_send: bool


# -- entry point ---------------------------------------------------------------------------------------


async def top_level_turn(
    agent: Agent,
    wiring: Wiring,
    message: str,
    *,
    caller: str,
    chat_id: str,
    context: Any,
    additional_instructions: str | None,
    stream: ResponseStream,
) -> AsyncGenerator[Event, None]:
    """One turn from outside the agency: load the chat once, run the entry agent, save what was produced."""
    manager = wiring.thread_manager
    async with manager.lock(chat_id):
        await manager.ensure_loaded(chat_id)
        thread = manager.get_thread(chat_id, caller, agent.name)
        start = len(thread.items)
        run = _Run(chat_id, stream.streaming, context)
        turn = _Turn(agent=agent, wiring=wiring, thread=thread, caller=caller, depth=0, run=run)
        try:
            async with aclosing(agent_turn(turn, message, additional_instructions)) as events:
                async for event in events:
                    yield event
        finally:
            await manager.save(chat_id)
        stream._finish(
            RunResult(
                final_output=turn.output,
                new_items=thread.items[start:],
                chat_id=chat_id,
                agent=agent.name,
                totals=UsageTotals.sum(run.usage_by_agent.values()),
                totals_by_agent=run.usage_by_agent,
            )
        )


# -- one agent's turn ------------------------------------------------------------------------------


async def agent_turn(turn: _Turn, message: str, additional_instructions: str | None) -> AsyncGenerator[Event, None]:
    """Model call -> items -> tools and sends -> repeat, until a final output or max_steps."""
    agent, run = turn.agent, turn.run
    name, caller, depth, chat_id = agent.name, turn.caller, turn.depth, run.chat_id
    yield AgentStarted(agent=name, caller=caller, depth=depth, chat_id=chat_id, message=message)
    if agent.input_guardrails:
        await _check_input_guardrails(turn, message)
    if agent.hooks is not None:
        await agent.hooks.on_start(run.context(), agent)
    await turn.thread.append({"role": "user", "content": message})
    setup = await _prepare(turn, additional_instructions)
    model_settings = agent.model_settings
    steps = 0
    while True:
        if steps == agent.max_steps:
            raise MaxStepsExceeded(agent=name, chat_id=chat_id, depth=depth, max_steps=agent.max_steps)
        steps += 1
        if run.streaming:
            streamed = _Streamed()
            async with aclosing(_stream_model(turn, setup, model_settings, streamed)) as raw_events:
                async for event in raw_events:
                    yield event
            output: Sequence[Any] = streamed.output
            usage = streamed.usage
        else:
            output, usage = await _call_model(turn, setup, model_settings)
        run.record(name, usage)
        await turn.thread.extend([item.model_dump(exclude_unset=True) for item in output])
        step = _next_step(turn, setup, output)
        match step:
            case FinalOutput():
                break
            case RunAgain():
                continue
            case RunTools(calls=calls):
                results: list[tuple[int, str, Any]] = []
                async with aclosing(_run_calls(turn, setup, calls, results)) as call_events:
                    async for event in call_events:
                        yield event
                stop = _stop_after_tools(agent, results)
                if stop is not None:
                    step = stop
                    break
                if agent.reset_tool_choice and model_settings.tool_choice is not None:
                    model_settings = dataclasses.replace(model_settings, tool_choice=None)
            case _:
                assert_never(step)
    if agent.output_guardrails or agent.hooks is not None:
        await _before_finishing(turn, step.output)
    turn.output = step.output
    yield AgentFinished(agent=name, caller=caller, depth=depth, chat_id=chat_id, output=step.output)


async def _prepare(turn: _Turn, additional_instructions: str | None) -> _Setup:
    agent, wiring = turn.agent, turn.wiring
    instructions = agent.instructions
    if not isinstance(instructions, str) and instructions is not None:
        instructions = await agent.get_system_prompt(turn.run.context())
    parts = [part for part in (wiring.shared_instructions, instructions, additional_instructions) if part]
    tools: list[Tool] = [tool for tool in agent.tools if getattr(tool, "is_enabled", True) is True]
    if len(tools) != len(agent.tools):  # some are disabled or decided per run
        tools = [tool for tool in agent.tools if await _enabled(tool, turn)]
    if agent.mcp_servers:
        tools = [*await agent.get_mcp_tools(turn.run.context()), *tools]
    function_tools = {tool.name: tool for tool in tools if isinstance(tool, FunctionTool)}
    if wiring.send_tool is not None:
        tools.append(wiring.send_tool)
    return _Setup(
        model=wiring.resolve_model(agent),
        instructions="\n\n".join(parts) if parts else None,
        tools=tools,
        function_tools=function_tools,
        schema=_output_schema(agent),
        can_send=wiring.send_tool is not None,
    )


async def _enabled(tool: Tool, turn: _Turn) -> bool:
    flag = getattr(tool, "is_enabled", True)
    if isinstance(flag, bool):
        return flag
    result = flag(turn.run.context(), turn.agent)
    if not isinstance(result, bool):
        result = await result
    return bool(result)


def _output_schema(agent: Agent) -> AgentOutputSchemaBase | None:
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


async def _call_model(turn: _Turn, setup: _Setup, settings: Any) -> tuple[Sequence[Any], Any]:
    agent = turn.agent
    history: Any = _history(turn)  # plain dicts in Responses-API input shape
    if agent.hooks is not None:
        await agent.hooks.on_llm_start(turn.run.context(), agent, setup.instructions, history)
    response = await setup.model.get_response(
        setup.instructions, history, settings, setup.tools, setup.schema, [], ModelTracing.DISABLED,
        previous_response_id=None, conversation_id=None, prompt=await _prompt(turn),
    )
    if agent.hooks is not None:
        await agent.hooks.on_llm_end(turn.run.context(), agent, response)
    return response.output, response.usage


def _history(turn: _Turn) -> list[dict[str, Any]]:
    items = turn.thread.items
    window = turn.agent.history_window
    if window is None or len(items) <= window + 1:
        return items  # the live list: no copy per model call
    return window_of(items, window)


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


class _Streamed:
    __slots__ = ("output", "usage")

    def __init__(self) -> None:
        self.output: list[Any] = []
        self.usage: Any = None


async def _stream_model(turn: _Turn, setup: _Setup, settings: Any, streamed: _Streamed) -> AsyncGenerator[Event, None]:
    agent, run = turn.agent, turn.run
    name, caller, depth, chat_id = agent.name, turn.caller, turn.depth, run.chat_id
    history: Any = _history(turn)
    if agent.hooks is not None:
        await agent.hooks.on_llm_start(run.context(), agent, setup.instructions, history)
    events: AsyncIterator[Any] = setup.model.stream_response(
        setup.instructions, history, settings, setup.tools, setup.schema, [], ModelTracing.DISABLED,
        previous_response_id=None, conversation_id=None, prompt=await _prompt(turn),
    )
    completed = None
    try:
        async for event in events:
            yield RawModelEvent(agent=name, caller=caller, depth=depth, chat_id=chat_id, data=event)
            kind = event.type
            if kind == "response.output_text.delta":
                yield TextDelta(agent=name, caller=caller, depth=depth, chat_id=chat_id, delta=event.delta)
            elif kind == "response.completed" or kind == "response.incomplete":
                completed = event.response
            elif kind == "response.failed" or kind == "error":
                raise ModelError(_stream_failure(event), agent=name, chat_id=chat_id, depth=depth)
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    if completed is None:
        raise ModelError(
            "The model's stream ended before response.completed.", agent=name, chat_id=chat_id, depth=depth
        )
    streamed.output, streamed.usage = completed.output, completed.usage
    if agent.hooks is not None:
        usage = Usage(requests=1) if completed.usage is None else Usage(
            requests=1, input_tokens=completed.usage.input_tokens, output_tokens=completed.usage.output_tokens,
            total_tokens=completed.usage.total_tokens,
        )
        await agent.hooks.on_llm_end(run.context(), agent, ModelResponse(
            output=list(completed.output), usage=usage, response_id=completed.id,
        ))


def _stream_failure(event: Any) -> str:
    error = getattr(getattr(event, "response", None), "error", None) or event
    message = getattr(error, "message", None) or str(error)
    return f"The model failed while streaming: {message}"


async def _prompt(turn: _Turn) -> Any:
    if turn.agent.prompt is None:
        return None
    return await turn.agent.get_prompt(turn.run.context())


def _next_step(turn: _Turn, setup: _Setup, output: Sequence[Any]) -> NextStep:
    calls: list[ToolCallStep] = []
    texts: list[str] = []
    for item in output:
        kind = item.type
        if kind == "function_call":
            tool = setup.function_tools.get(item.name)
            if item.name == SEND_MESSAGE and setup.can_send:
                calls.append(SendMessage(item))
            elif tool is not None:
                calls.append(FunctionToolCall(item, tool))
            else:
                calls.append(UnknownTool(item))
        elif kind == "message":
            for part in item.content:
                texts.append(part.text if part.type == "output_text" else getattr(part, "refusal", ""))
    if calls:
        return RunTools(calls)
    if setup.schema is None:
        return FinalOutput("".join(texts))
    if not texts:
        return RunAgain()
    try:
        return FinalOutput(setup.schema.validate_json("".join(texts)))
    except ModelBehaviorError as error:
        raise OutputValidationError(
            f"Agent {turn.agent.name!r} answered with output that does not match its output_type: {error}",
            agent=turn.agent.name, chat_id=turn.run.chat_id, depth=turn.depth,
        ) from error


def _stop_after_tools(agent: Agent, results: list[tuple[int, str, Any]]) -> FinalOutput | None:
    """`tool_use_behavior` as in the SDK: a function tool's output may end the turn."""
    behavior = agent.tool_use_behavior
    if behavior == "run_llm_again" or not results:
        return None
    results = sorted(results, key=lambda result: result[0])  # call order, whatever finished first
    if behavior == "stop_on_first_tool":
        return FinalOutput(results[0][2])
    if isinstance(behavior, dict):
        stop_at: StopAtTools = behavior
        for _, tool_name, output in results:
            if tool_name in stop_at["stop_at_tool_names"]:
                return FinalOutput(output)
        return None
    raise ConfigError(
        f"Agent {agent.name!r}: a function as tool_use_behavior is not supported by agency_swarm's loop; "
        "use 'run_llm_again', 'stop_on_first_tool' or StopAtTools."
    )


# -- tools and sends ------------------------------------------------------------------------------


_PENDING: Any = object()


async def _run_calls(
    turn: _Turn, setup: _Setup, calls: list[ToolCallStep], results: list[tuple[int, str, Any]]
) -> AsyncGenerator[Event, None]:
    """Run one response's calls (concurrently when several); store each output as soon as all before it exist."""
    outputs: list[Any] = [_PENDING] * len(calls)
    writer = _OutputWriter(turn.thread, calls, outputs)
    try:
        if len(calls) == 1:
            async with aclosing(_run_call(turn, setup, calls[0], outputs, 0, results)) as events:
                async for event in events:
                    yield event
        else:
            jobs = [
                writer.after(_run_call(turn, setup, step, outputs, index, results))
                for index, step in enumerate(calls)
            ]
            async with aclosing(_merge(jobs)) as merged:
                async for event in merged:
                    yield event
    finally:
        await writer.settle(final=True)  # also on failure or cancellation: every function_call gets its output
    name, caller, depth, chat_id = turn.agent.name, turn.caller, turn.depth, turn.run.chat_id
    for step, item in zip(calls, writer.items, strict=True):
        text = item["output"] if isinstance(item["output"], str) else json.dumps(item["output"])
        yield ToolOutput(
            agent=name, caller=caller, depth=depth, chat_id=chat_id, tool=step.call.name,
            call_id=step.call.call_id, output=text,
        )


class _OutputWriter:
    """Appends a response's tool outputs in call order, each as early as that order allows.

    A crash while a slow call runs then loses only the outputs that did not exist yet.
    """

    def __init__(self, thread: ConversationThread, calls: list[ToolCallStep], outputs: list[Any]) -> None:
        self.thread, self.calls, self.outputs = thread, calls, outputs
        self.items: list[dict[str, Any]] = []
        self._lock = asyncio.Lock()

    async def after(self, job: AsyncGenerator[Event, None]) -> AsyncGenerator[Event, None]:
        async with aclosing(job) as events:
            async for event in events:
                yield event
        await self.settle()

    async def settle(self, *, final: bool = False) -> None:
        async with self._lock:
            ready: list[dict[str, Any]] = []
            while len(self.items) < len(self.calls):
                index = len(self.items)
                call, out = self.calls[index].call, self.outputs[index]
                if out is _PENDING and not final:
                    break
                item = interrupted_output(call.call_id) if out is _PENDING else output_item(call, out)
                self.items.append(item)
                ready.append(item)
            await self.thread.extend(ready)


async def _run_call(
    turn: _Turn,
    setup: _Setup,
    step: ToolCallStep,
    outputs: list[Any],
    index: int,
    results: list[tuple[int, str, Any]],
) -> AsyncGenerator[Event, None]:
    agent, run = turn.agent, turn.run
    call = step.call
    match step:
        case SendMessage():
            async with aclosing(_send(turn, call, outputs, index)) as events:
                async for event in events:
                    yield event
        case FunctionToolCall(tool=tool):
            yield ToolCalled(
                agent=agent.name, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, tool=call.name,
                call_id=call.call_id, arguments=call.arguments,
            )
            outputs[index] = await run_function_tool(agent=agent, tool=tool, call=call, run_context=run.context())
            results.append((index, call.name, outputs[index]))
        case UnknownTool():
            yield ToolCalled(
                agent=agent.name, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, tool=call.name,
                call_id=call.call_id, arguments=call.arguments,
            )
            available = [*setup.function_tools, *([SEND_MESSAGE] if setup.can_send else [])]
            outputs[index] = unknown_tool_output(call.name, available)
        case _:
            assert_never(step)


async def _send(
    turn: _Turn, call: ResponseFunctionToolCall, outputs: list[Any], index: int
) -> AsyncGenerator[Event, None]:
    """Check chart, depth and re-entry; then run the recipient one level deeper. Refusals become outputs."""
    wiring, run, sender = turn.wiring, turn.run, turn.agent.name
    request = parse_send_request(call.arguments, list(wiring.recipients))
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
    sub_wiring = wiring.recipient_wirings.get(recipient.name) or recipient.wiring
    sub = _Turn(agent=recipient, wiring=sub_wiring, thread=thread, caller=sender, depth=depth, run=run)
    run.open_pairs.add(pair)  # before the first yield: a concurrent send on the same pair must see it
    try:
        yield MessageSent(
            agent=sender, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, recipient=recipient.name,
            message=request.message, call_id=call.call_id,
        )
        async with aclosing(agent_turn(sub, request.message, request.additional_instructions)) as events:
            async for event in events:
                yield event
        outputs[index] = _as_text(sub.output)
    except Exception as error:  # the recipient failed: its caller reads why and carries on
        outputs[index] = failure_output(recipient.name, error)
    finally:
        run.open_pairs.discard(pair)


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


async def _merge(jobs: list[AsyncGenerator[Event, None]]) -> AsyncGenerator[Event, None]:
    """Run several calls at once; their events reach the one ordered channel as they happen."""
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def drain(job: AsyncGenerator[Event, None]) -> None:
        try:
            async with aclosing(job) as events:
                async for event in events:
                    queue.put_nowait(event)
        except Exception as error:
            queue.put_nowait(_Failed(error))
        finally:
            queue.put_nowait(_DONE)

    tasks = [asyncio.create_task(drain(job)) for job in jobs]
    remaining = len(tasks)
    try:
        while remaining:
            item = await queue.get()
            if item is _DONE:
                remaining -= 1
            elif isinstance(item, _Failed):
                raise item.error
            else:
                yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# -- guardrails -----------------------------------------------------------------------------------


async def _check_input_guardrails(turn: _Turn, message: str) -> None:
    context: RunContextWrapper[Any] = turn.run.context()
    for guardrail in turn.agent.input_guardrails:
        result = await guardrail.run(turn.agent, message, context)
        if result.output.tripwire_triggered:
            raise InputGuardrailTripwireTriggered(result)


async def _before_finishing(turn: _Turn, output: Any) -> None:
    """Output guardrails, then the on_end hook."""
    agent, context = turn.agent, turn.run.context()
    for guardrail in agent.output_guardrails:
        result = await guardrail.run(context, agent, output)
        if result.output.tripwire_triggered:
            raise OutputGuardrailTripwireTriggered(result)
    if agent.hooks is not None:
        await agent.hooks.on_end(context, agent, output)
