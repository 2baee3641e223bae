"""`agency-swarm run --attach PATH` (the first message's images and files) and `/attach PATH` in the chat (the next
message's): what the model receives, and one clear line for a path that is no file the agency takes."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from test_cli import invoke, run_args

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"

AGENCY_YAML = """\
agents:
  CEO:
    description: Talks to the user.
    model: ceo-model
chart:
  supervisor: CEO
"""

MODELS_PY = '''\
from agency_swarm.testing import ScriptedModel


def parts_of(call):
    """What the last user message holds: its text and, for each image or file, its type and name."""
    content = [item for item in call.input if item.get("role") == "user"][-1]["content"]
    if isinstance(content, str):
        return content
    shown = []
    for part in content:
        if part["type"] == "input_text":
            shown.append(part["text"])
        elif part["type"] == "input_image":
            shown.append("image " + part["image_url"].split(";")[0])
        else:
            shown.append("file " + part["filename"] + " " + part["file_data"].split(";")[0])
    return " | ".join(shown)


def seeing():
    return {"ceo-model": ScriptedModel(lambda call: "got: " + parts_of(call))}


TOOLKITS = {}
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "agency.yaml").write_text(AGENCY_YAML)
    (tmp_path / "cli_models.py").write_text(MODELS_PY)
    (tmp_path / "dot.png").write_bytes(PNG)
    (tmp_path / "report.pdf").write_bytes(PDF)
    return tmp_path


def test_attach_sends_the_files_with_the_one_message(project: Path) -> None:
    code, out, err = invoke(run_args(project, "seeing", "-m", "What are these?", "--attach", str(project / "dot.png"),
                                     "--attach", str(project / "report.pdf")))
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == (
        "CEO: got: What are these? | image data:image/png | file report.pdf data:application/pdf"
    )


def test_attach_goes_with_the_first_typed_message_only(project: Path) -> None:
    code, out, _ = invoke(run_args(project, "seeing", "--attach", str(project / "dot.png")), input="look\nagain\n")
    assert code == 0
    assert "CEO: got: look | image data:image/png\n" in out
    assert "CEO: got: again\n" in out


def test_the_attach_command_adds_a_file_to_the_next_message(project: Path) -> None:
    typed = f"/attach {project / 'report.pdf'}\n/attach {project / 'dot.png'}\nboth\nafter\n"
    code, out, err = invoke(run_args(project, "seeing"), input=typed)
    assert (code, err) == (0, "")
    assert "Attached file report.pdf; it goes with your next message." in out
    assert "Attached image dot.png; it goes with your next message." in out
    assert "CEO: got: both | file report.pdf data:application/pdf | image data:image/png\n" in out
    assert "CEO: got: after\n" in out


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("missing.png", "no file at"),
        ("folder", "is a directory"),
        ("noise", "cannot tell the file's type"),
        ("big.png", "over max_part_bytes"),
    ],
)
def test_a_bad_attachment_is_one_line_without_a_traceback(project: Path, name: str, words: str) -> None:
    (project / "folder").mkdir()
    (project / "noise").write_bytes(b"\x00\x01\x02")
    (project / "big.png").write_bytes(PNG + b"\x00" * (20 * 1024 * 1024))
    path = str(project / name)
    code, out, err = invoke(run_args(project, "seeing", "-m", "hi", "--attach", path))
    assert code == 2
    assert err.startswith("Error: --attach: "), err
    assert words in err
    assert len(err.strip().splitlines()) == 1
    assert "CEO:" not in out  # nothing was sent
    code, out, err = invoke(run_args(project, "seeing"), input=f"/attach {path}\n/attach\nhi\n")
    assert code == 0
    assert words in err
    assert "Usage: /attach PATH" in out
    assert "CEO: got: hi\n" in out  # the chat goes on, without the refused file
