"""Which differences a generated `Case` can show, derived from what it contains: the reviewed ones
(differences.py) its scenario declares, and the open ones (fixed on other branches, or found by the fuzzer and
reported) under which a differing case is counted instead of failed."""

from __future__ import annotations

from collections.abc import Sequence

from parity.generators import Call, Case, Hosted, Item, Text
from parity.harness import Decision

INVALID_SHAPES = frozenset({"missing", "wrong_type", "not_json", "not_object", "empty", "extra"})
"""Shapes that may fail validation (whether they do depends on the tool's parameters)."""


def documented_differences(case: Case) -> tuple[str, ...]:
    """The reviewed differences (differences.py) this case can show, each because of something it contains."""
    found: list[str] = []
    spec = case.agent
    known_calls = [(item, case.tool_for(item)) for item in case.calls() if not case.is_unknown(item)]
    if any(item.shape in INVALID_SHAPES and tool is not None and tool.failure == "default"
           for item, tool in known_calls):
        found.append("invalid_arguments_text")
    if any(tool is not None and tool.raises and tool.failure == "default" for _, tool in known_calls):
        found.append("tool_error_text")
    if any(case.is_unknown(item) for item in case.calls()):
        found.append("unknown_tool_answered")  # Runner's default (unknown_tool_raises) ends the run: nothing to compare
    if "trip" in (spec.input_guardrail, spec.output_guardrail):
        found.append("guardrail_tripwire_message")
    if any("raise" in (tool.input_guard, tool.output_guard) for tool in spec.tools):
        found.append("tool_guardrail_tripwire_message")
    if spec.input_guardrail is not None:
        found.append("input_guardrail_sees_text")
    if case.max_turns < len(case.responses) + 1:
        found.append("max_turns")
    if spec.output_type in ("model", "dataclass") and (
        not case.final.valid or any(isinstance(item, Text) for response in case.responses for item in response)
    ):
        found.append("output_validation_error")
    return tuple(found)


def known_open(case: Case, decisions: Sequence[Decision] = ()) -> tuple[str, ...]:
    """Open differences other branches are fixing (listed in docs/design/parity.md's fuzzer section): a case that
    shows one is counted, not failed; every other difference fails. `decisions`: the scenario's, as decided."""
    found: list[str] = []
    spec = case.agent
    if decisions and spec.output_guardrail == "trip" and spec.tool_use_behavior != "run_llm_again":
        found.append("resumed_stream_tool_output_before_tripped_guardrail")
    found += _found_by_fuzzer(case)
    return tuple(found)


def _found_by_fuzzer(case: Case) -> list[str]:
    """Open differences the fuzzer found outside the list above (reported, each with its shrunk case in
    test_fuzz_regressions.OPEN)."""
    found: list[str] = []
    spec = case.agent
    if any(_hosted_after_call(response) for response in case.responses):
        found.append("hosted_item_event_before_tool_called")
    if any(_unknown_and_known(case, response) for response in case.responses):
        found.append("unknown_tool_output_order")
    parallel = [response for response in case.responses if sum(isinstance(item, Call) for item in response) > 1]
    guarded = any(tool.input_guard or tool.output_guard for tool in spec.tools)
    if parallel and (spec.hooks or guarded):  # what the hooks and the fuzz's tool guardrails log, in order
        found.append("parallel_calls_not_interleaved")
    return found


def _unknown_and_known(case: Case, response: tuple[Item, ...]) -> bool:
    """A response that calls a missing tool and one the agent has: Runner answers the missing one last."""
    unknown = [case.is_unknown(item) for item in response if isinstance(item, Call)]
    return any(unknown) and not all(unknown)


def _hosted_after_call(response: tuple[Item, ...]) -> bool:
    kinds = [type(item) for item in response]
    return Call in kinds and Hosted in kinds[kinds.index(Call):]
