"""Shared test set-up: tracing off (tests never export anything), nothing else global."""

from __future__ import annotations

import agents
import pytest

agents.set_tracing_disabled(True)


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach a real model, even on a machine that has a key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
