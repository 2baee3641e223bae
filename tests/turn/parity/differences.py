"""THE reviewed list of intended differences between `agents.Runner` and agency_swarm's loop.

Only what is listed here may differ; the harness requires everything else to be equal. A scenario names the
differences that apply to it (`Scenario.differences`); `apply_differences` then runs their normalizers on copies
of both outcomes. A normalizer first checks that each side shows exactly the documented behaviour (our text in
our documented format, Runner's in the SDK's), and only then replaces both with the same placeholder. So a
normalizer never hides an undocumented change: when a side does something else, it is left as it is and the
comparison reports it.

Two entries are not per scenario but built into the harness: EVENT_NAMES (harness.RUNNER_EVENT_MAP /
OUR_EVENT_MAP) and MAX_TURNS' argument mapping (Scenario.max_turns is Runner's `max_turns` and our agent's
`max_steps`).
"""

from __future__ import annotations

import ast
import base64
import copy
import dataclasses
import hashlib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents import (
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    ModelBehaviorError,
    OutputGuardrailTripwireTriggered,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailTripwireTriggered,
    UserError,
)

import agency_swarm
from parity.harness import AGENT_NAME, Outcome, RecordedCall, Scenario


@dataclass(frozen=True)
class Difference:
    name: str
    reason: str
    normalize: Callable[[Scenario, Outcome, Outcome], None] | None = None
    """Changes both (copied) outcomes in place; None for entries the harness applies itself (or documents)."""


# -- helpers --------------------------------------------------------------------------------------------------


def _tool_names(outcome: Outcome) -> dict[str, str]:
    """call_id -> tool name (`namespace.name` for a call with a namespace, as both sides name it in their texts),
    from every function_call the model produced on this side."""
    names: dict[str, str] = {}
    for items in [outcome.items or [], *(c.input for c in outcome.calls if isinstance(c.input, list))]:
        for item in items:
            if isinstance(item, dict) and item.get("type") == "function_call":
                namespace = item.get("namespace")
                name = f"{namespace}.{item.get('name')}" if namespace else str(item.get("name"))
                names[str(item.get("call_id"))] = name
    return names


def _rewrite_outputs(outcome: Outcome, rewrite: Callable[[str, str, str], str | None]) -> None:
    """Rewrite function_call_output texts (in the items, in every model call's input, and in the final output
    when a tool's output became it through tool_use_behavior).

    `rewrite(tool_name, call_id, text)` returns the replacement, or None to leave the text alone.
    """
    names = _tool_names(outcome)
    choices: dict[str, set[str | None]] = {}
    lists = [outcome.items or [], *(c.input for c in outcome.calls if isinstance(c.input, list))]
    for items in lists:
        for item in items:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                output = item.get("output")
                if isinstance(output, str):
                    call_id = str(item.get("call_id"))
                    new = rewrite(names.get(call_id, "?"), call_id, output)
                    choices.setdefault(output, set()).add(new)
                    if new is not None:
                        item["output"] = new
    # The final output (and on_end) is a text, not a call: rewritten only when every call with that text was
    # rewritten alike (two calls may have the same text, e.g. the SDK's generic one, and only one be documented).
    rewritten = {old: only for old, new in choices.items() if len(new) == 1 and (only := next(iter(new))) is not None}
    if isinstance(outcome.final_output, str) and outcome.final_output in rewritten:
        outcome.final_output = rewritten[outcome.final_output]  # a tool's output that ended the turn
    _rewrite_checked_outputs(outcome, rewritten)
    outcome.hook_calls = [_rewrite_on_end(line, rewritten) for line in outcome.hook_calls]


def _rewrite_checked_outputs(outcome: Outcome, rewritten: dict[str, str]) -> None:
    """The output an output guardrail checked (in the result view): a tool's output that ended the turn too."""
    view = outcome.result_view
    if not view or not isinstance(view.get("output_guardrail_results"), list):
        return
    results = copy.deepcopy(view["output_guardrail_results"])
    for result in results:
        checked = result.get("agent_output", {})
        if isinstance(checked.get("value"), str) and checked["value"] in rewritten:
            checked["value"] = rewritten[checked["value"]]
    outcome.result_view = {**view, "output_guardrail_results": results}


def _rewrite_on_end(line: str, rewritten: dict[str, str]) -> str:
    """An `on_end('text')` hook line (harness.RecordingHooks) for a tool's output that ended the turn gets the
    final output's placeholder."""
    for old, new in rewritten.items():
        if line == f"on_end({old!r})":
            return f"on_end({new!r})"
    return line


_TOOL_END = re.compile(r"on_tool_end\(([\w.]+), (.*)\)", re.S)


def _rewrite_tool_end(outcome: Outcome, documented: Callable[[str, str], bool]) -> None:
    """`on_tool_end(tool, 'text')` hook lines (harness.RecordingHooks) whose text is `documented(tool, text)`
    get one placeholder: a hook line has no call id, and Runner gives a tool that raised and arguments that
    failed the same text (the items, compared call by call, keep them apart)."""
    lines = []
    for line in outcome.hook_calls:
        match = _TOOL_END.fullmatch(line)
        text = _literal(match.group(2)) if match else None
        if match and isinstance(text, str) and documented(match.group(1), text):
            line = f"on_tool_end({match.group(1)}, <documented error text>)"
        lines.append(line)
    outcome.hook_calls = lines


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


def _replace_error(outcome: Outcome, kind: str, message: str) -> None:
    outcome.error_message = message
    outcome.error = _Placeholder(kind)


class _Placeholder(Exception):
    """Stands for an exception a difference maps to a common name (compared by that name)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


# -- the normalizers ------------------------------------------------------------------------------------------

SDK_TOOL_ERROR = "An error occurred while running the tool. Please try again."


def _rewrite_sdk_error_pairs(runner: Outcome, ours: Outcome, ours_pattern: str, label: str) -> None:
    """Runner's generic tool-error text and our text matching `ours_pattern` (`{tool}`: the tool's quoted name,
    `'namespace.name'` for a namespaced call) become `<label: tool>`, call by call: Runner's text is rewritten only
    for the calls whose output on our side matched, so two kinds of errors that Runner words alike (a tool that
    raised, arguments that failed) stay apart."""
    matched: set[str] = set()

    def our_side(tool: str, call_id: str, text: str) -> str | None:
        quoted = rf"'(?:\w+\.)?{re.escape(tool)}'"
        if not re.fullmatch(ours_pattern.replace("{tool}", quoted), text, re.S):
            return None
        matched.add(call_id)
        return f"<{label}: {tool}>"

    def runner_side(tool: str, call_id: str, text: str) -> str | None:
        return f"<{label}: {tool}>" if text == SDK_TOOL_ERROR and call_id in matched else None

    _rewrite_outputs(ours, our_side)
    _rewrite_outputs(runner, runner_side)
    ours_rewritten: Counter[str] = Counter()

    def ours_documented(tool: str, text: str) -> bool:
        documented = our_side(tool, "", text) is not None
        ours_rewritten[tool] += documented
        return documented

    def runner_documented(tool: str, text: str) -> bool:  # as many of Runner's lines as ours had, tool by tool
        if text != SDK_TOOL_ERROR or ours_rewritten[tool] <= 0:
            return False
        ours_rewritten[tool] -= 1
        return True

    _rewrite_tool_end(ours, ours_documented)
    _rewrite_tool_end(runner, runner_documented)
    _align_final_output(runner, ours)
    for index, (their_line, my_line) in enumerate(zip(runner.hook_calls, ours.hook_calls, strict=False)):
        named = re.search(r"tool '([\w.]+)'", my_line)  # on_end of a run that raised: no items to pair it with
        if their_line == f"on_end({SDK_TOOL_ERROR!r})" and my_line.startswith("on_end(") and named:
            text = _literal(my_line[len("on_end("):-1])
            if isinstance(text, str) and our_side(named.group(1), "", text) is not None:
                runner.hook_calls[index] = ours.hook_calls[index] = f"on_end({f'<{label}: {named.group(1)}>'!r})"


def _align_final_output(runner: Outcome, ours: Outcome) -> None:
    """A final output that is a tool's error text: Runner's generic text may be ambiguous (two calls got it, one
    documented), ours names its call. When ours' final output became a placeholder one of Runner's calls got too,
    Runner's generic final output (and on_end, and what an output guardrail checked) gets it as well."""
    placeholder = ours.final_output
    if not (isinstance(placeholder, str) and placeholder.startswith("<") and runner.final_output == SDK_TOOL_ERROR):
        return
    outputs = {item.get("output") for item in runner.items or [] if item.get("type") == "function_call_output"}
    if placeholder not in outputs:
        return
    runner.final_output = placeholder
    runner.hook_calls = [_rewrite_on_end(line, {SDK_TOOL_ERROR: placeholder}) for line in runner.hook_calls]
    _rewrite_checked_outputs(runner, {SDK_TOOL_ERROR: placeholder})


def _tool_error_text(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    _rewrite_sdk_error_pairs(runner, ours, r"Error: tool {tool} failed: [A-Za-z_][\w.]*: .*", "tool error")


def _invalid_arguments_text(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    pattern = r"Error: invalid arguments for tool {tool}: .+\. Call it again with arguments that match its parameters\."
    _rewrite_sdk_error_pairs(runner, ours, pattern, "invalid arguments")


def _unknown_tool_answered(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Compared against Runner run with RunConfig(tool_not_found_behavior="return_error_to_model")."""

    def runner_side(tool: str, call_id: str, text: str) -> str | None:  # a namespaced call: 'namespace.tool'
        return f"<no tool {tool}>" if re.fullmatch(rf"Tool '(\w+\.)?{re.escape(tool)}' not found\.", text) else None

    def our_side(tool: str, call_id: str, text: str) -> str | None:
        listed = re.fullmatch(rf"Error: there is no tool named {re.escape(repr(tool))}\. Available tools: .+\.", text)
        return f"<no tool {tool}>" if listed else None

    _rewrite_outputs(runner, runner_side)
    _rewrite_outputs(ours, our_side)


def _unknown_tool_raises(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Runner by default: ModelBehaviorError before anything runs. Ours: the model reads an error and goes on."""
    raised = isinstance(runner.error, ModelBehaviorError) and "not found in agent" in (runner.error_message or "")
    answered = ours.error is None and any(
        item.get("type") == "function_call_output" and str(item.get("output", "")).startswith("Error: there is no tool")
        for item in ours.items or []
    )
    if raised and answered:
        runner.replaced = ours.replaced = True


_TRIPWIRE = re.compile(rf"Agent {re.escape(repr(AGENT_NAME))}: (input|output) guardrail '[^']+' tripped(: .*)?", re.S)


_TOOL_TRIPWIRE = re.compile(
    rf"Agent {re.escape(repr(AGENT_NAME))}: tool '[^']+' (input|output) guardrail '[^']+' tripped(: .*)?", re.S
)


def _guardrail_tripwire_message(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    tripwires = (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered)
    if not (isinstance(runner.error, tripwires) and type(ours.error) is type(runner.error)):
        return
    if _TRIPWIRE.fullmatch(ours.error_message or "") and (runner.error_message or "").startswith("Guardrail "):
        runner.error_message = ours.error_message = "<tripwire message>"


def _tool_guardrail_tripwire_message(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    tripwires = (ToolInputGuardrailTripwireTriggered, ToolOutputGuardrailTripwireTriggered)
    if not (isinstance(runner.error, tripwires) and type(ours.error) is type(runner.error)):
        return
    sdk_text = re.fullmatch(r"Tool (input|output) guardrail \w+ triggered tripwire", runner.error_message or "")
    if _TOOL_TRIPWIRE.fullmatch(ours.error_message or "") and sdk_text:
        runner.error_message = ours.error_message = "<tool tripwire message>"


_GUARDRAIL_SAW = re.compile(r"input guardrail saw (.*)", re.S)


def _attachments_by_reference(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Each of our parts that holds a reference is replaced by Runner's part at the same place, once the reference is
    seen to name exactly Runner's bytes (their sha256, size and data URL header)."""
    for ours_item, runner_item in zip(ours.items or [], runner.items or [], strict=False):
        ours_parts, runner_parts = ours_item.get("content"), runner_item.get("content")
        if not (isinstance(ours_parts, list) and isinstance(runner_parts, list)):
            continue
        if len(ours_parts) != len(runner_parts):
            continue
        for index, (part, theirs) in enumerate(zip(ours_parts, runner_parts, strict=True)):
            reference = part.get("attachment") if isinstance(part, dict) else None
            if isinstance(reference, dict) and _names_the_bytes_of(reference, theirs):
                ours_parts[index] = copy.deepcopy(theirs)


def _names_the_bytes_of(reference: dict[str, Any], part: dict[str, Any]) -> bool:
    data = str(part.get("image_url") or part.get("file_data") or "")
    header, _, encoded = data.rpartition(",")
    raw = base64.b64decode(encoded)
    return (reference.get("sha256"), reference.get("size"), reference.get("encoding")) == (
        hashlib.sha256(raw).hexdigest(), len(raw), header)


def _input_guardrail_sees_text(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Runner's streamed path hands an agent input guardrail the input as items; its blocking path, like ours in
    both modes, hands it the text."""
    if not runner.stream:
        return
    as_items = f"input guardrail saw {[{'content': scenario.input, 'role': 'user'}]!r}"
    as_text = f"input guardrail saw {scenario.input!r}"
    if as_items in runner.hook_calls and as_text in ours.hook_calls:
        runner.hook_calls = [as_text if line == as_items else line for line in runner.hook_calls]


def _resume_announces_calls(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Our resumed stream starts with a tool_called for each call that waited at the pause (the run then runs,
    rejects or pauses it again); Runner announced those calls only in the stream that paused."""
    if not ours.stream:
        return
    waited = [sum(1 for item in ours.interruptions if item.get("run") == run) for run in range(len(ours.results))]
    events, run, announced = [], -1, 0
    for event in ours.events:
        if event == "agent_started":  # one agent: each run's stream starts with it
            run, announced = run + 1, 0
        elif event == "tool_called" and 0 < run < len(waited) + 1 and announced < waited[run - 1]:
            announced += 1
            continue
        events.append(event)
    ours.events = events


def _parallel_input_guardrail_first(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Runner starts the first model call next to a parallel input guardrail (its streamed path always, its blocking
    path as the scheduler lets it): when the guardrail trips, that call may have been made. Ours waits for the
    guardrail: no model call at all."""
    if not isinstance(runner.error, InputGuardrailTripwireTriggered) or type(ours.error) is not type(runner.error):
        return
    if ours.calls or ours.raw_event_types or len(runner.calls) > 1:
        return
    runner.calls, runner.raw_event_types, runner.text_deltas = [], [], []
    runner.hook_calls = [line for line in runner.hook_calls if not line.startswith(("on_llm_start(", "on_llm_end("))]


def _max_turns(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    if not isinstance(runner.error, MaxTurnsExceeded) or not isinstance(ours.error, agency_swarm.MaxStepsExceeded):
        return
    if runner.error_message == f"Max turns ({scenario.max_turns}) exceeded" and (
        ours.error.max_steps == scenario.max_turns and ours.error.agent == AGENT_NAME
    ):
        _replace_error(runner, "<max turns>", f"<{scenario.max_turns}>")
        _replace_error(ours, "<max turns>", f"<{scenario.max_turns}>")


def _output_validation_error(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    if not isinstance(runner.error, ModelBehaviorError):
        return
    if not isinstance(ours.error, agency_swarm.OutputValidationError):
        return
    if (ours.error_message or "").startswith(f"Agent {AGENT_NAME!r} answered with output that does not match"):
        _replace_error(runner, "<invalid final output>", "<message>")
        _replace_error(ours, "<invalid final output>", "<message>")


def _ambiguous_tools_message(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Both refuse the same tool set with UserError before the model is called; the wording is each one's own."""
    if not (type(runner.error) is UserError and type(ours.error) is UserError):
        return
    sdk_text = (runner.error_message or "").startswith("Ambiguous function tool configuration: ")
    our_text = re.fullmatch(r"Ambiguous function tools: .+, so a call could not say which one it means\. Rename one\.",
                            ours.error_message or "")
    if sdk_text and our_text:
        runner.error_message = ours.error_message = "<ambiguous tools>"


LOCAL_TOOLS = ("ComputerTool", "LocalShellTool", "ShellTool", "ApplyPatchTool")


def _local_tool_refused(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Ours refuses an agent with a local-execution tool at build time, naming it; Runner runs the tool."""
    if not isinstance(ours.error, agency_swarm.ConfigError) or ours.error_phase != "build":
        return
    named = [name for name in LOCAL_TOOLS if name in (ours.error_message or "")]
    if named and runner.error is None:
        runner.replaced = ours.replaced = True


_TOOL_PHASE = re.compile(r"on_tool_start\(.*\)|on_tool_end\(.*\)|\w+_(in|out) saw .*", re.S)


def _phases(lines: list[str]) -> list[list[str]]:
    """Hook lines cut into runs: each run of tool-phase lines (a tool's hooks and tool guardrails) is one part, any
    other line a part of its own."""
    parts: list[list[str]] = []
    for line in lines:
        if _TOOL_PHASE.fullmatch(line) and parts and _TOOL_PHASE.fullmatch(parts[-1][0]):
            parts[-1].append(line)
        else:
            parts.append([line])
    return parts


def _concurrent_calls_interleaved(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Calls of one response run concurrently: each side interleaves their hooks and tool guardrails as its
    scheduler runs them. Equal when every other hook line is in the same place and each run of tool-phase lines
    holds the same lines on both sides."""
    theirs, mine = _phases(runner.hook_calls), _phases(ours.hook_calls)
    if len(theirs) != len(mine) or theirs == mine:
        return
    for their_part, my_part in zip(theirs, mine, strict=True):
        tool_phase = _TOOL_PHASE.fullmatch(my_part[0]) is not None
        if their_part != my_part and not (tool_phase and Counter(their_part) == Counter(my_part)):
            return
    runner.hook_calls = list(ours.hook_calls)


_ANNOUNCED = frozenset({"tool_called", "hosted_item"})


def _hosted_items_first(events: list[str]) -> list[str]:
    """Each run of tool_called / hosted_item events with its hosted_item events moved to its front."""
    result: list[str] = []
    start = 0
    for index in range(len(events) + 1):
        if index == len(events) or events[index] not in _ANNOUNCED:
            run = events[start:index]
            result += [e for e in run if e == "hosted_item"] + [e for e in run if e != "hosted_item"]
            if index < len(events):
                result.append(events[index])
            start = index + 1
    return result


def _hosted_items_announced_first(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Streamed: ours emits a response's hosted items (run by the API before the response arrived) when the response
    arrives, then a tool_called as each function call starts; Runner emits them all in the response's order.
    Runner's events are brought into our order, not made equal to ours, so that another difference that applies to
    the same stream (sibling_finished_first's extra tool_output) still compares the rest."""
    if ours.stream and _hosted_items_first(ours.events) == ours.events:
        runner.events = _hosted_items_first(runner.events)


def _is_unknown_tool_answer(item: Any) -> bool:
    """An unknown tool's output on either side, in its own words or as unknown_tool_answered's placeholder."""
    output = item.get("output")
    return isinstance(output, str) and (
        output.startswith(("<no tool ", "Error: there is no tool named "))
        or re.fullmatch(r"Tool '[\w.]+' not found\.", output) is not None
    )


def _outputs_runs(items: list[Any]) -> list[tuple[int, int]]:
    """(start, end) of each run of consecutive function_call_output items."""
    runs, start = [], None
    for index, item in enumerate([*items, None]):
        is_output = isinstance(item, dict) and item.get("type") == "function_call_output"
        if is_output and start is None:
            start = index
        elif not is_output and start is not None:
            runs.append((start, index))
            start = None
    return runs


def _same_but_where_unknown_answers_are(theirs: list[Any], mine: list[Any]) -> bool:
    """Both lists' runs of outputs hold the same outputs of tools that ran, in the same order, and the same
    unknown-tool answers, in the same order: only where the answers sit among the others may differ."""
    runs = _outputs_runs(mine)
    if len(theirs) != len(mine) or runs != _outputs_runs(theirs):
        return False
    for start, end in runs:
        for unknown in (True, False):
            if [i for i in theirs[start:end] if _is_unknown_tool_answer(i) is unknown] != [
                i for i in mine[start:end] if _is_unknown_tool_answer(i) is unknown
            ]:
                return False
    return [i for i in theirs if not _is_output(i)] == [i for i in mine if not _is_output(i)]


def _is_output(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call_output"


def _unknown_tool_answer_order(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Ours stores a response's outputs in the order of its calls, an unknown tool's answer too; Runner (told to
    answer one, `return_error_to_model`) puts those answers after the outputs of the tools it ran (before a pause:
    those that ran before it). Equal when only where the unknown-tool answers sit differs."""
    pairs = [(runner.items or [], ours.items or [])] + [
        (theirs.input, mine.input) for theirs, mine in zip(runner.calls, ours.calls, strict=False)
        if isinstance(theirs.input, list) and isinstance(mine.input, list)
    ]
    if not all(_same_but_where_unknown_answers_are(theirs, mine) for theirs, mine in pairs):
        return
    for theirs, mine in pairs:
        theirs[:] = copy.deepcopy(mine)


def _resumed_stream_reports_blocked_output(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """Streamed, resumed: an approved call whose output ends the turn and then trips an output guardrail gets its
    tool_output in our resumed stream, as in Runner's stream of a run that did not pause (and the answer of a hosted
    MCP approval request of the same response, which the resume asks its server for, its hosted_item); Runner's
    resumed stream leaves both out. The tripwire, the withheld output and the items are compared as they are."""
    tripped = (OutputGuardrailTripwireTriggered,)
    if not (ours.stream and scenario.decisions and isinstance(runner.error, tripped)):
        return
    if type(ours.error) is not type(runner.error) or "agent_started" not in runner.events:
        return
    if ours.events.count("agent_started") != runner.events.count("agent_started"):
        return
    mine, theirs = _last_run(ours.events), _last_run(runner.events)
    asked_mcp = any(isinstance(item, dict) and item.get("type") == "mcp_approval_request" for item in ours.items or [])
    reported = ("tool_output", "hosted_item") if asked_mcp else ("tool_output",)
    kept = [event for event in mine if event not in reported]
    if "tool_output" in mine and "tool_output" not in theirs and kept == theirs:  # earlier runs: compared as they are
        ours.events = ours.events[: len(ours.events) - len(mine)] + kept


def _last_run(events: list[str]) -> list[str]:
    """The events of the last run's stream, after its agent_started."""
    return events[len(events) - events[::-1].index("agent_started"):]


def _extra(longer: list[str], shorter: list[str]) -> list[str] | None:
    """The items of `longer` that are not in `shorter`, when `shorter` is `longer` with some items left out."""
    extra: list[str] = []
    position = 0
    for item in longer:
        if position < len(shorter) and shorter[position] == item:
            position += 1
        else:
            extra.append(item)
    return extra if position == len(shorter) else None


_TOOL_OUT_GUARD = re.compile(r"(\w+)_out saw .*", re.S)
"""The fuzz's tool output guardrail's line (fuzz_cases._tool_guards): `<tool>_out saw <output>`."""


def _sibling_finished_first(scenario: Scenario, runner: Outcome, ours: Outcome) -> None:
    """A call's failure ends the turn while a sibling that does not pause runs: ours lets the sibling finish first
    (it runs, its output guardrails and on_tool_end, streamed its tool_output); Runner, which invokes each tool in
    a task of its own after extra scheduling steps, cancels it before. Equal when ours has only those more, each
    hook line among the same lines."""
    if runner.error is None or type(ours.error) is not type(runner.error):
        return
    theirs, mine = _phases(runner.hook_calls), _phases(ours.hook_calls)
    if len(theirs) != len(mine):
        return
    extra_runs = Counter(name for name, _ in ours.tool_runs) - Counter(name for name, _ in runner.tool_runs)
    hooked = any(line.startswith("on_start(") for line in runner.hook_calls)  # the agent has AgentHooks
    ended: Counter[str] = Counter()
    for their_part, my_part in zip(theirs, mine, strict=True):
        more, fewer = Counter(my_part) - Counter(their_part), Counter(their_part) - Counter(my_part)
        tools = [_TOOL_END.fullmatch(line) or _TOOL_OUT_GUARD.fullmatch(line) for line in more.elements()]
        if fewer or not all(match and (f"on_tool_start({match.group(1)})" in their_part if hooked
                                       else match.group(1) in extra_runs) for match in tools):
            return  # only a started sibling's end: its on_tool_end, its output guardrail
        ended.update(match.group(1) for match in tools if match and match.re is _TOOL_END)
    if _extra(sorted(ours.tool_runs, key=repr), sorted(runner.tool_runs, key=repr)) is None:
        return
    if hooked and any(ended[name] < count for name, count in extra_runs.items()):
        return  # with hooks, each tool that ran more has its on_tool_end
    outputs = _extra(ours.events, runner.events) if ours.stream else []
    if outputs is None or any(event != "tool_output" for event in outputs):
        return
    if not (ended or extra_runs or outputs):
        return
    ours.hook_calls, ours.tool_runs = list(runner.hook_calls), list(runner.tool_runs)
    if ours.stream:
        ours.events = list(runner.events)


# -- THE list -------------------------------------------------------------------------------------------------

DIFFERENCES: dict[str, Difference] = {d.name: d for d in [
    Difference(
        "tool_error_text",
        "a tool exception is shown to the model as `Error: tool 'x' failed: ExcType: msg` (README: Real models); "
        "the SDK's default failure_error_function hides it",
        _tool_error_text,
    ),
    Difference(
        "invalid_arguments_text",
        "malformed or invalid tool arguments are explained to the model (which argument, what is wrong); the SDK "
        "answers with its generic tool-error text",
        _invalid_arguments_text,
    ),
    Difference(
        "unknown_tool_answered",
        "a call to a tool the agent does not have is answered with an error output listing the agent's tools, "
        "like Runner with RunConfig(tool_not_found_behavior='return_error_to_model') but in our words",
        _unknown_tool_answered,
    ),
    Difference(
        "unknown_tool_raises",
        "Runner's default for an unknown tool is ModelBehaviorError; ours never raises for it (README: Errors)",
        _unknown_tool_raises,
    ),
    Difference(
        "guardrail_tripwire_message",
        "agent input/output guardrail tripwires keep the SDK's exception types, reworded to name the agent, the "
        "guardrail and its output_info (the text a nested agent's caller reads)",
        _guardrail_tripwire_message,
    ),
    Difference(
        "tool_guardrail_tripwire_message",
        "tool input/output guardrail tripwires keep the SDK's exception types, reworded to name the agent, the tool, "
        "the guardrail and its output_info (the SDK names only the guardrail's class; a nested agent's caller reads "
        "this text)",
        _tool_guardrail_tripwire_message,
    ),
    Difference(
        "attachments_by_reference",
        "an image or file given as bytes is stored once, and the items a result shows (`new_items`, "
        "`to_input_list()`) hold a reference to its bytes (`attachment`: sha256, media type, size) where Runner's hold "
        "the data URL; every model call still gets the data, exactly as Runner's",
        _attachments_by_reference,
    ),
    Difference(
        "input_guardrail_sees_text",
        "an agent input guardrail always gets the user's message text, blocking and streamed, as Runner's blocking "
        "path gives it; Runner's streamed path gives a one-item input list instead",
        _input_guardrail_sees_text,
    ),
    Difference(
        "parallel_input_guardrail_first",
        "an input guardrail with run_in_parallel=True finishes before the agent's first model call: a tripwire "
        "stops the turn before the model is called; Runner's streamed path calls the model next to it",
        _parallel_input_guardrail_first,
    ),
    Difference(
        "max_turns",
        "Runner's `max_turns` / MaxTurnsExceeded is our per-agent `Agent.max_steps` / MaxStepsExceeded (a "
        "RunError naming agent, chat and depth): in an agency every agent has its own budget",
        _max_turns,
    ),
    Difference(
        "resume_announces_calls",
        "a resumed stream (resume_stream) starts with a tool_called for each call that waited for approval, before "
        "it runs, is rejected or waits again: a consumer of the resumed stream alone can pair every tool_output with "
        "its call, and AgencyHooks.on_tool_start fires when an approved tool runs; Runner announces a call once, in "
        "the stream that paused",
        _resume_announces_calls,
    ),
    Difference(
        "output_validation_error",
        "a final output that does not match output_type raises agency_swarm.OutputValidationError (a RunError "
        "naming the agent) instead of the SDK's ModelBehaviorError",
        _output_validation_error,
    ),
    Difference(
        "ambiguous_tools_message",
        "a tool set in which a call could not say which tool it means (two tools with one namespace and name, or a "
        "namespaced tool beside a top-level `namespace.name`) raises UserError before the model call, as under "
        "Runner, in our own words",
        _ambiguous_tools_message,
    ),
    Difference(
        "local_tool_refused",
        "ComputerTool, LocalShellTool, ShellTool and ApplyPatchTool run on the caller's machine: building an "
        "agency_swarm Agent/Agency with one raises ConfigError naming the tool; Runner runs them",
        _local_tool_refused,
    ),
    Difference(
        "concurrent_calls_interleaved",
        "the calls of one response run concurrently, and each loop's scheduler interleaves their hooks and tool "
        "guardrails its own way (ours runs a call up to its first pause before the next starts; Runner's gathers "
        "start both): the same lines, every other hook line in its place; each call's guardrails still run before "
        "its tool, and single calls are compared in exact order",
        _concurrent_calls_interleaved,
    ),
    Difference(
        "hosted_items_announced_first",
        "streamed: a response's hosted items (run by the API before the response arrived) get their hosted_item "
        "events when the response arrives, before the tool_called of its function calls, each emitted as the call "
        "starts; Runner emits both kinds in the response's order. Event order only",
        _hosted_items_announced_first,
    ),
    Difference(
        "unknown_tool_answer_order",
        "a response's outputs are stored in the order of its calls, an unknown tool's answer included; Runner, told "
        "to answer unknown tools (`return_error_to_model`, not its default), puts those answers after the outputs "
        "of the tools it ran. The same outputs, in another order",
        _unknown_tool_answer_order,
    ),
    Difference(
        "resumed_stream_reports_blocked_output",
        "streamed, after a resume: an approved call whose output ends the turn (tool_use_behavior) gets its "
        "tool_output event (and a hosted MCP approval request of the same response its server's answer, hosted_item) "
        "before an output guardrail trips on it, as in Runner's own stream of a run that did not pause; Runner's "
        "resumed stream leaves them out. The guardrail trips alike, and the output reaches neither the "
        "final output nor the thread",
        _resumed_stream_reports_blocked_output,
    ),
    Difference(
        "sibling_finished_first",
        "the calls of one response run concurrently: when one call's failure ends the turn (a tool guardrail that "
        "raises, failure_error_function=None, a needs_approval function that raises), a sibling call that does not "
        "pause finishes first with us (it runs, "
        "its output guardrails and on_tool_end, streamed its tool_output), where Runner, which invokes each tool in "
        "a task of its own after extra scheduling steps, cancels it first (Runner too lets it finish when the failing "
        "call awaits anything, "
        "e.g. a guardrail that calls a model). The failing call never runs, its guardrail trips alike, and the error "
        "and everything else are compared as they are",
        _sibling_finished_first,
    ),
    Difference(
        "event_names",
        "our stream has its own event types (README: Events); harness.RUNNER_EVENT_MAP and OUR_EVENT_MAP map both "
        "onto one vocabulary: Runner's agent_updated is agent_started, message_output_created and "
        "reasoning_item_created have no event of ours (text comes as text_delta, everything as raw), a stream that "
        "ends with a final output is agent_finished, and each of Runner's result.interruptions is an "
        "approval_requested",
    ),
    Difference(
        "blocked_tool_response_kept",
        "when tool outputs that ended the turn trip an output guardrail, both store the calls with Runner's "
        "withheld text as outputs; a response that also held reasoning or a message keeps those with us (stored "
        "before its calls ran, so no call runs twice after a crash), where Runner's session drops the response "
        "whole (reasoning) or keeps only its calls. Checked over two turns in test_blocked_output.py",
    ),
    Difference(
        "per_pair_threads",
        "multi-agent only: agents talk through send_message on per-pair threads (`CEO->Developer`), not handoffs; "
        "never compared with Runner (Runner has no counterpart)",
    ),
]}


def apply_differences(scenario: Scenario, runner: Outcome, ours: Outcome) -> tuple[Outcome, Outcome]:
    """Copies of both outcomes with the scenario's declared differences normalized away."""
    unknown = [name for name in scenario.differences if name not in DIFFERENCES]
    assert not unknown, f"scenario {scenario.id!r} names differences not in differences.py: {unknown}"
    runner, ours = _copy(runner), _copy(ours)
    for name in scenario.differences:
        normalize = DIFFERENCES[name].normalize
        if normalize is not None:
            normalize(scenario, runner, ours)
    return runner, ours


def _copy(outcome: Outcome) -> Outcome:
    calls = [
        RecordedCall(**{**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)},
                        "input": copy.deepcopy(c.input), "live_input": None})
        for c in outcome.calls
    ]
    return dataclasses.replace(outcome, calls=calls, items=copy.deepcopy(outcome.items))
