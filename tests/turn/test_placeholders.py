"""Instruction placeholders: {{date}}, {{agent_name}}, {{AVAILABLE_AGENTS}} expanded per turn; unknown ones refused."""

from __future__ import annotations

import datetime

import pytest

import agency_swarm._base._placeholders as placeholders
from agency_swarm import Agency, Agent, ConfigError
from agency_swarm.testing import ScriptedModel, send_message

ORCHESTRATOR_PROMPT = "You route work.\n{{AVAILABLE_AGENTS}}\nPick one."


def worker(name: str, description: str | None, reply: str = "ok") -> Agent:
    return Agent(name=name, description=description, instructions="Work.", model=ScriptedModel([reply]))


class FixedDate(datetime.date):
    """`date.today()` returns whatever the test says: a new day must reach the next turn."""

    today_is = datetime.date(2031, 1, 2)

    @classmethod
    def today(cls) -> FixedDate:
        return cls(cls.today_is.year, cls.today_is.month, cls.today_is.day)


@pytest.fixture
def fixed_date(monkeypatch: pytest.MonkeyPatch) -> type[FixedDate]:
    fake = type("datetime", (), {"date": FixedDate})
    monkeypatch.setattr(placeholders, "datetime", fake)
    FixedDate.today_is = datetime.date(2031, 1, 2)
    return FixedDate


async def test_every_placeholder_reaches_the_model_expanded(fixed_date: type[FixedDate]) -> None:
    model = ScriptedModel(["done"])
    lead = Agent(
        name="Lead",
        instructions="I am {{agent_name}}. Today is {{date}}.\nTeam:\n{{AVAILABLE_AGENTS}}",
        model=model,
    )
    agency = Agency([lead, [lead, worker("Researcher", "Finds facts.")], [lead, worker("Writer", "Writes prose.")]])
    await agency.get_response("hello")
    assert model.calls[0].system_instructions == (
        "I am Lead. Today is 2031-01-02.\nTeam:\n- Researcher: Finds facts.\n- Writer: Writes prose."
    )


async def test_spaces_inside_the_braces_are_accepted(fixed_date: type[FixedDate]) -> None:
    model = ScriptedModel(["done"])
    solo = Agent(name="Solo", instructions="{{ agent_name }} on {{  date }}; team: {{ AVAILABLE_AGENTS }}", model=model)
    await Agency(solo).get_response("hello")
    assert model.calls[0].system_instructions == (
        f"Solo on 2031-01-02; team: {placeholders.NO_RECIPIENTS}"
    )


async def test_date_is_evaluated_at_each_turn_not_at_load(fixed_date: type[FixedDate]) -> None:
    model = ScriptedModel.each_turn(["done"])
    agency = Agency(Agent(name="Clock", instructions="Today is {{date}}.", model=model))
    await agency.get_response("first")
    fixed_date.today_is = datetime.date(2031, 1, 3)
    await agency.get_response("second")
    assert [call.system_instructions for call in model.calls] == ["Today is 2031-01-02.", "Today is 2031-01-03."]


async def test_date_is_todays_iso_date_without_a_fake() -> None:
    model = ScriptedModel(["done"])
    before = datetime.date.today().isoformat()
    await Agency(Agent(name="Clock", instructions="{{date}}", model=model)).get_response("hi")
    after = datetime.date.today().isoformat()
    assert model.calls[0].system_instructions in {before, after}


async def test_adding_an_agent_to_the_chart_changes_available_agents_without_editing_the_prompt() -> None:
    first_model, second_model = ScriptedModel(["done"]), ScriptedModel(["done"])
    orchestrator = Agent(name="Orchestrator", instructions=ORCHESTRATOR_PROMPT, model=first_model)
    researcher, engineer = worker("Researcher", "Finds facts."), worker("Engineer", "Writes code.")
    await Agency([orchestrator, [orchestrator, researcher]]).get_response("one")
    assert orchestrator.instructions == ORCHESTRATOR_PROMPT  # the prompt itself is never rewritten

    orchestrator.model = second_model
    await Agency([orchestrator, [orchestrator, researcher], [orchestrator, engineer]]).get_response("two")
    assert first_model.calls[0].system_instructions == "You route work.\n- Researcher: Finds facts.\nPick one."
    assert second_model.calls[0].system_instructions == (
        "You route work.\n- Researcher: Finds facts.\n- Engineer: Writes code.\nPick one."
    )


async def test_an_agent_shared_by_two_agencies_sees_each_agencys_team() -> None:
    model = ScriptedModel.each_turn(["done"])
    lead = Agent(name="Lead", instructions="{{AVAILABLE_AGENTS}}", model=model)
    small = Agency([lead, [lead, worker("A", "Does A.")]])
    large = Agency([lead, [lead, worker("A", "Does A.")], [lead, worker("B", "Does B.")]])
    await small.get_response("x")
    await large.get_response("y")
    await small.get_response("z")
    assert [call.system_instructions for call in model.calls] == [
        "- A: Does A.", "- A: Does A.\n- B: Does B.", "- A: Does A."
    ]


async def test_available_agents_lists_only_whom_this_agent_may_message_in_chart_order() -> None:
    lead_model, dev_model = ScriptedModel([send_message("Developer", "build"), "done"]), ScriptedModel(["built"])
    lead = Agent(name="Lead", instructions="{{AVAILABLE_AGENTS}}", model=lead_model)
    dev = Agent(name="Developer", description="Codes.", instructions="Peers:\n{{AVAILABLE_AGENTS}}", model=dev_model)
    qa = worker("QA", "Tests\n   things\tcarefully.")
    docs = worker("Docs", None)
    await Agency([lead, [lead, dev], [lead, docs], [dev, qa]]).get_response("go")
    assert lead_model.calls[0].system_instructions == "- Developer: Codes.\n- Docs: (no description)"
    assert dev_model.calls[0].system_instructions == "Peers:\n- QA: Tests things carefully."


async def test_shared_and_additional_instructions_are_expanded_for_the_agent_that_reads_them() -> None:
    lead_model = ScriptedModel([send_message("Developer", "build", "You are {{agent_name}}, helping Lead."), "done"])
    dev_model = ScriptedModel(["built"])
    lead = Agent(name="Lead", instructions="Lead the work.", model=lead_model)
    dev = Agent(name="Developer", instructions="Write code.", model=dev_model)
    agency = Agency([lead, [lead, dev]], shared_instructions="Agent {{agent_name}} of our team.")
    await agency.get_response("go", additional_instructions="Colleagues: {{AVAILABLE_AGENTS}}")
    assert lead_model.calls[0].system_instructions == (
        "Agent Lead of our team.\n\nLead the work.\n\nColleagues: - Developer: (no description)"
    )
    assert dev_model.calls[0].system_instructions == (
        "Agent Developer of our team.\n\nWrite code.\n\nYou are Developer, helping Lead."
    )


async def test_text_produced_at_run_time_keeps_unknown_placeholders_as_written() -> None:
    """Only what is known at load can be refused; a model's or a function's text never fails a turn."""
    model = ScriptedModel(["done"])

    def instructions(context: object, agent: Agent) -> str:
        return f"{{{{agent_name}}}} built by a function; {{{{memory}}}} is for later ({agent.name})."

    solo = Agent(name="Solo", instructions=instructions, model=model)
    await Agency(solo).get_response("hi", additional_instructions="Keep {{ticket.id}} as is.")
    assert model.calls[0].system_instructions == (
        "Solo built by a function; {{memory}} is for later (Solo).\n\nKeep {{ticket.id}} as is."
    )


async def test_double_braces_that_are_not_names_are_plain_text() -> None:
    model = ScriptedModel(["done"])
    text = 'Answer as JSON like {{"answer": 42}} or {{ }} or {{1st}}.'
    await Agency(Agent(name="Solo", instructions=text, model=model)).get_response("hi")
    assert model.calls[0].system_instructions == text


async def test_instructions_without_double_braces_skip_the_renderer(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> str:
        raise AssertionError("render ran on text without '{{'")

    monkeypatch.setattr(placeholders, "render", fail)
    model = ScriptedModel(["done"])
    lead = Agent(name="Lead", instructions="Plain {text} with single braces.", model=model)
    agency = Agency([lead, [lead, worker("Dev", "Codes.")]], shared_instructions="Shared, plain.")
    await agency.get_response("hi", additional_instructions="Also plain.")
    assert model.calls[0].system_instructions == "Shared, plain.\n\nPlain {text} with single braces.\n\nAlso plain."


async def test_streamed_turns_expand_placeholders_too() -> None:
    model = ScriptedModel(["done"])
    lead = Agent(name="Lead", instructions="{{agent_name}}: {{AVAILABLE_AGENTS}}", model=model)
    stream = Agency([lead, [lead, worker("Dev", "Codes.")]]).get_response_stream("hi")
    async for _ in stream:
        pass
    assert model.calls[0].stream is True
    assert model.calls[0].system_instructions == "Lead: - Dev: Codes."


def test_unknown_placeholder_in_instructions_is_refused_when_the_agency_is_built() -> None:
    model = ScriptedModel(["never"])
    lead = Agent(name="Lead", instructions="Memory: {{SHORT_TERM_MEMORY}} and {{ workspace }}", model=model)
    with pytest.raises(ConfigError) as caught:
        Agency(lead)
    message = str(caught.value)
    assert "agent 'Lead'" in message
    assert "{{SHORT_TERM_MEMORY}}" in message
    assert "{{workspace}}" in message  # every unknown one is named, not just the first
    assert "{{AVAILABLE_AGENTS}}, {{agent_name}}, {{date}}" in message
    assert model.calls == []


@pytest.mark.parametrize(
    ("written", "suggested"),
    [("{{Date}}", "{{date}}"), ("{{available_agents}}", "{{AVAILABLE_AGENTS}}"), ("{{agentname}}", "{{agent_name}}")],
)
def test_a_misspelt_placeholder_gets_a_suggestion(written: str, suggested: str) -> None:
    with pytest.raises(ConfigError, match=r"Did you mean (.*)\?") as caught:
        Agency(Agent(name="Lead", instructions=f"Hello {written}", model=ScriptedModel(["never"])))
    assert f"Did you mean {suggested}?" in str(caught.value)


def test_unknown_placeholder_in_shared_instructions_is_refused() -> None:
    lead = Agent(name="Lead", instructions="Fine: {{date}}", model=ScriptedModel(["never"]))
    with pytest.raises(ConfigError, match=r"shared_instructions use the unknown placeholder \{\{today\}\}"):
        Agency(lead, shared_instructions="Today: {{today}}")


def test_a_recipient_with_a_bad_placeholder_is_refused_too() -> None:
    lead = Agent(name="Lead", instructions="{{AVAILABLE_AGENTS}}", model=ScriptedModel(["never"]))
    helper = Agent(name="Helper", instructions="{{nope}}", model=ScriptedModel(["never"]))
    with pytest.raises(ConfigError, match=r"agent 'Helper' use the unknown placeholder \{\{nope\}\}"):
        Agency([lead, [lead, helper]])
