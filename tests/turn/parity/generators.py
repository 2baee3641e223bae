"""Hypothesis strategies for the parity fuzzer: a `Case` is plain data (agent, script, pause decisions).

Everything generated is a frozen dataclass of strings, numbers and tuples, so a shrunk case prints as a short,
readable literal; `fuzz_cases.build_scenario` turns it into a normal harness `Scenario`. The strategies are small
and composable: one per option of the agent, one per shape of a model call's arguments, one per output item.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hypothesis import strategies as st

# -- the data a case is made of ------------------------------------------------------------------------------

PARAMS = ("none", "int", "text_and_int", "model")
"""A tool's signature: `()`, `(n: int)`, `(text: str, n: int = 1)`, `(item: Item)` with Item(name: str, qty: int)."""

ARGUMENT_SHAPES = ("valid", "coercible", "missing", "extra", "wrong_type", "not_json", "empty", "not_object")
"""How the model writes a call's arguments (see `fuzz_cases.render_arguments`)."""

APPROVALS = ("never", "always", "policy_sync", "policy_async", "policy_raises")
"""`needs_approval`: False, True, or a callable reading the arguments (approval unless `n == 1`), or one that raises."""

GUARD_VERDICTS = ("allow", "reject", "raise")
HOSTED = ("web_search", "file_search", "mcp_list_and_call", "mcp_approval", "reasoning", "code_interpreter")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    params: str = "int"
    raises: bool = False
    namespace: str | None = None
    approval: str = "never"
    input_guard: str | None = None
    output_guard: str | None = None
    failure: str = "default"
    """failure_error_function: "default", "custom" (a function of ours), or "none" (errors raise)."""
    enabled: str = "true"
    """is_enabled: "true", "false", "callable_true", "callable_false", "async_true"."""
    sub_agent: bool = False
    """An `as_tool` sub-agent (params are its `input: str`) instead of a function."""

    @property
    def offered(self) -> bool:
        return self.enabled in ("true", "callable_true", "async_true")

    @property
    def can_end_turn(self) -> bool:
        """A call can end the turn: no failure_error_function (a raise or invalid arguments), a guardrail raises,
        or its needs_approval function does."""
        return self.failure == "none" or "raise" in (self.input_guard, self.output_guard) or (
            self.approval == "policy_raises"
        )


@dataclass(frozen=True)
class Call:
    tool: str
    """A tool's name, or "ghost" (no such tool)."""
    shape: str = "valid"
    n: int = 2
    namespace: str | None = None
    """The call's `namespace` field (the tool's namespace, or None)."""


@dataclass(frozen=True)
class Text:
    text: str = "Done."


@dataclass(frozen=True)
class Refusal:
    text: str = "I cannot help with that."


@dataclass(frozen=True)
class Hosted:
    kind: str = "web_search"


Item = Call | Text | Refusal | Hosted


@dataclass(frozen=True)
class Final:
    """The last response of a script: text the agent can finish on (valid or not for its output_type)."""

    valid: bool = True


@dataclass(frozen=True)
class AgentSpec:
    tools: tuple[ToolSpec, ...] = ()
    output_type: str = "none"
    """"none", "str", "model" (pydantic), "dataclass"."""
    tool_use_behavior: str = "run_llm_again"
    """"run_llm_again", "stop_on_first_tool", "stop_at_first_tool_name", "custom"."""
    tool_choice: str | None = None
    reset_tool_choice: bool | None = None
    temperature: float | None = None
    parallel_tool_calls: bool | None = None
    input_guardrail: str | None = None
    """None, "pass", "trip" (sequential), "pass_parallel"."""
    output_guardrail: str | None = None
    """None, "pass", "trip"."""
    hooks: bool = False


@dataclass(frozen=True)
class Decision:
    """What the user decides at one pause: the i-th waiting call gets `verdicts[i % len(verdicts)]`."""

    verdicts: tuple[str, ...] = ("approve",)
    """Each "approve", "reject" (the default rejection text) or "reject_with_message"."""
    new_context: bool = False
    """Resume with a different run context."""


@dataclass(frozen=True)
class Case:
    agent: AgentSpec
    responses: tuple[tuple[Item, ...], ...]
    final: Final = Final()
    max_turns: int = 10
    decisions: tuple[Decision, ...] = ()

    def calls(self) -> list[Call]:
        return [item for response in self.responses for item in response if isinstance(item, Call)]

    def tool_for(self, call: Call) -> ToolSpec | None:
        """The tool a call names, as `Runner` looks it up: by namespace and name (a call without a namespace names a
        top-level tool only)."""
        return next((tool for tool in self.agent.tools if (tool.name, tool.namespace) == (call.tool, call.namespace)),
                    None)

    def is_unknown(self, call: Call) -> bool:
        """The agent has no such tool, or does not offer it (is_enabled false)."""
        tool = self.tool_for(call)
        return tool is None or not tool.offered


# -- strategies -----------------------------------------------------------------------------------------------

failure_functions = st.sampled_from(("default", "custom", "none"))
enabled_options = st.sampled_from(("true", "true", "true", "false", "callable_true", "callable_false", "async_true"))
guards = st.one_of(st.none(), st.sampled_from(GUARD_VERDICTS))


@st.composite
def tool_specs(draw: st.DrawFn, name: str) -> ToolSpec:
    if draw(st.integers(0, 9)) == 0:
        return ToolSpec(name=name, params="text_and_int", sub_agent=True, enabled=draw(enabled_options),
                        failure=draw(failure_functions), approval=draw(st.sampled_from(("never", "never", "always"))))
    return ToolSpec(
        name=name,
        params=draw(st.sampled_from(PARAMS)),
        raises=draw(st.integers(0, 3)) == 0,
        namespace=draw(st.one_of(st.none(), st.none(), st.just("files"))),
        approval=draw(st.sampled_from(("never", "never", "never", "never", *APPROVALS[1:4], *APPROVALS[1:]))),
        input_guard=draw(guards),
        output_guard=draw(guards),
        failure=draw(failure_functions),
        enabled=draw(enabled_options),
    )


@st.composite
def agent_specs(draw: st.DrawFn) -> AgentSpec:
    count = draw(st.integers(0, 3))
    tools = tuple(draw(tool_specs(f"tool_{index}")) for index in range(count))
    namespaced = [tool for tool in tools if tool.namespace is not None]
    if namespaced and draw(st.integers(0, 4)) == 0:  # the same name in a second namespace
        tools += (dataclasses.replace(namespaced[0], namespace="notes", raises=not namespaced[0].raises),)
    names = [tool.name for tool in tools]
    return AgentSpec(
        tools=tools,
        output_type=draw(st.sampled_from(("none", "none", "str", "model", "dataclass"))),
        tool_use_behavior=draw(st.sampled_from(
            ("run_llm_again", "run_llm_again", "stop_on_first_tool", "stop_at_first_tool_name", "custom")
        )),
        tool_choice=draw(st.one_of(st.none(), st.sampled_from(("auto", "required", "none", *names[:1])))),
        reset_tool_choice=draw(st.one_of(st.none(), st.booleans())),
        temperature=draw(st.one_of(st.none(), st.sampled_from((0.0, 0.7)))),
        parallel_tool_calls=draw(st.one_of(st.none(), st.booleans())),
        input_guardrail=draw(st.sampled_from((None, None, "pass", "trip", "pass_parallel"))),
        output_guardrail=draw(st.sampled_from((None, None, "pass", "trip"))),
        hooks=draw(st.integers(0, 3)) == 0,
    )


@st.composite
def calls(draw: st.DrawFn, agent: AgentSpec) -> Call:
    tools = agent.tools
    if not tools or draw(st.integers(0, 9)) == 0:
        return Call(tool="ghost", shape=draw(st.sampled_from(("valid", "not_json"))))
    tool = draw(st.sampled_from(tools))
    namespace = tool.namespace if draw(st.integers(0, 4)) else None
    return Call(
        tool=tool.name,
        shape=draw(st.sampled_from(("valid", "valid", "valid", *ARGUMENT_SHAPES[1:]))),
        n=draw(st.integers(0, 4)),
        namespace=namespace,
    )


def items(agent: AgentSpec) -> st.SearchStrategy[Item]:
    return st.one_of(
        calls(agent),
        calls(agent),
        st.builds(Text, st.sampled_from(("Working on it.", "Let me check."))),
        st.builds(Hosted, st.sampled_from(HOSTED)),
        st.just(Refusal()),
    )


decisions = st.builds(
    Decision,
    verdicts=st.lists(st.sampled_from(("approve", "approve", "reject", "reject_with_message")), min_size=1,
                      max_size=2).map(tuple),
    new_context=st.integers(0, 3).map(lambda n: n == 0),
)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    agent = draw(agent_specs())
    responses = tuple(
        tuple(draw(st.lists(items(agent), min_size=1, max_size=3)))
        for _ in range(draw(st.integers(0, 3)))
    )
    pauses = sum(1 for response in responses for item in response if isinstance(item, Call))
    return Case(
        agent=agent,
        responses=responses,
        final=Final(valid=draw(st.integers(0, 5)) > 0),
        max_turns=draw(st.sampled_from((10, 10, 10, 1, 2))),
        decisions=tuple(draw(st.lists(decisions, min_size=pauses, max_size=pauses))),
    )
