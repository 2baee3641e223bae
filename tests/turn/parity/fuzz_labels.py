"""Which reviewed differences (differences.py) a generated `Case` can show, each derived from what the case
contains: a normalizer only acts where both sides show exactly the documented behaviour, so naming one where it
does not apply hides nothing."""

from __future__ import annotations

from parity.generators import Call, Case, Hosted, Item, Text

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
    return (*found, *_ordering_differences(case))


def _ordering_differences(case: Case) -> list[str]:
    """The documented differences of order: of concurrent calls' hooks, of stream events, of stored outputs."""
    found: list[str] = []
    spec = case.agent
    if case.decisions and spec.output_guardrail == "trip" and spec.tool_use_behavior != "run_llm_again":
        found.append("resumed_stream_reports_blocked_output")  # first: the others then compare every run
    parallel = any(sum(isinstance(item, Call) for item in response) > 1 for response in case.responses)
    guarded = any(tool.input_guard or tool.output_guard for tool in spec.tools)
    if parallel and (spec.hooks or guarded):  # what the hooks and the fuzz's tool guardrails log, in order
        found.append("concurrent_calls_interleaved")
    if any(_hosted_after_call(response) for response in case.responses):
        found.append("hosted_items_announced_first")
    if any(_unknown_and_known(case, response) for response in case.responses):
        found.append("unknown_tool_answer_order")
    if parallel and any(tool.can_end_turn for tool in spec.tools):
        found.append("sibling_finished_first")
    return found


def _unknown_and_known(case: Case, response: tuple[Item, ...]) -> bool:
    """A response that calls a missing tool and one the agent has: Runner answers the missing one last."""
    unknown = [case.is_unknown(item) for item in response if isinstance(item, Call)]
    return any(unknown) and not all(unknown)


def _hosted_after_call(response: tuple[Item, ...]) -> bool:
    kinds = [type(item) for item in response]
    return Call in kinds and Hosted in kinds[kinds.index(Call):]
