"""Agency.from_config: agencies from YAML or JSON files, with errors naming the file, the line and the key."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .._base._errors import ConfigError, ConfigFileError

if TYPE_CHECKING:
    from agents import Model, ModelProvider, Tool
    from pydantic import ValidationError

    from .._model._retry import RetryPolicy
    from .._threads._store import ThreadStore
    from .._turn._agent import Agent
    from ._schema import AgentSpec, ChartSpec, DepartmentSpec, FileSpec, RetrySpec, StoreSpec

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}
MAX_FILE_BYTES = 1_000_000
"""Config files and the instruction files they name are read whole; anything bigger is a mistake."""
MAX_NODES = 100_000
"""YAML aliases can make a small file describe a huge tree; refuse before anything walks it."""
MAX_LISTED_PROBLEMS = 20

_CREDENTIAL_KEY = re.compile(r"api[_-]?key|secret|passw|token|credential", re.IGNORECASE)

Loc = tuple[str | int, ...]
Built = TypeVar("Built")


def key_name(loc: Loc) -> str:
    """`("agents", "CEO", "toolkits", 0)` -> `agents.CEO.toolkits[0]`."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@dataclass(kw_only=True)
class _Source:
    """The file being loaded: how to name it, where it lives, which line each key is on."""

    shown: str
    directory: str
    lines: dict[Loc, int] = field(default_factory=dict)
    non_text_keys: dict[Loc, list[tuple[str, int]]] = field(default_factory=dict)
    """Keys YAML reads as something other than text (`yes`, `1`), as written, with their lines."""

    def line_of(self, loc: Loc) -> int | None:
        for end in range(len(loc), -1, -1):  # a missing key is reported on its parent's line
            line = self.lines.get(loc[:end])
            if line is not None:
                return line
        return None

    def where(self, loc: Loc, line: int | None) -> str:
        parts = [self.shown]
        if line is not None:
            parts.append(f"line {line}")
        if loc:
            parts.append(f"key {key_name(loc)}")
        return ", ".join(parts)

    def error(self, problem: str, loc: Loc = (), *, line: int | None = None) -> ConfigFileError:
        line = self.line_of(loc) if line is None else line
        return ConfigFileError(
            f"{self.where(loc, line)}: {problem}", path=self.shown, line=line, key=key_name(loc) or None
        )


# -- the entry point ------------------------------------------------------------------------------------------


def load_agency(
    cls: Callable[..., Built],
    path: str | os.PathLike[str],
    *,
    toolkits: Mapping[str, Sequence[Tool]] | None = None,
    model_provider: ModelProvider | None = None,
    thread_store: ThreadStore | None = None,
    threads_dir: str | os.PathLike[str] | None = None,
    models: Model | Mapping[str, Model] | None = None,
) -> Built:
    """Read, validate and build; the first problem found stops everything before any agent exists.

    `cls` (the agency class) is called with the chart and the options, as `cls(*entries, communication_flows=...)`.
    """
    if thread_store is not None and threads_dir is not None:
        raise ConfigError("Pass either thread_store or threads_dir, not both.")
    registry = _check_toolkits(toolkits)
    model_choice = _check_models(models)
    source, raw = _read(path)
    spec = _validate(source, raw)
    agents = {name: _build_agent(source, name, agent, registry, model_choice) for name, agent in spec.agents.items()}
    _check_model_keys(source, spec, model_choice)
    entries, flows = _chart(source, spec.chart, agents)
    _check_reserved_tool_names(source, agents, flows)
    shared = _text(source, ("shared_instructions",), spec.shared_instructions, spec.shared_instructions_file)
    if shared is not None:
        where = "The agency's shared_instructions"
        _check_placeholders(source, shared, where, _text_loc(spec, ("shared_instructions",)))
    store_options = _store_options(source, spec.store, thread_store, threads_dir)
    options: dict[str, Any] = {"model_provider": model_provider, "shared_instructions": shared, **store_options}
    if spec.max_recursion_depth is not None:
        options["max_recursion_depth"] = spec.max_recursion_depth
    if spec.retry is not None:
        options["retry"] = _retry_policy(spec.retry)
    if spec.show_tool_errors is not None:
        options["show_tool_errors"] = spec.show_tool_errors
    try:
        return cls(*entries, communication_flows=flows, **options)
    except ConfigFileError:
        raise
    except ConfigError as error:
        raise source.error(str(error)) from error


# -- reading and parsing --------------------------------------------------------------------------------------


def _read(path: str | os.PathLike[str]) -> tuple[_Source, Any]:
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(f"from_config needs the path of a .yaml, .yml or .json file, got {type(path).__name__}.")
    shown = os.fspath(path)
    kind = SUFFIXES.get(os.path.splitext(shown)[1].lower())
    if kind is None:
        raise ConfigError(f"{shown}: a config file must end in .yaml, .yml or .json.")
    source = _Source(shown=shown, directory=os.path.realpath(os.path.dirname(os.path.abspath(shown))))
    text = _read_text(source, shown, ())
    if kind == "yaml":
        return source, _parse_yaml(source, text)
    return source, _parse_json(source, text)


def _read_text(source: _Source, path: str, loc: Loc) -> str:
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise source.error(f"the file {path} does not exist.", loc) from None
    except IsADirectoryError:
        raise source.error(f"{path} is a directory, not a file.", loc) from None
    except OSError as error:
        raise source.error(f"cannot read {path}: {error.strerror or error}.", loc) from None
    if len(data) > MAX_FILE_BYTES:
        raise source.error(f"{path} is larger than {MAX_FILE_BYTES} bytes; is it the right file?", loc)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise source.error(f"{path} is not UTF-8 text (byte {error.start}).", loc) from None


def _parse_yaml(source: _Source, text: str) -> Any:
    import yaml

    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        node = yaml.compose(text, Loader=loader)
        if node is not None:
            _index(source, node)
        data = yaml.load(text, Loader=loader)  # a safe loader: plain data, never objects
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = error.problem or "cannot parse"
        if error.context:
            started = error.context_mark
            problem += f" {error.context}" + ("" if started is None else f" that starts on line {started.line + 1}")
        raise source.error(f"invalid YAML: {problem}.", line=None if mark is None else mark.line + 1) from None
    except yaml.YAMLError as error:
        raise source.error(f"invalid YAML: {error}.") from None
    except RecursionError:
        raise source.error("the YAML is nested too deeply.") from None
    return data


def _parse_json(source: _Source, text: str) -> Any:
    import yaml

    try:  # JSON is YAML too: its node marks give line numbers
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if node is not None:
            _index(source, node)
    except (yaml.YAMLError, RecursionError):
        source.lines.clear()  # only the line numbers are lost; json decides what is valid
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise source.error(f"invalid JSON: {error.msg}.", line=error.lineno) from None
    except _DuplicateKey as duplicate:
        raise source.error(f"the key {duplicate.key!r} appears twice in one object.") from None
    except RecursionError:
        raise source.error("the JSON is nested too deeply.") from None


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _index(source: _Source, root: Any) -> None:
    """Record the line of every key and list item; refuse duplicate keys (safe_load keeps the last silently)."""
    import yaml

    budget = MAX_NODES
    stack: list[tuple[Any, Loc]] = [(root, ())]
    source.lines.setdefault((), root.start_mark.line + 1)
    while stack:
        node, loc = stack.pop()
        budget -= 1
        if budget < 0:
            raise source.error(f"the file describes more than {MAX_NODES} values (through YAML aliases?).")
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue  # a complex key: validation reports it
                key, line = key_node.value, key_node.start_mark.line + 1
                if key_node.tag != "tag:yaml.org,2002:str":
                    source.non_text_keys.setdefault(loc, []).append((key, line))
                if key in seen and key != "<<":
                    what = "agent" if loc == ("agents",) else "key"
                    raise source.error(f"duplicate {what} {key!r} (first defined on line {seen[key]}).", loc, line=line)
                seen[key] = line
                source.lines.setdefault((*loc, key), line)
                stack.append((value_node, (*loc, key)))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                source.lines.setdefault((*loc, index), item.start_mark.line + 1)
                stack.append((item, (*loc, index)))


# -- validation -------------------------------------------------------------------------------------------------


def _validate(source: _Source, raw: Any) -> FileSpec:
    from pydantic import ValidationError

    from ._schema import FileSpec

    if not isinstance(raw, dict):
        raise source.error(
            f"the file must hold a mapping with an `agents:` key, not {_kind(raw)}.", line=source.lines.get(())
        )
    data = dict(raw)
    if isinstance(data.get("agents"), list):
        data["agents"] = _agents_by_name(source, data["agents"])
    elif isinstance(data.get("agents"), dict):
        data["agents"] = _agents_named_by_key(source, data["agents"])
    try:
        return FileSpec.model_validate(data)
    except ValidationError as error:
        raise _explain(source, error) from None


def _agents_by_name(source: _Source, items: list[Any]) -> dict[Any, Any]:
    """The list form `agents: [{name: CEO, ...}]` becomes the mapping form; line numbers follow."""
    agents: dict[Any, Any] = {}
    first_index: dict[str, int] = {}
    for index, item in enumerate(items):
        loc: Loc = ("agents", index)
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            raise source.error("each agent in the list needs a `name:` (text).", loc)
        name = item["name"]
        if name in agents:
            first = source.line_of(("agents", first_index[name]))
            raise source.error(f"duplicate agent {name!r} (first defined on line {first}).", loc)
        first_index[name] = index
        agents[name] = {key: value for key, value in item.items() if key != "name"}
    names = {index: name for name, index in first_index.items()}
    for known, line in list(source.lines.items()):
        if len(known) > 1 and known[0] == "agents" and known[1] in names:
            source.lines.setdefault(("agents", names[known[1]], *known[2:]), line)
    return agents


def _agents_named_by_key(source: _Source, agents: dict[Any, Any]) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    for name, item in agents.items():
        if not isinstance(name, str):
            odd = source.non_text_keys.get(("agents",))
            written, line = odd[0] if odd else (str(name), None)
            raise source.error(
                f"YAML reads the agent name {written} as {_kind(name)}; quote it: '{written}'.", ("agents",), line=line
            )
        if isinstance(item, dict) and "name" in item:
            if item["name"] != name:
                raise source.error(
                    f"`name: {item['name']}` differs from the key {name!r}; the key is the agent's name, drop `name:`.",
                    ("agents", name, "name"),
                )
            item = {key: value for key, value in item.items() if key != "name"}
        result[name] = {} if item is None else item
    return result


def _explain(source: _Source, error: ValidationError) -> ConfigFileError:
    problems: list[tuple[int, Loc, str]] = []
    for item in error.errors(include_url=False):
        loc: Loc = tuple(item["loc"])
        problems.append((source.line_of(loc) or 0, loc, _problem(item, loc)))
    problems.sort(key=lambda problem: problem[0])
    _, loc, first = problems[0]
    found = source.error(first, loc)
    if len(problems) > 1:
        shown = problems[1 : MAX_LISTED_PROBLEMS + 1]
        others = "\n".join(f"  {source.where(other, source.line_of(other))}: {text}" for _, other, text in shown)
        if len(problems) - 1 > len(shown):
            others += f"\n  ... and {len(problems) - 1 - len(shown)} more"
        found = ConfigFileError(
            f"{found}\n{len(problems) - 1} more problem(s):\n{others}", path=found.path, line=found.line, key=found.key
        )
    return found


def _problem(item: Any, loc: Loc) -> str:
    import difflib

    from ._schema import model_at

    kind = item["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        model = model_at(loc[:-1])
        allowed = list(model.model_fields) if model is not None else []
        close = difflib.get_close_matches(key, allowed, n=1)
        if not close and _CREDENTIAL_KEY.search(key):
            return (
                f"{key!r} looks like a credential, and config files never hold API keys or passwords: the OpenAI "
                "client reads OPENAI_API_KEY from the environment; build other clients in Python (models=...)."
            )
        hint = f" Did you mean {close[0]!r}?" if close else ""
        listed = f" Allowed here: {', '.join(allowed)}." if allowed else ""
        return f"unknown key {key!r}.{hint}{listed}"
    if kind == "missing":
        return f"the required key {loc[-1]!r} is missing."
    message = str(item["msg"]).removeprefix("Value error, ")
    if kind.endswith("_type"):
        message += f" (got {_kind(item.get('input'))})"
    return message + "."


def _kind(value: Any) -> str:
    """YAML's words for a Python value's type; values themselves are never echoed (they may be secrets)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {str: "text", int: "an integer", float: "a number", list: "a list", dict: "a mapping"}
    return names.get(type(value), type(value).__name__)


# -- agents ------------------------------------------------------------------------------------------------------


def _build_agent(
    source: _Source,
    name: str,
    spec: AgentSpec,
    registry: dict[str, list[Tool]],
    model_choice: Model | dict[str, Model] | None,
) -> Agent:
    from agents import ModelSettings
    from openai.types.shared import Reasoning

    from .._turn._agent import Agent
    from .._turn._definition import DEFAULT_MAX_STEPS

    loc: Loc = ("agents", name)
    _check_agent_name(source, name)
    instructions = _text(source, (*loc, "instructions"), spec.instructions, spec.instructions_file)
    if instructions is not None:
        where = f"The instructions of agent {name!r}"
        _check_placeholders(source, instructions, where, _text_loc(spec, (*loc, "instructions")))
    if spec.max_steps is not None and spec.max_iterations is not None:
        raise source.error("set max_steps or its alias max_iterations, not both.", (*loc, "max_iterations"))
    settings = spec.model_settings()
    if spec.reasoning is not None:
        settings["reasoning"] = Reasoning(**spec.reasoning.model_dump(exclude_none=True))
    tools = _tools(source, loc, spec, registry)
    try:
        return Agent(
            name=name,
            description=spec.description,
            instructions=instructions,
            model=_model_for(name, spec.model, model_choice),
            model_settings=ModelSettings(**settings),
            tools=tools,
            max_steps=spec.max_steps or spec.max_iterations or DEFAULT_MAX_STEPS,
            history_window=spec.history_window,
            retry=_retry_policy(spec.retry),
            show_tool_errors=spec.show_tool_errors,
        )
    except ConfigError as error:
        raise source.error(str(error), loc) from error


def _retry_policy(spec: RetrySpec | None) -> RetryPolicy | None:
    from .._model._retry import RetryPolicy

    return None if spec is None else RetryPolicy(**spec.model_dump())


def _check_agent_name(source: _Source, name: str) -> None:
    from .._base._names import USER

    loc: Loc = ("agents", name)
    if not name.strip():
        raise source.error("an agent name is empty; give every agent a name.", loc)
    if "->" in name:
        raise source.error(f"agent name {name!r} contains '->', which separates thread keys; rename it.", loc)
    if name == USER:
        raise source.error(f"{USER!r} is reserved for the person talking to the agency; rename this agent.", loc)


def _text_loc(spec: Any, loc: Loc) -> Loc:
    """Point at `instructions_file` when the text came from a file."""
    return (*loc[:-1], f"{loc[-1]}_file") if getattr(spec, f"{loc[-1]}_file", None) is not None else loc


def _check_placeholders(source: _Source, text: str, where: str, loc: Loc) -> None:
    from .._base._placeholders import placeholder_problem

    problem = placeholder_problem(text, where)
    if problem is not None:
        raise source.error(problem, loc)


def _text(source: _Source, loc: Loc, inline: str | None, file: str | None) -> str | None:
    """Inline text or the content of a file inside the config's directory."""
    if file is None:
        return inline
    file_loc: Loc = (*loc[:-1], f"{loc[-1]}_file")
    if inline is not None:
        raise source.error(f"set {loc[-1]} or {loc[-1]}_file, not both.", file_loc)
    return _read_text(source, _inside(source, file, file_loc), file_loc)


def _inside(source: _Source, relative: str, loc: Loc) -> str:
    """The real path of `relative`, which must stay in the config's directory (symlinks resolved)."""
    if "\0" in relative:
        raise source.error("the path contains a NUL character.", loc)
    if os.path.isabs(relative) or relative.startswith("~"):
        raise source.error(
            f"{relative!r} is absolute; write paths relative to the config file's directory ({source.directory}).", loc
        )
    joined = os.path.normpath(os.path.join(source.directory, relative))
    real = os.path.realpath(joined)
    for candidate, how in ((joined, "points outside"), (real, "is a symlink to a file outside")):
        if os.path.commonpath([candidate, source.directory]) != source.directory:
            raise source.error(
                f"{relative!r} {how} the config file's directory ({source.directory}); keep instruction files "
                "next to the config or below it.",
                loc,
            )
    return real


# -- toolkits and models ----------------------------------------------------------------------------------------


def _tool_classes() -> tuple[type, ...]:
    import typing

    from agents import Tool

    return tuple(typing.get_origin(kind) or kind for kind in typing.get_args(Tool))


def _check_toolkits(toolkits: Mapping[str, Sequence[Tool]] | None) -> dict[str, list[Tool]]:
    if toolkits is None:
        return {}
    if not isinstance(toolkits, Mapping):
        raise ConfigError('toolkits must be a mapping of names to lists of tools, e.g. {"search": [web_search]}.')
    classes = _tool_classes()
    registry: dict[str, list[Tool]] = {}
    for name, tools in toolkits.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"toolkit names must be non-empty text, got {name!r}.")
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            raise ConfigError(f"toolkits[{name!r}] must be a list of tools, got {type(tools).__name__}.")
        names: set[str] = set()
        for tool in tools:
            if not isinstance(tool, classes):
                raise ConfigError(
                    f"toolkits[{name!r}] holds {type(tool).__name__} {getattr(tool, '__name__', '')}, not a tool; "
                    "decorate functions with @function_tool."
                )
            if tool.name in names:
                raise ConfigError(f"toolkits[{name!r}] has two tools named {tool.name!r}.")
            names.add(tool.name)
        registry[name] = list(tools)
    return registry


def _tools(source: _Source, loc: Loc, spec: AgentSpec, registry: dict[str, list[Tool]]) -> list[Tool]:
    chosen: list[Tool] = []
    origin: dict[str, str] = {}
    for index, pick in enumerate(spec.toolkits):
        pick_loc: Loc = (*loc, "toolkits", index)
        available = registry.get(pick.toolkit)
        if available is None:
            known = ", ".join(registry) or "none (pass from_config(..., toolkits={'name': [tool, ...]}))"
            raise source.error(f"unknown toolkit {pick.toolkit!r}. Known toolkits: {known}.", pick_loc)
        if pick.tools is None:
            tools = available
        else:
            by_name = {tool.name: tool for tool in available}
            for position, tool_name in enumerate(pick.tools):
                if tool_name not in by_name:
                    raise source.error(
                        f"toolkit {pick.toolkit!r} has no tool {tool_name!r}; its tools: {', '.join(by_name)}.",
                        (*pick_loc, "tools", position),
                    )
            tools = [by_name[tool_name] for tool_name in dict.fromkeys(pick.tools)]
        for tool in tools:
            if tool.name in origin:
                if origin[tool.name] == pick.toolkit:
                    continue
                raise source.error(
                    f"toolkits {origin[tool.name]!r} and {pick.toolkit!r} both have a tool named {tool.name!r}.",
                    pick_loc,
                )
            origin[tool.name] = pick.toolkit
            chosen.append(tool)
    return chosen


def _check_models(models: Model | Mapping[str, Model] | None) -> Model | dict[str, Model] | None:
    from agents import Model

    if models is None or isinstance(models, Model):
        return models
    if not isinstance(models, Mapping):
        raise ConfigError(
            "models must be an agents.Model (used by every agent) or a mapping of agent names or model names "
            f"to agents.Model instances, got {type(models).__name__}."
        )
    for key, model in models.items():
        if not isinstance(key, str) or not isinstance(model, Model):
            raise ConfigError(
                f"models[{key!r}] must map an agent name or a model name to an agents.Model instance, "
                f"got {type(model).__name__}."
            )
    return dict(models)


def _model_for(name: str, model_name: str | None, choice: Model | dict[str, Model] | None) -> Model | str | None:
    """An agent's own entry in `models`, else its model name's, else the name for the agency's provider."""
    if choice is None or not isinstance(choice, dict):
        return choice if choice is not None else model_name
    if name in choice:
        return choice[name]
    if model_name is not None and model_name in choice:
        return choice[model_name]
    return model_name


def _check_model_keys(source: _Source, spec: FileSpec, choice: Model | dict[str, Model] | None) -> None:
    if not isinstance(choice, dict):
        return
    known = set(spec.agents) | {agent.model for agent in spec.agents.values() if agent.model}
    stray = [key for key in choice if key not in known]
    if stray:
        raise ConfigError(
            f"models= names {', '.join(map(repr, stray))}, which is neither an agent nor a model name in "
            f"{source.shown}; agents: {', '.join(spec.agents)}."
        )


# -- the chart --------------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class _ChartBuilder:
    source: _Source
    agents: dict[str, Agent]
    entries: list[Agent] = field(default_factory=list)
    flows: list[tuple[Agent, Agent]] = field(default_factory=list)

    def agent(self, name: str, loc: Loc) -> Agent:
        agent = self.agents.get(name)
        if agent is None:
            raise self.source.error(
                f"the chart names {name!r}, which is not defined under agents; defined agents: "
                f"{', '.join(self.agents)}.",
                loc,
            )
        return agent

    def flow(self, sender: Agent, recipient: Agent, loc: Loc) -> None:
        if sender is recipient:
            raise self.source.error(f"agent {sender.name!r} cannot message itself.", loc)
        self.flows.append((sender, recipient))

    def departments(self, parent: Agent, departments: list[DepartmentSpec], loc: Loc) -> None:
        for index, department in enumerate(departments):
            here: Loc = (*loc, "departments", index)
            lead = self.agent(department.lead, (*here, "lead"))
            self.flow(parent, lead, (*here, "lead"))
            for position, worker in enumerate(department.workers):
                self.flow(lead, self.agent(worker, (*here, "workers", position)), (*here, "workers", position))
            self.departments(lead, department.departments, here)


def _chart(source: _Source, chart: ChartSpec | None, agents: dict[str, Agent]) -> tuple[list[Agent], list[Any]]:
    if chart is None:
        if len(agents) == 1:
            return list(agents.values()), []
        raise source.error(
            "several agents but no `chart:`; add one, e.g. `chart: {supervisor: Lead, workers: [A, B]}`.",
            line=source.lines.get(()),
        )
    builder = _ChartBuilder(source=source, agents=agents)
    if chart.supervisor is not None:
        supervisor = builder.agent(chart.supervisor, ("chart", "supervisor"))
        builder.entries.append(supervisor)
        for index, worker in enumerate(chart.workers):
            builder.flow(supervisor, builder.agent(worker, ("chart", "workers", index)), ("chart", "workers", index))
        builder.departments(supervisor, chart.departments, ("chart",))
    elif chart.workers or chart.departments:
        key = "workers" if chart.workers else "departments"
        raise source.error(f"{key} report to a supervisor: add `supervisor: <agent name>`.", ("chart", key))
    for index, name in enumerate(chart.entry_points):
        builder.entries.append(builder.agent(name, ("chart", "entry_points", index)))
    for index, chain in enumerate(chart.flows):
        if len(chain) < 2:
            raise source.error(
                "a flow lists a sender and at least one recipient, e.g. [Lead, Writer].", ("chart", "flows", index)
            )
        members = [builder.agent(name, ("chart", "flows", index, position)) for position, name in enumerate(chain)]
        for position in range(1, len(members)):
            builder.flow(members[position - 1], members[position], ("chart", "flows", index, position))
    if not builder.entries:
        raise source.error(
            "the chart has no entry point: add `supervisor:` or `entry_points: [...]` (whom the user talks to).",
            ("chart",),
        )
    used = {agent.name for agent in builder.entries} | {agent.name for pair in builder.flows for agent in pair}
    for name in agents:
        if name not in used:
            raise source.error(
                f"agent {name!r} is defined but the chart never uses it; add it to the chart or remove it.",
                ("agents", name),
            )
    return builder.entries, builder.flows


def _check_reserved_tool_names(source: _Source, agents: dict[str, Agent], flows: list[Any]) -> None:
    """Found here rather than by Agency, so the error has a line and no store has been created yet."""
    from .._base._names import SEND_MESSAGE

    for name in dict.fromkeys(sender.name for sender, _ in flows):
        if any(tool.name == SEND_MESSAGE for tool in agents[name].tools):
            raise source.error(
                f"agent {name!r} messages other agents, so the tool name {SEND_MESSAGE!r} is reserved for that; "
                "a toolkit gives it a tool of that name: rename the tool or leave that toolkit out.",
                ("agents", name, "toolkits"),
            )


# -- the thread store ---------------------------------------------------------------------------------------------

_STORE_KEYS = {"memory": (), "file": ("dir", "durable"), "sqlite": ("path",), "sql": ("url", "url_env")}


def _store_options(
    source: _Source, spec: StoreSpec | None, thread_store: ThreadStore | None, threads_dir: Any
) -> dict[str, Any]:
    if thread_store is not None or threads_dir is not None:  # the caller's choice beats the file's
        return {"thread_store": thread_store, "threads_dir": threads_dir}
    if spec is None:
        return {}
    kind = spec.type or ("sql" if spec.url is not None or spec.url_env is not None else None)
    if kind is None:
        raise source.error("set the store's `type:` (memory, file, sqlite or sql) or its `url:`.", ("store",))
    for key in ("dir", "durable", "path", "url", "url_env"):
        if getattr(spec, key) is not None and key not in _STORE_KEYS[kind]:
            allowed = ", ".join(_STORE_KEYS[kind]) or "nothing else"
            raise source.error(f"a {kind} store takes {allowed}, not {key!r}.", ("store", key))
    if kind == "memory":
        return {}
    if kind == "file":
        from .._threads._file_store import FileThreadStore

        directory = _required(source, spec.dir, "dir", "type: file")
        return {"thread_store": FileThreadStore(_resolve(source, directory), durable=bool(spec.durable))}
    if kind == "sqlite":
        from .._threads._sql_store import SQLiteThreadStore

        database = _required(source, spec.path, "path", "type: sqlite")
        return {"thread_store": SQLiteThreadStore(_resolve(source, database))}
    return {"thread_store": _sql_store(source, spec)}


def _required(source: _Source, value: str | None, key: str, kind: str) -> str:
    if value is None:
        raise source.error(f"a store with {kind} needs `{key}:`.", ("store",))
    return value


def _resolve(source: _Source, path: str) -> str:
    """Store paths are relative to the config file's directory (absolute ones are taken as they are)."""
    return os.path.join(source.directory, os.path.expanduser(path))


def _sql_store(source: _Source, spec: StoreSpec) -> ThreadStore:
    from urllib.parse import urlsplit

    from .._threads._sql_store import SQLThreadStore, redact_url

    if (spec.url is None) == (spec.url_env is None):
        raise source.error(
            "a sql store takes one of `url:` or `url_env:` (the name of an environment variable holding the URL).",
            ("store",),
        )
    if spec.url_env is not None:
        url = os.environ.get(spec.url_env)
        if not url:
            raise source.error(f"the environment variable {spec.url_env} is not set.", ("store", "url_env"))
    else:
        url = spec.url or ""
        try:
            has_password = urlsplit(url).password is not None or "password=" in url.lower()
        except ValueError:
            has_password = False
        if has_password:
            raise source.error(
                f"the store URL {redact_url(url)} holds a password, and config files never hold secrets: put the URL "
                "in an environment variable and write `url_env: ITS_NAME`.",
                ("store", "url"),
            )
        url = _sqlite_url_here(source, url)
    try:
        return SQLThreadStore(url)
    except ConfigError as error:
        raise source.error(str(error), ("store", "url_env" if spec.url_env else "url")) from error


def _sqlite_url_here(source: _Source, url: str) -> str:
    """`sqlite:///threads.db` in a config file means next to the config file, not in the working directory."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower().startswith("sqlite") and rest.startswith("/") and not rest.startswith("//"):
        relative = rest[1:]
        if relative and relative != ":memory:" and not os.path.isabs(relative):
            return f"{scheme}:///{os.path.join(source.directory, relative)}"
    return url
