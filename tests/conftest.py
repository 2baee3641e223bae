"""Shared test set-up: tracing off (tests never export anything), nothing else global."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import agents
import pytest

if TYPE_CHECKING:
    from openai_server import OpenAIServer

agents.set_tracing_disabled(True)


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach a real model, even on a machine that has a key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture(scope="module")
def running_server() -> Iterator[OpenAIServer]:
    """The local OpenAI-compatible server (tests/openai_server.py), one per test module that asks for it."""
    from openai_server import serve

    with serve() as started:
        yield started


@pytest.fixture
def server(running_server: OpenAIServer) -> Iterator[OpenAIServer]:
    """The server with a clean script and request log; a scripted reply nobody asked for fails the test."""
    running_server.reset()
    yield running_server
    problems = running_server.finish()
    assert not problems, problems
