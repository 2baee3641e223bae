"""The config file's schema as pydantic models (imported only by the config loader: building them is not free)."""

from __future__ import annotations

from typing import Any, Literal

from openai.types.shared import ReasoningEffort
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._source import yaml_kind

_STRICT = ConfigDict(extra="forbid", strict=True)


class ReasoningSpec(BaseModel):
    """`reasoning: {effort: low, summary: auto}` for reasoning models."""

    model_config = _STRICT

    effort: ReasoningEffort = None
    summary: Literal["auto", "concise", "detailed"] | None = None


class ToolkitPick(BaseModel):
    """`{toolkit: files, tools: [read_file]}`: only these tools of a toolkit (a bare name means all of them)."""

    model_config = _STRICT

    toolkit: str = Field(min_length=1)
    tools: list[str] | None = None


MODEL_SETTING_KEYS = (
    "temperature", "top_p", "frequency_penalty", "presence_penalty", "max_tokens", "tool_choice",
    "parallel_tool_calls", "truncation", "reasoning", "verbosity", "metadata", "top_logprobs", "timeout",
)
"""The agents.ModelSettings fields a config file may set. Headers, query and body extras are left out on purpose:
they are where credentials go, and credentials never belong in a config file."""


class RetrySpec(BaseModel):
    """`retry:` of an agent or of the whole agency: the fields of agency_swarm.RetryPolicy."""

    model_config = _STRICT

    max_attempts: int = Field(default=3, ge=1)
    initial_delay: float = Field(default=0.5, ge=0)
    max_delay: float = Field(default=8.0, ge=0)
    jitter: bool = True
    max_retry_after: float = Field(default=60.0, ge=0)


class AgentSpec(BaseModel):
    """One agent under `agents:` (its name is the key, or `name:` in the list form)."""

    model_config = _STRICT

    description: str | None = None
    model: str | None = Field(default=None, min_length=1)
    instructions: str | None = None
    instructions_file: str | None = Field(default=None, min_length=1)
    toolkits: list[ToolkitPick] = Field(default_factory=list)
    max_steps: int | None = Field(default=None, ge=1)
    max_iterations: int | None = Field(default=None, ge=1)
    """The reference design's name for max_steps."""
    history_window: int | None = Field(default=None, ge=1)
    retry: RetrySpec | None = None
    show_tool_errors: bool | None = None
    # agents.ModelSettings
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    tool_choice: str | None = Field(default=None, min_length=1)
    parallel_tool_calls: bool | None = None
    truncation: Literal["auto", "disabled"] | None = None
    reasoning: ReasoningSpec | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    metadata: dict[str, str] | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    timeout: float | None = Field(default=None, gt=0)

    @field_validator("toolkits", mode="before")
    @classmethod
    def _toolkit_names(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        picks = []
        for index, item in enumerate(value):
            if isinstance(item, str):
                picks.append({"toolkit": item})
            elif isinstance(item, dict):
                picks.append(item)
            else:  # its kind, never the value: a secret pasted here must not be printed back
                raise ValueError(
                    f"toolkits[{index}]: each toolkit is a name (search) or {{toolkit: name, tools: [tool, ...]}}, "
                    f"got {yaml_kind(item)}"
                )
        return picks

    def model_settings(self) -> dict[str, Any]:
        """The settings this agent sets, ready for agents.ModelSettings(**...)."""
        settings: dict[str, Any] = {}
        for key in MODEL_SETTING_KEYS:
            value = getattr(self, key)
            if value is not None:
                settings[key] = value
        return settings


class DepartmentSpec(BaseModel):
    """A lead who may message its workers (and the leads of its own sub-departments)."""

    model_config = _STRICT

    lead: str = Field(min_length=1)
    workers: list[str] = Field(default_factory=list)
    departments: list[DepartmentSpec] = Field(default_factory=list)


class ChartSpec(BaseModel):
    """Who the user may address and who may message whom.

    `supervisor` + `workers` is a flat team; `supervisor` + `departments` a hierarchy; `entry_points` and `flows`
    (chains like `[a, b, c]`: a -> b -> c) say anything else. All forms may be combined.
    """

    model_config = _STRICT

    supervisor: str | None = Field(default=None, min_length=1)
    workers: list[str] = Field(default_factory=list)
    departments: list[DepartmentSpec] = Field(default_factory=list)
    entry_points: list[str] = Field(default_factory=list)
    flows: list[list[str]] = Field(default_factory=list)


class StoreSpec(BaseModel):
    """Where threads are kept. The combinations each `type` allows are checked by the loader."""

    model_config = _STRICT

    type: Literal["memory", "file", "sqlite", "sql"] | None = None
    dir: str | None = Field(default=None, min_length=1)
    durable: bool | None = None
    path: str | None = Field(default=None, min_length=1)
    url: str | None = Field(default=None, min_length=1)
    url_env: str | None = Field(default=None, min_length=1)


class FileSpec(BaseModel):
    """The whole file."""

    model_config = _STRICT

    agents: dict[str, AgentSpec] = Field(min_length=1)
    chart: ChartSpec | None = None
    shared_instructions: str | None = None
    shared_instructions_file: str | None = Field(default=None, min_length=1)
    max_recursion_depth: int | None = Field(default=None, ge=0)
    retry: RetrySpec | None = None
    """The default for agents without their own `retry`."""
    show_tool_errors: bool | None = None
    """The default for agents without their own `show_tool_errors`."""
    store: StoreSpec | None = None


# The model that validates the mapping found at a path of the file; used to list the keys allowed there.
def model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    if not loc:
        return FileSpec
    head, rest = loc[0], loc[1:]
    if head == "agents":
        if len(rest) == 1:
            return AgentSpec
        if len(rest) == 2 and rest[1] == "reasoning":
            return ReasoningSpec
        if len(rest) == 2 and rest[1] == "retry":
            return RetrySpec
        if len(rest) == 3 and rest[1] == "toolkits":
            return ToolkitPick
        return None
    if head == "chart":
        if not rest:
            return ChartSpec
        return DepartmentSpec if rest[-2:-1] == ("departments",) else None
    if head == "store" and not rest:
        return StoreSpec
    if head == "retry" and not rest:
        return RetrySpec
    return None
