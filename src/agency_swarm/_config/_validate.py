"""Validating a parsed file against the schema, and explaining what is wrong by file, line and key."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .._base._errors import ConfigFileError
from ._source import Loc, Source, yaml_kind

if TYPE_CHECKING:
    from pydantic import ValidationError

    from ._schema import FileSpec

MAX_LISTED_PROBLEMS = 20

_CREDENTIAL_KEY = re.compile(r"api[_-]?key|secret|passw|token|credential", re.IGNORECASE)


def validate_config(source: Source, raw: Any) -> FileSpec:
    from pydantic import ValidationError

    from ._schema import FileSpec

    if not isinstance(raw, dict):
        raise source.error(
            f"the file must hold a mapping with an `agents:` key, not {yaml_kind(raw)}.", line=source.lines.get(())
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


def _agents_by_name(source: Source, items: list[Any]) -> dict[Any, Any]:
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


def _agents_named_by_key(source: Source, agents: dict[Any, Any]) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    for name, item in agents.items():
        if not isinstance(name, str):
            odd = source.non_text_keys.get(("agents",))
            written, line = odd[0] if odd else (str(name), None)
            raise source.error(
                f"YAML reads the agent name {written} as {yaml_kind(name)}; quote it: '{written}'.", ("agents",),
                line=line,
            )
        if isinstance(item, dict) and "name" in item:
            if item["name"] != name:
                raise source.error(
                    f"`name:` differs from the key {name!r}; the key is the agent's name, drop `name:`.",
                    ("agents", name, "name"),
                )
            item = {key: value for key, value in item.items() if key != "name"}
        result[name] = {} if item is None else item
    return result


def _explain(source: Source, error: ValidationError) -> ConfigFileError:
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
    given = item.get("input")
    if isinstance(given, str | int | float) and not isinstance(given, bool) and len(str(given)) >= 3:
        message = message.replace(str(given), "the value")  # a message that quotes the value would echo a secret
    if kind.endswith("_type"):
        message += f" (got {yaml_kind(given)})"
    return message + "."
