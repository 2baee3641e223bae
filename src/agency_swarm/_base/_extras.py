"""The optional extras (serve, postgres, durable, litellm): one message, naming the extra to install, wherever one
is missing."""

from __future__ import annotations

import importlib


class MissingExtra(ModuleNotFoundError):
    """A module of an optional extra is not installed. A `ModuleNotFoundError` (code that catches ImportError still
    does), whose message names the extra and the command that installs it; `extra` is its name."""

    def __init__(self, extra: str, module: str, needed_by: str) -> None:
        super().__init__(extra_message(extra, module, needed_by), name=module)
        self.extra = extra


def install_hint(extra: str) -> str:
    """The command that adds an extra. The package is on no index: from a clone, or the wheel built from it."""
    return f'pip install ".[{extra}]" in a clone of agency_swarm (or "./dist/<the wheel>.whl[{extra}]")'


def extra_message(extra: str, module: str, needed_by: str) -> str:
    """`<needed_by> needs the <extra> extra (<module> is not installed): pip install ".[<extra>]" ...`."""
    return f"{needed_by} needs the {extra} extra ({module} is not installed): {install_hint(extra)}."


def require_extra(extra: str, *modules: str, needed_by: str) -> None:
    """Import `modules` (the extra's), or raise MissingExtra for the first one missing. A module that is installed
    but fails to import for another reason raises its own error."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as missing:
            if missing.name is None or missing.name.partition(".")[0] != module:
                raise
            raise MissingExtra(extra, module, needed_by) from missing
