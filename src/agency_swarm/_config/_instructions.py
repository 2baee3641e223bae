"""Instructions: inline or read from a file beside the config, with their placeholders checked."""

from __future__ import annotations

import os
from typing import Any

from ._source import Loc, Source, read_text


def text_loc(spec: Any, loc: Loc) -> Loc:
    """Point at `instructions_file` when the text came from a file."""
    return (*loc[:-1], f"{loc[-1]}_file") if getattr(spec, f"{loc[-1]}_file", None) is not None else loc


def check_placeholders(source: Source, text: str, where: str, loc: Loc) -> None:
    from .._base._placeholders import placeholder_problem

    problem = placeholder_problem(text, where)
    if problem is not None:
        raise source.error(problem, loc)


def instruction_text(source: Source, loc: Loc, inline: str | None, file: str | None) -> str | None:
    """Inline text or the content of a file inside the config's directory."""
    if file is None:
        return inline
    file_loc: Loc = (*loc[:-1], f"{loc[-1]}_file")
    if inline is not None:
        raise source.error(f"set {loc[-1]} or {loc[-1]}_file, not both.", file_loc)
    return read_text(source, _inside(source, file, file_loc), file_loc)


def _inside(source: Source, relative: str, loc: Loc) -> str:
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
