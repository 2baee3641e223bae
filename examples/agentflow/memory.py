"""The run's shared state: the question, the memory of executed actions, and which step is running. It is the
`context=` of the run, so every tool and every dynamic prompt reads and writes the same object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(kw_only=True)
class Action:
    step: int
    sub_goal: str
    tool: str
    command: str
    result: str


@dataclass(kw_only=True)
class Memory:
    actions: list[Action] = field(default_factory=list)

    def add_action(self, *, step: int, sub_goal: str, tool: str, command: str, result: str) -> None:
        self.actions.append(Action(step=step, sub_goal=sub_goal, tool=tool, command=command, result=result))

    def get_actions(self) -> list[dict[str, Any]]:
        return [vars(action).copy() for action in self.actions]

    def render(self) -> str:
        """The memory as the planner and verifier read it in their instructions."""
        if not self.actions:
            return "(nothing has been done yet)"
        return "\n".join(
            f"Step {a.step} - {a.sub_goal}\n  {a.tool}({a.command}) -> {a.result}" for a in self.actions
        )


@dataclass(kw_only=True)
class FlowState:
    question: str
    memory: Memory = field(default_factory=Memory)
    step: int = 0
    """The step being run; 0 before the first one."""
    sub_goal: str = ""
    """The current step's sub-goal, as the planner chose it."""
