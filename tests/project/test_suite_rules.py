"""Rules the test suite keeps, checked on its source: no test asserts on elapsed time (speed belongs to benchmarks/;
a bound that guards against a hang is a timeout that fails saying what did not happen)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CLOCKS = {"monotonic", "perf_counter", "process_time", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}


def clock_reads(node: ast.AST) -> list[str]:
    """The clock calls in `node`: `time.monotonic()`, `perf_counter()`, `loop.time()`..."""
    found = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            if name in CLOCKS:
                found.append(ast.unparse(call))
    return found


def elapsed_time_asserts(source: str, where: str) -> list[str]:
    return [
        f"{where}:{node.lineno}: assert {ast.unparse(node.test)[:80]}"
        for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Assert) and clock_reads(node.test)
    ]


def test_no_test_asserts_on_elapsed_time() -> None:
    found = [
        line for path in sorted(TESTS.rglob("*.py"))
        for line in elapsed_time_asserts(path.read_text(), str(path.relative_to(TESTS)))
    ]
    assert found == [], "\n".join(found)


def test_the_rule_sees_a_clock_in_an_assert() -> None:
    source = "import time\nstart = time.monotonic()\nassert time.monotonic() - start < 30\nassert 1 < 2\n"
    assert elapsed_time_asserts(source, "t.py") == ["t.py:3: assert time.monotonic() - start < 30"]
    assert elapsed_time_asserts("assert loop.time() < deadline\n", "u.py") == ["u.py:1: assert loop.time() < deadline"]
