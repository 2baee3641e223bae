"""Only `_sdk.py` touches openai-agents' private names; each has a fallback, and SHORTCUTS=False changes no result.

The boundary rule, checked on every module of src/agency_swarm except `_sdk.py`:

- No import of a private module or name from `agents` or `openai`: `import agents._x`, `from agents._x import y`,
  `from agents.tool import _y` (any dotted segment, or imported name, that starts with `_`).
- No attribute access `x._name`, and no string literal `"_name"` (which covers `getattr(x, "_name")`,
  `x.__dict__["_name"]` and names kept in constants), where `_name` is a private name openai-agents defines and our
  own code does not. The SDK's names are collected from its source with `ast`: attributes it assigns, functions,
  classes and variables it defines, and `"_name"` strings it uses. Ours are the functions, classes and variables
  defined, and the attributes assigned on `self` / `cls`, in src/agency_swarm outside `_sdk.py`. So our own
  `self._wrapper` passes and `invoker._invoke_tool_impl` does not.
- No attribute or string starting with `__agents_` (the SDK's private markers).

Python's own dunders (`__dict__`, `__code__`) are not the SDK's and are allowed.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import agents
import agents._function_tool_arguments
import agents.models._retry_runtime
import agents.tool
import agents.util._approvals
import httpx2
import pytest
from agents import AgentHooks, OpenAIResponsesModel, function_tool
from agents.tool_context import ToolContext
from agents.tracing import get_trace_provider
from openai import AsyncOpenAI

import agency_swarm
from agency_swarm import Agency, Agent
from agency_swarm._base import _sdk as _sdk
from agency_swarm._turn import _direct_call as _direct_call
from agency_swarm._turn._tracing import open_trace
from agency_swarm.testing import ScriptedModel, Step, ToolCall, send_message

SRC = Path(agency_swarm.__file__).parent

# -- the boundary -----------------------------------------------------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and name != "_" and not (name.startswith("__") and name.endswith("__"))


def _defined_by_sdk(node: ast.AST) -> str | None:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
        return node.attr
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
        return node.value
    return None


def _defined_by_us(node: ast.AST) -> str | None:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if (
        isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
    ):
        return node.attr
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return node.id
    return None


def _names(paths: list[Path], defined: Callable[[ast.AST], str | None]) -> set[str]:
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = defined(node)
            if name is not None and _private(name):
                found.add(name)
    return found


def _our_modules() -> list[Path]:
    return [path for path in sorted(SRC.rglob("*.py")) if path.name != "_sdk.py"]


@functools.cache
def sdk_private_names() -> frozenset[str]:
    """Every private name the installed openai-agents defines or uses as a string."""
    return frozenset(_names(sorted(Path(agents.__file__).parent.rglob("*.py")), _defined_by_sdk))


@functools.cache
def our_private_names() -> frozenset[str]:
    return frozenset(_names(_our_modules(), _defined_by_us))


def _sdk_module(name: str) -> bool:
    return name.split(".")[0] in ("agents", "openai")


def _uses(node: ast.AST, flagged: frozenset[str]) -> Iterator[str]:
    """The private SDK names one node uses (a module path for a private import)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if _sdk_module(alias.name) and _private_path(alias.name))
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and _sdk_module(node.module or ""):
        module = node.module or ""
        if _private_path(module):
            yield module
        yield from (f"{module}.{alias.name}" for alias in node.names if _private(alias.name))
    elif isinstance(node, ast.Attribute) and (node.attr in flagged or node.attr.startswith("__agents_")):
        yield node.attr
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (
        node.value in flagged or node.value.startswith("__agents_")
    ):
        yield node.value


def _private_path(module: str) -> bool:
    return any(_private(part) for part in module.split("."))


def private_uses(source: str, ours: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, name) of every use of a private SDK name in `source`, by the rule of the module docstring."""
    flagged = sdk_private_names() - our_private_names() - ours
    return [
        (getattr(node, "lineno", 0), name)
        for node in ast.walk(ast.parse(source))
        for name in _uses(node, flagged)
    ]


def test_only_the_sdk_module_touches_private_sdk_names() -> None:
    problems = [
        f"{path.relative_to(SRC)}:{line}: {name}"
        for path in _our_modules()
        for line, name in private_uses(path.read_text(encoding="utf-8"))
    ]
    assert problems == [], "private openai-agents names belong in _sdk.py:\n" + "\n".join(problems)


@pytest.mark.parametrize("source", [
    "from agents._function_tool_arguments import can_prepare_without_user_code",
    "from agents.tool import _get_function_tool_invoke_context",
    "import agents._debug",
    "from openai._models import BaseModel",
    "def f(invoker):\n    return invoker._invoke_tool_impl",
    "def f(provider):\n    return getattr(provider, '_disabled', None)",
    "def f(context):\n    context.__dict__['_approvals'] = {}",
    "NAME = '_refresh_disabled_flag'",
    "MARK = '__agents_function_tool_wrapped_callable__'",
])
def test_the_boundary_check_catches_each_kind_of_private_use(source: str) -> None:
    assert private_uses(source) != []


@pytest.mark.parametrize("source", [
    "from agents import Agent as _SDKAgent",
    "from agents.tool_context import ToolContext",
    "from . import _sdk",
    "class A:\n    def __init__(self):\n        self._wrapper = None\n\n    def f(self):\n        return self._wrapper",
    "def f(x):\n    return x.__dict__, x.__code__",
])
def test_the_boundary_check_lets_our_own_names_and_public_ones_pass(source: str) -> None:
    assert private_uses(source) == []


def test_every_private_name_the_sdk_module_uses_is_listed_in_its_docstring() -> None:
    names = {name for _, name in private_uses((SRC / "_base" / "_sdk.py").read_text(encoding="utf-8"))}
    assert {"_invoke_tool_impl", "_DISABLE_PROVIDER_MANAGED_RETRIES", "_approvals", "_exporter"} <= names
    listed = set(re.findall(r"\w+", _sdk.__doc__ or ""))
    assert sorted(names - listed) == []


# -- turns to compare -------------------------------------------------------------------------------------------


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers (a sync tool: run in a worker thread)."""
    return a + b


@function_tool
async def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@function_tool
async def where(ctx: ToolContext[Any], note: str) -> str:
    """Reports what its ToolContext holds."""
    return (
        f"{note}: {ctx.tool_name} {ctx.tool_arguments} {ctx.context} requests={ctx.usage.requests} "
        f"agent={getattr(ctx.agent, 'name', None)} config={ctx.run_config is not None}"
    )


@function_tool
def pair(a: int) -> dict[str, int]:
    """Returns a dict, which the SDK turns into JSON text."""
    return {"a": a, "twice": 2 * a}


@function_tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"boom: {reason}")


@function_tool(failure_error_function=lambda ctx, error: f"custom: {error}")
def explode_politely(reason: str) -> str:
    """Always fails, with its own message."""
    raise KeyError(reason)


TOOLS = [add, shout, where, pair, explode, explode_politely]

TURNS: dict[str, list[Step]] = {
    "sync tool": [ToolCall("add", {"a": 2, "b": 3}), "five"],
    "async tool": [ToolCall("shout", {"text": "hi"}), "done"],
    "tool taking its ToolContext": [ToolCall("where", {"note": "here"}), "done"],
    "tool returning a dict": [ToolCall("pair", {"a": 4}), "done"],
    "tool raising": [ToolCall("explode", {"reason": "disk"}), "it failed"],
    "tool with a failure function": [ToolCall("explode_politely", {"reason": "gone"}), "it failed"],
    "arguments of the wrong type": [ToolCall("add", {"a": "x", "b": 1}), "retry"],
    "arguments that are not JSON": [ToolCall("add", "not json"), "retry"],
    "parallel calls": [[ToolCall("add", {"a": 1, "b": 1}), ToolCall("shout", {"text": "yo"})], "both"],
    "no tool": ["just text"],
}
DETAILED = ("arguments of the wrong type",)
"""Turns whose tool output names the argument that was wrong (the detail a hidden marker loses)."""

_ID = re.compile(r"\b(?:call|fc|msg|resp)_[0-9a-f]{8}_\d+\b")


def _normalized(value: Any) -> Any:
    """`value` as JSON with the scripted model's ids numbered by first appearance (they differ run to run)."""
    seen: dict[str, str] = {}
    text = json.dumps(value, sort_keys=True, default=repr)
    return json.loads(_ID.sub(lambda match: seen.setdefault(match.group(), f"id{len(seen)}"), text))


class HookLog(AgentHooks[Any]):
    def __init__(self) -> None:
        self.lines: list[Any] = []

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        self.lines.append(["start", tool.name, context.tool_arguments, context.usage.requests])

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.lines.append(["end", tool.name, repr(result)])


async def outcome(steps: list[Step], *, streaming: bool = False, hooks: bool = False) -> Any:
    """Final output, every thread, the events' kinds and what hooks heard, for one turn of one agent."""
    log = HookLog() if hooks else None
    agent = Agent(name="Worker", model=ScriptedModel(steps), tools=TOOLS, hooks=log)
    agency = Agency(agent)
    events: list[Any] = []
    if streaming:
        stream = agency.get_response_stream("go", chat_id="c", context={"user": 1})
        events = [event.to_dict() async for event in stream if event.type != "raw"]
        result = stream.result
    else:
        result = await agency.get_response("go", chat_id="c", context={"user": 1})
    threads = agency.thread_manager.get_threads("c")
    return _normalized([result.final_output, result.new_items, threads, events, log.lines if log else None])


async def outcomes(names: tuple[str, ...] = tuple(TURNS)) -> dict[str, Any]:
    return {name: await outcome(TURNS[name]) for name in names}


# -- SHORTCUTS --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("hooks", [False, True], ids=["plain", "hooks"])
@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
@pytest.mark.parametrize("name", list(TURNS))
async def test_shortcuts_off_gives_the_same_turn(
    monkeypatch: pytest.MonkeyPatch, name: str, streaming: bool, hooks: bool
) -> None:
    fast = await outcome(TURNS[name], streaming=streaming, hooks=hooks)
    monkeypatch.setattr(_sdk, "SHORTCUTS", False)
    plain = await outcome(TURNS[name], streaming=streaming, hooks=hooks)
    assert plain == fast


async def test_a_delegation_is_the_same_with_shortcuts_off(monkeypatch: pytest.MonkeyPatch) -> None:
    async def delegation() -> Any:
        ceo = Agent(name="CEO", model=ScriptedModel([send_message("Dev", "add 2 and 2"), "four"]))
        dev = Agent(name="Dev", model=ScriptedModel([ToolCall("add", {"a": 2, "b": 2}), "4"]), tools=[add])
        agency = Agency([ceo, [ceo, dev]])
        result = await agency.get_response("go", chat_id="d")
        return _normalized([result.final_output, agency.thread_manager.get_threads("d")])

    fast = await delegation()
    monkeypatch.setattr(_sdk, "SHORTCUTS", False)
    assert await delegation() == fast


async def test_shortcuts_off_really_takes_the_sdk_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each shortcut answers differently when it is off: not a switch that nothing reads."""
    from openai.types.responses import ResponseFunctionToolCall

    from agency_swarm._base import _items as _items
    from agency_swarm._model import _usage
    from agency_swarm._turn import _tools as _tools

    call = ResponseFunctionToolCall(type="function_call", call_id="c1", name="add", arguments='{"a": 1, "b": 2}')

    class Run:
        user_context = None

        def context(self) -> Any:
            return agents.RunContextWrapper(context=None)

    assert _direct_call.direct_call(add) is not None
    assert type(_tools.tool_context(Run(), call, None, _tools.TOOL_RUN_CONFIG)) is _sdk.RunToolContext
    assert _sdk.tracing_switched_off(get_trace_provider()) is True
    monkeypatch.setattr(_sdk, "SHORTCUTS", False)
    assert _direct_call.direct_call(add) is None
    assert type(_tools.tool_context(Run(), call, None, _tools.TOOL_RUN_CONFIG)) is ToolContext
    assert _sdk.tracing_switched_off(get_trace_provider()) is False
    assert open_trace("Worker", "c") is None  # `trace()` said so instead
    assert _items.stored_item(call) == call.model_dump(exclude_unset=True)
    assert _usage.new_usage(1, 2, 3, 5) == agents.Usage(requests=1, input_tokens=2, output_tokens=3, total_tokens=5)


# -- each borrowed name hidden ----------------------------------------------------------------------------------


class Hider:
    """Hides borrowed names the way a newer SDK would, and puts everything back afterwards."""

    def __init__(self) -> None:
        self.patch = pytest.MonkeyPatch()

    def forget(self) -> None:
        """What was worked out per tool while the names were there must not be reused."""
        self.patch.setattr(_direct_call, "_MEMO", {})
        self.patch.setattr(_direct_call, "_TAKES_TOOL_CONTEXT", {})

    def module_name(self, module: Any, name: str) -> None:
        """The SDK module lacks `name` while agency_swarm's `_sdk` is imported again (the SDK itself keeps it:
        its own code still calls it)."""
        with pytest.MonkeyPatch.context() as during_import:
            during_import.delattr(module, name)
            importlib.reload(_sdk)
        self.forget()

    def attribute(self, constant: str) -> None:
        """The SDK object's attribute `_sdk.<constant>` names is called something else now."""
        self.patch.setattr(_sdk, constant, "_renamed_in_a_newer_sdk")
        self.forget()

    def restore(self) -> None:
        self.patch.undo()
        importlib.reload(_sdk)


@pytest.fixture
def hider() -> Iterator[Hider]:
    hiding = Hider()
    try:
        yield hiding
    finally:
        hiding.restore()
    assert _sdk._INVOKER is agents.tool._FailureHandlingFunctionToolInvoker
    assert _sdk._FILLS_TOOL_CONTEXT


MODULE_NAMES = [
    (agents.tool, "_FailureHandlingFunctionToolInvoker", "_INVOKER"),
    (agents._function_tool_arguments, "can_prepare_without_user_code", "_CAN_PREPARE"),
    (agents.tool, "_get_function_tool_invoke_context", "_INVOKE_CONTEXT"),
]


@pytest.mark.parametrize(("module", "name", "ours"), MODULE_NAMES, ids=[name for _, name, _ in MODULE_NAMES])
async def test_a_hidden_tool_name_means_the_sdk_path_and_the_same_turns(
    hider: Hider, module: Any, name: str, ours: str
) -> None:
    expected = await outcomes()
    hider.module_name(module, name)
    assert getattr(_sdk, ours) is None
    assert _direct_call.direct_call(add) is None
    assert await outcomes() == expected


async def test_without_the_sdks_approval_check_every_call_of_a_policy_tool_waits(hider: Hider) -> None:
    """Fail closed: without the SDK's check nobody knows whether the tool runs with what the policy would see."""
    asked: list[dict[str, Any]] = []

    async def never(_context: Any, arguments: dict[str, Any], _call_id: str) -> bool:
        asked.append(arguments)
        return False

    @function_tool(needs_approval=never)
    def note(text: str) -> str:
        """Write a note."""
        return f"noted {text}"

    def paused_turn() -> Any:
        model = ScriptedModel([ToolCall("note", {"text": "hi"}), "done"])
        return Agent(name="Notes", tools=[note], model=model).get_response("note it")

    assert not (await paused_turn()).paused
    assert asked == [{"text": "hi"}]
    hider.module_name(agents.util._approvals, "evaluate_function_tool_approval")
    assert _sdk._EVALUATE_APPROVAL is None
    assert (await paused_turn()).paused
    assert asked == [{"text": "hi"}]


INVOKER_ATTRIBUTES = ["_TOOL_OF_INVOKER", "_IMPLEMENTATION_OF_INVOKER", "_ERROR_HANDLER_OF_INVOKER", "_IMPLEMENTATION"]


@pytest.mark.parametrize("constant", INVOKER_ATTRIBUTES)
async def test_a_renamed_invoker_attribute_means_the_sdk_path_and_the_same_turns(hider: Hider, constant: str) -> None:
    plain = tuple(name for name in TURNS if name not in DETAILED)
    expected = await outcomes(plain)
    hider.attribute(constant)
    assert _direct_call.direct_call(add) is None
    assert await outcomes(plain) == expected


async def test_an_invoker_whose_closure_changed_means_the_sdk_path(hider: Hider) -> None:
    expected = await outcomes()
    hider.patch.setattr(_sdk, "_CLOSURE", _sdk._CLOSURE - {"the_func"} | {"the_function"})
    hider.forget()
    assert _direct_call.direct_call(add) is None
    assert await outcomes() == expected


@pytest.mark.parametrize("constant", ["_WRAPPED_CALLABLE", "_IMPLEMENTATION_OF_INVOKER"])
async def test_without_the_decorated_function_the_model_still_reads_that_its_arguments_were_wrong(
    hider: Hider, constant: str
) -> None:
    [detailed] = (await outcomes(DETAILED)).values()
    assert "a: Input should be a valid integer" in json.dumps(detailed)
    hider.attribute(constant)
    assert _sdk.decorated_function(add) is None
    [plain] = (await outcomes(DETAILED)).values()
    assert plain[0] == "retry"
    text = json.dumps(plain)
    assert "Error: invalid arguments for tool 'add': they do not match its parameters." in text
    assert "valid integer" not in text


@pytest.mark.parametrize("field", [
    "_approvals", "_tool_invocations", "_restored_unbound_approval_call_ids", "_custom_data",
    "_function_tool_arguments",
])
async def test_a_renamed_tool_context_field_means_the_constructor_and_the_same_turns(
    hider: Hider, field: str
) -> None:
    expected = await outcomes()
    built = ToolContext.__init__

    def renamed(self: Any, *args: Any, **kwargs: Any) -> None:
        built(self, *args, **kwargs)
        self.__dict__[field + "_v2"] = self.__dict__.pop(field)

    with pytest.MonkeyPatch.context() as newer_sdk:
        newer_sdk.setattr(ToolContext, "__init__", renamed)
        importlib.reload(_sdk)
    hider.forget()
    assert not _sdk._FILLS_TOOL_CONTEXT
    assert await outcomes() == expected


async def test_a_hidden_retry_flag_means_a_flag_of_our_own_and_the_same_turn(hider: Hider) -> None:
    """The SDK's models read the flag while a request is sent; with ours nobody does (clients retry themselves)."""
    from test_sync_and_real_client import FakeResponsesAPI

    seen: list[bool] = []

    class API(FakeResponsesAPI):
        def handler(self, request: httpx2.Request) -> httpx2.Response:
            seen.append(agents.models._retry_runtime.should_disable_provider_managed_retries())
            return super().handler(request)

    async def turn() -> Any:
        api = API()
        async with AsyncOpenAI(api_key="sk-test", base_url="http://testserver/v1",
                               http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api.handler))) as client:
            ceo = Agent(name="CEO", instructions="You are the CEO.",
                        model=OpenAIResponsesModel(model="m", openai_client=client))
            dev = Agent(name="Developer", instructions="You are the Developer.",
                        model=OpenAIResponsesModel(model="m", openai_client=client))
            result = await Agency([ceo, [ceo, dev]]).get_response("Build it", chat_id="r")
        return result.final_output

    expected = await turn()
    assert seen == [True, True, True]
    hider.module_name(agents.models._retry_runtime, "_DISABLE_PROVIDER_MANAGED_RETRIES")
    assert _sdk._NO_CLIENT_RETRIES is _sdk._OWN_NO_CLIENT_RETRIES
    seen.clear()
    assert await turn() == expected
    assert seen == [False, False, False]


@pytest.mark.parametrize("constant", ["_REFRESH_FLAG", "_DISABLED_FLAG"])
async def test_unreadable_tracing_flags_mean_asking_trace(hider: Hider, constant: str) -> None:
    expected = await outcomes()
    assert _sdk.tracing_switched_off(get_trace_provider()) is True
    hider.attribute(constant)
    assert _sdk.tracing_switched_off(get_trace_provider()) is False
    assert open_trace("Worker", "c") is None  # tracing is off in the tests: `trace()` gave a NoOpTrace
    assert await outcomes() == expected


@pytest.mark.parametrize("constant", ["_PROCESSOR_SET", "_PROCESSORS", "_EXPORTER"])
async def test_an_unreadable_processor_list_keeps_tracing_on(hider: Hider, constant: str) -> None:
    from agents.tracing.processors import BatchTraceProcessor, default_exporter

    expected = await outcomes(("sync tool",))
    agents.set_tracing_disabled(False)
    agents.set_trace_processors([BatchTraceProcessor(default_exporter())])  # the SDK's own set-up, and no key
    try:
        assert open_trace("Worker", "c") is None  # it would be dropped with "OPENAI_API_KEY is not set"
        hider.attribute(constant)
        opened = open_trace("Worker", "c")
        assert opened is not None  # the fallback: trace, and let the SDK say it skips the export
        opened.trace.finish()
    finally:
        agents.set_tracing_disabled(True)
        agents.set_trace_processors([])
    assert await outcomes(("sync tool",)) == expected


def test_the_package_imports_and_runs_a_tool_turn_with_every_borrowed_module_name_gone() -> None:
    script = """
import asyncio, importlib, pkgutil, sys
import agents, agents.tool, agents._function_tool_arguments, agents.models._retry_runtime, agents.util._approvals
hidden = [(agents.tool, "_FailureHandlingFunctionToolInvoker"), (agents.tool, "_get_function_tool_invoke_context"),
          (agents._function_tool_arguments, "can_prepare_without_user_code"),
          (agents.models._retry_runtime, "_DISABLE_PROVIDER_MANAGED_RETRIES"),
          (agents.util._approvals, "evaluate_function_tool_approval")]
saved = [(module, name, getattr(module, name)) for module, name in hidden]
for module, name, _ in saved:
    delattr(module, name)
import agency_swarm, agency_swarm.testing
from agency_swarm import Agency, Agent  # loads the package's modules (`import agency_swarm` alone loads none)
assert "agency_swarm._base._sdk" in sys.modules and "agency_swarm._turn._tools" in sys.modules
for module, name, value in saved:  # the SDK's own code (function_tool, invoke_function_tool) still needs them
    setattr(module, name, value)
for info in pkgutil.walk_packages(agency_swarm.__path__, "agency_swarm."):
    if not info.name.startswith("agency_swarm.serving") and info.name != "agency_swarm.__main__":
        importlib.import_module(info.name)
from agency_swarm import Agent, function_tool
from agency_swarm._base import _sdk as _sdk
from agency_swarm.testing import ScriptedModel, ToolCall
@function_tool
def add(a: int, b: int) -> int:
    "Add."
    return a + b
agent = Agent(name="Calc", tools=[add], model=ScriptedModel([ToolCall("add", {"a": 2, "b": 3}), "five"]))
result = asyncio.run(agent.get_response("add"))
print(_sdk._INVOKER, _sdk._CAN_PREPARE, _sdk._INVOKE_CONTEXT, _sdk._EVALUATE_APPROVAL, _sdk._NO_CLIENT_RETRIES.name)
print(result.final_output, [item.get("output") for item in result.new_items if "output" in item])
"""
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    env["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["None None None None agency_swarm_no_client_retries", "five ['5']"]


async def test_a_reloaded_sdk_module_leaves_every_caller_working(hider: Hider) -> None:
    """Other modules hold `_sdk`'s functions; a reload (as in these tests) must leave them reading the new state."""
    importlib.reload(_sdk)
    agent = Agent(name="Calc", tools=[add], model=ScriptedModel([ToolCall("add", {"a": 2, "b": 3}), "five"]))
    assert (await agent.get_response("add")).final_output == "five"
    assert _direct_call.direct_call(add) is not None
