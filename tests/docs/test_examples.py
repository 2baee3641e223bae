"""The README's commands and examples run offline and print what the README says they print."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agency_swarm import Agency
from agency_swarm import __main__ as cli
from agency_swarm._cli import _demo as demo

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> str:
    """Run `python *args` from the project root without an API key; return stdout (and fail loudly on errors)."""
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.stderr == "", done.stderr
    return done.stdout


def test_demo_streams_the_whole_chain_offline() -> None:
    lines = run("-m", "agency_swarm", "demo").splitlines()
    assert lines[0] == "Using scripted offline models (set OPENAI_API_KEY to use a real model)"
    assert lines[1] == f"user -> CEO: {demo.DEFAULT_MESSAGE}"
    assert lines[2] == f"CEO -> Developer: Please build this: {demo.DEFAULT_MESSAGE}"
    assert lines[3].startswith('  Developer calls write_file({"path": "index.html"')
    assert lines[4] == "  Developer <- write_file: Wrote 75 characters to index.html."
    assert lines[5].startswith("  Developer -> QA: Please review index.html:")
    assert lines[6] == "    QA: Reviewed index.html: heading, pitch and sign-up link are there. Approved."
    assert lines[7] == "  Developer: index.html is written and QA approved it."
    assert lines[8] == "CEO: Done. The Developer reports: index.html is written and QA approved it."
    assert lines[10] == "Usage: 6 requests (CEO 2, Developer 3, QA 1); tokens: 60 input + 30 output = 90"
    assert lines[11] == (
        "Threads of chat 'default': user->CEO (4 items), CEO->Developer (6 items), Developer->QA (2 items)"
    )


def test_quickstart() -> None:
    assert run("examples/quickstart.py").splitlines() == [
        "Done: hello.py prints a greeting.",
        "['user->CEO', 'CEO->Developer']",
    ]


def test_streaming_notebook() -> None:
    out = run("examples/streaming_notebook.py")
    assert "Lead -> Analyst: Count the words of the question.\n" in out
    assert '  Analyst calls count_words({"text": "agents that talk to agents"})\n' in out
    assert "  Analyst: It has 5 words.\nLead: That is 5 words.\n" in out
    assert "streamed final output: That is 5 words.\nsync final output: That is 5 words.\n" in out
    assert out.endswith("user->Lead: 8 items\nLead->Analyst: 8 items\n")


# -- in process (for coverage and the parts a subprocess cannot reach) ---------------------------------


async def test_run_demo_in_process() -> None:
    agency = demo.build_agency(demo.scripted_models())
    out = io.StringIO()
    result = await demo.run_demo(agency, "Make a logo", out)
    assert result.final_output == "Done. The Developer reports: index.html is written and QA approved it."
    assert "CEO -> Developer: Please build this: Make a logo\n" in out.getvalue()
    assert sorted(agency.thread_manager.get_threads("default")) == ["CEO->Developer", "Developer->QA", "user->CEO"]


def test_cli_main_runs_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--message", "Hi"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Using scripted offline models")
    assert "user -> CEO: Hi\n" in out
    assert cli.main([]) == 0
    assert capsys.readouterr().out.startswith("usage: agency-swarm")


def test_demo_uses_openai_when_a_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "offline-test-value-never-printed"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    seen: list[Agency] = []

    async def fake_run(agency: Agency, message: str, out: io.StringIO) -> None:
        seen.append(agency)

    monkeypatch.setattr(demo, "run_demo", fake_run)
    out = io.StringIO()
    assert demo.main("Hi", out) == 0
    assert out.getvalue() == f"Using OpenAI model {demo.OPENAI_MODEL} (OPENAI_API_KEY is set)\n"
    assert secret not in out.getvalue()
    assert [agent.model for agent in seen[0].agents.values()] == [demo.OPENAI_MODEL] * 3


def test_printer_shows_refused_sends_and_keeps_text_on_one_line() -> None:
    from agency_swarm import TextDelta, ToolOutput

    out = io.StringIO()
    printer = demo.Printer(out)
    common = {"caller": "CEO", "chat_id": "c"}
    printer.show(TextDelta(agent="Developer", depth=1, delta="Hello\nthere", **common))
    printer.show(TextDelta(agent="Developer", depth=1, delta=" you", **common))
    printer.show(ToolOutput(agent="Developer", depth=1, tool="send_message", call_id="x", output="Error: no", **common))
    printer.end_line()
    assert out.getvalue() == (
        "  Developer: Hello\n"
        "             there you\n"
        "  Developer <- send_message: Error: no\n"
    )


def test_demo_reports_errors_and_interrupts(monkeypatch: pytest.MonkeyPatch) -> None:
    from agency_swarm import ConfigError

    async def fail(agency: Agency, message: str, out: io.StringIO) -> None:
        raise ConfigError("bad")

    async def interrupt(agency: Agency, message: str, out: io.StringIO) -> None:
        raise KeyboardInterrupt

    out = io.StringIO()
    monkeypatch.setattr(demo, "run_demo", fail)
    assert demo.main("Hi", out) == 1
    assert out.getvalue().endswith("\nError: ConfigError: bad\n")
    monkeypatch.setattr(demo, "run_demo", interrupt)
    assert demo.main("Hi", out) == 130
