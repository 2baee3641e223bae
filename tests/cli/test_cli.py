"""The `agency-swarm` command: run (one turn, interactive, approvals, resumed chats), visualize, demo, bad input;
one real subprocess run, and Ctrl-C in a real pseudo-terminal."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import io
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from agency_swarm import Agency, Agent, ChatPaused
from agency_swarm import __main__ as main_module
from agency_swarm._cli._commands import app, load_python_object
from agency_swarm._cli._demo import DEFAULT_MESSAGE
from agency_swarm._cli._terminal import TerminalChat
from agency_swarm.testing import ScriptedModel

AGENCY_YAML = """\
agents:
  CEO:
    description: Talks to the user and delegates.
    model: ceo-model
    instructions: Delegate the work to the Developer.
  Developer:
    description: Writes code.
    model: dev-model
    toolkits: [deploy]
chart:
  supervisor: CEO
  workers: [Developer]
"""

# Offline models and tools for the config above, loaded with --models FILE:NAME / --toolkits FILE:NAME.
MODELS_PY = '''\
import asyncio

from agency_swarm import function_tool
from agency_swarm.testing import Fail, ScriptedModel, ToolCall, send_message


@function_tool(needs_approval=True)
def deploy(env: str) -> str:
    """Deploy the build to an environment."""
    return f"deployed to {env}"


TOOLKITS = {"deploy": [deploy]}


def team():
    return {
        "ceo-model": ScriptedModel.each_turn([send_message("Developer", "build it"), "Done: built."]),
        "dev-model": ScriptedModel.each_turn(["built"]),
    }


def approvals():
    return {
        "ceo-model": ScriptedModel.each_turn([send_message("Developer", "ship it"), "Shipped."]),
        "dev-model": ScriptedModel.each_turn([ToolCall("deploy", {"env": "prod"}), "deploy finished"]),
    }


def counting():
    def reply(call):
        seen = sum(1 for item in call.input if item.get("role") == "user")
        return f"You have sent {seen} messages; the last was {call.last_user_message!r}."

    return {"ceo-model": ScriptedModel(reply), "dev-model": ScriptedModel([])}


def failing():
    return {"ceo-model": ScriptedModel([Fail(RuntimeError("model down"))]), "dev-model": ScriptedModel([])}


class HangsOnFirstStream(ScriptedModel):
    """Streams the first words of its first reply, then waits forever (until the turn is cancelled)."""

    streams = 0

    async def stream_response(self, *args, **kwargs):
        self.streams += 1
        first = self.streams == 1
        async for event in super().stream_response(*args, **kwargs):
            yield event
            if first and event.type == "response.output_text.delta":
                await asyncio.Event().wait()


def hanging():
    return {
        "ceo-model": HangsOnFirstStream(lambda call: f"echo {call.last_user_message}"),
        "dev-model": ScriptedModel([]),
    }
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "agency.yaml").write_text(AGENCY_YAML)
    (tmp_path / "cli_models.py").write_text(MODELS_PY)
    return tmp_path


def run_args(project: Path, models: str, *extra: str) -> list[str]:
    return [
        "run", str(project / "agency.yaml"), "--models", f"{project / 'cli_models.py'}:{models}",
        "--toolkits", f"{project / 'cli_models.py'}:TOOLKITS", *extra,
    ]


runner = CliRunner()


def invoke(args: list[str], input: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, args, input=input)
    assert "Traceback" not in result.stdout + result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


# -- run: one message --------------------------------------------------------------------------------------------


def test_run_one_message_streams_labelled_lines(project: Path) -> None:
    code, out, err = invoke(run_args(project, "team", "--message", "Build it"))
    assert (code, err) == (0, "")
    assert out == (
        "user -> CEO: Build it\n"
        "CEO -> Developer: build it\n"
        "  Developer: built\n"
        "CEO: Done: built.\n"
    )


def test_run_approves_a_tool_call_when_the_user_says_y(project: Path) -> None:
    code, out, _ = invoke(run_args(project, "approvals", "-m", "Ship"), input="y\n")
    assert code == 0
    assert out == (
        "user -> CEO: Ship\n"
        "CEO -> Developer: ship it\n"
        '  Developer calls deploy({"env": "prod"})\n'
        '  Developer wants to call deploy({"env": "prod"}): waiting for your approval\n'
        'Approve Developer\'s call deploy({"env": "prod"})? [y/n] y\n'
        "  Developer <- deploy: deployed to prod\n"  # the replayed context of the resumed turn is not repeated
        "  Developer: deploy finished\n"
        "CEO: Shipped.\n"
    )


def test_run_rejects_a_tool_call_on_n_and_asks_again_on_other_answers(project: Path) -> None:
    code, out, _ = invoke(run_args(project, "approvals", "-m", "Ship"), input="maybe\nn\n")
    assert code == 0
    asked_again = "? [y/n] maybe\nPlease answer y or n (or exit to quit, leaving the turn paused).\nApprove Developer's"
    assert asked_again in out
    assert "  Developer <- deploy: Tool execution was not approved." in out
    assert "deployed to prod" not in out


@pytest.mark.parametrize("answer", ["", "exit\n", "quit\n"])
def test_exit_or_end_of_input_at_an_approval_question_quits_leaving_the_turn_paused(
    project: Path, answer: str
) -> None:
    code, out, _ = invoke(run_args(project, "approvals", "-m", "Ship", "--threads-dir", str(project / "t")), answer)
    assert code == 0
    assert out.endswith("Quitting without a decision: the turn stays paused; run this chat again to decide.\n")
    assert "Please answer y or n" not in out
    assert "Tool execution was not approved." not in out
    assert "deployed to prod" not in out
    code, out, _ = invoke(run_args(project, "approvals", "--threads-dir", str(project / "t")), "y\nexit\n")
    assert code == 0
    assert "Developer <- deploy: deployed to prod" in out  # still waiting, decided in the next session


def test_run_on_a_paused_chat_says_so_at_start_and_asks_for_the_decisions_first(project: Path) -> None:
    stored = ["--threads-dir", str(project / "t"), "--chat-id", "ops"]
    assert invoke(run_args(project, "approvals", "-m", "Ship", *stored), "exit\n")[0] == 0  # left paused
    code, out, _ = invoke(run_args(project, "approvals", *stored), "y\nexit\n")  # a new session on that chat
    assert code == 0
    lines = out.splitlines()
    assert lines[1] == "This chat is paused: a tool call waits for your approval. Decide first; then send your message."
    assert lines[2:] == [
        "CEO -> Developer: ship it",  # how the turn got there
        '  Developer calls deploy({"env": "prod"})',
        '  Developer wants to call deploy({"env": "prod"}): waiting for your approval',
        'Approve Developer\'s call deploy({"env": "prod"})? [y/n] y',  # the first line typed answers the question
        "  Developer <- deploy: deployed to prod",
        "  Developer: deploy finished",
        "CEO: Shipped.",
        "you: exit",
    ]


def test_a_failed_turn_is_one_red_line_and_exit_1(project: Path) -> None:
    code, out, err = invoke(run_args(project, "failing", "-m", "Hi"))
    assert code == 1
    assert out == "user -> CEO: Hi\n"
    assert err.startswith("Error: ")
    assert "model down" in err
    assert err.count("\n") == 1


def test_no_api_key_is_one_line_naming_agent_model_and_ways_out_and_exit_2(project: Path) -> None:
    (project / "agency.yaml").write_text(AGENCY_YAML.replace("model: ceo-model", "model: gpt-4.1"))
    code, out, err = invoke(["run", str(project / "agency.yaml"), "--toolkits", f"{project / 'cli_models.py'}:TOOLKITS",
                             "-m", "hello"])
    assert code == 2
    assert out == "user -> CEO: hello\n"
    assert err.startswith("Error: ModelAuthenticationError: Agent 'CEO' (model 'gpt-4.1') has no API key: set "
                          "OPENAI_API_KEY, or run offline models instead (--models on the command line")
    assert err.count("\n") == 1


# -- run: interactive ----------------------------------------------------------------------------------------------


def test_interactive_chat_until_exit(project: Path) -> None:
    code, out, _ = invoke(run_args(project, "counting"), input="hello\n\nagain\nexit\n")
    assert code == 0
    assert out == (
        "Talking to CEO (chat 'default', kept in memory only (--threads-dir keeps it)). Ctrl-C cancels a turn; "
        "Ctrl-C again, Ctrl-D or `exit` quits.\n"
        "you: hello\n"
        "CEO: You have sent 1 messages; the last was 'hello'.\n"
        "you: \n"
        "you: again\n"
        "CEO: You have sent 2 messages; the last was 'again'.\n"
        "you: exit\n"
    )


def test_interactive_chat_ends_at_end_of_input_and_survives_a_failed_turn(project: Path) -> None:
    code, out, err = invoke(run_args(project, "failing"), input="hi\n")
    assert code == 0
    assert out.endswith("you: hi\nyou: \n")  # the failed turn, then end of input
    assert err.startswith("Error: ")
    assert "model down" in err


def test_chat_id_resumes_a_stored_chat(project: Path) -> None:
    threads = project / "threads"
    first = run_args(project, "counting", "--threads-dir", str(threads), "--chat-id", "c-42", "-m", "one")
    assert invoke(first)[0] == 0
    code, out, _ = invoke(run_args(project, "counting", "--threads-dir", str(threads), "--chat-id", "c-42"), "two\n")
    assert code == 0
    assert out.startswith("Talking to CEO (chat 'c-42', 2 stored items).")
    assert "CEO: You have sent 2 messages; the last was 'two'.\n" in out
    assert sorted(path.name for path in threads.iterdir()) == ["c-42.jsonl"]


def test_agent_option_picks_the_entry_agent(project: Path) -> None:
    (project / "agency.yaml").write_text(AGENCY_YAML + "  entry_points: [Developer]\n")  # the user may address it
    code, out, _ = invoke(run_args(project, "team", "--agent", "Developer", "-m", "Direct"))
    assert code == 0
    assert out == "user -> Developer: Direct\nDeveloper: built\n"


# -- bad input: one red line, exit 2, nothing runs -----------------------------------------------------------------


def one_error_line(args: list[str]) -> str:
    code, out, err = invoke(args)
    assert code == 2
    assert out == ""
    assert err.startswith("Error: ")
    assert err.count("\n") == 1, err
    return err


def test_missing_config_file(tmp_path: Path) -> None:
    err = one_error_line(["run", str(tmp_path / "nope.yaml"), "-m", "hi"])
    assert f"Config file not found: {tmp_path / 'nope.yaml'}" in err
    assert "Config file not found" in one_error_line(["visualize", str(tmp_path / "nope.yaml")])
    assert "is not a file" in one_error_line(["run", str(tmp_path)])


def test_invalid_config_names_file_line_and_key(project: Path) -> None:
    (project / "agency.yaml").write_text(AGENCY_YAML.replace("model: ceo-model", "model: ceo-model\n    colour: red"))
    err = one_error_line(run_args(project, "team", "-m", "hi"))
    assert "agency.yaml, line 5" in err
    assert "colour" in err
    (project / "agency.yaml").write_text("agents: [unclosed\n")
    assert "agency.yaml" in one_error_line(["visualize", str(project / "agency.yaml")])


def test_unknown_agent_chat_id_models_and_toolkits(project: Path) -> None:
    err = one_error_line(run_args(project, "team", "--agent", "Nobody", "-m", "hi"))
    assert "--agent: No such agent: 'Nobody' is not in this agency (its agents: CEO, Developer)" in err
    err = one_error_line(run_args(project, "team", "--agent", "Developer", "-m", "hi"))  # a worker: the chart's rule
    assert "--agent: 'Developer' is not an entry point of this agency; the user may address: CEO." in err
    assert "looks like a path" in one_error_line(run_args(project, "team", "--chat-id", "../x", "-m", "hi"))
    assert "has no attribute 'nothing'" in one_error_line(run_args(project, "nothing", "-m", "hi"))
    err = one_error_line(["run", str(project / "agency.yaml"), "--models", "no_such_module_here:MODELS"])
    assert "cannot import module 'no_such_module_here'" in err
    assert "write FILE.py:NAME" in one_error_line(["run", str(project / "agency.yaml"), "--models", "justaname"])
    err = one_error_line(["run", str(project / "agency.yaml"), "--models", f"{project / 'cli_models.py'}:team"])
    assert "unknown toolkit 'deploy'" in err  # the config needs --toolkits
    assert "pass --toolkits FILE.py:NAME, NAME a {toolkit name: [tool, ...]} mapping" in err  # the flag, not Python's
    assert "from_config" not in err


def test_cli_errors_name_the_cli_options_not_python_arguments(project: Path) -> None:
    (project / "stray.py").write_text(
        "from agency_swarm.testing import ScriptedModel\nMODELS = {'Nobody': ScriptedModel([])}\n"
    )
    toolkits = f"{project / 'cli_models.py'}:TOOLKITS"
    err = one_error_line(["run", str(project / "agency.yaml"), "--models", f"{project / 'stray.py'}:MODELS",
                          "--toolkits", toolkits, "-m", "hi"])
    assert "--models names 'Nobody', which is neither an agent nor a model name" in err
    assert "models=" not in err


def test_load_python_object_reports_broken_files_and_functions(tmp_path: Path) -> None:
    from agency_swarm import ConfigError

    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match=r"--models: importing .*broken.py failed: RuntimeError: boom"):
        load_python_object("--models", f"{broken}:X")
    failing = tmp_path / "failing.py"
    failing.write_text("def make():\n    raise KeyError('k')\n")
    with pytest.raises(ConfigError, match=r"calling make\(\) failed: KeyError"):
        load_python_object("--toolkits", f"{failing}:make")
    with pytest.raises(ConfigError, match="does not exist"):
        load_python_object("--models", f"{tmp_path / 'absent.py'}:X")
    assert load_python_object("--models", "agency_swarm._cli._demo:DEFAULT_MESSAGE") == DEFAULT_MESSAGE


# -- visualize and demo --------------------------------------------------------------------------------------------


def test_visualize_prints_mermaid_and_writes_html(project: Path) -> None:
    toolkits = f"{project / 'cli_models.py'}:TOOLKITS"
    code, out, _ = invoke(["visualize", str(project / "agency.yaml")])  # the file alone: no --toolkits, no --models
    assert code == 0
    assert invoke(["visualize", str(project / "agency.yaml"), "--toolkits", toolkits])[1] == out  # still accepted
    assert out == (
        "flowchart TD\n"
        '    user(["user"])\n'
        '    agent_0["CEO<br/>Talks to the user and delegates."]\n'
        '    agent_1["Developer<br/>Writes code."]\n'
        "    user --> agent_0\n"
        "    agent_0 --> agent_1\n"
        "    classDef entry stroke-width:3px\n"
        "    class agent_0 entry\n"
    )
    page = project / "out" / "chart.html"
    page.parent.mkdir()
    args = ["visualize", str(project / "agency.yaml"), "--format", "html", "-o", str(page)]
    code, out, _ = invoke(args)
    assert code == 0
    assert out == f"Wrote the html chart of 2 agents to {page}\n"
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert 'data-from="CEO" data-to="Developer"' in page.read_text()


def test_visualize_refuses_an_unknown_format_and_an_unwritable_output(project: Path) -> None:
    toolkits = f"{project / 'cli_models.py'}:TOOLKITS"
    result = runner.invoke(app, ["visualize", str(project / "agency.yaml"), "--format", "png", "--toolkits", toolkits])
    assert result.exit_code == 2
    assert "png" in result.stderr
    err = one_error_line(
        ["visualize", str(project / "agency.yaml"), "-o", str(project / "missing" / "c.md"), "--toolkits", toolkits]
    )
    assert "Cannot write" in err


def test_visualize_draws_without_building_tools_models_or_the_store(project: Path) -> None:
    (project / "agency.yaml").write_text(AGENCY_YAML + "store: {type: sqlite, path: chats.db}\n")
    code, out, _ = invoke(["visualize", str(project / "agency.yaml"), "--format", "html"])
    assert code == 0
    assert 'data-from="CEO" data-to="Developer"' in out
    assert not (project / "chats.db").exists()  # nothing opened
    (project / "agency.yaml").write_text(AGENCY_YAML.replace("workers: [Developer]", "workers: [Nobody]"))
    assert "the chart names 'Nobody'" in one_error_line(["visualize", str(project / "agency.yaml")])


def test_help_shows_the_toolkits_mapping_and_version_prints_the_installed_one() -> None:
    from importlib.metadata import version

    for command in ("run", "serve"):
        shown = " ".join(runner.invoke(app, [command, "--help"]).stdout.replace("│", " ").split())
        assert "a {toolkit name: [tool, ...]} mapping" in shown  # not eaten as rich markup
    code, out, _ = invoke(["--version"])
    assert code == 0
    assert out == f"agency-swarm {version('agency-swarm-sdk')}\n"


def test_demo_command_prints_the_readme_output() -> None:
    assert invoke(["demo", "-m", "Ship it"])[1].splitlines()[1] == "user -> CEO: Ship it"  # -m, as for run
    code, out, _ = invoke(["demo", "--message", "Ship the pricing page"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "Using scripted offline models (set OPENAI_API_KEY to use a real model)"
    assert lines[1] == "user -> CEO: Ship the pricing page"
    assert lines[-1] == (
        "Threads of chat 'default': user->CEO (4 items), CEO->Developer (6 items), Developer->QA (2 items)"
    )
    assert invoke(["demo"])[1].splitlines()[1] == f"user -> CEO: {DEFAULT_MESSAGE}"


def test_main_returns_exit_codes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main_module.main([]) == 0
    usage, commands = capsys.readouterr().out.splitlines()[:3:2]
    assert usage == "usage: agency-swarm COMMAND [ARGS]..."
    assert {"demo", "run", "visualize"} <= set(commands.removeprefix("commands: ").split(", "))
    assert main_module.main(["run", str(tmp_path / "absent.yaml")]) == 2
    assert "Config file not found" in capsys.readouterr().err
    assert main_module.main(["--help"]) == 0
    assert "visualize" in capsys.readouterr().out
    assert main_module.main(["no-such-command"]) == 2


# -- approvals across sessions (in process: a KeyboardInterrupt at a prompt) ---------------------------------------


def answers(*replies: str | type[BaseException]) -> Callable[[str], str]:
    queue: Iterator[str | type[BaseException]] = iter(replies)

    def read(prompt: str) -> str:
        reply = next(queue)
        if isinstance(reply, str):
            return reply
        raise reply

    return read


def test_a_paused_chat_asks_for_its_approvals_before_the_next_message(project: Path) -> None:
    models = load_python_object("--models", f"{project / 'cli_models.py'}:approvals")
    toolkits = load_python_object("--toolkits", f"{project / 'cli_models.py'}:TOOLKITS")
    out = Path(project / "out.txt")
    with out.open("w") as sink, asyncio.Runner() as loop:
        agency = Agency.from_config(project / "agency.yaml", models=models, toolkits=toolkits,
                                    threads_dir=project / "threads")
        chat = TerminalChat(agency, runner=loop, out=sink, read=answers(KeyboardInterrupt))
        outcome = chat.send("Ship")  # Ctrl-C at the approval prompt: no decision, the turn stays paused
        assert outcome.cancelled
        loop.run(agency.aclose())
    assert "No decision: the turn stays paused" in out.read_text()

    with out.open("w") as sink, asyncio.Runner() as loop:  # a new process, the same stored chat
        agency = Agency.from_config(project / "agency.yaml", models=load_python_object(
            "--models", f"{project / 'cli_models.py'}:approvals"), toolkits=toolkits, threads_dir=project / "threads")
        with pytest.raises(ChatPaused):
            loop.run(agency.get_response("sneak past"))
        chat = TerminalChat(agency, runner=loop, out=sink, read=answers("y", "y"))  # the old call, then a new one
        outcome = chat.send("Thanks")
        assert outcome.result is not None
        assert outcome.result.final_output == "Shipped."
        loop.run(agency.aclose())
    text = out.read_text()
    assert text.startswith("The last turn of this chat is waiting for your approval; your message comes next.\n")
    assert "  Developer <- deploy: deployed to prod\n" in text
    assert text.count("CEO: Shipped.") == 2  # the resumed turn, then the reply to "Thanks"


class InterruptsTwice(ScriptedModel):
    """Presses Ctrl-C twice (SIGINT to this process) as soon as it is called, then hangs until cancelled."""

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        self.calls.append(None)  # type: ignore[arg-type]  # only counted
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.Event().wait()
        yield  # never reached: makes this an async generator


def test_two_ctrl_c_during_a_turn_cancel_it_and_end_the_chat(tmp_path: Path) -> None:
    model = InterruptsTwice([])
    agency = Agency(Agent(name="CEO", model=model), threads_dir=tmp_path)
    out = io.StringIO()
    with asyncio.Runner() as loop:
        chat = TerminalChat(agency, runner=loop, out=out, read=answers("go"))
        assert chat.interact() == 130  # no second prompt: the second Ctrl-C asked to exit
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C at a prompt works again
        loop.run(agency.aclose())
    assert out.getvalue() == "Turn cancelled; what it produced so far is saved.\n"
    assert len(model.calls) == 1
    assert '"go"' in (tmp_path / "default.jsonl").read_text()


def test_spinner_shows_what_the_turn_waits_on_in_a_terminal(project: Path) -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    models = load_python_object("--models", f"{project / 'cli_models.py'}:team")
    toolkits = load_python_object("--toolkits", f"{project / 'cli_models.py'}:TOOLKITS")
    out = io.StringIO()
    with asyncio.Runner() as loop:
        agency = Agency.from_config(project / "agency.yaml", models=models, toolkits=toolkits)
        chat = TerminalChat(agency, runner=loop, out=out, console=console, echo_user=True)
        assert chat.send_once("Build it") == 0
    assert "CEO is thinking..." in screen.getvalue()
    assert "Developer is thinking..." in screen.getvalue()
    assert out.getvalue() == (
        "user -> CEO: Build it\nCEO -> Developer: build it\n  Developer: built\nCEO: Done: built.\n"
    )


# -- real processes ------------------------------------------------------------------------------------------------

CLI = Path(sys.executable).parent / "agency-swarm"


def child_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("OPENAI_API_KEY", "CI", "NO_COLOR")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def test_the_installed_command_runs_one_turn(project: Path) -> None:
    done = subprocess.run(
        [str(CLI), *run_args(project, "team", "-m", "Build it")],
        capture_output=True, text=True, timeout=120, check=False, env=child_env(), cwd=project,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "user -> CEO: Build it\nCEO -> Developer: build it\n  Developer: built\nCEO: Done: built.\n"


ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\r")


class Terminal:
    """A child process on a pseudo-terminal; `expect` waits (bounded by a deadline) for text to appear."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a session leader whose controlling terminal is the pty
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.seen = ""
        self.consumed = 0

    def expect(self, marker: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.seen[self.consumed :]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{marker!r} did not appear; the terminal shows:\n{self.seen}")
            if not self._read(remaining):
                raise AssertionError(f"the process ended before {marker!r}; the terminal shows:\n{self.seen}")
        self.consumed = self.seen.index(marker, self.consumed) + len(marker)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError as error:  # EIO: the child closed the terminal
            if error.errno != errno.EIO:
                raise
            return False
        if not data:
            return False
        self.seen += ANSI.sub("", data.decode("utf-8", "replace"))
        return True

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while self._read(max(0.0, deadline - time.monotonic())):
            if time.monotonic() > deadline:
                raise AssertionError(f"the process did not exit; the terminal shows:\n{self.seen}")
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return os.waitstatus_to_exitcode(status)

    def close(self) -> None:
        if self.pid:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


def test_ctrl_c_cancels_the_turn_keeps_it_saved_and_a_second_ctrl_c_exits(project: Path) -> None:
    threads = project / "threads"
    env = {**child_env(), "TERM": "xterm-256color"}
    terminal = Terminal([str(CLI), *run_args(project, "hanging", "--threads-dir", str(threads))], env)
    try:
        terminal.expect("Talking to CEO (chat 'default', new).")
        terminal.expect("you: ")
        terminal.send("first message\r")
        terminal.expect("CEO: echo")  # the model streamed its first words and now hangs
        terminal.send("\x03")
        terminal.expect("Turn cancelled; what it produced so far is saved.")
        terminal.expect("you: ")
        stored = (threads / "default.jsonl").read_text()
        assert "first message" in stored  # saved before the process ends
        terminal.send("second message\r")
        terminal.expect("CEO: echo second message")
        terminal.expect("you: ")
        terminal.send("\x03")  # Ctrl-C at the prompt: exit
        assert terminal.wait() == 130
    finally:
        terminal.close()
    assert "Traceback" not in terminal.seen
    assert "echo second message" in (threads / "default.jsonl").read_text()
