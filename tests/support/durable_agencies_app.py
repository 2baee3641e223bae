"""Two agencies of different charts for the durable queue tests (`--factory durable_agencies_app:build_support` and
`build_sales`): each answers "<agent>: <message>", so a turn answered by the other agency's agent is caught."""

from __future__ import annotations

from agents import set_tracing_disabled

from agency_swarm import Agency, Agent, ThreadStore
from agency_swarm.testing import ScriptedModel

set_tracing_disabled(True)  # as in every test: nothing leaves the machine


def answers_as(name: str) -> ScriptedModel:
    return ScriptedModel(lambda call: f"{name}: {call.last_user_message}")


def build_support(store: ThreadStore) -> Agency:
    return Agency(Agent(name="Support", model=answers_as("Support")), thread_store=store)


def build_sales(store: ThreadStore) -> Agency:
    sales, helper = Agent(name="Sales", model=answers_as("Sales")), Agent(name="Helper", model=answers_as("Helper"))
    return Agency([sales, [sales, helper]], thread_store=store)
