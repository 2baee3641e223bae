"""`FILE.py:NAME` or `package.module:NAME` to the object it names: how `--models`, `--toolkits` and `--factory` load."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from .._base._errors import ConfigError


def load_python_object(option: str, target: str) -> Any:
    """`FILE.py:NAME` or `package.module:NAME` -> that object; a function (not a model) is called without arguments,
    so every run gets fresh objects (scripted models keep state)."""
    value = python_object(option, target)
    from agents import Model

    if callable(value) and not isinstance(value, Model):
        name = target.rpartition(":")[2]
        try:
            value = value()
        except Exception as error:  # the user's function: report what broke instead of a traceback
            problem = f"{type(error).__name__}: {error}"
            raise ConfigError(f"{option} {target!r}: calling {name}() failed: {problem}") from error
    return value


def python_object(option: str, target: str) -> Any:
    """`FILE.py:NAME` or `package.module:NAME` (NAME may be dotted: `module:Class.method`) -> that object, as it is.
    A module is looked for in the current directory first, as `python -m` does (a command's own directory is not)."""
    location, _, name = target.rpartition(":")
    if not location or not all(part.isidentifier() for part in name.split(".")):
        raise ConfigError(f"{option} {target!r}: write FILE.py:NAME or package.module:NAME.")
    if location.endswith(".py") or os.sep in location:
        module = _import_file(option, location)
    else:
        module = _import_module(option, location)
    value: Any = module
    for part in name.split("."):
        if not hasattr(value, part):
            raise ConfigError(f"{option} {target!r}: {location} has no attribute {name!r}.")
        value = getattr(value, part)
    return value


def _import_file(option: str, location: str) -> Any:
    path = Path(location).resolve()
    if not path.is_file():
        raise ConfigError(f"{option}: the file {location} does not exist.")
    spec = importlib.util.spec_from_file_location(f"_agency_swarm_cli_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{option}: cannot import {location} as Python.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as `import` does: dataclasses and pickling look the module up there
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the user's file: report what broke instead of a traceback
        del sys.modules[spec.name]
        raise ConfigError(f"{option}: importing {location} failed: {type(error).__name__}: {error}") from error
    return module


def _import_module(option: str, location: str) -> Any:
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)  # kept: worker processes started from here inherit it
    try:
        return importlib.import_module(location)
    except ImportError as error:
        raise ConfigError(
            f"{option}: cannot import module {location!r} ({error}); it is looked for in the current directory and "
            "on PYTHONPATH, or name a file: path/to/file.py:NAME."
        ) from error
