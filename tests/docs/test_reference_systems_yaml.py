"""Reference system 2 (examples/yaml_agents): agencies from YAML, {{date}}, toolkits, max_iterations, history
trimming, and tools that pause the run for approval."""

from __future__ import annotations

import datetime
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agency_swarm import Agency, ChatPaused, ConfigFileError, Interruption
from agency_swarm.testing import ScriptedModel, ToolCall

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(ROOT / "examples"))  # the reference systems are packages under examples/

from yaml_agents import main as app  # noqa: E402
from yaml_agents.offline import scripted_models  # noqa: E402
from yaml_agents.toolkits import TOOLKITS, Office, sample_office  # noqa: E402

HERE = ROOT / "examples" / "yaml_agents"
FLAT, DEPARTMENTS = HERE / "flat_team.yaml", HERE / "departments.yaml"
FLAT_MESSAGES = app.DEFAULT_MESSAGES["flat_team.yaml"]


def load(path: Path, **replace: ScriptedModel) -> tuple[Agency, dict[str, ScriptedModel]]:
    names = list(Agency.from_config(path, toolkits=TOOLKITS).agents)
    models = {**scripted_models(names), **replace}
    return Agency.from_config(path, toolkits=TOOLKITS, models=models), models


class Decisions:
    """Answers every approval with `answer` and keeps what it was asked."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[Interruption] = []

    def __call__(self, waiting: Interruption) -> bool:
        self.asked.append(waiting)
        return self.answer


# -- what the files build ----------------------------------------------------------------------------------------


def test_the_flat_file_builds_a_supervisor_with_workers_toolkits_and_limits() -> None:
    agency = Agency.from_config(FLAT, toolkits=TOOLKITS)
    assert [agent.name for agent in agency.entry_points] == ["Dispatcher"]
    assert agency.communication_flows == [
        ("Dispatcher", "Researcher"), ("Dispatcher", "Scheduler"), ("Dispatcher", "Mailer"),
    ]
    agents = agency.agents
    assert {name: [tool.name for tool in agent.tools] for name, agent in agents.items()} == {
        "Dispatcher": [], "Researcher": ["web_search"], "Scheduler": ["list_events", "create_event"],
        "Mailer": ["send_email"],
    }
    assert {name: agent.max_steps for name, agent in agents.items()} == {
        "Dispatcher": 10, "Researcher": 4, "Scheduler": 4, "Mailer": 4,
    }
    assert agents["Dispatcher"].history_window == 6
    assert agents["Dispatcher"].model_settings.temperature == 0.2
    assert {agent.model for agent in agents.values()} == {"gpt-4.1-mini"}


def test_the_departments_file_builds_a_hierarchy() -> None:
    agency = Agency.from_config(DEPARTMENTS, toolkits=TOOLKITS)
    assert [agent.name for agent in agency.entry_points] == ["Director"]
    assert agency.communication_flows == [
        ("Director", "EngineeringLead"), ("Director", "CommsLead"), ("EngineeringLead", "Developer"),
        ("CommsLead", "Writer"), ("CommsLead", "Mailer"),
    ]
    assert [tool.name for tool in agency.agents["Developer"].tools] == ["list_pull_requests", "merge_pull_request"]


def test_a_bad_file_is_refused_with_its_line_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "team.yaml"
    bad.write_text(FLAT.read_text().replace("toolkits: [search]", "toolkits: [serach]"))
    line = FLAT.read_text().splitlines().index("    toolkits: [search]") + 1
    with pytest.raises(ConfigFileError) as caught:
        Agency.from_config(bad, toolkits=TOOLKITS)
    assert (f"{bad}, line {line}, key agents.Researcher.toolkits[0]: unknown toolkit 'serach'. "
            "Known toolkits: search, calendar, email, github.") in str(caught.value)
    assert (caught.value.key, caught.value.line) == ("agents.Researcher.toolkits[0]", line)
    assert app.main([str(bad), "--message", "hi"]) == 2
    assert "unknown toolkit 'serach'" in capsys.readouterr().err


def test_offline_mode_names_agents_it_has_no_script_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    solo = tmp_path / "solo.yaml"
    solo.write_text("agents:\n  Bob:\n    instructions: Say hi.\n")
    assert app.main([str(solo), "--message", "hi"]) == 2
    assert "no offline script for agent(s) Bob; set OPENAI_API_KEY" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        app.main([str(solo)])
    assert "give at least one --message" in capsys.readouterr().err


# -- running the flat team ---------------------------------------------------------------------------------------


async def test_date_and_available_agents_are_expanded_in_what_the_model_receives() -> None:
    agency, models = load(FLAT)
    before = datetime.date.today().isoformat()
    await app.converse(agency, FLAT_MESSAGES[0], sample_office(), Decisions(True))
    after = datetime.date.today().isoformat()
    seen = models["Dispatcher"].calls[0].system_instructions or ""
    assert seen.startswith((f"Today is {before}. ", f"Today is {after}. "))
    assert "- Scheduler: Reads and books the team calendar (dates as YYYY-MM-DD).\n" in seen
    assert "{{" not in seen
    assert (models["Scheduler"].calls[0].system_instructions or "").startswith(("Today is 20", "Today is 19"))


async def test_three_turns_with_an_approved_email_and_history_trimmed_to_first_plus_last_six() -> None:
    agency, models = load(FLAT)
    office, decisions = sample_office(), Decisions(True)
    results = [await app.converse(agency, message, office, decisions) for message in FLAT_MESSAGES]
    assert [result.final_output for result in results] == [
        "Done: 2025-07-01: Stand-up, Design review",
        "Done: Booked 'Release review' on 2025-07-02.",
        "Done: Email 'The release review is booked for 2025-07-02' sent to team@example.com.",
    ]
    assert office.calendar["2025-07-02"] == ["Release review"]
    [email] = office.outbox
    assert (email.to, email.subject) == ("team@example.com", "The release review is booked for 2025-07-02")
    [asked] = decisions.asked
    assert (asked.agent, asked.caller, asked.depth, asked.tool) == ("Mailer", "Dispatcher", 1, "send_email")
    # the store keeps all 12 items; the last model call (before the final answer) got the first and the last 6
    thread = agency.thread_manager.get_threads("default")["user->Dispatcher"]
    assert len(thread) == 12
    assert models["Dispatcher"].calls[-1].input == [thread[0], *thread[5:11]]
    assert models["Dispatcher"].calls[0].input == thread[:1]


async def test_the_paused_turn_waits_for_a_decision_and_a_new_message_is_refused() -> None:
    agency, _ = load(FLAT)
    office = sample_office()
    paused = await agency.get_response(FLAT_MESSAGES[2], context=office)
    assert paused.paused
    assert paused.final_output is None
    [waiting] = paused.interruptions
    assert (waiting.agent, waiting.tool) == ("Mailer", "send_email")
    assert office.outbox == []  # nothing left before the approval
    with pytest.raises(ChatPaused, match="waiting for approval"):
        await agency.get_response("Anything else?", context=office)
    done = await agency.resume(approve=[waiting.call_id], context=office)
    assert not done.paused
    assert done.final_output.startswith("Done: Email")
    assert len(office.outbox) == 1


async def test_a_rejected_email_is_not_sent_and_the_mailer_says_so() -> None:
    agency, _ = load(FLAT)
    office = sample_office()
    result = await app.converse(agency, FLAT_MESSAGES[2], office, Decisions(False))
    assert office.outbox == []
    assert result.final_output == "Done: The email to team@example.com was not sent: the user did not approve it."


async def test_max_iterations_stops_a_worker_that_loops() -> None:
    looping = ScriptedModel(lambda call: ToolCall("list_events", {"day": "2025-07-01"}))
    agency, _ = load(FLAT, Scheduler=looping)
    result = await app.converse(agency, FLAT_MESSAGES[0], sample_office(), Decisions(True))
    assert len(looping.calls) == 4  # max_iterations: 4 in flat_team.yaml
    assert result.final_output.startswith(
        "Done: Error: Scheduler failed to answer: MaxStepsExceeded: Agent 'Scheduler' reached max_steps=4"
    )


# -- running the departments -------------------------------------------------------------------------------------


async def test_departments_pause_twice_in_one_turn_at_depth_two() -> None:
    agency, _ = load(DEPARTMENTS)
    office, decisions = sample_office(), Decisions(True)
    result = await app.converse(agency, app.DEFAULT_MESSAGES["departments.yaml"][0], office, decisions)
    assert [(w.agent, w.caller, w.depth, w.tool) for w in decisions.asked] == [
        ("Developer", "EngineeringLead", 2, "merge_pull_request"),
        ("Mailer", "CommsLead", 2, "send_email"),
    ]
    assert office.pull_requests[41].merged
    assert not office.pull_requests[42].merged
    [email] = office.outbox
    assert (email.to, email.body) == ("customers@example.com",
                                      "Good news: the login fix is live. Thank you for your patience!")
    assert result.final_output == (
        "Done. Merged #41 (Login fix: keep the session after a password reset). "
        "Email 'Good news: the login fix is live' sent to customers@example.com."
    )
    threads = agency.thread_manager.get_threads("default")
    assert set(threads) == {"user->Director", "Director->EngineeringLead", "EngineeringLead->Developer",
                            "Director->CommsLead", "CommsLead->Writer", "CommsLead->Mailer"}


async def test_a_rejected_merge_leaves_the_code_alone() -> None:
    agency, _ = load(DEPARTMENTS)
    office = Office(pull_requests=sample_office().pull_requests)
    result = await app.converse(agency, "Merge the approved pull request for the login fix.", office, Decisions(False))
    assert not office.pull_requests[41].merged
    assert result.final_output == "Done. The merge was not approved; nothing was merged."


# -- the command ---------------------------------------------------------------------------------------------------


def run_main(*args: str, answers: str = "") -> str:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, "examples/yaml_agents/main.py", *args], cwd=ROOT, env=env, input=answers,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def test_main_runs_the_flat_team_offline_and_asks_before_the_email() -> None:
    out = run_main(answers="y\n")
    assert out.startswith("Using scripted offline models")
    assert "    [authorization required] Mailer wants to run send_email: the turn pauses\n" in out
    assert '? [y/N] y\n-- resuming: 1 approved, 0 rejected\n' in out
    assert "  sent to team@example.com: 'The release review is booked for 2025-07-02'\n" in out
    assert "Dispatcher's thread holds 12 items; each of its model calls sees its first item and its last 6" in out
    assert "  Its last model call received 7 items.\n" in out


def test_main_runs_the_departments_and_rejects_without_an_answer(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # stdin is empty: no answer means no
    assert app.main(["departments.yaml"]) == 0
    out = capsys.readouterr().out
    assert out.count("(no answer: rejected)") == 2
    assert "  merged: nothing\n" in out
    assert "sent to" not in out


def test_main_reject_all_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert app.main(["departments.yaml", "--reject-all"]) == 0
    out = capsys.readouterr().out
    assert "-- resuming: 0 approved, 1 rejected" in out
    assert "Director: Done. The merge was not approved; nothing was merged." in out


def test_main_uses_the_files_models_when_a_key_is_set(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "offline-test-value-never-printed")
    built: list[Agency] = []

    async def fake_converse(agency: Agency, message: str, office: Office, decide: Any) -> None:
        built.append(agency)

    monkeypatch.setattr(app, "converse", fake_converse)
    assert app.main(["--approve-all"]) == 0
    assert capsys.readouterr().out.startswith("Using the models named in the YAML file (OPENAI_API_KEY is set)\n")
    assert {agent.model for agent in built[0].agents.values()} == {"gpt-4.1-mini"}
    assert len(built) == len(FLAT_MESSAGES)
