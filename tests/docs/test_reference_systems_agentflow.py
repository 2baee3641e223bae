"""Reference system 4 (examples/agentflow): planner / executor / verifier on send_message, memory, limits, audit log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agency_swarm import MessageSent
from agency_swarm.testing import ModelCall, ScriptedModel, Step

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(ROOT / "examples"))  # the reference systems are packages under examples/

from agentflow import main as app  # noqa: E402
from agentflow import offline, tools  # noqa: E402
from agentflow.memory import FlowState  # noqa: E402
from agentflow.solver import Limits, Solution, solve  # noqa: E402
from agentflow.team import EXECUTOR, PLANNER, SOLVER, VERIFIER, build_agency  # noqa: E402

QUESTION = app.DEFAULT_QUESTION
START = 1_750_000_000.0  # 2025-06-15T15:06:40+00:00
KEYS = ["step", "agent", "sub_goal", "tool", "result_summary", "verdict", "started_at", "finished_at"]


class ManualClock:
    """Time moves only when the test (or a scripted model standing in for a slow one) says so."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def log_of(solution: Solution) -> list[dict[str, Any]]:
    return [json.loads(line) for line in solution.log_path.read_text().splitlines()]


async def run(tmp_path: Path, limits: Limits | None = None, clock: ManualClock | None = None,
              **overrides: ScriptedModel) -> tuple[Solution, dict[str, ScriptedModel], list[Any]]:
    models = {**offline.scripted_models(), **overrides}
    events: list[Any] = []
    solution = await solve(build_agency(lambda name: models[name]), QUESTION, log_dir=tmp_path / "logs",
                           limits=limits or Limits(), clock=clock or ManualClock(), on_event=events.append)
    return solution, models, events


async def test_the_verifier_stops_the_loop_and_the_memory_holds_every_action(tmp_path: Path) -> None:
    solution, models, events = await run(tmp_path)
    assert solution.stop_reason == "verifier said STOP: The memory has the population, the area and their quotient."
    assert solution.answer == "calculator returned: 1250000 / 5000 = 250"
    assert solution.steps == 3
    assert solution.memory.get_actions() == [
        {"step": 1, "sub_goal": "Find Lumaria's population.", "tool": "search", "command": "Lumaria population",
         "result": "Lumaria (overview): " + tools.CORPUS["Lumaria (overview)"]},
        {"step": 2, "sub_goal": "Find Lumaria's land area.", "tool": "search",
         "command": "Lumaria land area square kilometres",
         "result": "Lumaria (geography): " + tools.CORPUS["Lumaria (geography)"]},
        {"step": 3, "sub_goal": "Divide the population by the land area.", "tool": "calculator",
         "command": "1250000 / 5000", "result": "1250000 / 5000 = 250"},
    ]
    # it all ran on send_message: the Solver messaged Planner, Executor, Verifier in turn, three times
    sends = [(event.agent, event.recipient) for event in events if isinstance(event, MessageSent)]
    assert sends == [(SOLVER, PLANNER), (SOLVER, EXECUTOR), (SOLVER, VERIFIER)] * 3
    # the planner read the memory in its instructions, rendered afresh at every step
    planner_prompts = [call.system_instructions or "" for call in models[PLANNER].calls]
    assert "This is step 1." in planner_prompts[0]
    assert "(nothing has been done yet)" in planner_prompts[0]
    assert "Step 1 - Find Lumaria's population.\n  search(Lumaria population) -> Lumaria (overview)" in (
        planner_prompts[1]
    )
    assert "calculator(1250000 / 5000)" in (models[VERIFIER].calls[-1].system_instructions or "")


async def test_every_role_receives_the_image_with_the_question(tmp_path: Path) -> None:
    models = offline.scripted_models()
    solution = await solve(build_agency(lambda name: models[name]), app.IMAGE_QUESTION, image=app.FLAG,
                           log_dir=tmp_path / "logs", clock=ManualClock())
    assert solution.answer == "calculator returned: 1250000 / 5000 = 250"
    flag = app.FLAG.read_bytes()
    for role in (SOLVER, PLANNER, EXECUTOR, VERIFIER):
        assert models[role].calls, role
        for call in models[role].calls:  # every model call of every role holds the picture, as its bytes
            assert set(offline.images(call)) == {flag}, (role, call.input)
    # stored once: the threads hold references, the chat's one copy of the bytes is the store's
    threads = await solution_threads(solution)
    assert "base64," not in json.dumps(threads)


async def solution_threads(solution: Solution) -> dict[str, Any]:
    agency = solution.result.last_agent.wiring.thread_manager  # type: ignore[union-attr]
    return await agency.read_threads(solution.result.chat_id)


async def test_every_step_is_in_the_audit_log(tmp_path: Path) -> None:
    solution, _, _ = await run(tmp_path)
    assert solution.log_path.parent == tmp_path / "logs"
    records = log_of(solution)
    assert [(r["step"], r["agent"]) for r in records] == [
        (1, PLANNER), (1, EXECUTOR), (1, VERIFIER), (2, PLANNER), (2, EXECUTOR), (2, VERIFIER),
        (3, PLANNER), (3, EXECUTOR), (3, VERIFIER), (3, SOLVER),
    ]
    for record in records[:-1]:
        assert list(record) == KEYS
        assert record["started_at"] == record["finished_at"] == "2025-06-15T15:06:40+00:00"
    planner, executor, verifier = records[6:9]
    assert (planner["sub_goal"], planner["tool"]) == ("Divide the population by the land area.", "calculator")
    assert (executor["sub_goal"], executor["tool"]) == ("Divide the population by the land area.", "calculator")
    assert executor["result_summary"] == "calculator returned: 1250000 / 5000 = 250"
    assert (verifier["verdict"], records[2]["verdict"]) == ("STOP", "CONTINUE")
    last = records[-1]
    assert last["stop_reason"] == solution.stop_reason
    assert (last["verdict"], last["result_summary"], last["sub_goal"]) == ("STOP", solution.answer, None)


async def test_max_steps_ends_the_loop_before_the_planner_runs_again(tmp_path: Path) -> None:
    solution, models, _ = await run(tmp_path, Limits(max_steps=2))
    assert solution.stop_reason == "max_steps reached (2 of 2 steps done, no STOP verdict)"
    assert len(models[PLANNER].calls) == 2  # the third step never reached the planner's model
    assert [action.step for action in solution.memory.actions] == [1, 2]
    # the Solver still answered, in a second turn of the same chat, from what it had
    assert solution.answer == (
        "Stopped early; best answer so far: search returned: Lumaria (geography): "
        + tools.CORPUS["Lumaria (geography)"]
    )
    assert solution.result.chat_id.startswith("solve-")
    assert models[SOLVER].calls[-1].last_user_message.startswith("Stop now: max_steps reached")
    records = log_of(solution)
    assert [(r["step"], r["agent"]) for r in records][-2:] == [(2, VERIFIER), (2, SOLVER)]
    assert records[-1]["stop_reason"] == solution.stop_reason
    assert records[-1]["verdict"] == "CONTINUE"


async def test_max_time_ends_the_loop_on_an_injected_clock(tmp_path: Path) -> None:
    clock = ManualClock()
    slow = offline.scripted_models()[EXECUTOR]

    def slow_executor(call: ModelCall) -> Step:
        clock.now += 20.0  # each executor model call "takes" 20 s
        return offline.executor(call)

    solution, models, _ = await run(tmp_path, Limits(max_steps=10, max_time=60), clock,
                                    **{EXECUTOR: ScriptedModel(slow_executor)})
    # step 1: 40 s (two executor calls); step 2: 80 s >= 60 s, so step 3 never starts
    assert solution.stop_reason == "max_time reached (80.0s elapsed, limit 60s)"
    assert solution.steps == 2
    assert len(models[PLANNER].calls) == 2
    assert slow.calls == []
    records = log_of(solution)
    executor_records = [r for r in records if r["agent"] == EXECUTOR]
    assert [(r["started_at"], r["finished_at"]) for r in executor_records] == [
        ("2025-06-15T15:06:40+00:00", "2025-06-15T15:07:20+00:00"),
        ("2025-06-15T15:07:20+00:00", "2025-06-15T15:08:00+00:00"),
    ]
    assert records[-1]["stop_reason"].startswith("max_time reached")


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="max_steps must be >= 1 and max_time > 0"):
        Limits(max_steps=0)
    with pytest.raises(ValueError, match="max_steps must be >= 1 and max_time > 0"):
        Limits(max_time=0)


def test_the_calculator_does_arithmetic_only() -> None:
    assert tools.evaluate("1,250,000 / 5000") == 250
    assert tools.evaluate("-(2 + 3) ** 2 % 7") == 3
    for bad, why in [("__import__('os').system('true')", "only numbers"), ("x + 1", "only numbers"),
                     ("2 ** 1000", "exponent too large"), ("1 +", "not an arithmetic expression")]:
        with pytest.raises(ValueError, match=why):
            tools.evaluate(bad)
    assert tools.find("Port Edda inhabitants") == [("Port Edda", tools.CORPUS["Port Edda"])]
    assert tools.find("zebra") == []


async def test_tools_write_failures_to_memory_too(tmp_path: Path) -> None:
    from agency_swarm import Agency, Agent
    from agency_swarm.testing import ToolCall

    worker = Agent(name="Worker", tools=list(tools.TOOLS), model=ScriptedModel([
        ToolCall("calculator", {"expression": "open('x')"}), ToolCall("search", {"query": "zebra"}), "done",
    ]))
    state = FlowState(question="q", step=4, sub_goal="try things")
    await Agency(worker).get_response("go", context=state)
    assert [(a.step, a.sub_goal, a.tool, a.result) for a in state.memory.actions] == [
        (4, "try things", "calculator", "Error: only numbers and + - * / // % ** are allowed, not \"open('x')\""),
        (4, "try things", "search", "No entry matches 'zebra'."),
    ]


def test_main_runs_offline_in_one_command(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    done = subprocess.run(
        [sys.executable, "examples/agentflow/main.py", "--log-dir", str(tmp_path), "--max-steps", "4"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == "Using scripted offline models (set OPENAI_API_KEY to use a real model)"
    assert lines[1] == f"user -> {SOLVER}: {app.IMAGE_QUESTION}"  # offline, the question is about flag.png
    assert '  Executor calls calculator({"expression": "1250000 / 5000"})' in lines
    assert "Answer: calculator returned: 1250000 / 5000 = 250" in lines  # labelled once
    assert not any(line.startswith("Answer: Answer:") for line in lines)
    [log] = tmp_path.glob("agentflow-*.jsonl")
    assert lines[-1] == f"Audit log: {log}"
    assert len(log.read_text().splitlines()) == 10


def test_main_rejects_bad_limits_and_a_file_as_log_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        app.main(["--max-steps", "0"])
    assert "max_steps must be >= 1" in capsys.readouterr().err
    afile = tmp_path / "file"
    afile.write_text("")
    with pytest.raises(SystemExit):
        app.main(["--log-dir", str(afile)])
    assert "exists and is not a directory" in capsys.readouterr().err


def test_main_uses_the_real_model_when_a_key_is_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "offline-test-value-never-printed")
    seen: list[Any] = []

    async def fake_solve(agency: Any, question: str, **kwargs: Any) -> Solution:
        seen.append(agency)
        return Solution(answer="a", stop_reason="r", steps=0, memory=FlowState(question=question).memory,
                        log_path=tmp_path / "x.jsonl", result=None)  # type: ignore[arg-type]

    monkeypatch.setattr(app, "solve", fake_solve)
    assert app.main(["--log-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Using OpenAI model gpt-4.1-mini (OPENAI_API_KEY is set)\n")
    assert "sk-test" not in out
    assert {agent.model for agent in seen[0].agents.values()} == {"gpt-4.1-mini"}
