"""The chart: who the user talks to and who messages whom, checked against the agents the file defines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._source import Loc, Source

if TYPE_CHECKING:
    from .._turn._agent import Agent
    from ._schema import ChartSpec, DepartmentSpec


@dataclass(kw_only=True)
class _ChartBuilder:
    source: Source
    agents: dict[str, Agent]
    entries: list[Agent] = field(default_factory=list)
    flows: list[tuple[Agent, Agent]] = field(default_factory=list)

    def agent(self, name: str, loc: Loc) -> Agent:
        agent = self.agents.get(name)
        if agent is None:
            raise self.source.error(
                f"the chart names {name!r}, which is not defined under agents; defined agents: "
                f"{', '.join(self.agents)}.",
                loc,
            )
        return agent

    def flow(self, sender: Agent, recipient: Agent, loc: Loc) -> None:
        if sender is recipient:
            raise self.source.error(f"agent {sender.name!r} cannot message itself.", loc)
        self.flows.append((sender, recipient))

    def departments(self, parent: Agent, departments: list[DepartmentSpec], loc: Loc) -> None:
        for index, department in enumerate(departments):
            here: Loc = (*loc, "departments", index)
            lead = self.agent(department.lead, (*here, "lead"))
            self.flow(parent, lead, (*here, "lead"))
            for position, worker in enumerate(department.workers):
                self.flow(lead, self.agent(worker, (*here, "workers", position)), (*here, "workers", position))
            self.departments(lead, department.departments, here)


def build_chart(source: Source, chart: ChartSpec | None, agents: dict[str, Agent]) -> tuple[list[Agent], list[Any]]:
    if chart is None:
        if len(agents) == 1:
            return list(agents.values()), []
        raise source.error(
            "several agents but no `chart:`; add one, e.g. `chart: {supervisor: Lead, workers: [A, B]}`.",
            line=source.lines.get(()),
        )
    builder = _ChartBuilder(source=source, agents=agents)
    if chart.supervisor is not None:
        supervisor = builder.agent(chart.supervisor, ("chart", "supervisor"))
        builder.entries.append(supervisor)
        for index, worker in enumerate(chart.workers):
            builder.flow(supervisor, builder.agent(worker, ("chart", "workers", index)), ("chart", "workers", index))
        builder.departments(supervisor, chart.departments, ("chart",))
    elif chart.workers or chart.departments:
        key = "workers" if chart.workers else "departments"
        raise source.error(f"{key} report to a supervisor: add `supervisor: <agent name>`.", ("chart", key))
    for index, name in enumerate(chart.entry_points):
        builder.entries.append(builder.agent(name, ("chart", "entry_points", index)))
    for index, chain in enumerate(chart.flows):
        if len(chain) < 2:
            raise source.error(
                "a flow lists a sender and at least one recipient, e.g. [Lead, Writer].", ("chart", "flows", index)
            )
        members = [builder.agent(name, ("chart", "flows", index, position)) for position, name in enumerate(chain)]
        for position in range(1, len(members)):
            builder.flow(members[position - 1], members[position], ("chart", "flows", index, position))
    if not builder.entries:
        raise source.error(
            "the chart has no entry point: add `supervisor:` or `entry_points: [...]` (whom the user talks to).",
            ("chart",),
        )
    used = {agent.name for agent in builder.entries} | {agent.name for pair in builder.flows for agent in pair}
    for name in agents:
        if name not in used:
            raise source.error(
                f"agent {name!r} is defined but the chart never uses it; add it to the chart or remove it.",
                ("agents", name),
            )
    return builder.entries, builder.flows


def check_reserved_tool_names(source: Source, agents: dict[str, Agent], flows: list[Any]) -> None:
    """Found here rather than by Agency, so the error has a line and no store has been created yet."""
    from .._base._names import SEND_MESSAGE

    for name in dict.fromkeys(sender.name for sender, _ in flows):
        if any(tool.name == SEND_MESSAGE for tool in agents[name].tools):
            raise source.error(
                f"agent {name!r} messages other agents, so the tool name {SEND_MESSAGE!r} is reserved for that; "
                "a toolkit gives it a tool of that name: rename the tool or leave that toolkit out.",
                ("agents", name, "toolkits"),
            )
