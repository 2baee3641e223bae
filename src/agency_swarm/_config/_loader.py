"""Agency.from_config: agencies from YAML or JSON files, with errors naming the file, the line and the key."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._base._errors import ConfigError, ConfigFileError
from ._agents import build_agent, retry_policy
from ._chart import build_chart, check_reserved_tool_names
from ._instructions import check_placeholders, instruction_text, text_loc
from ._model_choice import check_model_keys, check_models
from ._parse import read_config
from ._source import PYTHON_ARGUMENTS, ArgumentNames
from ._store_options import thread_store_options
from ._toolkits import check_toolkits
from ._validate import validate_config

if TYPE_CHECKING:
    from agents import Model, ModelProvider, Tool

    from .._threads._store import ThreadStore

Built = TypeVar("Built")


def load_agency(
    cls: Callable[..., Built],
    path: str | os.PathLike[str],
    *,
    toolkits: Mapping[str, Sequence[Tool]] | None = None,
    model_provider: ModelProvider | None = None,
    thread_store: ThreadStore | None = None,
    threads_dir: str | os.PathLike[str] | None = None,
    models: Model | Mapping[str, Model] | None = None,
    arguments: ArgumentNames = PYTHON_ARGUMENTS,
) -> Built:
    """Read, validate and build; the first problem found stops everything before any agent exists.

    `cls` (the agency class) is called with the chart and the options, as `cls(*entries, communication_flows=...)`.
    `arguments`: how errors name toolkits= and models= (the command line has its own options for them).
    """
    if thread_store is not None and threads_dir is not None:
        raise ConfigError("Pass either thread_store or threads_dir, not both.")
    registry = check_toolkits(toolkits)
    model_choice = check_models(models)
    source, raw = read_config(path)
    source.arguments = arguments
    spec = validate_config(source, raw)
    agents = {name: build_agent(source, name, agent, registry, model_choice) for name, agent in spec.agents.items()}
    check_model_keys(source, spec, model_choice)
    entries, flows = build_chart(source, spec.chart, agents)
    check_reserved_tool_names(source, agents, flows)
    shared = instruction_text(source, ("shared_instructions",), spec.shared_instructions, spec.shared_instructions_file)
    if shared is not None:
        where = "The agency's shared_instructions"
        check_placeholders(source, shared, where, text_loc(spec, ("shared_instructions",)))
    store_options = thread_store_options(source, spec.store, thread_store, threads_dir)
    options: dict[str, Any] = {"model_provider": model_provider, "shared_instructions": shared, **store_options}
    if spec.max_recursion_depth is not None:
        options["max_recursion_depth"] = spec.max_recursion_depth
    if spec.retry is not None:
        options["retry"] = retry_policy(spec.retry)
    if spec.show_tool_errors is not None:
        options["show_tool_errors"] = spec.show_tool_errors
    try:
        return cls(*entries, communication_flows=flows, **options)
    except ConfigFileError:
        raise
    except ConfigError as error:
        raise source.error(str(error)) from error


def load_chart(cls: Callable[..., Built], path: str | os.PathLike[str]) -> Built:
    """The agency a file describes, for drawing its chart only: each agent with its name and description, and no
    tools, models or store (so a file whose agents name toolkits draws without them)."""
    from .._turn._agent import Agent

    source, raw = read_config(path)
    spec = validate_config(source, raw)
    agents = {name: Agent(name=name, description=agent.description) for name, agent in spec.agents.items()}
    entries, flows = build_chart(source, spec.chart, agents)
    try:
        return cls(*entries, communication_flows=flows)
    except ConfigFileError:
        raise
    except ConfigError as error:
        raise source.error(str(error)) from error
