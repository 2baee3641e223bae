"""Turns the chart spellings into entry points and directed flows, and rejects bad charts (pure, no I/O)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._base._errors import ChartError
from .._base._names import USER
from ._agent import Agent


@dataclass(kw_only=True)
class Chart:
    """A validated chart: who may be addressed by the user, and who may message whom."""

    entry_points: list[Agent]
    agents: dict[str, Agent]
    flows: dict[str, list[str]] = field(default_factory=dict)

    def recipients_of(self, name: str) -> list[str]:
        return self.flows.get(name, [])


def parse_chart(positional: Sequence[Any], communication_flows: Iterable[Any] | None) -> Chart:
    """Accept `Agency([ceo, [ceo, dev]])` and `Agency(ceo, communication_flows=[(ceo, dev)])` alike."""
    if len(positional) == 1 and isinstance(positional[0], (list, tuple)):
        elements: list[Any] = list(positional[0])
    else:
        elements = list(positional)
    entries: list[Agent] = []
    chains: list[list[Agent]] = []
    for index, element in enumerate(elements):
        if isinstance(element, (list, tuple)):
            chains.append(_chain(element, f"chart item {index}"))
        else:
            entries.append(_agent(element, f"chart item {index}"))
    if communication_flows is not None:
        if isinstance(communication_flows, (str, bytes)) or not isinstance(communication_flows, Iterable):
            raise ChartError("communication_flows must be a list of (sender, recipient) pairs, e.g. [(ceo, dev)].")
        for index, flow in enumerate(communication_flows):
            if not isinstance(flow, (list, tuple)):
                raise ChartError(
                    f"communication_flows[{index}] is {_describe(flow)}; write each flow as a pair (sender, recipient)."
                )
            chains.append(_chain(flow, f"communication_flows[{index}]"))
    if not entries and not chains:
        raise ChartError("The agency chart is empty: pass at least one agent, e.g. Agency([ceo, [ceo, dev]]).")
    if not entries:
        raise ChartError(
            "The agency chart has no entry point: put at least one agent standalone in the chart, "
            "e.g. Agency([ceo, [ceo, dev]]) or Agency(ceo, communication_flows=[(ceo, dev)])."
        )
    return _build(entries, chains)


def _build(entries: list[Agent], chains: list[list[Agent]]) -> Chart:
    agents: dict[str, Agent] = {}
    for agent in [*entries, *(a for chain in chains for a in chain)]:
        known = agents.setdefault(agent.name, agent)
        if known is not agent:
            raise ChartError(
                f"Two different agents are named {agent.name!r}; agent names must be unique in an agency."
            )
    entry_points: list[Agent] = []
    for agent in entries:
        if agent not in entry_points:
            entry_points.append(agent)
    flows: dict[str, list[str]] = {}
    for chain in chains:
        for sender, recipient in itertools.pairwise(chain):
            if sender is recipient:
                raise ChartError(f"Agent {sender.name!r} cannot message itself; remove it from its own flow.")
            targets = flows.setdefault(sender.name, [])
            if recipient.name not in targets:
                targets.append(recipient.name)
    return Chart(entry_points=entry_points, agents=agents, flows=flows)


def _chain(element: Sequence[Any], where: str) -> list[Agent]:
    if len(element) < 2:
        raise ChartError(f"{where} is a flow with {len(element)} agent(s); a flow needs a sender and a recipient.")
    return [_agent(item, f"{where}[{position}]") for position, item in enumerate(element)]


def _agent(value: Any, where: str) -> Agent:
    if isinstance(value, Agent):
        _check_name(value.name, where)
        return value
    hint = ""
    if type(value).__name__ == "Agent" or hasattr(value, "instructions"):
        hint = " (an openai-agents Agent? build it with agency_swarm.Agent, which adds messaging)"
    raise ChartError(f"{where} is {_describe(value)}, not an agency_swarm.Agent{hint}.")


def _check_name(name: str, where: str) -> None:
    if not name or not name.strip():
        raise ChartError(f"{where} has an empty name; give every agent a name.")
    if "->" in name:
        raise ChartError(f"{where} is named {name!r}; agent names cannot contain '->' (it separates thread keys).")
    if name == USER:
        raise ChartError(f"{where} is named {USER!r}, which is reserved for the person talking to the agency.")


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"
