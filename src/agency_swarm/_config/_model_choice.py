"""The models the caller passes in (one for every agent, or by agent or model name), checked and chosen per agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._base._errors import ConfigError
from ._source import Source

if TYPE_CHECKING:
    from agents import Model

    from ._schema import FileSpec


def check_models(models: Model | Mapping[str, Model] | None) -> Model | dict[str, Model] | None:
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


def model_for(name: str, model_name: str | None, choice: Model | dict[str, Model] | None) -> Model | str | None:
    """An agent's own entry in `models`, else its model name's, else the name for the agency's provider."""
    if choice is None or not isinstance(choice, dict):
        return choice if choice is not None else model_name
    if name in choice:
        return choice[name]
    if model_name is not None and model_name in choice:
        return choice[model_name]
    return model_name


def check_model_keys(source: Source, spec: FileSpec, choice: Model | dict[str, Model] | None) -> None:
    if not isinstance(choice, dict):
        return
    known = set(spec.agents) | {agent.model for agent in spec.agents.values() if agent.model}
    stray = [key for key in choice if key not in known]
    if stray:
        raise ConfigError(
            f"{source.arguments.models} names {', '.join(map(repr, stray))}, which is neither an agent nor a model "
            f"name in {source.shown}; agents: {', '.join(spec.agents)}."
        )
