"""The package's shape, read from the source: layers that import only downward, no import cycles, size limits.

Every import counts: module level, function-local and under `TYPE_CHECKING` alike, since a cycle hidden behind
any of them is still a cycle in the design.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "agency_swarm"
PACKAGE = "agency_swarm"

LAYERS = [
    "_base", "_attachments", "testing", "_threads", "_model", "_telemetry", "_turn", "_remote", "_config", "_agency",
    "durable", "serving", "_cli", "",
]
"""Bottom first. A module belongs to the layer of its folder (top-level files name their own); it may import its
own layer and the layers below, never one above. "" is the package root (`__init__`, `__main__`)."""

TOP_LEVEL = {"__init__": "", "__main__": "", "testing": "testing"}
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 50
MAX_LOOP_LINES = 499  # "under 500"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts])


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SRC.rglob("*.py"))}


def _base_of(name: str, path: Path, level: int) -> str:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return package


def imports_of(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The package modules `name` imports, resolved to the most specific module that exists."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _base_of(name, path, node.level)
                module = f"{base}.{node.module}" if node.module else base
            elif node.module and node.module.split(".")[0] == PACKAGE:
                module = node.module
            else:
                continue
            targets = [
                f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target not in known:
                target = target.rpartition(".")[0]
            if target != name:
                yield target


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: set(imports_of(name, path, known)) for name, path in found.items()}


def layer_of(module: str) -> str:
    parts = module.split(".")[1:]
    if not parts:
        return ""
    if len(parts) == 1 and parts[0] in TOP_LEVEL:
        return TOP_LEVEL[parts[0]]
    return parts[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_belongs_to_a_declared_layer() -> None:
    unknown = sorted(name for name in modules() if layer_of(name) not in LAYERS)
    assert unknown == [], f"add these to a layer folder or to LAYERS: {unknown}"


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_layers_import_only_downward() -> None:
    upward = [
        f"{source} -> {target}"
        for source, targets in sorted(import_graph().items())
        for target in sorted(targets)
        if LAYERS.index(layer_of(target)) > LAYERS.index(layer_of(source))
    ]
    assert upward == []


def test_the_checker_sees_cycles_and_upward_imports() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert layer_of("agency_swarm._turn._loop") == "_turn"
    assert layer_of("agency_swarm.testing") == "testing"
    assert layer_of("agency_swarm") == ""
    real = import_graph()
    assert "agency_swarm._base._errors" in real["agency_swarm._turn._loop"]  # relative imports are resolved
    assert "agency_swarm._agency._agency" in real["agency_swarm"]


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


@pytest.mark.parametrize("name", sorted(modules()))
def test_size_limits(name: str) -> None:
    path = modules()[name]
    text = path.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    limit = MAX_LOOP_LINES if name == "agency_swarm._turn._loop" else MAX_MODULE_LINES
    assert lines <= limit, f"{name} has {lines} lines; the limit is {limit}"
    long = [
        f"{function.name} ({(function.end_lineno or function.lineno) - function.lineno + 1} lines)"
        for function in _functions(ast.parse(text))
        if (function.end_lineno or function.lineno) - function.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == [], f"{name}: functions over {MAX_FUNCTION_LINES} lines: {long}"
