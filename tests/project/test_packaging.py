"""The wheel and the sdist, built from this tree as a release is (`python -m build`): their metadata and contents, and
the wheel installed on its own and run, as the README's install from a built wheel does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME, VERSION = PROJECT["name"].replace("-", "_"), PROJECT["version"]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/ of `python -m build` (the sdist, then the wheel built from the sdist), without network: the build
    backend comes from the dev extras."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def package_files() -> set[str]:
    """The package's files in the source tree, relative to src/ (what the wheel must hold)."""
    source = ROOT / "src"
    return {
        path.relative_to(source).as_posix() for path in (source / "agency_swarm").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def wheel_metadata(wheel: Path) -> tuple[Message, set[str], str]:
    with zipfile.ZipFile(wheel) as archive:
        info = f"{NAME}-{VERSION}.dist-info"
        metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        names = {name for name in archive.namelist() if not name.startswith(f"{info}/")}
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    return metadata, names, entry_points


def test_the_wheel_holds_the_package_its_metadata_and_its_command(dist: Path) -> None:
    wheel = dist / f"{NAME}-{VERSION}-py3-none-any.whl"
    metadata, names, entry_points = wheel_metadata(wheel)
    assert names == package_files()  # every module, py.typed; no tests, examples or scripts
    assert "agency_swarm/py.typed" in names
    assert (metadata["Name"], metadata["Version"]) == (PROJECT["name"], VERSION)
    assert metadata["Requires-Python"] == PROJECT["requires-python"]
    assert metadata["License-Expression"] == PROJECT["license"]
    assert sorted(metadata.get_all("Classifier") or []) == sorted(PROJECT["classifiers"])
    assert set(metadata.get_all("Provides-Extra") or []) == set(PROJECT["optional-dependencies"])
    requires = metadata.get_all("Requires-Dist") or []
    base = [line for line in requires if "extra ==" not in line]
    assert len(base) == len(PROJECT["dependencies"])
    serve = {line.split(";")[0].split(">")[0] for line in requires if "extra == 'serve'" in line}
    assert serve == {"fastapi", "uvicorn", "asyncpg", "pyjwt[crypto]", "python-multipart"}
    assert metadata.get_all("License-File") == ["LICENSE"]  # MIT, as the License-Expression says
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload().startswith("# agency_swarm")  # the README is the long description
    assert "agency-swarm = agency_swarm.__main__:cli" in entry_points


def test_the_sdist_holds_what_builds_the_wheel(dist: Path) -> None:
    with tarfile.open(dist / f"{NAME}-{VERSION}.tar.gz") as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if archive.getmember(name).isfile()}
        pkg_info = archive.extractfile(f"{NAME}-{VERSION}/PKG-INFO")
        assert pkg_info is not None
        metadata = Parser().parsestr(pkg_info.read().decode())
    assert names == {"PKG-INFO", "pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE", ".gitignore"} | {
        f"src/{name}" for name in package_files()
    }
    assert (metadata["Name"], metadata["Version"]) == (PROJECT["name"], VERSION)


def test_the_installed_wheel_imports_runs_its_command_and_the_demo(dist: Path, tmp_path: Path) -> None:
    """Installed alone (its dependencies are this environment's), the wheel's package is the one that runs."""
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(target),
         str(dist / f"{NAME}-{VERSION}-py3-none-any.whl")],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("OPENAI_API_KEY", None)
    where = subprocess.run(
        [sys.executable, "-c", "import agency_swarm; print(agency_swarm.__file__)"],
        capture_output=True, text=True, timeout=60, check=True, env=env, cwd=tmp_path,
    )
    assert where.stdout.startswith(str(target / "agency_swarm"))
    version = subprocess.run(
        [str(target / "bin" / "agency-swarm"), "--version"],
        capture_output=True, text=True, timeout=60, check=True, env=env, cwd=tmp_path,
    )
    assert version.stdout == f"agency-swarm {VERSION}\n"
    demo = subprocess.run(
        [str(target / "bin" / "agency-swarm"), "demo"],
        capture_output=True, text=True, timeout=60, check=True, env=env, cwd=tmp_path,
    )
    assert demo.stdout.startswith("Using scripted offline models")
    assert "CEO: Done." in demo.stdout


def test_the_readme_installs_from_a_clone_or_the_wheel_built_here_with_quoted_extras(dist: Path) -> None:
    """The package is on no index: the README installs it from a clone or from the wheel `python -m build` makes,
    and quotes every extra (zsh reads an unquoted `[serve]` as a file pattern)."""
    readme = (ROOT / "README.md").read_text()
    [wheel] = [path.name for path in dist.glob("*.whl")]
    assert 'pip install ".[serve]"' in readme
    assert f'pip install "./dist/{wheel}[serve]"' in readme
    assert f"pip install {PROJECT['name']}" not in readme  # not on an index
    texts = [readme, *(path.read_text() for path in (ROOT / "docs").rglob("*.md"))]
    unquoted = [found for text in texts for found in re.findall(r"pip install [^'\"\s]*\[[^\]]*\]", text)]
    assert unquoted == []
