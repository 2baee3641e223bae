"""Parity of function-tool approvals: what pauses, what a `needs_approval` policy sees, what a rejection tells the
model, and how a resume goes on (context, max_turns)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from agents import FunctionToolResult, RunContextWrapper, ToolsToFinalOutputResult, function_tool
from agents.tool_context import ToolContext

from parity.harness import Decision, Kit, Outcome, RecordingHooks, Scenario, call, msg, run_and_compare


def delete_tool(kit: Kit, **agent: Any) -> dict[str, Any]:
    @function_tool(needs_approval=True)
    def delete_branch(name: str) -> str:
        """Delete a git branch."""
        kit.ran("delete_branch", {"name": name})
        return f"deleted {name}"

    return {"tools": [delete_branch], **agent}


def _policy(kit: Kit, limit: int = 100) -> Any:
    """Approval above `limit`; every call of the policy is logged with what it was handed."""

    async def above_limit(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        kit.hook_calls.append(f"policy({params!r}, {call_id})")
        return bool(params.get("amount", 0) > limit)

    return above_limit


def transfer_tool(kit: Kit) -> dict[str, Any]:
    @function_tool(needs_approval=_policy(kit))
    def transfer(amount: int) -> str:
        """Transfer money."""
        kit.ran("transfer", {"amount": amount})
        return f"sent {amount}"

    @function_tool(needs_approval=_policy(kit))
    def ping() -> str:
        """Check the bank is up."""
        kit.ran("ping", {})
        return "pong"

    return {"tools": [transfer, ping]}


def raising_policy(kit: Kit) -> dict[str, Any]:
    async def broken(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        raise ValueError("the policy service is down")

    @function_tool(needs_approval=broken)
    def note(text: str) -> str:
        """Write a note."""
        kit.ran("note", {"text": text})
        return "noted"

    return {"tools": [note]}


def malformed_setting(kit: Kit) -> dict[str, Any]:
    @function_tool
    def note(text: str) -> str:
        """Write a note."""
        kit.ran("note", {"text": text})
        return "noted"

    note.needs_approval = "sometimes"  # type: ignore[assignment]  # neither a bool nor a function
    return {"tools": [note]}


def context_reader(kit: Kit) -> dict[str, Any]:
    @function_tool(needs_approval=True)
    def whoami(ctx: ToolContext[Any], label: str) -> str:
        """Say who the user is."""
        kit.ran("whoami", {"label": label, "context": ctx.context})
        return f"{label}: {ctx.context['user']}"

    def instructions(ctx: RunContextWrapper[Any], agent: Any) -> str:
        return f"The user is {ctx.context['user']}."

    return {"tools": [whoami], "instructions": instructions, "hooks": RecordingHooks(kit)}


def delete_and_add(kit: Kit) -> dict[str, Any]:
    @function_tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        kit.ran("add", {"a": a, "b": b})
        return a + b

    agent = delete_tool(kit)
    return {"tools": [*agent["tools"], add]}


def _first_output(ctx: RunContextWrapper[Any], results: list[FunctionToolResult]) -> ToolsToFinalOutputResult:
    return ToolsToFinalOutputResult(is_final_output=True, final_output=f"first: {results[0].output}")


def _stopping(kit: Kit) -> dict[str, Any]:
    return delete_tool(kit, tool_use_behavior="stop_on_first_tool", hooks=RecordingHooks(kit))


def _delete_then_answer() -> list[list[Any]]:
    return [[call("delete_branch", {"name": "old"})], [msg("Done.", "msg_2")]]


def _transfer(arguments: dict[str, Any] | str, tool: str = "transfer") -> Any:
    return lambda: [[call(tool, arguments)], [msg("Done.", "msg_2")]]


def _two_pauses() -> list[list[Any]]:
    return [[call("delete_branch", {"name": "a"}, "call_1")], [call("delete_branch", {"name": "b"}, "call_2")],
            [msg("Done.", "msg_2")]]


def _three_deletes() -> list[list[Any]]:
    return [
        [call("delete_branch", {"name": "a"}, "call_1"), call("delete_branch", {"name": "b"}, "call_2"),
         call("delete_branch", {"name": "c"}, "call_3")],
        [msg("Done.", "msg_2")],
    ]


def _did_not_ask_policy(runner: Outcome, ours: Outcome) -> None:
    for outcome in (runner, ours):
        asked = [line for line in outcome.hook_calls if line.startswith("policy(")]
        assert not asked, f"{outcome.side}: the policy was asked ({asked}) about arguments it cannot judge"
        assert outcome.results[0].interruptions, f"{outcome.side}: the call must wait for approval"


APPROVE = [Decision(approve=["call_1"])]
REJECT = [Decision(reject=["call_1"])]

SCENARIOS = [
    # what a decision does
    Scenario("approved_call_runs", _delete_then_answer, delete_tool, decisions=APPROVE),
    Scenario("rejected_call_default_text", _delete_then_answer, delete_tool, decisions=REJECT),
    Scenario("rejected_call_own_message", _delete_then_answer, delete_tool,
             decisions=[Decision(reject={"call_1": "The branch is protected; ask the owner."})]),
    Scenario("rejected_call_message_none", _delete_then_answer, delete_tool,
             decisions=[Decision(reject={"call_1": None})]),
    Scenario("mixed_decisions", _three_deletes, delete_tool,
             decisions=[Decision(approve=["call_2"], reject={"call_1": "No.", "call_3": None})]),
    Scenario("decisions_with_hooks", _three_deletes, lambda kit: delete_tool(kit, hooks=RecordingHooks(kit)),
             decisions=[Decision(approve=["call_1"], reject=["call_2"]), Decision(reject={"call_3": "Later."})]),
    Scenario("rejection_with_stop_on_first_tool", _delete_then_answer, _stopping, decisions=REJECT),
    Scenario("approval_with_stop_on_first_tool", _delete_then_answer, _stopping, decisions=APPROVE),
    Scenario("rejection_with_stop_at_tools", _delete_then_answer,
             lambda kit: delete_tool(kit, tool_use_behavior={"stop_at_tool_names": ["delete_branch"]}),
             decisions=[Decision(reject={"call_1": "Protected."})]),
    Scenario("rejection_with_a_tool_use_function", _delete_then_answer,
             lambda kit: delete_tool(kit, tool_use_behavior=_first_output), decisions=REJECT),
    # what a needs_approval policy is asked, and when it is not
    Scenario("policy_string_for_int", _transfer({"amount": "5000"}), transfer_tool, decisions=APPROVE,
             check=_did_not_ask_policy),
    Scenario("policy_float_for_int", _transfer('{"amount": 5000.0}'), transfer_tool, decisions=APPROVE,
             check=_did_not_ask_policy),
    Scenario("policy_empty_arguments", _transfer("", "ping"), transfer_tool, decisions=APPROVE,
             check=_did_not_ask_policy),
    Scenario("policy_non_json_arguments", _transfer("amount=5000"), transfer_tool, decisions=REJECT,
             check=_did_not_ask_policy),
    Scenario("policy_array_arguments", _transfer("[5000]"), transfer_tool, decisions=REJECT,
             check=_did_not_ask_policy),
    Scenario("policy_nan_arguments", _transfer('{"amount": NaN}'), transfer_tool, decisions=REJECT,
             check=_did_not_ask_policy),
    Scenario("policy_extra_argument", _transfer({"amount": 5, "to": "x"}), transfer_tool, decisions=REJECT),
    Scenario("policy_allows_small_amount", _transfer({"amount": 50}), transfer_tool),
    Scenario("policy_asks_for_large_amount", _transfer({"amount": 5000}), transfer_tool, decisions=APPROVE),
    Scenario("policy_raises", lambda: [[call("note", {"text": "hi"})], [msg("Noted.", "msg_2")]], raising_policy),
    Scenario("needs_approval_neither_bool_nor_function",
             lambda: [[call("note", {"text": "hi"})], [msg("Noted.", "msg_2")]], malformed_setting),
    Scenario(
        "one_call_runs_the_other_waits_then_is_approved",
        lambda: [[call("transfer", {"amount": 50}, "call_1"), call("transfer", {"amount": 700}, "call_2")],
                 [msg("Done.", "msg_2")]],
        transfer_tool, decisions=[Decision(approve=["call_2"])],
    ),
    Scenario(
        "undecided_call_waits_without_asking_again",
        lambda: [[call("transfer", {"amount": 500}, "call_1"), call("transfer", {"amount": 700}, "call_2")],
                 [msg("Done.", "msg_2")]],
        transfer_tool, decisions=[Decision(approve=["call_1"]), Decision(reject=["call_2"])],
    ),
    Scenario("a_second_pause_after_a_resume", _two_pauses, delete_tool,
             decisions=[Decision(approve=["call_1"]), Decision(reject={"call_2": "Not b."})]),
    # what a resume keeps from the paused run
    Scenario("context_kept_on_resume", lambda: [[call("whoami", {"label": "me"})], [msg("Done.", "msg_2")]],
             context_reader, context=lambda: {"user": "ann"}, decisions=APPROVE),
    Scenario("context_replaced_on_resume", lambda: [[call("whoami", {"label": "me"})], [msg("Done.", "msg_2")]],
             context_reader, context=lambda: {"user": "ann"},
             decisions=[Decision(approve=["call_1"], context=lambda: {"user": "bob"})]),
    Scenario(
        "max_turns_counts_calls_before_pause",
        lambda: [[call("delete_branch", {"name": "old"})], [call("add", {"a": 1, "b": 2}, "call_2")],
                 [call("add", {"a": 3, "b": 4}, "call_3")], [msg("Done.", "msg_2")]],
        delete_and_add, max_turns=2, decisions=APPROVE, differences=("max_turns",),
    ),
    Scenario("max_turns_across_two_pauses", _two_pauses, delete_tool, max_turns=2,
             decisions=[Decision(approve=["call_1"]), Decision(approve=["call_2"])], differences=("max_turns",)),
]

SCENARIOS = [  # every resumed stream announces the calls it resumes with (see differences.py)
    dataclasses.replace(scenario, differences=(*scenario.differences, "resume_announces_calls"))
    if scenario.decisions else scenario
    for scenario in SCENARIOS
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.id)
async def test_parity(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)
