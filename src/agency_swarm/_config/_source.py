"""The config file being loaded: its name, its directory, the line of each key, and errors that point there."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._base._errors import ConfigFileError
from .._base._redact import redact_secrets

MAX_FILE_BYTES = 1_000_000
"""Config files and the instruction files they name are read whole; anything bigger is a mistake."""

Loc = tuple[str | int, ...]


def key_name(loc: Loc) -> str:
    """`("agents", "CEO", "toolkits", 0)` -> `agents.CEO.toolkits[0]`."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@dataclass(frozen=True, kw_only=True)
class ArgumentNames:
    """How the caller hands over what a file only names, for errors to say: Python arguments or command-line options."""

    toolkits: str = "from_config(..., toolkits={'name': [tool, ...]})"
    models: str = "models="


PYTHON_ARGUMENTS = ArgumentNames()
CLI_ARGUMENTS = ArgumentNames(toolkits="--toolkits FILE.py:NAME, NAME a {toolkit name: [tool, ...]} mapping",
                              models="--models")


@dataclass(kw_only=True)
class Source:
    """The file being loaded: how to name it, where it lives, which line each key is on."""

    shown: str
    directory: str
    arguments: ArgumentNames = PYTHON_ARGUMENTS
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
        """The error at `loc`. Messages name the problem and the place, never a value; names they quote (an unknown
        key or toolkit) lose anything shaped like a credential, in case a secret was pasted in the wrong place."""
        line = self.line_of(loc) if line is None else line
        key = key_name(loc) or None
        text = redact_secrets(f"{self.where(loc, line)}: {problem}")
        return ConfigFileError(text, path=self.shown, line=line, key=None if key is None else redact_secrets(key))


def read_text(source: Source, path: str, loc: Loc) -> str:
    """A file the config loads (itself, or an instruction file it names) as UTF-8 text; errors point at `loc`."""
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


def yaml_kind(value: Any) -> str:
    """YAML's words for a Python value's type; values themselves are never echoed (they may be secrets)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {str: "text", int: "an integer", float: "a number", list: "a list", dict: "a mapping"}
    return names.get(type(value), type(value).__name__)
