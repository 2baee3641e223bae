"""From a generated `Case` (generators.py) to a harness `Scenario`: tools, agent options, script, and the
documented differences that the case's own content makes applicable."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
from typing import Any

import agents
from agents import (
    CodeInterpreterTool,
    FileSearchTool,
    FunctionTool,
    FunctionToolResult,
    GuardrailFunctionOutput,
    HostedMCPTool,
    MCPToolApprovalFunctionResult,
    MCPToolApprovalRequest,
    ModelSettings,
    RunConfig,
    RunContextWrapper,
    StopAtTools,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    ToolsToFinalOutputResult,
    WebSearchTool,
    function_tool,
    input_guardrail,
    output_guardrail,
    tool_input_guardrail,
    tool_namespace,
    tool_output_guardrail,
)
from openai.types.responses import ResponseOutputMessage, ResponseOutputRefusal
from pydantic import BaseModel

import agency_swarm
from parity.differences import SDK_TOOL_ERROR
from parity.fuzz_labels import documented_differences
from parity.generators import Call, Case, Decision, Hosted, Item, Refusal, Text, ToolSpec
from parity.harness import Decision as HarnessDecision
from parity.harness import (
    Kit,
    Outcome,
    RecordingHooks,
    RecordingModel,
    Scenario,
    call,
    code_interpreter,
    file_search,
    mcp_approval_request,
    mcp_call,
    mcp_list_tools,
    msg,
    reasoning,
    run_runner,
    web_search,
)
from parity.test_agent_options import Ticket, Weather


class Stock(BaseModel):
    name: str
    qty: int




# -- arguments ---------------------------------------------------------------------------------------------------

_VALID: dict[str, Any] = {
    "none": lambda n: {},
    "int": lambda n: {"n": n},
    "text_and_int": lambda n: {"text": f"t{n}", "n": n},
    "model": lambda n: {"item": {"name": f"i{n}", "qty": n}},
}


def render_arguments(params: str, shape: str, n: int) -> str:
    """The raw `arguments` string of a call: valid, coercible ("5" or 5.0 for an int), missing a field, with an
    extra one, of a wrong type, not JSON, empty, or JSON that is not an object."""
    valid = _VALID[params](n)
    if shape == "valid":
        return json.dumps(valid)
    if shape == "coercible":
        coerced = {"int": {"n": str(n)}, "text_and_int": {"text": f"t{n}", "n": float(n)},
                   "model": {"item": {"name": f"i{n}", "qty": str(n)}}}
        return json.dumps(coerced.get(params, valid))
    if shape == "missing":
        return json.dumps({key: value for key, value in list(valid.items())[1:]} if params != "model"
                          else {"item": {"name": "x"}})
    if shape == "extra":
        return json.dumps({**valid, "extra": n})
    if shape == "wrong_type":
        return json.dumps({key: [value] for key, value in valid.items()} or {"n": "abc"})
    if shape == "not_json":
        return '{"n": ' + str(n)
    if shape == "empty":
        return ""
    return ("[1]", "5", "null", '"text"', "[1]")[n]  # not_object


# -- tools -------------------------------------------------------------------------------------------------------


def _explain_failure(ctx: RunContextWrapper[Any], error: Exception) -> str:
    return f"custom failure: {type(error).__name__}"


def _is_enabled(option: str) -> Any:
    if option == "true":
        return True
    if option == "false":
        return False
    if option == "async_true":
        async def enabled_async(ctx: RunContextWrapper[Any], agent: Any) -> bool:
            return True

        return enabled_async
    return lambda ctx, agent: option == "callable_true"


def _needs_approval(option: str) -> Any:
    """Approval unless the arguments are exactly `{..., "n": 1}`; the policies read what the model wrote."""

    def policy(ctx: RunContextWrapper[Any], params: Any, call_id: str) -> bool:
        return not (isinstance(params, dict) and params.get("n") == 1)

    async def policy_async(ctx: RunContextWrapper[Any], params: Any, call_id: str) -> bool:
        return policy(ctx, params, call_id)

    def policy_raises(ctx: RunContextWrapper[Any], params: Any, call_id: str) -> bool:
        raise RuntimeError("approval policy broke")

    options = {"never": False, "always": True, "policy_sync": policy, "policy_async": policy_async,
               "policy_raises": policy_raises}
    return options[option]


def _tool_guards(spec: ToolSpec, kit: Kit) -> dict[str, Any]:
    guards: dict[str, Any] = {}
    if spec.input_guard is not None:
        verdict_in = spec.input_guard

        @tool_input_guardrail(name=f"{spec.name}_in")
        def guard_in(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
            kit.hook_calls.append(f"{spec.name}_in saw {data.context.tool_arguments!r}")
            return _verdict(verdict_in, f"{spec.name}: input blocked")

        guards["tool_input_guardrails"] = [guard_in]
    if spec.output_guard is not None:
        verdict_out = spec.output_guard

        @tool_output_guardrail(name=f"{spec.name}_out")
        async def guard_out(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
            kit.hook_calls.append(f"{spec.name}_out saw {_seen_output(data.output)}")
            return _verdict(verdict_out, f"{spec.name}: output withheld")

        guards["tool_output_guardrails"] = [guard_out]
    return guards


_ERROR_TEXTS = re.compile(r"Error: (tool '[\w.]+' failed|invalid arguments for tool '[\w.]+'): .*", re.S)


def _seen_output(output: Any) -> str:
    """What a tool output guardrail saw; an error text in either side's documented wording (tool_error_text,
    invalid_arguments_text) as one placeholder, the wording being compared where the model reads it."""
    if output == SDK_TOOL_ERROR or (isinstance(output, str) and _ERROR_TEXTS.fullmatch(output)):
        return "<tool error text>"
    return repr(output)


def _verdict(verdict: str, message: str) -> ToolGuardrailFunctionOutput:
    if verdict == "reject":
        return ToolGuardrailFunctionOutput.reject_content(message, output_info="rejected")
    if verdict == "raise":
        return ToolGuardrailFunctionOutput.raise_exception(output_info="raised")
    return ToolGuardrailFunctionOutput.allow(output_info="fine")


def _function(spec: ToolSpec, kit: Kit, all_async: bool) -> Any:
    """The Python function behind the tool, with the signature `spec.params` names. When a tool of the agent can
    end the turn, every tool is async: a sync tool runs in a thread on both sides, and whether a sibling call of
    the same response ran before the turn ended would be up to the scheduler."""
    function = _plain_function(spec, kit)
    if not all_async or inspect.iscoroutinefunction(function):
        return function

    @functools.wraps(function)
    async def run_async(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return run_async


def _plain_function(spec: ToolSpec, kit: Kit) -> Any:

    def body(arguments: dict[str, Any]) -> str:
        kit.ran(spec.name, arguments)
        if spec.raises:
            raise ValueError(f"{spec.name} broke on {arguments}")
        return f"{spec.name} ok {arguments}"

    if spec.params == "none":
        def run_none() -> str:
            return body({})

        return run_none
    if spec.params == "int":
        async def run_int(n: int) -> str:
            return body({"n": n})

        return run_int
    if spec.params == "text_and_int":
        def run_text(text: str, n: int = 1) -> str:
            return body({"text": text, "n": n})

        return run_text

    def run_model(item: Stock) -> str:
        return body({"item": item.model_dump()})

    return run_model


def _failure_option(spec: ToolSpec) -> dict[str, Any]:
    if spec.failure == "custom":
        return {"failure_error_function": _explain_failure}
    if spec.failure == "none":
        return {"failure_error_function": None}
    return {}


def build_tool(spec: ToolSpec, kit: Kit, all_async: bool = False) -> list[FunctionTool]:
    if spec.sub_agent:
        return [_sub_agent_tool(spec, kit)]
    tool = function_tool(
        _function(spec, kit, all_async), name_override=spec.name, description_override=f"Tool {spec.name}.",
        is_enabled=_is_enabled(spec.enabled), needs_approval=_needs_approval(spec.approval),
        **_failure_option(spec), **_tool_guards(spec, kit),
    )
    if spec.namespace is None:
        return [tool]
    return tool_namespace(name=spec.namespace, description=f"The {spec.namespace} tools.", tools=[tool])


def _sub_agent_tool(spec: ToolSpec, kit: Kit) -> FunctionTool:
    """An `as_tool` sub-agent of the side's own Agent class, answering every run with one message."""
    agent_class = agents.Agent if kit.side == "runner" else agency_swarm.Agent
    helper = agent_class(name="Helper", instructions="Help.",
                         model=RecordingModel([[msg("The helper's answer.", "msg_helper")]] * 12))
    options = _failure_option(spec)
    return helper.as_tool(spec.name, "Ask the helper.", is_enabled=_is_enabled(spec.enabled),
                          needs_approval=_needs_approval(spec.approval), **options)


def _hosted_tools(case: Case, kit: Kit) -> list[Any]:
    kinds = {item.kind for response in case.responses for item in response if isinstance(item, Hosted)}
    tools: list[Any] = []
    if "web_search" in kinds:
        tools.append(WebSearchTool())
    if "file_search" in kinds:
        tools.append(FileSearchTool(vector_store_ids=["vs_1"]))
    if "code_interpreter" in kinds:
        tools.append(CodeInterpreterTool(tool_config={"type": "code_interpreter", "container": {"type": "auto"}}))
    if kinds & {"mcp_list_and_call", "mcp_approval"}:
        tools.append(_mcp_tool(kit, asks="mcp_approval" in kinds))
    return tools


def _mcp_tool(kit: Kit, *, asks: bool) -> HostedMCPTool:
    config: Any = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/sse",
                   "require_approval": "always" if asks else "never"}
    if not asks:
        return HostedMCPTool(tool_config=config)

    def on_approval_request(request: MCPToolApprovalRequest) -> MCPToolApprovalFunctionResult:
        kit.ran("on_approval_request", {"name": request.data.name})
        return {"approve": True}

    return HostedMCPTool(tool_config=config, on_approval_request=on_approval_request)


# -- the agent ---------------------------------------------------------------------------------------------------

OUTPUT_TYPES: dict[str, Any] = {"none": None, "str": str, "model": Weather, "dataclass": Ticket}


def _tool_use_behavior(option: str, kit: Kit) -> Any:
    if option == "stop_at_first_tool_name":
        return StopAtTools(stop_at_tool_names=["tool_0"])
    if option != "custom":
        return option

    def decide(ctx: RunContextWrapper[Any], results: list[FunctionToolResult]) -> ToolsToFinalOutputResult:
        kit.hook_calls.append(f"tool_use_behavior saw {[(r.tool.name, _seen_output(r.output)) for r in results]}")
        last = [r for r in results if r.tool.name == "tool_1"]
        if not last:
            return ToolsToFinalOutputResult(is_final_output=False)
        return ToolsToFinalOutputResult(is_final_output=True, final_output=f"custom: {_seen_output(last[0].output)}")

    return decide


def _agent_guardrails(case: Case, kit: Kit) -> dict[str, Any]:
    spec, options = case.agent, {}
    if spec.input_guardrail is not None:
        trips = spec.input_guardrail == "trip"

        @input_guardrail(name="check_input", run_in_parallel=spec.input_guardrail == "pass_parallel")
        def check_input(ctx: RunContextWrapper[Any], agent: Any, user_input: Any) -> GuardrailFunctionOutput:
            kit.hook_calls.append(f"input guardrail saw {user_input!r}")
            return GuardrailFunctionOutput(output_info="input checked", tripwire_triggered=trips)

        options["input_guardrails"] = [check_input]
    if spec.output_guardrail is not None:
        trips_out = spec.output_guardrail == "trip"

        @output_guardrail(name="check_output")
        async def check_output(ctx: RunContextWrapper[Any], agent: Any, output: Any) -> GuardrailFunctionOutput:
            kit.hook_calls.append(f"output guardrail saw {_seen_output(output)}")
            return GuardrailFunctionOutput(output_info="output checked", tripwire_triggered=trips_out)

        options["output_guardrails"] = [check_output]
    return options


def build_agent(case: Case, kit: Kit) -> dict[str, Any]:
    spec = case.agent
    all_async = any(tool.can_end_turn for tool in spec.tools)
    tools = [tool for tool_spec in spec.tools for tool in build_tool(tool_spec, kit, all_async)]
    settings = ModelSettings(tool_choice=spec.tool_choice, temperature=spec.temperature,
                             parallel_tool_calls=spec.parallel_tool_calls)
    options: dict[str, Any] = {
        "instructions": "You are a fuzzed agent.",
        "tools": tools + _hosted_tools(case, kit),
        "output_type": OUTPUT_TYPES[spec.output_type],
        "tool_use_behavior": _tool_use_behavior(spec.tool_use_behavior, kit),
        "model_settings": settings,
        **_agent_guardrails(case, kit),
    }
    if spec.reset_tool_choice is not None:
        options["reset_tool_choice"] = spec.reset_tool_choice
    if spec.hooks:
        options["hooks"] = RecordingHooks(kit)
    return options


# -- the script --------------------------------------------------------------------------------------------------


def _render(case: Case, item: Item, where: str) -> list[Any]:
    if isinstance(item, Call):
        tool = case.tool_for(item)
        params = "int" if tool is None else ("text_and_int" if tool.sub_agent else tool.params)
        arguments = render_arguments(params, item.shape, item.n)
        if tool is not None and tool.sub_agent and item.shape == "valid":
            arguments = json.dumps({"input": f"question {item.n}"})
        made = call(item.tool, arguments, f"call_{where}")
        return [made.model_copy(update={"namespace": item.namespace})] if item.namespace else [made]
    if isinstance(item, Text):
        return [msg(item.text, f"msg_{where}")]
    if isinstance(item, Refusal):
        return [ResponseOutputMessage(type="message", id=f"msg_{where}", role="assistant", status="completed",
                                      content=[ResponseOutputRefusal(type="refusal", refusal=item.text)])]
    return _hosted(item.kind, where)


def _hosted(kind: str, where: str) -> list[Any]:
    makers: dict[str, Any] = {
        "web_search": lambda: [web_search(f"ws_{where}")],
        "file_search": lambda: [file_search(f"fs_{where}")],
        "code_interpreter": lambda: [code_interpreter(f"ci_{where}")],
        "mcp_list_and_call": lambda: [mcp_list_tools(f"mcpl_{where}"), mcp_call(f"mcp_{where}")],
        "mcp_approval": lambda: [mcp_approval_request(f"mcpr_{where}")],
        "reasoning": lambda: [reasoning(f"rs_{where}")],
    }
    return list(makers[kind]())


def final_text(case: Case) -> str:
    output_type = case.agent.output_type
    if not case.final.valid and output_type in ("model", "dataclass"):
        return "not the JSON you asked for"
    if output_type == "model":
        return json.dumps({"city": "Oslo", "celsius": 3})
    if output_type == "dataclass":
        return json.dumps({"response": {"title": "Fix it", "priority": 2}})
    return "All done."


def build_script(case: Case) -> list[list[Any]]:
    script = [
        [rendered for index, item in enumerate(response) for rendered in _render(case, item, f"{turn}_{index}")]
        for turn, response in enumerate(case.responses)
    ]
    return [*script, [msg(final_text(case), "msg_final")]]


USAGE_FIELDS = ("requests", "input_tokens", "output_tokens", "total_tokens")


def usage_check(runner: Outcome, ours: Outcome) -> None:
    """Usage over the whole run, resumes included: requests and tokens (cache_write_tokens and
    request_usage_entries are not compared here). Runner's last result counts every run of a paused-and-resumed
    turn, and so does ours."""
    if runner.result is not None and ours.result is not None:
        theirs = [getattr(runner.result.context_wrapper.usage, name) for name in USAGE_FIELDS]
        last = [getattr(ours.result.usage, name) for name in USAGE_FIELDS]
        assert theirs == last, f"usage {USAGE_FIELDS}: Runner {theirs}, ours {last}"


async def decided_scenario(case: Case, id: str = "fuzz") -> Scenario:
    """The case's scenario with one harness `Decision` per pause. Which calls wait at a pause is Runner's to say
    (the oracle): each pause is found by running Runner's side with the decisions so far; ours must then pause on
    the same calls, or the comparison reports it."""
    scenario = build_scenario(case, id)
    decided: list[HarnessDecision] = []
    for decision in case.decisions:
        outcome = await run_runner(dataclasses.replace(scenario, decisions=tuple(decided)), stream=False)
        waiting = [item["call_id"] for item in outcome.interruptions if item["run"] == len(decided)]
        if outcome.error is not None or not waiting:
            break
        decided.append(_harness_decision(decision, waiting))
    resumed = ("resume_announces_calls",) if decided else ()  # first: the event normalizers see its events
    return dataclasses.replace(scenario, decisions=tuple(decided), differences=resumed + scenario.differences)


def _harness_decision(decision: Decision, waiting: list[str]) -> HarnessDecision:
    verdicts = {call_id: decision.verdicts[index % len(decision.verdicts)] for index, call_id in enumerate(waiting)}
    return HarnessDecision(
        approve=[call_id for call_id, verdict in verdicts.items() if verdict == "approve"],
        reject={call_id: "Not today." if verdict == "reject_with_message" else None
                for call_id, verdict in verdicts.items() if verdict != "approve"},
        context=(lambda: {"user": "bob"}) if decision.new_context else None,
    )


def build_scenario(case: Case, id: str = "fuzz") -> Scenario:
    differences = documented_differences(case)
    runner_config = None
    if "unknown_tool_answered" in differences:
        def runner_config() -> RunConfig:
            return RunConfig(tool_not_found_behavior="return_error_to_model")

    return Scenario(
        id, script=lambda: build_script(case), agent=lambda kit: build_agent(case, kit),
        context=lambda: {"user": "ann"}, max_turns=case.max_turns, differences=differences,
        runner_config=runner_config, check=usage_check,
    )
