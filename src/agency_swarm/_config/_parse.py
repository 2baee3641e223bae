"""Reading a config file and parsing its YAML or JSON, with the line of every key and no duplicate keys."""

from __future__ import annotations

import json
import os
from typing import Any

from .._base._errors import ConfigError
from ._source import Loc, Source, read_text

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}
MAX_NODES = 100_000
"""YAML aliases can make a small file describe a huge tree; refuse before anything walks it."""


def read_config(path: str | os.PathLike[str]) -> tuple[Source, Any]:
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(f"from_config needs the path of a .yaml, .yml or .json file, got {type(path).__name__}.")
    shown = os.fspath(path)
    kind = SUFFIXES.get(os.path.splitext(shown)[1].lower())
    if kind is None:
        raise ConfigError(f"{shown}: a config file must end in .yaml, .yml or .json.")
    source = Source(shown=shown, directory=os.path.realpath(os.path.dirname(os.path.abspath(shown))))
    text = read_text(source, shown, ())
    if kind == "yaml":
        return source, _parse_yaml(source, text)
    return source, _parse_json(source, text)


def _parse_yaml(source: Source, text: str) -> Any:
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


def _parse_json(source: Source, text: str) -> Any:
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


def _index(source: Source, root: Any) -> None:
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
