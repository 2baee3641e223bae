"""Building each agent of the file: its instructions, settings, tools, model and retry policy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base._errors import ConfigError
from ._instructions import check_placeholders, instruction_text, text_loc
from ._model_choice import model_for
from ._source import Loc, Source
from ._toolkits import pick_tools

if TYPE_CHECKING:
    from agents import Model, Tool

    from .._model._retry import RetryPolicy
    from .._turn._agent import Agent
    from ._schema import AgentSpec, RetrySpec


def build_agent(
    source: Source,
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
    instructions = instruction_text(source, (*loc, "instructions"), spec.instructions, spec.instructions_file)
    if instructions is not None:
        where = f"The instructions of agent {name!r}"
        check_placeholders(source, instructions, where, text_loc(spec, (*loc, "instructions")))
    if spec.max_steps is not None and spec.max_iterations is not None:
        raise source.error("set max_steps or its alias max_iterations, not both.", (*loc, "max_iterations"))
    settings = spec.model_settings()
    if spec.reasoning is not None:
        settings["reasoning"] = Reasoning(**spec.reasoning.model_dump(exclude_none=True))
    tools = pick_tools(source, loc, spec, registry)
    try:
        return Agent(
            name=name,
            description=spec.description,
            instructions=instructions,
            model=model_for(name, spec.model, model_choice),
            model_settings=ModelSettings(**settings),
            tools=tools,
            max_steps=spec.max_steps or spec.max_iterations or DEFAULT_MAX_STEPS,
            history_window=spec.history_window,
            retry=retry_policy(spec.retry),
            show_tool_errors=spec.show_tool_errors,
        )
    except ConfigError as error:
        raise source.error(str(error), loc) from error


def retry_policy(spec: RetrySpec | None) -> RetryPolicy | None:
    from .._model._retry import RetryPolicy

    return None if spec is None else RetryPolicy(**spec.model_dump())


def _check_agent_name(source: Source, name: str) -> None:
    from .._base._names import USER

    loc: Loc = ("agents", name)
    if not name.strip():
        raise source.error("an agent name is empty; give every agent a name.", loc)
    if "->" in name:
        raise source.error(f"agent name {name!r} contains '->', which separates thread keys; rename it.", loc)
    if name == USER:
        raise source.error(f"{USER!r} is reserved for the person talking to the agency; rename this agent.", loc)
