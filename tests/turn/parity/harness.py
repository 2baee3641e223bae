"""Differential parity harness: one scenario through `agents.Runner` and through `agency_swarm.Agency`.

A `Scenario` builds everything fresh for each side from the same factories: the script of model responses (a
list of responses, each a list of Responses-API output items), the agent's keyword arguments, the run context.
`RecordingModel` plays the script in `get_response` and `stream_response` alike and records a deep copy of every
argument at call time (plus the live input object, to check later that nobody mutated what the model got).

`run_runner` and `run_ours` produce an `Outcome` each; `compare` applies the documented differences
(differences.py) and then asserts that everything else is equal, reporting field by field.

Pauses: a scenario whose run pauses for approvals carries one `Decision` per pause in `Scenario.decisions`, in
order. After each paused run (one with interruptions) the next decision is applied: Runner's side continues with
`result.to_state()`, `state.approve(item)` / `state.reject(item, rejection_message=...)` and `Runner.run(agent,
state)` (streamed: `Runner.run_streamed`); ours with `agency.resume(approve=..., reject=...)` (streamed:
`resume_stream`). `Decision.reject` is a list of call ids (the default rejection text) or a mapping {call id:
message or None}, exactly as ours takes it; `Decision.context` makes a new context to resume with (None: the
paused run's context is kept, Runner's through its state, ours by not passing `context=`). The runs stop at the
first one that does not pause or fails, or when the decisions run out. Everything compared (model calls, tool
runs, hooks, items, final output, events, interruptions) is over the whole run, resumes included: `items` is the
input and every item the runs added, `final_output` the last run's, `interruptions` every run's, each with the
`run` it came from (0: the first run, 1: the first resume, ...); an error in resume N has the phase `resume N`.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import pprint
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import agents
import pytest
from agents import (
    AgentHooks,
    AgentOutputSchemaBase,
    FunctionTool,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    RunConfig,
    RunContextWrapper,
    Runner,
    Tool,
    Usage,
)
from agents.items import ToolApprovalItem
from agents.models.interface import ModelTracing
from agents.stream_events import AgentUpdatedStreamEvent, RawResponsesStreamEvent, RunItemStreamEvent
from openai.types.responses import (
    Response,
    ResponseApplyPatchToolCall,
    ResponseCodeInterpreterToolCall,
    ResponseCompletedEvent,
    ResponseComputerToolCall,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFileSearchToolCall,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionShellToolCall,
    ResponseFunctionShellToolCallOutput,
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseUsage,
)
from openai.types.responses.response_output_item import (
    ImageGenerationCall,
    LocalShellCall,
    McpApprovalRequest,
    McpCall,
    McpListTools,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

import agency_swarm

AGENT_NAME = "Assistant"
INPUT_TOKENS, OUTPUT_TOKENS = 10, 5

# -- output items the script is made of -------------------------------------------------------------------------


def msg(text: str, id: str = "msg_1") -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message", id=id, role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])],
    )


def call(
    name: str, arguments: dict[str, Any] | str | None = None, call_id: str = "call_1", namespace: str | None = None,
) -> ResponseFunctionToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    fields: dict[str, Any] = {"namespace": namespace} if namespace is not None else {}
    return ResponseFunctionToolCall(
        type="function_call", id=f"fc_{call_id}", call_id=call_id, name=name, arguments=raw, status="completed",
        **fields,
    )


def reasoning(id: str = "rs_1", summary: str = "thinking it over", encrypted: str | None = "enc-abc") -> Any:
    fields: dict[str, Any] = {"type": "reasoning", "id": id, "summary": [{"type": "summary_text", "text": summary}]}
    if encrypted is not None:
        fields["encrypted_content"] = encrypted
    return ResponseReasoningItem.model_validate(fields)


def web_search(id: str = "ws_1", query: str = "weather in Paris") -> ResponseFunctionWebSearch:
    return ResponseFunctionWebSearch.model_validate(
        {"type": "web_search_call", "id": id, "status": "completed", "action": {"type": "search", "query": query}}
    )


def file_search(id: str = "fs_1", query: str = "refund policy") -> ResponseFileSearchToolCall:
    return ResponseFileSearchToolCall.model_validate(
        {"type": "file_search_call", "id": id, "status": "completed", "queries": [query], "results": None}
    )


def code_interpreter(id: str = "ci_1", code: str = "print(6 * 7)") -> ResponseCodeInterpreterToolCall:
    return ResponseCodeInterpreterToolCall.model_validate({
        "type": "code_interpreter_call", "id": id, "status": "completed", "code": code, "container_id": "cntr_1",
        "outputs": [{"type": "logs", "logs": "42\n"}],
    })


def image_generation(id: str = "ig_1") -> ImageGenerationCall:
    return ImageGenerationCall.model_validate(
        {"type": "image_generation_call", "id": id, "status": "completed", "result": "aGVsbG8="}
    )


def mcp_list_tools(id: str = "mcpl_1", server_label: str = "docs") -> McpListTools:
    return McpListTools.model_validate({
        "type": "mcp_list_tools", "id": id, "server_label": server_label,
        "tools": [{"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
    })


def mcp_call(id: str = "mcp_1", server_label: str = "docs", name: str = "lookup", output: str = "found it") -> McpCall:
    return McpCall.model_validate({
        "type": "mcp_call", "id": id, "server_label": server_label, "name": name, "arguments": '{"q": "x"}',
        "output": output, "status": "completed",
    })


def mcp_approval_request(id: str = "mcpr_1", server_label: str = "docs", name: str = "lookup") -> McpApprovalRequest:
    return McpApprovalRequest.model_validate({
        "type": "mcp_approval_request", "id": id, "server_label": server_label, "name": name,
        "arguments": '{"q": "x"}',
    })


def computer_call(id: str = "cu_1", call_id: str = "call_cu_1") -> ResponseComputerToolCall:
    return ResponseComputerToolCall.model_validate({
        "type": "computer_call", "id": id, "call_id": call_id, "status": "completed", "pending_safety_checks": [],
        "action": {"type": "click", "button": "left", "x": 10, "y": 20},
    })


def local_shell_call(id: str = "ls_1", call_id: str = "call_ls_1") -> LocalShellCall:
    return LocalShellCall.model_validate({
        "type": "local_shell_call", "id": id, "call_id": call_id, "status": "completed",
        "action": {"type": "exec", "command": ["echo", "hi"], "env": {}},
    })


def shell_call(id: str = "sh_1", call_id: str = "call_sh_1") -> ResponseFunctionShellToolCall:
    return ResponseFunctionShellToolCall.model_validate({
        "type": "shell_call", "id": id, "call_id": call_id, "status": "completed",
        "action": {"commands": ["echo hi"], "timeout_ms": 1000, "max_output_length": 1000},
    })


def shell_call_output(id: str = "sho_1", call_id: str = "call_sh_1") -> ResponseFunctionShellToolCallOutput:
    return ResponseFunctionShellToolCallOutput.model_validate({
        "type": "shell_call_output", "id": id, "call_id": call_id, "status": "completed",
        "output": [{"stdout": "hi\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    })


def apply_patch_call(id: str = "ap_1", call_id: str = "call_ap_1") -> ResponseApplyPatchToolCall:
    return ResponseApplyPatchToolCall.model_validate({
        "type": "apply_patch_call", "id": id, "call_id": call_id, "status": "completed",
        "operation": {"type": "create_file", "path": "hello.txt", "diff": "+hello\n"},
    })


# -- the recording model --------------------------------------------------------------------------------------


class ScriptExhausted(Exception):
    """The model was called more often than the scenario's script has responses."""


@dataclass
class RecordedCall:
    """One model call: deep copies taken at call time, plus the live input object the model was handed."""

    index: int
    stream: bool
    system_instructions: Any
    input: Any
    live_input: Any
    model_settings: dict[str, Any]
    tools: list[dict[str, Any]]
    output_schema: dict[str, Any] | None
    handoffs: list[str]
    prompt: Any
    previous_response_id: Any
    conversation_id: Any
    live: dict[str, Any] = field(default_factory=dict, repr=False)
    """The objects themselves, as the model got them (settings, tools, schema, prompt)."""
    mutated: bool = False
    """Set after the run: the live input no longer equals the call-time copy (see `mark_mutations`)."""


def tool_summary(tool: Tool) -> dict[str, Any]:
    """What the model learns about a tool: class, name, description, parameters, strictness, hosted config."""
    summary: dict[str, Any] = {"class": type(tool).__name__, "name": getattr(tool, "name", None)}
    if isinstance(tool, FunctionTool):
        summary["description"] = tool.description
        summary["params_json_schema"] = copy.deepcopy(tool.params_json_schema)
        summary["strict_json_schema"] = tool.strict_json_schema
        summary["namespace"] = getattr(tool, "_tool_namespace", None)
        return summary
    if dataclasses.is_dataclass(tool):
        for item in dataclasses.fields(tool):
            value = getattr(tool, item.name)
            summary[item.name] = "<callable>" if callable(value) else _plain(value)
    return summary


def _plain(value: Any) -> Any:
    try:
        return copy.deepcopy(value)
    except Exception:
        return repr(value)


def schema_summary(schema: AgentOutputSchemaBase | None) -> dict[str, Any] | None:
    if schema is None:
        return None
    plain = schema.is_plain_text()
    return {
        "class": type(schema).__name__,
        "name": schema.name(),
        "plain_text": plain,
        "strict": schema.is_strict_json_schema(),
        "json_schema": None if plain else copy.deepcopy(schema.json_schema()),
    }


def settings_summary(settings: ModelSettings) -> dict[str, Any]:
    return copy.deepcopy(settings.to_json_dict())


def scripted_usage(index: int) -> ResponseUsage:
    """Model call `index`'s usage: every count differs from call to call, cached and cache-write tokens included."""
    details = {"cached_tokens": index + 1, "cache_write_tokens": 2 * index + 1}
    return ResponseUsage(
        input_tokens=INPUT_TOKENS + index,
        input_tokens_details=InputTokensDetails.model_validate(
            {name: value for name, value in details.items() if name in InputTokensDetails.model_fields}
        ),
        output_tokens=OUTPUT_TOKENS + index,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=index),
        total_tokens=INPUT_TOKENS + OUTPUT_TOKENS + 2 * index,
    )


def usage_view(usage: Any) -> dict[str, Any]:
    """An `agents.Usage`, field by field, as plain values (token details and each request entry included)."""

    def tokens(part: Any) -> dict[str, Any]:
        return {
            "input_tokens": part.input_tokens, "output_tokens": part.output_tokens, "total_tokens": part.total_tokens,
            "input_tokens_details": part.input_tokens_details.model_dump(),
            "output_tokens_details": part.output_tokens_details.model_dump(),
        }

    return {"requests": usage.requests, **tokens(usage),
            "request_usage_entries": [tokens(entry) for entry in usage.request_usage_entries]}


_WORDS = re.compile(r"\s*\S+\s*|\s+")


def stream_events(response_id: str, output: list[Any], usage: ResponseUsage | None = None) -> list[ResponseStreamEvent]:
    """The Responses-API event sequence of one response: created, per item added (+ deltas) and done, completed."""
    sequence = itertools.count()

    def response(items: list[Any], status: Any, usage: ResponseUsage | None) -> Response:
        return Response(
            id=response_id, created_at=0.0, model="recording-model", object="response", output=items,
            tool_choice="auto", tools=[], parallel_tool_calls=True, status=status, usage=usage,
        )

    events: list[Any] = [ResponseCreatedEvent(
        type="response.created", sequence_number=next(sequence), response=response([], "in_progress", None),
    )]
    for index, item in enumerate(output):
        if isinstance(item, ResponseOutputMessage):
            part = item.content[0]
            text = part.text if isinstance(part, ResponseOutputText) else ""
            events += [
                ResponseOutputItemAddedEvent(
                    type="response.output_item.added", output_index=index, sequence_number=next(sequence),
                    item=item.model_copy(update={"content": [], "status": "in_progress"}),
                ),
                ResponseContentPartAddedEvent(
                    type="response.content_part.added", item_id=item.id, output_index=index, content_index=0,
                    part=ResponseOutputText(type="output_text", text="", annotations=[], logprobs=[]),
                    sequence_number=next(sequence),
                ),
            ]
            for chunk in _WORDS.findall(text):
                events.append(ResponseTextDeltaEvent(
                    type="response.output_text.delta", item_id=item.id, output_index=index, content_index=0,
                    delta=chunk, logprobs=[], sequence_number=next(sequence),
                ))
            events += [
                ResponseTextDoneEvent(
                    type="response.output_text.done", item_id=item.id, output_index=index, content_index=0,
                    text=text, logprobs=[], sequence_number=next(sequence),
                ),
                ResponseContentPartDoneEvent(
                    type="response.content_part.done", item_id=item.id, output_index=index, content_index=0,
                    part=part, sequence_number=next(sequence),
                ),
            ]
        elif isinstance(item, ResponseFunctionToolCall):
            events += [
                ResponseOutputItemAddedEvent(
                    type="response.output_item.added", output_index=index, sequence_number=next(sequence),
                    item=item.model_copy(update={"arguments": "", "status": "in_progress"}),
                ),
                ResponseFunctionCallArgumentsDeltaEvent(
                    type="response.function_call_arguments.delta", item_id=item.id or "", output_index=index,
                    delta=item.arguments, sequence_number=next(sequence),
                ),
                ResponseFunctionCallArgumentsDoneEvent(
                    type="response.function_call_arguments.done", item_id=item.id or "", output_index=index,
                    arguments=item.arguments, sequence_number=next(sequence), name=item.name,
                ),
            ]
        else:
            events.append(ResponseOutputItemAddedEvent(
                type="response.output_item.added", output_index=index, sequence_number=next(sequence),
                item=item.model_copy(),
            ))
        events.append(ResponseOutputItemDoneEvent(
            type="response.output_item.done", output_index=index, sequence_number=next(sequence), item=item,
        ))
    events.append(ResponseCompletedEvent(
        type="response.completed", sequence_number=next(sequence),
        response=response(list(output), "completed", usage or scripted_usage(0)),
    ))
    return events


class RecordingModel(Model):
    """Plays `script` (one list of output items per model call) and records every call's arguments.

    Its `get_response` / `stream_response` have the SDK's exact abstract signature: the keyword-only
    `previous_response_id`, `conversation_id` and `prompt` have no defaults, so a caller that leaves one out fails
    here as it would with any custom `agents.Model` written that way."""

    def __init__(self, script: Sequence[Sequence[Any]], *, label: str = "recording-model") -> None:
        self.script = [list(response) for response in script]
        self.calls: list[RecordedCall] = []
        self.label = label

    def _record(
        self,
        stream: bool,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> list[Any]:
        index = len(self.calls)
        self.calls.append(RecordedCall(
            index=index,
            stream=stream,
            system_instructions=copy.deepcopy(system_instructions),
            input=copy.deepcopy(input),
            live_input=input,
            model_settings=settings_summary(model_settings),
            tools=[tool_summary(tool) for tool in tools],
            output_schema=schema_summary(output_schema),
            handoffs=[getattr(handoff, "tool_name", repr(handoff)) for handoff in handoffs],
            prompt=copy.deepcopy(prompt),
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            live={"model_settings": model_settings, "tools": tools, "output_schema": output_schema,
                  "handoffs": handoffs, "prompt": prompt, "system_instructions": system_instructions},
        ))
        if index >= len(self.script):
            raise ScriptExhausted(f"model call {index + 1}, but the script has {len(self.script)} responses")
        return self.script[index]

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        output = self._record(
            False, system_instructions, input, model_settings, tools, output_schema, handoffs,
            previous_response_id, conversation_id, prompt,
        )
        scripted = scripted_usage(len(self.calls) - 1)
        usage = Usage(requests=1, input_tokens=scripted.input_tokens, output_tokens=scripted.output_tokens,
                      total_tokens=scripted.total_tokens, input_tokens_details=scripted.input_tokens_details,
                      output_tokens_details=scripted.output_tokens_details)
        return ModelResponse(output=list(output), usage=usage, response_id=f"resp_{len(self.calls)}")

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> AsyncIterator[ResponseStreamEvent]:
        output = self._record(
            True, system_instructions, input, model_settings, tools, output_schema, handoffs,
            previous_response_id, conversation_id, prompt,
        )
        for event in stream_events(f"resp_{len(self.calls)}", output, scripted_usage(len(self.calls) - 1)):
            yield event


# -- scenarios ---------------------------------------------------------------------------------------------------


@dataclass
class Kit:
    """Per side: what the scenario's tools, hooks and guardrails record, in the order it happened."""

    side: str
    tool_runs: list[tuple[str, Any]] = field(default_factory=list)
    hook_calls: list[str] = field(default_factory=list)

    def ran(self, tool: str, arguments: Any) -> None:
        self.tool_runs.append((tool, _plain(arguments)))


@dataclass(frozen=True)
class Decision:
    """What the user decides at one pause: call ids to approve and to reject; undecided calls pause again."""

    approve: Sequence[str] = ()
    reject: Sequence[str] | Mapping[str, str | None] = ()
    """Call ids rejected with the default text, or {call id: the rejection message the model reads, or None}."""
    context: Callable[[], Any] | None = None
    """A new context to resume with; None keeps the paused run's context (ours: no `context=` is passed)."""

    def rejections(self) -> dict[str, str | None]:
        reject = self.reject
        return dict(reject) if isinstance(reject, Mapping) else dict.fromkeys(reject)


@dataclass(frozen=True)
class Scenario:
    """One scenario: built twice from the same factories, once per side, so no state leaks between them."""

    id: str
    script: Callable[[], list[list[Any]]]
    """The model's responses, each a list of output items."""
    agent: Callable[[Kit], dict[str, Any]] = lambda kit: {}
    """Keyword arguments for the agent (tools, output_type, tool_use_behavior, hooks, guardrails, ...)."""
    input: str | list[dict[str, Any]] = "Hello"
    """The user's message: text, or input items (each side gets its own deep copy)."""
    context: Callable[[], Any] | None = None
    max_turns: int = 10
    """Runner's `max_turns`; ours gets the same number as the agent's `max_steps`."""
    differences: tuple[str, ...] = ()
    """Names from differences.DIFFERENCES that apply here; everything else must be equal."""
    runner_config: Callable[[], RunConfig] | None = None
    """A RunConfig for Runner's side, only where a documented difference says ours behaves like that config."""
    check: Callable[[Outcome, Outcome], None] | None = None
    """Extra assertions about both outcomes (e.g. that a tool did not run), after the comparison."""
    decisions: Sequence[Decision] = ()
    """One per pause, in order: how each paused run is resumed (see the module docstring)."""


@dataclass
class Outcome:
    """Everything observable about one run, on one side."""

    side: str
    stream: bool
    calls: list[RecordedCall] = field(default_factory=list)
    tool_runs: list[tuple[str, Any]] = field(default_factory=list)
    hook_calls: list[str] = field(default_factory=list)
    items: list[dict[str, Any]] | None = None
    final_output: Any = None
    error: BaseException | None = None
    error_phase: str | None = None
    """"build" (making the agent or agency raised), "run", "resume N" (the Nth resume raised) or "decide" (a
    decision names a call id that is not waiting: the scenario is broken)."""
    error_message: str | None = None
    events: list[str] = field(default_factory=list)
    raw_event_types: list[str] = field(default_factory=list)
    text_deltas: list[str] = field(default_factory=list)
    approval_events: list[str] = field(default_factory=list)
    """Streamed: our approval_requested events' tools; Runner's result.interruptions' tools (it has no event)."""
    interruptions: list[dict[str, Any]] = field(default_factory=list)
    """Every run's interruptions (tool, arguments, call id), each with the `run` it came from (0: the first)."""
    usage: dict[str, Any] | None = None
    """The last run's usage (`usage_view`): Runner's `result.context_wrapper.usage`, our `RunResult.usage`."""
    usage_by_agent: dict[str, Any] | None = None
    """Our `RunResult.usage_by_agent`; Runner's whole usage under the agent's name (it has one agent)."""
    result: Any = None
    """The last run's result."""
    results: list[Any] = field(default_factory=list)
    """Every run's result: the first run's, then each resume's."""
    context: Any = None
    """The context object the run was given (`result.context_wrapper.context` must be this very object)."""
    result_view: dict[str, Any] | None = None
    """What the result offers beyond items and final output (`result_view`), taken right after the run."""
    replaced: bool = False
    """A difference replaced the whole comparison (e.g. ours refuses the set-up): nothing more to compare."""

    @property
    def error_type(self) -> str | None:
        return None if self.error is None else type(self.error).__name__


def _error(outcome: Outcome, error: BaseException, phase: str) -> None:
    outcome.error, outcome.error_phase, outcome.error_message = error, phase, str(error)


# Runner's stream events -> our event types (documented in differences.py as EVENT_NAMES).
RUNNER_EVENT_MAP: dict[str, str | None] = {
    "agent_updated": "agent_started",
    "tool_called": "tool_called",
    "tool_output": "tool_output",
    "message_output_created": None,
    "reasoning_item_created": None,
    "mcp_approval_requested": "hosted_item",
    "mcp_approval_response": "hosted_item",
    "mcp_list_tools": "hosted_item",
    "hosted_tool_called": "hosted_item",  # Runner's tool_called / tool_output for an item the API ran itself
}
_FUNCTION_ITEMS = frozenset({"function_call", "function_call_output"})


def runner_event_name(event: RunItemStreamEvent) -> str:
    """Runner names a hosted call `tool_called` like a function call; ours has `hosted_item` for those."""
    if event.name in ("tool_called", "tool_output"):
        raw = getattr(event.item, "raw_item", None)
        kind = raw.get("type") if isinstance(raw, dict) else getattr(raw, "type", None)
        if kind not in _FUNCTION_ITEMS:
            return "hosted_tool_called"
    return str(event.name)
OUR_EVENT_MAP: dict[str, str | None] = {
    "agent_started": "agent_started",
    "tool_called": "tool_called",
    "message_sent": None,  # multi-agent only; a send is also a tool_called (Runner: every call is)
    "tool_output": "tool_output",
    "approval_requested": None,  # compared on its own: Runner has no event, only result.interruptions
    "agent_finished": "agent_finished",
    "hosted_item": "hosted_item",
}


async def run_runner(scenario: Scenario, stream: bool) -> Outcome:
    kit = Kit("runner")
    model = RecordingModel(scenario.script())
    outcome = Outcome("runner", stream)
    context = scenario.context() if scenario.context is not None else None
    outcome.context = context
    run_config = scenario.runner_config() if scenario.runner_config is not None else None
    try:
        agent = agents.Agent(name=AGENT_NAME, model=model, **scenario.agent(kit))
    except Exception as error:
        _error(outcome, error, "build")
        return _finish(outcome, kit, model)
    state: Any = copy.deepcopy(scenario.input)
    options: dict[str, Any] = {"context": context, "max_turns": scenario.max_turns, "run_config": run_config}
    for run, decision in _runs(scenario):
        if run:  # a resume: the paused run's state with the decision applied (its context and max_turns kept)
            try:
                state = _decided_state(outcome.result, decision)
            except KeyError as missing:
                _error(outcome, missing, "decide")
                break
            options = {"run_config": run_config}
            if decision.context is not None:
                options["context"] = decision.context()
        try:
            result = await _runner_run(agent, state, options, outcome)
        except Exception as error:
            _error(outcome, error, _phase(run))
            break
        _runner_result(outcome, result, run, scenario.input)
        if not result.interruptions:
            break
    return _finish(outcome, kit, model)


def _runs(scenario: Scenario) -> list[tuple[int, Decision]]:
    """(run number, the decision it applies): the first run (no decision), then one resume per decision."""
    return [(0, Decision()), *((number + 1, decision) for number, decision in enumerate(scenario.decisions))]


def _phase(run: int) -> str:
    return "run" if run == 0 else f"resume {run}"


def approval_id(item: ToolApprovalItem) -> str | None:
    """The id a decision names an interruption by: a call's call_id (a hosted MCP request's id)."""
    raw = item.raw_item
    if isinstance(raw, dict):
        found = raw.get("call_id") or raw.get("id")
    else:
        found = getattr(raw, "call_id", None) or getattr(raw, "id", None)
    return None if found is None else str(found)


def _decided_state(result: Any, decision: Decision) -> Any:
    """Runner's RunState after the paused `result`, with `decision` applied (KeyError: a call id is not waiting)."""
    state = result.to_state()
    waiting = {approval_id(item): item for item in result.interruptions}
    for call_id in decision.approve:
        state.approve(waiting[call_id])
    for call_id, message in decision.rejections().items():
        state.reject(waiting[call_id], rejection_message=message)
    return state


async def _runner_run(agent: Any, state: Any, options: dict[str, Any], outcome: Outcome) -> Any:
    if not outcome.stream:
        return await Runner.run(agent, state, **options)
    streamed = Runner.run_streamed(agent, state, **options)
    async for event in streamed.stream_events():
        if isinstance(event, RawResponsesStreamEvent):
            outcome.raw_event_types.append(event.data.type)
            if event.data.type == "response.output_text.delta":
                outcome.text_deltas.append(event.data.delta)
        elif isinstance(event, AgentUpdatedStreamEvent):
            _mapped(outcome, RUNNER_EVENT_MAP, "agent_updated")
        elif isinstance(event, RunItemStreamEvent):
            _mapped(outcome, RUNNER_EVENT_MAP, runner_event_name(event))
    return streamed


def _runner_result(outcome: Outcome, result: Any, run: int, input: str | list[dict[str, Any]]) -> None:
    """One run's result: Runner's resumed result holds every item since the first run's input, so `items` is the
    last run's."""
    outcome.result = result
    outcome.results.append(result)
    outcome.final_output = result.final_output
    outcome.usage = usage_view(result.context_wrapper.usage)
    outcome.usage_by_agent = {AGENT_NAME: outcome.usage} if outcome.usage.get("requests") else {}
    outcome.items = [
        _input_item(item.to_input_item()) for item in result.new_items if not isinstance(item, ToolApprovalItem)
    ]
    outcome.items[:0] = [{"content": input, "role": "user"}] if isinstance(input, str) else copy.deepcopy(input)
    interruptions = [
        {"tool": item.name, "arguments": item.arguments, "call_id": approval_id(item), "run": run}
        for item in result.interruptions
    ]
    outcome.interruptions += interruptions
    if outcome.stream:
        outcome.approval_events += [item["tool"] for item in interruptions]
        if not interruptions:
            outcome.events.append("agent_finished")  # the stream ended with a final output
    outcome.result_view = result_view(outcome)


def _input_item(item: Any) -> dict[str, Any]:
    return copy.deepcopy(dict(item))


def _mapped(outcome: Outcome, table: dict[str, str | None], name: str) -> None:
    if name not in table:
        outcome.events.append(f"<unmapped {name}>")
    elif table[name] is not None:
        outcome.events.append(table[name])  # type: ignore[arg-type]


def _finish(outcome: Outcome, kit: Kit, model: RecordingModel) -> Outcome:
    for recorded in model.calls:
        recorded.mutated = recorded.live_input != recorded.input or (
            settings_summary(recorded.live["model_settings"]) != recorded.model_settings
        )
    outcome.calls = model.calls
    outcome.tool_runs = kit.tool_runs
    outcome.hook_calls = kit.hook_calls
    return outcome


def shortcuts_module() -> Any:
    try:
        from agency_swarm._base import _sdk as _sdk  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _sdk


async def run_ours(scenario: Scenario, stream: bool) -> Outcome:
    kit = Kit("ours")
    model = RecordingModel(scenario.script())
    outcome = Outcome("ours", stream)
    context = scenario.context() if scenario.context is not None else None
    outcome.context = context
    try:
        agent = agency_swarm.Agent(name=AGENT_NAME, model=model, max_steps=scenario.max_turns, **scenario.agent(kit))
        agency = agency_swarm.Agency([agent])
    except Exception as error:
        _error(outcome, error, "build")
        return _finish(outcome, kit, model)
    for run, decision in _runs(scenario):
        try:
            result = await _our_run(agency, scenario, run, decision, context, outcome)
        except Exception as error:
            _error(outcome, error, _phase(run))
            break
        outcome.result = result
        outcome.results.append(result)
        outcome.final_output = result.final_output
        outcome.usage = usage_view(result.usage)
        by_agent = result.usage_by_agent  # Runner has one total: agent tools' agents count in their caller's
        outcome.usage_by_agent = {name: usage_view(usage) for name, usage in by_agent.items()} if set(
            by_agent) <= {AGENT_NAME} else {AGENT_NAME: outcome.usage}
        outcome.items = (outcome.items or []) + copy.deepcopy(list(result.new_items))
        outcome.interruptions += [
            {"tool": item.tool, "arguments": item.arguments, "call_id": item.call_id, "run": run}
            for item in result.interruptions
        ]
        outcome.result_view = result_view(outcome)
        if not result.interruptions:
            break
    return _finish(outcome, kit, model)


async def _our_run(
    agency: agency_swarm.Agency, scenario: Scenario, run: int, decision: Decision, context: Any, outcome: Outcome
) -> Any:
    """The first run (`get_response`), or resume `run` with `decision` (the paused context kept unless it says)."""
    options: dict[str, Any] = {"context": context}
    if run:
        reject = decision.reject if isinstance(decision.reject, Mapping) else list(decision.reject)
        options = {"approve": list(decision.approve), "reject": reject}
        if decision.context is not None:
            options["context"] = decision.context()
    given = copy.deepcopy(scenario.input)
    if not outcome.stream:
        return await (agency.resume(**options) if run else agency.get_response(given, **options))
    response_stream = agency.resume_stream(**options) if run else agency.get_response_stream(given, **options)
    async for event in response_stream:
        if event.type == "approval_requested":
            outcome.approval_events.append(event.tool)
        if event.type == "raw":
            outcome.raw_event_types.append(event.data.type)
        elif event.type == "text_delta":
            outcome.text_deltas.append(event.delta)
        else:
            _mapped(outcome, OUR_EVENT_MAP, event.type)
    return response_stream.result


# -- comparing ---------------------------------------------------------------------------------------------------


def _show(value: Any) -> str:
    return pprint.pformat(value, width=110, sort_dicts=True)


def _diff(where: str, runner: Any, ours: Any) -> str:
    return f"{where}:\n  Runner: {_show(runner)}\n  ours:   {_show(ours)}"


def _compare_values(where: str, runner: Any, ours: Any, problems: list[str]) -> None:
    """Equal, or one line per differing leaf (dicts by key, lists by index)."""
    if runner == ours and type(runner) is type(ours):
        return
    if isinstance(runner, dict) and isinstance(ours, dict):
        for key in sorted(set(runner) | set(ours), key=str):
            if key not in runner:
                problems.append(_diff(f"{where}.{key}", "<absent>", ours[key]))
            elif key not in ours:
                problems.append(_diff(f"{where}.{key}", runner[key], "<absent>"))
            else:
                _compare_values(f"{where}.{key}", runner[key], ours[key], problems)
        return
    if isinstance(runner, list) and isinstance(ours, list):
        if len(runner) != len(ours):
            problems.append(_diff(f"{where} (length {len(runner)} vs {len(ours)})", runner, ours))
            return
        for index, (left, right) in enumerate(zip(runner, ours, strict=True)):
            _compare_values(f"{where}[{index}]", left, right, problems)
        return
    problems.append(_diff(where, runner, ours))


def _value_and_type(value: Any) -> dict[str, Any]:
    dump = getattr(value, "model_dump", None)
    plain = dump(mode="json") if callable(dump) else (
        dataclasses.asdict(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value
    )
    return {"type": f"{type(value).__module__}.{type(value).__qualname__}", "value": plain}


def compare(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Apply the scenario's documented differences, then require everything else to be equal."""
    from parity.differences import apply_differences

    if runner.error_phase == "build":
        pytest.fail(f"scenario {scenario.id!r} is broken: Runner's side could not be built: {runner.error!r}",
                    pytrace=False)
    if runner.error_phase == "decide":
        pytest.fail(f"scenario {scenario.id!r} is broken: a decision names call id {runner.error} that does not "
                    "wait on Runner's side", pytrace=False)
    normal_runner, normal_ours = apply_differences(scenario, runner, ours)
    problems: list[str] = []
    if not (normal_runner.replaced and normal_ours.replaced):
        _compare_outcomes(normal_runner, normal_ours, problems)
    if scenario.check is not None:
        try:
            scenario.check(runner, ours)
        except AssertionError as failed:
            problems.append(f"scenario check {getattr(scenario.check, '__qualname__', '')}: {failed}")
    if problems:
        header = f"scenario {scenario.id!r} ({'streamed' if runner.stream else 'blocking'}): Runner and ours differ"
        pytest.fail(header + "\n" + "\n".join(problems), pytrace=False)


def _compare_outcomes(runner: Outcome, ours: Outcome, problems: list[str]) -> None:
    _compare_values("error", _error_view(runner), _error_view(ours), problems)
    _compare_values("model call count", len(runner.calls), len(ours.calls), problems)
    for index, (left, right) in enumerate(zip(runner.calls, ours.calls, strict=False)):
        for name in ("system_instructions", "input", "model_settings", "tools", "output_schema", "handoffs", "prompt",
                     "previous_response_id", "conversation_id", "stream"):
            _compare_values(f"model call {index + 1}: {name}", getattr(left, name), getattr(right, name), problems)
    _compare_values(
        "model calls whose input list (or settings) changed after the call",
        [c.index + 1 for c in runner.calls if c.mutated], [c.index + 1 for c in ours.calls if c.mutated], problems,
    )
    _compare_values(  # calls of one response run concurrently: which starts first is up to the scheduler
        "tools that ran (name, arguments; sorted)", sorted(runner.tool_runs, key=repr),
        sorted(ours.tool_runs, key=repr), problems,
    )
    _compare_values("hook calls", runner.hook_calls, ours.hook_calls, problems)
    _compare_values("runs (the first, then each resume)", len(runner.results) + (runner.error is not None),
                    len(ours.results) + (ours.error is not None), problems)
    if runner.error is None and ours.error is None:
        _compare_values("items", runner.items, ours.items, problems)
        _compare_values("final output", _value_and_type(runner.final_output), _value_and_type(ours.final_output),
                        problems)
        _compare_values("interruptions", runner.interruptions, ours.interruptions, problems)
        _compare_values("usage", runner.usage, ours.usage, problems)
        _compare_values("usage by agent", runner.usage_by_agent, ours.usage_by_agent, problems)
        _compare_values("result", runner.result_view, ours.result_view, problems)
    if runner.stream:
        _compare_values("events (mapped)", runner.events, ours.events, problems)
        _compare_values("approvals requested while streaming", runner.approval_events, ours.approval_events, problems)
        _compare_values("raw model event types", runner.raw_event_types, ours.raw_event_types, problems)
        _compare_values("text deltas", runner.text_deltas, ours.text_deltas, problems)


def _usage_view(usage: Any) -> dict[str, int]:
    return {name: getattr(usage, name) for name in ("requests", "input_tokens", "output_tokens", "total_tokens")}


def result_view(outcome: Outcome) -> dict[str, Any]:
    """What a result offers beyond items and final output: guardrail results (by guardrail name, output and agent),
    raw responses (output items, usage), `to_input_list()`, `last_agent`, and `context_wrapper` (the very context
    object the run was given, and the run's usage)."""
    result = outcome.result
    try:
        wrapper = result.context_wrapper
    except AttributeError as missing:
        return {"missing": str(missing)}
    return {
        "input_guardrail_results": [
            {"guardrail": item.guardrail.get_name(), "tripwire": item.output.tripwire_triggered,
             "output_info": _plain(item.output.output_info)}
            for item in result.input_guardrail_results
        ],
        "output_guardrail_results": [
            {"guardrail": item.guardrail.get_name(), "tripwire": item.output.tripwire_triggered,
             "output_info": _plain(item.output.output_info), "agent_output": _value_and_type(item.agent_output),
             "agent": item.agent.name}
            for item in result.output_guardrail_results
        ],
        "raw_responses": [
            {"output": [item.model_dump(mode="json") for item in response.output], "usage": _usage_view(response.usage)}
            for response in result.raw_responses
        ],
        # the items themselves are compared (normalized) above: here, that to_input_list() is exactly them
        "to_input_list() is the input and new items": [_input_item(item) for item in result.to_input_list()]
        == outcome.items,
        "last_agent": result.last_agent.name,
        "context_wrapper.context is the run's context": wrapper.context is outcome.context,
        "context_wrapper.usage": _usage_view(wrapper.usage),
        "context_wrapper.turn_input": _plain(getattr(wrapper, "turn_input", None)),
    }


def _error_view(outcome: Outcome) -> dict[str, Any] | None:
    if outcome.error is None:
        return None
    kind = getattr(outcome.error, "kind", None) or outcome.error_type
    return {"type": kind, "phase": outcome.error_phase, "message": outcome.error_message}


def check_inputs_not_mutated(outcome: Outcome) -> list[str]:
    """The input each model call received must still equal its call-time copy after the run."""
    problems = []
    for recorded in outcome.calls:
        if recorded.live_input != recorded.input:
            problems.append(
                f"{outcome.side}: the input list given to model call {recorded.index + 1} was changed after the "
                f"call:\n  at call time ({len(recorded.input)} items): {_show(recorded.input)}\n"
                f"  after the run ({len(recorded.live_input)} items): {_show(recorded.live_input)}"
            )
    return problems


# -- helpers for scenario files -----------------------------------------------------------------------------------


class RecordingHooks(AgentHooks[Any]):
    """AgentHooks that log every call, by name (and tool name), into the side's Kit."""

    def __init__(self, kit: Kit) -> None:
        self.kit = kit

    async def on_start(self, context: RunContextWrapper[Any], agent: Any) -> None:
        self.kit.hook_calls.append(f"on_start(turn_input={_plain(getattr(context, 'turn_input', None))!r})")

    async def on_end(self, context: RunContextWrapper[Any], agent: Any, output: Any) -> None:
        self.kit.hook_calls.append(f"on_end({output!r})")

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Any, tool: Tool) -> None:
        self.kit.hook_calls.append(f"on_tool_start({tool.name})")

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Any, tool: Tool, result: Any) -> None:
        self.kit.hook_calls.append(f"on_tool_end({tool.name}, {result!r})")

    async def on_llm_start(self, context: RunContextWrapper[Any], agent: Any, system_prompt: Any,
                           input_items: Any) -> None:
        self.kit.hook_calls.append(f"on_llm_start({system_prompt!r}, {len(input_items)} items)")

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Any, response: ModelResponse) -> None:
        self.kit.hook_calls.append(f"on_llm_end({[item.type for item in response.output]})")


async def run_and_compare(scenario: Scenario, stream: bool) -> tuple[Outcome, Outcome]:
    """Run the scenario through Runner and through ours (same mode), compare, and return both outcomes."""
    runner = await run_runner(scenario, stream)
    ours = await run_ours(scenario, stream)
    compare(scenario, runner, ours)
    return runner, ours
