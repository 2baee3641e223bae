"""`FILE.py:NAME` or `package.module:NAME` to the object it names: how `--models`, `--toolkits` and factories load."""

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
    location, _, name = target.rpartition(":")
    if not location or not name.isidentifier():
        raise ConfigError(f"{option} {target!r}: write FILE.py:NAME or package.module:NAME.")
    if location.endswith(".py") or os.sep in location:
        module = _import_file(option, location)
    else:
        module = _import_module(option, location)
    if not hasattr(module, name):
        raise ConfigError(f"{option} {target!r}: {location} has no attribute {name!r}.")
    value = getattr(module, name)
    from agents import Model

    if callable(value) and not isinstance(value, Model):
        try:
            value = value()
        except Exception as error:  # the user's function: report what broke instead of a traceback
            problem = f"{type(error).__name__}: {error}"
            raise ConfigError(f"{option} {target!r}: calling {name}() failed: {problem}") from error
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
    try:
        return importlib.import_module(location)
    except ImportError as error:
        raise ConfigError(f"{option}: cannot import module {location!r}: {error}") from error
