"""scripts/: what test.sh does to the machine beyond .venv (Chromium through apt-get as root) is said, and skippable."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_chromium_step(tmp_path: Path, **env: str) -> tuple[str, list[str]]:
    """Source scripts/_chromium.sh as root on a machine with apt-get and no Chromium (stubs on PATH only); returns its
    output and the apt-get commands it ran."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "apt-get.calls"
    (stubs / "id").write_text("#!/bin/sh\necho 0\n")
    (stubs / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    done = subprocess.run(
        ["/bin/bash", "-c", "set -euo pipefail; source scripts/_chromium.sh"], cwd=ROOT, capture_output=True,
        text=True, timeout=30, check=False, env={"PATH": str(stubs), **env},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, calls.read_text().splitlines() if calls.exists() else []


def test_test_sh_says_it_installs_chromium_and_how_to_skip_it(tmp_path: Path) -> None:
    output, apt_get = run_chromium_step(tmp_path)
    assert apt_get == ["update -qq", "install -y -qq chromium"]
    assert "installing chromium with apt-get" in output
    assert "AGENCY_SWARM_SKIP_CHROMIUM=1" in output
    assert "source scripts/_chromium.sh" in (ROOT / "scripts" / "test.sh").read_text()


def test_agency_swarm_skip_chromium_skips_the_install(tmp_path: Path) -> None:
    output, apt_get = run_chromium_step(tmp_path, AGENCY_SWARM_SKIP_CHROMIUM="1")
    assert apt_get == []
    assert "AGENCY_SWARM_SKIP_CHROMIUM=1: tests/test_visualize.py skips its browser test" in output


def test_the_browser_test_skips_when_chromium_was_skipped_even_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import test_visualize

    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("AGENCY_SWARM_SKIP_CHROMIUM", "1")
    with pytest.raises(pytest.skip.Exception, match="AGENCY_SWARM_SKIP_CHROMIUM=1; to run this test, unset it"):
        test_visualize.chromium()
    monkeypatch.delenv("AGENCY_SWARM_SKIP_CHROMIUM")
    with pytest.raises(pytest.fail.Exception, match="Chromium is missing in CI"):
        test_visualize.chromium()


def test_readme_mentions_the_chromium_install_next_to_the_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    command = readme.index("bash scripts/test.sh")
    assert "AGENCY_SWARM_SKIP_CHROMIUM=1" in readme[command:command + 1500]
    assert os.path.exists(ROOT / "scripts" / "_chromium.sh")


def test_test_sh_says_loudly_when_node_is_missing_for_the_ag_ui_client(tmp_path: Path) -> None:
    done = subprocess.run(
        ["/bin/bash", "-c", "set -euo pipefail; source scripts/_node.sh"], cwd=ROOT, capture_output=True, text=True,
        timeout=30, check=False, env={"PATH": str(tmp_path)},  # no node, no npm
    )
    assert done.returncode == 0, done.stderr
    assert "tests/test_ag_ui_js.py (the official AG-UI client) will SKIP" in done.stdout
    assert "source scripts/_node.sh" in (ROOT / "scripts" / "test.sh").read_text()
