"""What the edge suite generates, and how many examples: few, derandomized (a fixed seed per test), never shrunk."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, Phase, settings

from test_serving_edges import many_keys, nested_zeros

EDGE_SETTINGS = settings(
    max_examples=5, derandomize=True, database=None, deadline=None, phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Five generated examples per test and store, plus each test's explicit worst cases: the same requests on every
run (derandomized), and a failure is reported as found (each example is a real request; shrinking would repeat
dozens of them)."""

MAX_BODY_BYTES = 1024 * 1024
"""`agency-swarm serve`'s default limit: larger bodies get 413 before they are parsed."""


def deep_body(depth: int, objects: bool, lone: bool) -> bytes:
    """`depth` nested arrays (or one-key objects) in `x`; `lone`: the message is a lone surrogate."""
    if not objects:
        return nested_zeros(depth, 1, lone=lone)
    message = b'"\\ud800"' if lone else b'"hi"'
    return b'{"message":' + message + b',"x":' + b'{"k":' * depth + b"0" + b"}" * depth + b"}"


def wide_body(depth: int, zeros: int, lone: bool) -> bytes:
    return nested_zeros(depth, zeros, lone=lone)


def many_keys_body(count: int, lone: bool) -> bytes:
    """`count` small keys in `x`; `lone`: one more key, a lone surrogate, last of all."""
    return json.dumps({"message": "hi", "x": many_keys(count, lone)}).encode()


def long_string_body(length: int, character: str, lone: bool, escaped: bool) -> bytes:
    """A message of `length` characters, a lone surrogate in its middle when `lone`; `escaped`: as \\u escapes
    (ASCII JSON), else as raw UTF-8 (a lone surrogate then goes as the three bytes no UTF-8 decoder takes)."""
    half = character * (length // 2)
    message: dict[str, Any] = {"message": half + ("\udbff" if lone else "") + half}
    if escaped:
        return json.dumps(message).encode()
    return json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
