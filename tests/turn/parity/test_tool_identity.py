"""Parity of tool identity: a call names its tool by namespace and name, and only that tool runs (with its own
approval setting, guardrails and parameter schema); a call that names no tool of the agent runs none."""

from __future__ import annotations

from typing import Any

import pytest
from agents import (
    RunConfig,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    UserError,
    function_tool,
    tool_input_guardrail,
    tool_namespace,
)

from parity.harness import Kit, Outcome, Scenario, call, msg, run_and_compare


def _lookup(kit: Kit, label: str, **options: Any) -> Any:
    @function_tool(name_override="lookup", **options)
    def lookup(q: str) -> str:
        """Look a record up."""
        kit.ran(f"{label}.lookup", {"q": q})
        if q == "boom":
            raise ValueError(f"{label} is down")
        return f"{label} record for {q}"

    return lookup


def _count_lookup(kit: Kit, label: str) -> Any:
    @function_tool(name_override="lookup")
    def lookup(n: int) -> str:
        """Look a record up by number."""
        kit.ran(f"{label}.lookup", {"n": n})
        return f"{label} record {n}"

    return lookup


def _namespaced(crm: Any, billing: Any) -> list[Any]:
    return [
        *tool_namespace(name="crm", description="Customer records.", tools=[crm]),
        *tool_namespace(name="billing", description="Invoices.", tools=[billing]),
    ]


def two_namespaces(kit: Kit) -> dict[str, Any]:
    return {"tools": _namespaced(_lookup(kit, "crm"), _lookup(kit, "billing"))}


def two_namespaces_and_bare(kit: Kit) -> dict[str, Any]:
    return {"tools": [*two_namespaces(kit)["tools"], _lookup(kit, "bare")]}


def crm_needs_approval(kit: Kit) -> dict[str, Any]:
    return {"tools": _namespaced(_lookup(kit, "crm", needs_approval=True), _lookup(kit, "billing"))}


def _refuse_all(kit: Kit) -> Any:
    @tool_input_guardrail(name="crm_guard")
    def guard(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        kit.hook_calls.append(f"crm_guard saw {data.context.tool_arguments} for {data.context.tool_name}")
        return ToolGuardrailFunctionOutput.reject_content("crm lookups are not allowed")

    return guard


def crm_guarded(kit: Kit) -> dict[str, Any]:
    crm = _lookup(kit, "crm", tool_input_guardrails=[_refuse_all(kit)])
    return {"tools": _namespaced(crm, _lookup(kit, "billing"))}


def different_parameters(kit: Kit) -> dict[str, Any]:
    return {"tools": _namespaced(_lookup(kit, "crm"), _count_lookup(kit, "billing"))}


def same_namespace_twice(kit: Kit) -> dict[str, Any]:
    return {"tools": [
        *tool_namespace(name="crm", description="Customer records.", tools=[_lookup(kit, "crm")]),
        *tool_namespace(name="crm", description="Customer records.", tools=[_lookup(kit, "crm2")]),
    ]}


def namespaced_beside_dotted(kit: Kit) -> dict[str, Any]:
    dotted = _lookup(kit, "dotted")
    dotted.name = "crm.lookup"
    return {"tools": [*tool_namespace(name="crm", description="Customer records.", tools=[_lookup(kit, "crm")]),
                      dotted]}


def top_level_twice(kit: Kit) -> dict[str, Any]:
    """`Runner` shows the model only the last of two top-level tools with one name (and warns)."""
    return {"tools": [_lookup(kit, "first"), _lookup(kit, "second")]}


def deferred_tool(kit: Kit) -> dict[str, Any]:
    return {"tools": [_lookup(kit, "deferred", defer_loading=True)]}


def _answer_config() -> RunConfig:
    return RunConfig(tool_not_found_behavior="return_error_to_model")


def _then(*first: Any) -> Any:
    return lambda: [list(first), [msg("done", "msg_2")]]


def _explains_crm_parameter(runner: Outcome, ours: Outcome) -> None:
    """The model reads what is wrong with its arguments for crm.lookup (`q`), not for billing.lookup (`n`)."""
    outputs = [item.get("output") for item in ours.items or [] if item.get("type") == "function_call_output"]
    assert len(outputs) == 1, outputs
    assert "q: Field required" in str(outputs[0]), outputs


def _ambiguous(runner: Outcome, ours: Outcome) -> None:
    for side in (runner, ours):
        assert isinstance(side.error, UserError), side.error
        assert "crm.lookup" in (side.error_message or ""), side.error_message
        assert side.tool_runs == [], side.tool_runs


_CRM = {"namespace": "crm"}
SCENARIOS = [
    Scenario("namespaced_call_first_namespace", _then(call("lookup", {"q": "x"}, **_CRM)), two_namespaces),
    Scenario("namespaced_call_last_namespace", _then(call("lookup", {"q": "x"}, namespace="billing")),
             two_namespaces),
    Scenario("namespaced_calls_in_parallel", _then(
        call("lookup", {"q": "a"}, "call_1", namespace="billing"), call("lookup", {"q": "b"}, "call_2", **_CRM),
    ), two_namespaces),
    Scenario("namespaced_call_unknown_namespace", _then(call("lookup", {"q": "x"}, namespace="hr")), two_namespaces,
             differences=("unknown_tool_answered",), runner_config=_answer_config),
    Scenario("namespaced_call_unknown_namespace_runner_default", _then(call("lookup", {"q": "x"}, namespace="hr")),
             two_namespaces, differences=("unknown_tool_raises",)),
    Scenario("namespaced_tool_called_without_namespace", _then(call("lookup", {"q": "x"})), two_namespaces,
             differences=("unknown_tool_answered",), runner_config=_answer_config),
    Scenario("bare_call_beside_namespaced_tools", _then(call("lookup", {"q": "x"})), two_namespaces_and_bare),
    Scenario("namespaced_call_beside_bare_tool", _then(call("lookup", {"q": "x"}, **_CRM)), two_namespaces_and_bare),
    Scenario("namespaced_approval_of_the_named_tool", _then(call("lookup", {"q": "x"}, **_CRM)), crm_needs_approval),
    Scenario("namespaced_no_approval_for_the_other_tool", _then(call("lookup", {"q": "x"}, namespace="billing")),
             crm_needs_approval),
    Scenario("namespaced_guardrail_of_the_named_tool", _then(call("lookup", {"q": "x"}, **_CRM)), crm_guarded),
    Scenario("namespaced_no_guardrail_for_the_other_tool", _then(call("lookup", {"q": "x"}, namespace="billing")),
             crm_guarded),
    Scenario("namespaced_tool_error", _then(call("lookup", {"q": "boom"}, **_CRM)), two_namespaces,
             differences=("tool_error_text",)),
    Scenario("namespaced_invalid_arguments_explained", _then(call("lookup", {"n": 1}, **_CRM)), different_parameters,
             differences=("invalid_arguments_text",), check=_explains_crm_parameter),
    Scenario("namespaced_same_name_twice_refused", _then(call("lookup", {"q": "x"}, **_CRM)), same_namespace_twice,
             differences=("ambiguous_tools_message",), check=_ambiguous),
    Scenario("namespaced_beside_dotted_top_level_refused", _then(call("lookup", {"q": "x"}, **_CRM)),
             namespaced_beside_dotted, differences=("ambiguous_tools_message",), check=_ambiguous),
    Scenario("top_level_same_name_twice_last_wins", _then(call("lookup", {"q": "x"})), top_level_twice),
    Scenario("deferred_tool_called_by_its_own_namespace", _then(call("lookup", {"q": "x"}, namespace="lookup")),
             deferred_tool),
    Scenario("deferred_tool_called_without_namespace", _then(call("lookup", {"q": "x"})), deferred_tool,
             differences=("unknown_tool_answered",), runner_config=_answer_config),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
async def test_scenario(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)
