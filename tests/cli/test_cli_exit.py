"""How the command-line process ends, run as a user runs it (a real process): a model it cannot reach is one line
with no SDK log noise, traces it cannot export do not hold it up, and Ctrl-C while it loads or ends is one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from serving_support import free_port

BOUND = 120  # seconds: a process still running then has hung, and the test fails saying so


def run_cli(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`code` in a new interpreter (tracing on, as for a user), which ends in `agency_swarm.__main__.cli()`."""
    child_env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "AGENCY_SWARM"))}
    child_env.update(env)
    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=BOUND,
                              check=False, cwd=tmp_path, env=child_env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as expired:
        raise AssertionError(f"the command still ran after {BOUND} s: {expired.stdout!r} {expired.stderr!r}") from None


OFFLINE_VALUE = "offline-test-value-not-a-key"
DEMO = "import sys\nsys.argv = ['agency-swarm', 'demo']\nfrom agency_swarm.__main__ import cli\ncli()\n"


def test_a_model_it_cannot_reach_is_one_error_line_without_sdk_log_lines(tmp_path: Path) -> None:
    closed = free_port()  # nobody listens there: every model call fails to connect
    done = run_cli(DEMO, tmp_path, OPENAI_API_KEY=OFFLINE_VALUE, OPENAI_BASE_URL=f"http://127.0.0.1:{closed}/v1")
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""  # no "Error streaming response", no "[non-fatal] Tracing request failed"
    lines = done.stdout.splitlines()
    assert lines[:2] == ["Using OpenAI model gpt-4.1-mini (OPENAI_API_KEY is set)",
                         "user -> CEO: Build a tiny landing page for our product launch."]
    [error] = [line for line in lines if "Error" in line]
    assert error.startswith("Error: ModelUnavailable: Agent 'CEO' (model 'gpt-4.1-mini'): the model API failed")
    assert "last: Connection error. Retries are set by" in error  # one period, not two
    assert "offline-test-value-not-a-key" not in done.stdout


STALLED_EXPORT = """
import os, signal, sys, threading
import agents

class StalledExport(agents.TracingProcessor):
    '''A trace backend that never answers; the user presses Ctrl-C while the process waits for it.'''
    def on_trace_start(self, trace): pass
    def on_trace_end(self, trace): pass
    def on_span_start(self, span): pass
    def on_span_end(self, span): pass
    def shutdown(self): threading.Event().wait()
    def force_flush(self):
        if os.environ.get("PRESS_CTRL_C"):
            os.kill(os.getpid(), signal.SIGINT)
        threading.Event().wait()

agents.add_trace_processor(StalledExport())
"""


def test_traces_it_cannot_export_get_a_bounded_time_then_are_dropped(tmp_path: Path) -> None:
    """The SDK's exit handler would wait for a stalled export (and retry a failed one) before the process ends."""
    done = run_cli(STALLED_EXPORT + DEMO, tmp_path)  # offline models: the turn runs, its traces wait for export
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("Threads of chat 'default'")
    assert done.stderr == ""


def test_ctrl_c_while_traces_are_exported_at_the_end_stops_at_once_quietly(tmp_path: Path) -> None:
    done = run_cli(STALLED_EXPORT + DEMO, tmp_path, PRESS_CTRL_C="1")
    assert done.returncode == 130
    assert done.stdout.splitlines()[-1].startswith("Threads of chat 'default'")  # what it printed stays printed
    assert done.stderr == ""  # no traceback from an exit handler


CTRL_C_WHILE_LOADING = """
import os, signal, sys

class PressCtrlC:
    '''Ctrl-C arrives while openai-agents is being imported (the slowest part of the command's start).'''
    def find_spec(self, name, path=None, target=None):
        if name == "agents":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, PressCtrlC())
"""


def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path: Path) -> None:
    done = run_cli(CTRL_C_WHILE_LOADING + DEMO, tmp_path)
    assert done.returncode == 130
    assert done.stderr == "Interrupted.\n"
