"""The parity suite itself: enough distinct scenarios, unique ids, and a list of differences that is all in use."""

from __future__ import annotations

from parity import (
    test_agent_options,
    test_approvals,
    test_attachments,
    test_function_tools,
    test_fuzz_regressions,
    test_nested_pauses,
    test_output_items,
    test_tool_choice,
    test_tool_guardrails,
    test_tool_identity,
    test_usage,
)
from parity.differences import DIFFERENCES
from parity.harness import Scenario

ALL: list[Scenario] = [
    *test_function_tools.SCENARIOS,
    *test_agent_options.SCENARIOS,
    *test_output_items.SCENARIOS,
    *test_tool_guardrails.SCENARIOS,
    *test_tool_identity.SCENARIOS,
    *test_tool_choice.SCENARIOS,
    *test_usage.SCENARIOS,
    *test_approvals.SCENARIOS,
    *test_nested_pauses.SCENARIOS,
    *test_fuzz_regressions.SCENARIOS,
    *test_attachments.SCENARIOS,
]

BUILT_IN = {"event_names", "per_pair_threads", "blocked_tool_response_kept"}
"""Entries the harness applies to every streamed comparison, that only document multi-agent behaviour, or that a
test of its own checks (test_blocked_output.py compares two turns, which a Scenario does not)."""


def test_at_least_forty_distinct_scenarios() -> None:
    ids = [scenario.id for scenario in ALL]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert len(ids) >= 40, len(ids)


def test_every_difference_is_documented_and_used() -> None:
    for difference in DIFFERENCES.values():
        assert difference.reason.strip(), difference.name
        assert (difference.normalize is None) == (difference.name in BUILT_IN), difference.name
    used = {name for scenario in ALL for name in scenario.differences}
    assert used <= set(DIFFERENCES), used - set(DIFFERENCES)
    assert set(DIFFERENCES) - BUILT_IN <= used, f"listed but never exercised: {set(DIFFERENCES) - BUILT_IN - used}"


def test_runner_config_only_where_a_difference_says_so() -> None:
    """A Runner-only RunConfig would make Runner behave unlike its defaults: only a documented difference may."""
    for scenario in ALL:
        if scenario.runner_config is not None:
            assert "unknown_tool_answered" in scenario.differences, scenario.id
