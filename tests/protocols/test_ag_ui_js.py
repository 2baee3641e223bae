"""The official AG-UI client, `@ag-ui/client`'s HttpAgent under node, against a real `agency-swarm serve --ag-ui` on
127.0.0.1: its own pipeline (verifier and reducer) accepts every run, approvals answered with its `buildResumeArray`.

scripts/test.sh installs the client (`npm ci` in tests/js); without node or the install this test skips, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from serving_support import Server, start_serve

JS = Path(__file__).resolve().parents[1] / "js"
TOKEN = "ag-ui-js-token"
NODE_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def reports() -> dict[tuple[str, str], dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: install Node.js 18+ (and npm) to run the AG-UI client test")
    if not (JS / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip("@ag-ui/client is not installed: `npm ci` in tests/js (scripts/test.sh does it)")
    server: Server = start_serve(
        ["--factory", "ag_ui_app:build_agency", "--ag-ui", "--auth-token-env", "AG_UI_TOKEN"],
        env={"AG_UI_TOKEN": TOKEN},
    )
    try:
        done = subprocess.run(
            [node, "ag_ui_client.mjs", server.url], cwd=JS, env={**os.environ, "AG_UI_TOKEN": TOKEN},
            capture_output=True, text=True, timeout=NODE_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL,
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {(report["scenario"], report["run"]): report for report in lines}


def test_the_client_accepts_every_run(reports: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert len(reports) == 10
    refused = {key: report.get("error") for key, report in reports.items() if not report["ok"]}
    assert refused == {}  # the client's verifier throws on any event out of order
    for report in reports.values():
        assert report["types"][0] == "RUN_STARTED"
        assert report["types"][-1] in ("RUN_FINISHED", "RUN_ERROR")


def test_the_client_sees_each_agent_as_a_sub_agent(reports: dict[tuple[str, str], dict[str, Any]]) -> None:
    nested = reports[("nested", "first")]
    assert nested["result"] == "CEO: Dev: QA checked"
    assert nested["types"].count("SUBAGENT_STARTED") == nested["types"].count("SUBAGENT_FINISHED") == 2
    said = {message["name"]: message for message in nested["messages"] if message["role"] == "assistant"
            and message["content"]}
    assert said["CEO"]["subagentRunId"] is None
    assert said["QA"]["subagentRunId"] is not None
    assert said["QA"]["subagentRunId"] != said["Developer"]["subagentRunId"]


def test_the_client_answers_an_interrupt_and_the_run_goes_on(reports: dict[tuple[str, str], dict[str, Any]]) -> None:
    paused, resumed = reports[("approve", "first")], reports[("approve", "resume")]
    assert len(paused["interrupts"]) == 1
    assert resumed["interrupts"] == []
    assert resumed["result"] == "CEO: Dev: QA: deployed prod"
    calls = [name for message in resumed["messages"] for name in message["toolCalls"]]
    assert calls.count("deploy") == 1  # the resumed run does not announce the call again
    assert reports[("reject", "resume")]["result"] == "CEO: Dev: QA: Not today."


def test_the_client_sees_errors_as_ag_ui_says(reports: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert reports[("toolerror", "first")]["result"].startswith("CEO: Dev: Error: tool 'broken' failed")
    assert "SUBAGENT_ERROR" in reports[("suberror", "first")]["types"]
    assert reports[("modelerror", "first")]["types"][-1] == "RUN_ERROR"
    again = reports[("retry", "again")]
    assert again["types"][-1] == "RUN_FINISHED"
    assert again["result"] == reports[("retry", "first")]["result"] == "CEO: Dev: QA checked"
