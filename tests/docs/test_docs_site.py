"""The documentation site builds with `mkdocs build --strict`: a broken link, a missing page in the nav, a
reference mkdocstrings cannot resolve, or a generated part that fails (the CLI's help, the OpenAPI schema, the
config schema) fails this test. The site's words speak of the product, never of the order work was done in."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROCESS_WORDS = re.compile(
    r"\b(stop|issue|round|session|step|phase) ?#?[0-9]+\b|\b(this|that|last|next|previous) session\b|\bround two\b",
    re.IGNORECASE,
)


def test_the_site_builds_strictly_with_its_generated_pages(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False, env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "site"
    schema = json.loads((site / "openapi.json").read_text())
    assert "/chats/{chat_id}/messages" in schema["paths"]
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "Usage: agency-swarm serve" in cli
    assert "--workers" in cli
    api = (site / "reference" / "api" / "index.html").read_text()
    assert 'id="agency_swarm.Agency.get_response"' in api
    assert "additionalProperties" in (site / "reference" / "config" / "index.html").read_text()


def documented_texts() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md"))]


def test_no_process_words_in_the_docs() -> None:
    """A work stop's or an issue's number, "this session": no reader can place them. Versions, dates, commits."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
        for path in documented_texts()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for match in PROCESS_WORDS.finditer(line)
    ]
    assert found == []


def test_the_process_word_check_catches_what_it_is_for() -> None:
    for text in (f"at stop {17}", f"Issue {20} wanted", "as measured this session", f"(issue #{21})", f"Round {2}"):
        assert PROCESS_WORDS.search(text), text
    for text in ("--rounds 7", "10 rounds per cell", "a stopped turn", "an issue with 20 items"):
        assert not PROCESS_WORDS.search(text), text
