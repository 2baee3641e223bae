"""The executor's tools. Each one records what it did in the run's memory (the context every tool receives)."""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable

from agents import RunContextWrapper, function_tool

from .memory import FlowState

CORPUS = {
    "Lumaria (overview)": "Lumaria is an island nation in the Korvan Sea. Population: 1,250,000 (2024 census). "
    "Its capital is Port Edda.",
    "Lumaria (geography)": "Lumaria has a land area of 5,000 square kilometres, mostly volcanic highlands.",
    "Port Edda": "Port Edda, the capital of Lumaria, has 310,000 inhabitants and the island's only deep-water port.",
    "Korvan Sea": "The Korvan Sea lies between three island nations; Lumaria is the largest of them.",
}
"""A tiny, invented encyclopedia, so searches are offline and their answers are known."""

_WORD = re.compile(r"[a-z0-9]+")
_OPERATORS: dict[type, Callable[..., float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def evaluate(expression: str) -> float:
    """Arithmetic only (numbers, + - * / // % **, parentheses): no names, calls or attributes."""
    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 100:
                raise ValueError("exponent too large")
            return _OPERATORS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.operand))
        raise ValueError(f"only numbers and + - * / // % ** are allowed, not {ast.unparse(node)!r}")

    try:
        tree = ast.parse(expression.replace(",", ""), mode="eval")
    except SyntaxError as error:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from error
    return walk(tree.body)


def find(query: str, limit: int = 1) -> list[tuple[str, str]]:
    """The entries sharing the most words with the query (title and text both count)."""
    words = set(_WORD.findall(query.lower()))
    scored = [(len(words & set(_WORD.findall(f"{title} {text}".lower()))), title, text)
              for title, text in CORPUS.items()]
    return [(title, text) for score, title, text in sorted(scored, key=lambda s: -s[0]) if score > 0][:limit]


def _remember(ctx: RunContextWrapper[FlowState], tool: str, command: str, result: str) -> str:
    state = ctx.context
    state.memory.add_action(step=state.step, sub_goal=state.sub_goal, tool=tool, command=command, result=result)
    return result


@function_tool
async def calculator(ctx: RunContextWrapper[FlowState], expression: str) -> str:
    """Evaluate an arithmetic expression, e.g. "1250000 / 5000".

    Args:
        expression: Numbers with + - * / // % ** and parentheses.
    """
    try:
        value = evaluate(expression)
    except (ValueError, ArithmeticError) as error:  # remembered too: the planner must see what failed
        return _remember(ctx, "calculator", expression, f"Error: {error}")
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return _remember(ctx, "calculator", expression, f"{expression} = {shown}")


@function_tool
async def search(ctx: RunContextWrapper[FlowState], query: str) -> str:
    """Search the encyclopedia; returns the entry that matches best.

    Args:
        query: A few keywords.
    """
    hits = find(query)
    result = " | ".join(f"{title}: {text}" for title, text in hits) if hits else f"No entry matches {query!r}."
    return _remember(ctx, "search", query, result)


TOOLS = [calculator, search]
TOOL_NAMES = [tool.name for tool in TOOLS]
