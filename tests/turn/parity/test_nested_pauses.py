"""Parity of pauses inside an agent tool (`agent.as_tool(...)`): the outer run pauses, and resuming continues the
nested run, then the outer one."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, function_tool

from parity.harness import Decision, Kit, Outcome, RecordingModel, Scenario, call, msg, run_and_compare


def _delete_file(kit: Kit) -> Any:
    @function_tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        kit.ran("delete_file", {"path": path})
        return f"deleted {path}"

    return delete_file


def _add(kit: Kit) -> Any:
    @function_tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        kit.ran("add", {"a": a, "b": b})
        return a + b

    return add


_NESTED_MODELS: dict[int, RecordingModel] = {}
"""The sub-agent's model of each side, by the id of that side's `tool_runs` list (an Outcome holds the same list)."""


def _cleaner(kit: Kit, script: list[list[Any]], *, needs_approval: bool = False) -> Any:
    """The sub-agent, exposed as the tool `clean_up`; its model plays `script`."""
    model = _NESTED_MODELS[id(kit.tool_runs)] = RecordingModel(script)
    cleaner = Agent(name="Cleaner", tools=[_delete_file(kit)], model=model)
    return cleaner.as_tool("clean_up", "Clean up files.", needs_approval=needs_approval)


def _nested_inputs(outcome: Outcome) -> list[Any]:
    """What the sub-agent's model got on each call (a rejection's message included)."""
    return [recorded.input for recorded in _NESTED_MODELS.pop(id(outcome.tool_runs)).calls]


def one_deletion(kit: Kit) -> dict[str, Any]:
    script = [[call("delete_file", {"path": "a.txt"}, "call_in")], [msg("Removed a.txt.", "msg_in")]]
    return {"tools": [_cleaner(kit, script)]}


def two_deletions(kit: Kit) -> dict[str, Any]:
    script = [
        [call("delete_file", {"path": "a.txt"}, "call_a"), call("delete_file", {"path": "b.txt"}, "call_b")],
        [msg("Handled both.", "msg_in")],
    ]
    return {"tools": [_cleaner(kit, script)]}


def guarded_agent_tool(kit: Kit) -> dict[str, Any]:
    script = [[call("delete_file", {"path": "a.txt"}, "call_in")], [msg("Removed a.txt.", "msg_in")]]
    return {"tools": [_cleaner(kit, script, needs_approval=True)]}


def with_a_sibling(kit: Kit) -> dict[str, Any]:
    script = [[call("delete_file", {"path": "a.txt"}, "call_in")], [msg("Removed a.txt.", "msg_in")]]
    return {"tools": [_cleaner(kit, script), _add(kit)]}


def _outer(*first: Any) -> Any:
    """The entry agent's script: `first` (by default one call of the agent tool), then its answer."""
    first_response = list(first) or [call("clean_up", {"input": "remove a.txt"}, "call_out")]
    return lambda: [first_response, [msg("All clean.", "msg_2")]]


def _ran(*expected: tuple[str, Any]) -> Any:
    def check(runner: Outcome, ours: Outcome) -> None:
        assert runner.tool_runs == ours.tool_runs == list(expected)
        assert _nested_inputs(runner) == _nested_inputs(ours)
        assert ours.interruptions, "the outer run paused at least once"
        assert {item["tool"] for item in ours.interruptions} <= {"delete_file", "clean_up"}

    return check


RESUMED = ("resume_announces_calls",)
"""Every scenario resumes: our resumed stream announces the waiting agent tool's call again."""

SCENARIOS = [
    Scenario(
        "nested_approval_approved", _outer(), one_deletion, differences=RESUMED,
        decisions=[Decision(approve=["call_in"])], check=_ran(("delete_file", {"path": "a.txt"})),
    ),
    Scenario(
        "nested_approval_rejected", _outer(), one_deletion, differences=RESUMED,
        decisions=[Decision(reject=["call_in"])], check=_ran(),
    ),
    Scenario(
        "nested_approval_rejected_with_a_message", _outer(), one_deletion, differences=RESUMED,
        decisions=[Decision(reject={"call_in": "Not that one."})], check=_ran(),
    ),
    Scenario(
        "nested_approval_undecided_pauses_again", _outer(), one_deletion, differences=RESUMED,
        decisions=[Decision(), Decision(approve=["call_in"])], check=_ran(("delete_file", {"path": "a.txt"})),
    ),
    Scenario(
        "nested_approvals_decided_one_at_a_time", _outer(), two_deletions, differences=RESUMED,
        decisions=[Decision(approve=["call_b"]), Decision(reject=["call_a"])],
        check=_ran(("delete_file", {"path": "b.txt"})),
    ),
    Scenario(
        "nested_approval_after_the_agent_tool_own_approval", _outer(), guarded_agent_tool, differences=RESUMED,
        decisions=[Decision(approve=["call_out"]), Decision(approve=["call_in"])],
        check=_ran(("delete_file", {"path": "a.txt"})),
    ),
    Scenario(
        "nested_approval_beside_a_plain_call",
        _outer(call("clean_up", {"input": "remove a.txt"}, "call_out"), call("add", {"a": 1, "b": 2}, "call_add")),
        with_a_sibling, differences=RESUMED, decisions=[Decision(approve=["call_in"])],
        check=_ran(("add", {"a": 1, "b": 2}), ("delete_file", {"path": "a.txt"})),
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.id)
async def test_parity(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)
