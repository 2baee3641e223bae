"""Reference system 3 (examples/available_agents): {{AVAILABLE_AGENTS}} lists what the chart lets the Manager reach."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agency_swarm import Agency, Agent, ConfigError
from agency_swarm.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(ROOT / "examples"))  # the reference systems are packages under examples/

from available_agents import main as app  # noqa: E402
from available_agents import offline  # noqa: E402
from available_agents.team import (  # noqa: E402
    MANAGER,
    MANAGER_INSTRUCTIONS,
    WORKERS,
    PromptLog,
    build_manager,
    build_team,
)

REQUEST = app.DEFAULT_REQUEST


def listing(*names: str) -> str:
    return "The agents you can message:\n" + "".join(f"- {name}: {WORKERS[name]}\n" for name in names) + "\nIf none"


async def test_adding_an_agent_to_the_chart_changes_what_the_manager_sees_without_a_prompt_edit() -> None:
    models = offline.scripted_models()
    prompt_log = PromptLog()
    manager = build_manager(models[MANAGER], prompt_log)

    small = build_team(manager, ["Researcher", "Memory"], lambda name: models[name])
    first = await small.get_response(REQUEST)
    seen_small = models[MANAGER].calls[0].system_instructions or ""
    assert listing("Researcher", "Memory") in seen_small
    assert "Engineer" not in seen_small
    assert "{{" not in seen_small
    assert first.final_output == "None of the agents I can message fits this request (I have: Researcher, Memory)."

    big = build_team(manager, ["Researcher", "Memory", "Engineer"], lambda name: models[name])
    second = await big.get_response(REQUEST)
    seen_big = models[MANAGER].calls[1].system_instructions or ""
    assert listing("Researcher", "Memory", "Engineer") in seen_big
    assert second.final_output.startswith("Done. Engineer: count_lines.py")
    assert list(big.thread_manager.get_threads("default")) == ["user->Manager", "Manager->Engineer"]

    # the prompt itself was never touched; only what the model received differs, by exactly the new line
    assert manager.instructions is MANAGER_INSTRUCTIONS
    assert "{{AVAILABLE_AGENTS}}" in MANAGER_INSTRUCTIONS
    assert seen_big.replace(f"- Engineer: {WORKERS['Engineer']}\n", "") == seen_small
    # the SDK's on_llm_start hook saw the same expanded prompts
    assert prompt_log.prompts == [call.system_instructions for call in models[MANAGER].calls]


async def test_the_list_follows_chart_order_and_drops_removed_agents() -> None:
    models = offline.scripted_models()
    manager = build_manager(models[MANAGER], PromptLog())
    agency = build_team(manager, ["Engineer", "Researcher"], lambda name: models[name])
    result = await agency.get_response("Please check the facts in this news story.")
    seen = models[MANAGER].calls[0].system_instructions or ""
    assert listing("Engineer", "Researcher") in seen
    assert "Memory" not in seen
    assert result.final_output.startswith("Done. Researcher:")  # "check" matched the Researcher's description


async def test_a_manager_that_can_message_nobody_is_told_so() -> None:
    models = offline.scripted_models()
    manager = build_manager(models[MANAGER], PromptLog())
    result = await build_team(manager, [], lambda name: models[name]).get_response(REQUEST)
    seen = models[MANAGER].calls[0].system_instructions or ""
    assert "The agents you can message:\n(none: you cannot message other agents)\n" in seen
    assert result.final_output == "None of the agents I can message fits this request (I have: none)."


def test_a_misspelt_placeholder_is_refused_when_the_agency_is_built() -> None:
    typo = Agent(name=MANAGER, instructions="Delegate to one of:\n{{AVAILABLE_AGENT}}", model=ScriptedModel([]))
    worker = Agent(name="Engineer", description=WORKERS["Engineer"], model=ScriptedModel([]))
    with pytest.raises(ConfigError, match=r"\{\{AVAILABLE_AGENT\}\}.*Did you mean \{\{AVAILABLE_AGENTS\}\}"):
        Agency(typo, communication_flows=[(typo, worker)])


def test_build_team_names_unknown_workers() -> None:
    manager = build_manager(ScriptedModel([]), PromptLog())
    with pytest.raises(ValueError, match=r"Unknown worker\(s\) \['Designer'\]; the workers are: Researcher"):
        build_team(manager, ["Designer"], lambda name: "unused")


def test_main_runs_offline_in_one_command() -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    done = subprocess.run(
        [sys.executable, "examples/available_agents/main.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    team1, team2 = out.split("=== Team 2")
    assert f"  | - Engineer: {WORKERS['Engineer']}" not in team1
    assert f"  | - Engineer: {WORKERS['Engineer']}" in team2
    assert "Manager: None of the agents I can message fits this request (I have: Researcher, Memory)." in team1
    assert "Manager: Done. Engineer: count_lines.py" in team2


def test_models_are_real_when_a_key_is_set(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "offline-test-value-never-printed")
    models = app.choose_models()
    assert dict(models) == {name: "gpt-4.1-mini" for name in (MANAGER, *WORKERS)}
    assert capsys.readouterr().out == "Using OpenAI model gpt-4.1-mini (OPENAI_API_KEY is set)\n"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert all(isinstance(model, ScriptedModel) for model in app.choose_models().values())
