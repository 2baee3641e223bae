"""The @a2a-js/sdk client (npm, under node) against an agency served over A2A: the card, and a streamed message on
each transport. scripts/test.sh installs it (npm ci in tests/js_a2a); without node or the package the test is
skipped, saying why."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from test_a2a_server import TOKEN, served

JS_DIR = Path(__file__).resolve().parents[1] / "js_a2a"
NODE = shutil.which("node")
INSTALLED = (JS_DIR / "node_modules" / "@a2a-js" / "sdk" / "package.json").is_file()
pytestmark = pytest.mark.skipif(
    NODE is None or not INSTALLED,
    reason="node, or @a2a-js/sdk in tests/js_a2a (npm ci there; scripts/test.sh does), is missing",
)


async def run_client(url: str, chat: str, binding: str) -> list[dict[str, Any]]:
    assert NODE is not None
    process = await asyncio.create_subprocess_exec(
        NODE, str(JS_DIR / "client.mjs"), url, chat, binding, cwd=JS_DIR,
        env={**os.environ, "A2A_TOKEN": TOKEN}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_the_js_client_reads_the_card_and_streams_a_message(tmp_path: Path, binding: str) -> None:
    chat = f"js-{uuid.uuid4().hex[:8]}"
    async with served(tmp_path) as (url, app):
        lines = await run_client(url, chat, binding)
        threads = await app.state.agency.get_threads(chat)
    assert lines[0] == {"card": "Developer", "skills": ["Developer"]}
    kinds = [line["kind"] for line in lines[1:]]
    assert kinds[0] == "task"
    assert kinds[-1] == "statusUpdate"
    assert lines[-1]["state"] == 3  # TASK_STATE_COMPLETED
    tagged = [(line["agent"], line.get("depth")) for line in lines if line.get("agent")]
    assert ("QA", 1) in tagged
    assert ("Developer", 0) in tagged
    [artifact] = [line for line in lines[1:] if line["kind"] == "artifactUpdate"]
    assert artifact["text"].startswith("Developer did: [qa] from node (QA checked:")
    assert threads["user->Developer"][0]["content"] == "[qa] from node"
