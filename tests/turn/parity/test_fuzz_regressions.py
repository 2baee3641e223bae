"""Cases the fuzzer found, shrunk and kept as named scenarios (each built from its generated `Case` literal).

Each is a difference the fuzzer found that is now fixed, or reviewed and documented as intended (differences.py,
applied because the case contains what triggers it): they must stay equal.
"""

from __future__ import annotations

import dataclasses
import gc

import pytest

from parity.fuzz_cases import build_scenario
from parity.generators import AgentSpec, Call, Case, Decision, Final, Hosted, ToolSpec
from parity.harness import Decision as HarnessDecision
from parity.harness import Scenario, run_and_compare


def resumed_scenario(case: Case, id: str, *decisions: HarnessDecision) -> Scenario:
    """A case's scenario with its pauses decided by call id (`decided_scenario` asks Runner; a literal names them)."""
    scenario = build_scenario(case, id)
    return dataclasses.replace(scenario, decisions=decisions,
                               differences=("resume_announces_calls", *scenario.differences))


SCENARIOS: list[Scenario] = [
    # Runner words a tool that raised and arguments that failed alike; ours tells them apart. Both documented
    # differences apply in one run: they must be told apart call by call, not by text.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True),
                               ToolSpec(name="tool_1", params="int"))),
        responses=((Call(tool="tool_0"), Call(tool="tool_1", shape="not_json")),),
    ), "fuzz_tool_error_and_invalid_arguments_in_one_response"),
    # A no-parameter tool given an extra argument runs (and raises): its error is a tool error, not invalid
    # arguments, although the case also has a shape that can fail validation.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True),),
                        tool_use_behavior="stop_on_first_tool"),
        responses=((Call(tool="tool_0", shape="extra"),),),
    ), "fuzz_extra_argument_to_raising_tool_stops_on_first_tool"),
    # on_tool_end gets the same text the model reads: the documented wording differences apply to it too.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="model", raises=True),), hooks=True),
        responses=((Call(tool="tool_0", shape="not_object", n=0),), (Call(tool="tool_0"),)),
    ), "fuzz_on_tool_end_sees_error_texts"),
    # A raising tool's error text that ends the turn (stop_on_first_tool) is what on_end gets, too.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True),),
                        tool_use_behavior="stop_on_first_tool", hooks=True),
        responses=((Call(tool="tool_0"),),),
    ), "fuzz_on_end_sees_error_text_as_final_output"),
    # ... and so is what an output guardrail checked.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True),),
                        tool_use_behavior="stop_on_first_tool", output_guardrail="pass", hooks=True),
        responses=((Call(tool="tool_0", n=0),),),
    ), "fuzz_output_guardrail_checks_error_text_as_final_output"),
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True),),
                        tool_use_behavior="stop_on_first_tool", output_guardrail="trip", hooks=True),
        responses=((Call(tool="tool_0", n=0),),),
    ), "fuzz_on_end_sees_error_text_before_a_tripped_output_guardrail"),
    # A namespaced call with invalid arguments: ours names the tool `'files.tool_1'`.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_1", namespace="files"),), tool_use_behavior="stop_on_first_tool"),
        responses=((Call(tool="tool_1", shape="not_json", n=1, namespace="files"),),),
    ), "fuzz_namespaced_invalid_arguments"),
    # A namespaced call to a disabled tool: Runner's text names it `'files.tool_0'`.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", namespace="files", enabled="false"),)),
        responses=((Call(tool="tool_0", namespace="files"),),),
    ), "fuzz_namespaced_call_to_disabled_tool"),
    # Fixed (found as open differences): each shrunk case now compares equal.
    # An `as_tool` sub-agent's model calls count in the turn's usage, as in Runner's run usage.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="text_and_int", sub_agent=True),)),
        responses=((Call(tool="tool_0"),),),
    ), "fuzz_as_tool_usage_counted"),
    # One tool name in two namespaces: a call naming one namespace runs that namespace's tool.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", namespace="files", raises=True),
                               ToolSpec(name="tool_0", params="none", namespace="notes"))),
        responses=((Call(tool="tool_0", namespace="files"),),),
    ), "fuzz_namespaced_same_name_runs_the_named_namespace"),
    # on_end runs before the output guardrails.
    build_scenario(Case(agent=AgentSpec(output_guardrail="pass", hooks=True), responses=()),
                   "fuzz_on_end_before_output_guardrails"),
    # on_start runs before an input guardrail with run_in_parallel=True.
    build_scenario(Case(agent=AgentSpec(input_guardrail="pass_parallel", hooks=True), responses=()),
                   "fuzz_on_start_before_parallel_input_guardrail"),
    # After a response of MCP approval requests only, tool_choice is kept.
    build_scenario(Case(agent=AgentSpec(tool_choice="required"), responses=((Hosted("mcp_approval"),),)),
                   "fuzz_tool_choice_kept_after_mcp_approval"),
    # A resumed turn's usage counts every run of the turn (the check compares the last result's usage).
    resumed_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", approval="always"),)), responses=((Call(tool="tool_0"),),),
    ), "fuzz_usage_cumulative_after_resume", HarnessDecision(approve=["call_0_0"])),
    # A call naming a namespaced tool without its namespace names no tool: both answer it as unknown (the fuzzer's
    # own lookup, `Case.tool_for`, used to take it for the namespaced tool and expected it to run).
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", namespace="files"),)), responses=((Call(tool="tool_0"),),),
    ), "fuzz_namespaced_tool_called_without_namespace_is_unknown"),
    # Streamed: when one of two calls ends the turn (failure_error_function=None), the sibling that finished gets its
    # tool_output before the error, as under Runner.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0"), ToolSpec(name="tool_1", raises=True, failure="none"))),
        responses=((Call(tool="tool_0"), Call(tool="tool_1")),),
    ), "fuzz_sibling_output_streamed_when_a_call_ends_the_turn"),
    # ... but not an unknown tool's answer: Runner answers it after the tools it runs, and the failure came first.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True, failure="none"),)),
        responses=((Call(tool="ghost"), Call(tool="tool_0", n=0)),),
    ), "fuzz_unknown_tool_answer_not_streamed_when_a_call_ends_the_turn"),
    # ... nor a sibling's approval request: Runner reports interruptions only with a paused result.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", approval="always"),
                               ToolSpec(name="tool_1", params="none", raises=True, failure="none"))),
        responses=((Call(tool="tool_0"), Call(tool="tool_1")),),
    ), "fuzz_approval_request_not_streamed_when_a_sibling_ends_the_turn"),
    # ... but after a resume, as Runner's resumed stream: no sibling's output (here a rejected call's) is reported.
    resumed_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="text_and_int", approval="always", failure="none",
                                        sub_agent=True),), hooks=True),
        responses=((Call(tool="tool_0", shape="coercible", n=0), Call(tool="tool_0", n=0)),),
        decisions=(Decision(verdicts=("approve", "reject")),),
    ), "fuzz_as_tool_sibling_output_not_streamed_when_a_resumed_call_ends_the_turn",
        HarnessDecision(approve=["call_0_0"], reject=["call_0_1"])),
    # Streamed: a failure that ends the turn at once (a needs_approval function that raises; arguments an `as_tool`
    # with failure_error_function=None refuses) still leaves every call of the response announced, as under Runner.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", approval="policy_raises"),)),
        responses=((Call(tool="tool_0"), Call(tool="tool_0")),),
    ), "fuzz_calls_announced_before_approval_policy_error"),
    # A needs_approval function that raises ends the turn while an `as_tool` sibling (no approval) already ran.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True, approval="policy_raises"),
                               ToolSpec(name="tool_1", params="text_and_int", sub_agent=True)), hooks=True),
        responses=((Call(tool="tool_0", n=0), Call(tool="tool_1", shape="coercible", n=0)),), final=Final(valid=False),
    ), "fuzz_as_tool_sibling_finished_first_before_approval_policy_error"),
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="text_and_int", failure="none", sub_agent=True),)),
        responses=((Call(tool="tool_0", shape="coercible", n=0), Call(tool="tool_0", n=0)),),
    ), "fuzz_calls_announced_before_as_tool_arguments_error"),
    # An `as_tool` sub-agent given invalid arguments: both sides answer with the SDK's generic text, and on_tool_end
    # gets it too; the documented wording differences must not rewrite Runner's side alone.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="text_and_int", sub_agent=True),), hooks=True),
        responses=((Call(tool="tool_0", shape="missing", n=0),),),
    ), "fuzz_as_tool_invalid_arguments_seen_by_on_tool_end"),
    # An MCP approval request its server's callback decides, beside a call that waits for approval: the callback is
    # asked when the turn goes on (with the context it goes on with), and its answer follows the call's output.
    resumed_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", approval="always"),)),
        responses=((Hosted("mcp_approval"), Call(tool="tool_0")),), decisions=(Decision(new_context=True),),
    ), "fuzz_mcp_callback_asked_when_the_paused_turn_goes_on",
        HarnessDecision(approve=["call_0_1"], context=lambda: {"user": "bob"})),
    # Two calls answered with the SDK's generic text, only one of them documented (a raising tool; an `as_tool`'s
    # invalid arguments are the SDK's text on both sides): the final output, which is the undocumented one's, stays.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="text_and_int", sub_agent=True),
                               ToolSpec(name="tool_2", params="none", raises=True, namespace="notes")),
                        tool_use_behavior="stop_on_first_tool", hooks=True),
        responses=((Call(tool="tool_0", shape="coercible", n=0), Call(tool="tool_2", n=0, namespace="notes")),),
    ), "fuzz_same_generic_text_documented_for_one_call_only"),
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True),
                               ToolSpec(name="tool_1", params="text_and_int", sub_agent=True)),
                        tool_use_behavior="stop_on_first_tool", hooks=True),
        responses=((Call(tool="tool_0", n=0), Call(tool="tool_1", shape="coercible", n=0)),),
    ), "fuzz_same_generic_text_documented_one_ends_the_turn"),
    # A call that ran beside one that waited for approval: on resume, tool_use_behavior reads both results, as
    # Runner's resumed turn does (StopAtTools ends the turn with the call that ran first).
    resumed_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="text_and_int", sub_agent=True),
                               ToolSpec(name="tool_1", params="text_and_int", approval="always", sub_agent=True)),
                        tool_use_behavior="stop_at_first_tool_name", hooks=True),
        responses=((Call(tool="tool_0", n=0), Call(tool="tool_1", n=0)),), decisions=(Decision(),),
    ), "fuzz_tool_use_behavior_reads_calls_answered_before_the_pause", HarnessDecision(approve=["call_0_1"])),
    resumed_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", approval="always"),
                               ToolSpec(name="tool_1", params="none")), tool_use_behavior="custom"),
        responses=((Call(tool="tool_0", n=0), Call(tool="tool_1", n=0)),), decisions=(Decision(verdicts=("reject",)),),
    ), "fuzz_tool_use_behavior_function_reads_calls_answered_before_the_pause", HarnessDecision(reject=["call_0_0"])),
    # Two pauses in two responses: the second resume reads only its own response's results.
    resumed_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True, approval="always"),),
                        tool_use_behavior="custom", hooks=True),
        responses=((Call(tool="tool_0", n=0),), (Call(tool="tool_0", n=0),)), decisions=(Decision(), Decision()),
    ), "fuzz_tool_use_behavior_after_a_second_pause", HarnessDecision(approve=["call_0_0"]),
        HarnessDecision(approve=["call_1_0"])),
    # Reviewed differences of order (differences.py), each in the shrunk case that showed it.
    # Two calls with hooks: the same hook lines, interleaved by each loop's scheduler.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0"),), hooks=True),
        responses=((Call(tool="tool_0"), Call(tool="tool_0")),),
    ), "fuzz_concurrent_calls_interleaved"),
    # Streamed: a hosted item after a function call is announced when the response arrives.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0"),)), responses=((Call(tool="tool_0"), Hosted("web_search")),),
    ), "fuzz_hosted_item_announced_before_tool_called"),
    # A missing tool's answer keeps its call's place; Runner puts it last.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none"),)),
        responses=((Call(tool="ghost"), Call(tool="tool_0")),),
    ), "fuzz_unknown_tool_answer_keeps_its_place"),
    # A tool input guardrail raises while an `as_tool` sibling refuses its arguments: ours lets the sibling end.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", input_guard="raise"),
                               ToolSpec(name="tool_1", params="text_and_int", sub_agent=True)), hooks=True),
        responses=((Call(tool="tool_0", n=0), Call(tool="tool_1", shape="coercible", n=0)),),
    ), "fuzz_as_tool_sibling_finished_first"),
    # ... also when a sibling waits for approval: Runner's answer comes after the outputs of the tools that ran
    # before the pause, the waiting call's output after the resume.
    resumed_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none"),
                               ToolSpec(name="tool_1", params="none", approval="always"))),
        responses=((Call(tool="ghost"), Call(tool="tool_0", n=0), Call(tool="tool_1", n=0)),),
        decisions=(Decision(),),
    ), "fuzz_unknown_tool_answer_keeps_its_place_beside_a_pause", HarnessDecision(approve=["call_0_2"])),
    # A tool input guardrail raises while a function sibling runs: ours lets the sibling run and end first.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True),
                               ToolSpec(name="tool_2", params="none", input_guard="raise")), hooks=True),
        responses=((Call(tool="tool_0", n=0), Call(tool="tool_2", n=0)),),
    ), "fuzz_function_sibling_finished_first"),
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True, namespace="files"),
                               ToolSpec(name="tool_1", params="none", input_guard="raise"))),
        responses=((Call(tool="tool_0", n=0, namespace="files"), Call(tool="tool_1", n=0)),),
    ), "fuzz_function_sibling_finished_first_without_hooks"),
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True, output_guard="allow"),
                               ToolSpec(name="tool_1", params="none", input_guard="raise")), hooks=True),
        responses=((Call(tool="tool_0", n=0), Call(tool="tool_1", n=0)),),
    ), "fuzz_guarded_function_sibling_finished_first"),
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True, output_guard="allow"),
                               ToolSpec(name="tool_1", params="none", input_guard="raise"))),
        responses=((Call(tool="tool_0", n=0), Call(tool="tool_1", n=0)),),
    ), "fuzz_guarded_function_sibling_finished_first_without_hooks"),
    # Streamed: a hosted item between the calls and a sibling that finishes first, in one response: both
    # differences apply to one stream's events.
    build_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="text_and_int", sub_agent=True),
                               ToolSpec(name="tool_2", params="none", raises=True, input_guard="raise")), hooks=True),
        responses=((Call(tool="tool_0", shape="coercible", n=0), Hosted(kind="web_search"), Call(tool="tool_2", n=0)),),
    ), "fuzz_as_tool_sibling_finished_first_after_hosted_item"),
    # Streamed, resumed: the approved call's output that ends the turn and trips the output guardrail is reported.
    resumed_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", approval="always"),),
                        tool_use_behavior="stop_on_first_tool", output_guardrail="trip"),
        responses=((Call(tool="tool_0"),),), decisions=(Decision(),),
    ), "fuzz_resumed_stream_reports_blocked_output", HarnessDecision(approve=["call_0_0"])),
    resumed_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="text_and_int", approval="always", sub_agent=True),),
                        tool_use_behavior="stop_on_first_tool", output_guardrail="trip", hooks=True),
        responses=((Call(tool="ghost"), Hosted("web_search"), Call(tool="tool_0", n=0)),), decisions=(Decision(),),
    ), "fuzz_resumed_stream_reports_blocked_output_after_hosted_items", HarnessDecision(approve=["call_0_2"])),
    resumed_scenario(Case(
        agent=AgentSpec(tools=(ToolSpec(name="tool_0", params="none", raises=True, approval="always"),
                               ToolSpec(name="tool_1", params="text_and_int", sub_agent=True)),
                        tool_use_behavior="stop_on_first_tool", output_guardrail="trip", hooks=True),
        responses=((Call(tool="tool_0", n=0), Hosted(kind="mcp_approval")),), final=Final(valid=False),
        decisions=(Decision(new_context=True),),
    ), "fuzz_resumed_stream_reports_blocked_output_and_mcp_answer", HarnessDecision(approve=["call_0_0"])),
]


# A call whose failure ends the turn cancels its siblings, on both sides; an `as_tool` sibling cancelled while the
# SDK's `Runner.run` starts its nested run leaves that run's turn coroutine unstarted: the SDK's own warning, raised
# when the coroutine is collected (within the test, for the scenarios with an `as_tool`), not ours.
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <coroutine object run_single_turn at:pytest.PytestUnraisableExceptionWarning"
)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.id)
async def test_fuzz_regression(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)
    if "as_tool" in scenario.id:
        gc.collect()
