"""scripts/: what they install (the demo: the package alone), and what test.sh does beyond .venv, says and skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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
    assert "AGENCY_SWARM_SKIP_CHROMIUM=1: tests/agency/test_visualize.py skips its browser test" in output


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
    assert "tests/protocols/test_ag_ui_js.py (the official AG-UI client) will SKIP" in done.stdout
    assert "source scripts/_node.sh" in (ROOT / "scripts" / "test.sh").read_text()


# -- what the scripts install, and where they say what they skip ---------------------------------------------------

FAKE_PYTHON = """#!/bin/bash
# A stand-in interpreter: `-m venv DIR` makes DIR/bin/python (this script); anything else is logged, and succeeds.
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0; fi
if [ "$1" = "-c" ] && [[ "$2" == *version_info* ]]; then echo "${FAKE_VERSION:-3.11}"; exit 0; fi
echo "$(basename "$(dirname "$(dirname "$0")")") $*" >> "$CALLS"
"""


def scripts_copy(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """The scripts and pyproject.toml in a scratch directory, a stand-in `python3`, and the environment to run them."""
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    for script in (ROOT / "scripts").iterdir():
        (project / "scripts" / script.name).write_text(script.read_text())
    (project / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "PYTHON": str(fake), "CALLS": str(calls), "HOME": str(tmp_path),
           "PYENV_ROOT": str(tmp_path / "no-pyenv")}
    return project, calls, env


def bash(project: Path, script: str, env: dict[str, str]) -> str:
    done = subprocess.run(["/bin/bash", "-c", script], cwd=project, capture_output=True, text=True, timeout=30,
                          check=False, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_demo_installs_the_package_alone_and_the_tests_the_dev_extras(tmp_path: Path) -> None:
    project, calls, env = scripts_copy(tmp_path)
    bash(project, "bash scripts/demo.sh --message hi", env)
    installs = [line for line in calls.read_text().splitlines() if "pip install --quiet -e" in line]
    assert installs == [".venv -m pip install --quiet -e ."]  # the package alone: no [dev], no linters or checkers
    assert calls.read_text().splitlines()[-1] == ".venv -m agency_swarm demo --message hi"
    calls.unlink()
    bash(project, 'source scripts/_venv.sh && make_venv .venv "$PYTHON" dev', env)
    assert ".venv -m pip install --quiet -e .[dev]" in calls.read_text().splitlines()
    calls.unlink()
    bash(project, "bash scripts/demo.sh", env)  # the dev extras hold the package: nothing installed again
    assert calls.read_text().splitlines() == [".venv -m agency_swarm demo"]


OTHER_PYTHONS = (
    "source scripts/_venv.sh && source scripts/_other_pythons.sh && other_pythons_start && other_pythons_wait"
    " && other_pythons_test"
)


def test_a_claimed_python_that_is_missing_is_said_and_skipped(tmp_path: Path) -> None:
    project, calls, env = scripts_copy(tmp_path)
    output = bash(project, OTHER_PYTHONS, env)
    for version in ("3.12", "3.13"):
        assert f"== CPython {version}: not found" in output
        assert f"its fast tests are SKIPPED; install it (e.g. `pyenv install {version}`)" in output
    assert not calls.exists()


def test_a_claimed_python_that_is_there_runs_the_fast_tests_in_its_own_venv(tmp_path: Path) -> None:
    project, calls, env = scripts_copy(tmp_path)
    pyenv_python = tmp_path / "no-pyenv" / "versions" / "3.13.0" / "bin" / "python3.13"
    pyenv_python.parent.mkdir(parents=True)
    pyenv_python.write_text(FAKE_PYTHON)
    pyenv_python.chmod(0o755)
    output = bash(project, OTHER_PYTHONS, {**env, "FAKE_VERSION": "3.13"})
    assert "== CPython 3.12: not found" in output  # the stand-in says 3.13 whatever its name: not taken for 3.12
    assert f"== CPython 3.13 ({pyenv_python}): .venv-3.13 installs in the background" in output
    assert "== pytest, fast tests on CPython 3.13 (.venv-3.13)" in output
    lines = calls.read_text().splitlines()
    assert ".venv-3.13 -m pip install --quiet -e .[dev]" in lines
    [run] = [line for line in lines if "-m pytest" in line]
    assert run.startswith(".venv-3.13 -m pytest -q -p no:cacheprovider tests/project/test_python_versions.py ")
    assert "tests/threads/test_lent_history.py" in run


def test_the_test_command_says_which_postgresql_it_uses_and_what_happens_without_it() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert script.index("source scripts/_postgres.sh") < script.index("-m pytest")
    unreachable = "postgresql://tests:secret@127.0.0.1:9/nowhere"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "postgres_support.py")],
        capture_output=True, text=True, timeout=60,
        check=False, env={**os.environ, "AGENCY_SWARM_TEST_POSTGRES_URL": unreachable, "CI": ""},
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == ("== PostgreSQL for the tests: postgresql://tests:***@127.0.0.1:9/nowhere "
                     "(AGENCY_SWARM_TEST_POSTGRES_URL=postgresql://... points them at another)")
    assert "unreachable (" in second
    assert "its tests are SKIPPED; start the local one with `pg_ctlcluster" in second
    assert "secret" not in done.stdout


def test_the_pythons_pyproject_claims_are_the_ones_the_tests_run_on() -> None:
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    claimed = {c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if re.fullmatch(r".*:: Python :: 3\.\d+", c)}
    others = re.search(r"^OTHER_PYTHONS=\((.*)\)$", (ROOT / "scripts" / "_other_pythons.sh").read_text(), re.M)
    assert others is not None
    ci_python = re.search(r"^PYTHON=\"\$\{PYTHON:-python3\}\"$", (ROOT / "scripts" / "_venv.sh").read_text(), re.M)
    assert ci_python is not None  # the whole suite runs on the machine's python3 (3.11 here, the floor)
    assert project["requires-python"] == ">=3.11"
    assert claimed == {"3.11", *others[1].split()}
