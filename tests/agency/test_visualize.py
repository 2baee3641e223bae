"""Agency.visualize(): exact Mermaid text, escaping of hostile names, and the HTML page drawn by a real Chromium."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agency_swarm import Agency, Agent, ConfigError
from agency_swarm._agency._visualize import ChartView, layers
from agency_swarm.testing import ScriptedModel

HOSTILE = "<script>document.title='pwned'</script> \"Eve\" & #1"


def agent(name: str, description: str | None = None) -> Agent:
    return Agent(name=name, description=description, model=ScriptedModel(["ok"]))


def team() -> tuple[Agent, Agent, Agent]:
    return agent("CEO", "Talks to the user"), agent("Developer", "Writes code"), agent("QA")


EXPECTED_MERMAID = """flowchart TD
    user(["user"])
    agent_0["CEO<br/>Talks to the user"]
    agent_1["Developer<br/>Writes code"]
    agent_2["QA"]
    user --> agent_0
    agent_0 --> agent_1
    agent_1 --> agent_2
    classDef entry stroke-width:3px
    class agent_0 entry
"""


def test_mermaid_text_of_a_small_chart_is_exact() -> None:
    ceo, dev, qa = team()
    assert Agency([ceo, [ceo, dev, qa]]).visualize() == EXPECTED_MERMAID


def test_both_chart_spellings_draw_the_same_chart() -> None:
    ceo, dev, qa = team()
    nested = Agency([ceo, [ceo, dev, qa]])
    flows = Agency(ceo, communication_flows=[(ceo, dev), (dev, qa)])
    assert flows.visualize("mermaid") == nested.visualize("mermaid") == EXPECTED_MERMAID
    assert flows.visualize("html") == nested.visualize("html")


def test_mermaid_names_never_become_syntax() -> None:
    ceo = agent(HOSTILE, 'Says "hi"\nand <b>bold</b> things')
    lines = Agency([ceo, [ceo, agent("Büro Ü 2")]]).visualize().splitlines()
    assert lines[2] == (
        '    agent_0["#60;script#62;document.title=\'pwned\'#60;/script#62; #34;Eve#34; #38; #35;1'
        '<br/>Says #34;hi#34; and #60;b#62;bold#60;/b#62; things"]'
    )
    assert lines[3] == '    agent_1["Büro Ü 2"]'
    assert lines[5] == "    agent_0 --> agent_1"


def test_long_descriptions_are_cut_in_mermaid() -> None:
    text = Agency(agent("CEO", "word " * 40)).visualize()
    label = text.splitlines()[2]
    assert label.endswith('…"]')
    assert len(label.split("<br/>")[1]) <= 80 + 2


def test_several_entry_points_are_all_marked() -> None:
    ceo, dev, qa = team()
    lines = Agency([ceo, qa, [ceo, dev]]).visualize().splitlines()
    assert "    user --> agent_0" in lines
    assert "    user --> agent_1" in lines
    assert lines[-1] == "    class agent_0,agent_1 entry"


def test_unknown_format_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"Unknown chart format 'svg'; use one of: mermaid, html"):
        Agency(agent("CEO")).visualize("svg")


def test_layers_are_distances_from_the_user() -> None:
    ceo, dev, qa = team()
    lone, helper = agent("Lone"), agent("Helper")
    view = ChartView.of(Agency([ceo, [ceo, dev, qa], [qa, ceo], [lone, helper]]))
    # Lone and Helper are reachable from nobody the user can address: they form their own part from row 1.
    assert layers(view) == {"CEO": 1, "Developer": 2, "QA": 3, "Lone": 1, "Helper": 2}


def test_html_escapes_hostile_names_and_embeds_the_mermaid_text() -> None:
    ceo = agent(HOSTILE, "<img src=x onerror=alert(1)>")
    page = Agency([ceo, [ceo, agent("Dev")]]).visualize("html")
    assert "<script" not in page.lower()
    assert "<img" not in page.lower()
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt; &quot;Eve&quot; &amp; #1" in page
    assert 'data-name="&lt;script&gt;' in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing to fetch
    assert "https://" not in page
    mermaid = page.split('<pre class="mermaid-source">')[1].split("</pre>")[0]
    assert mermaid.startswith("flowchart TD\n    user([&quot;user&quot;])\n")
    assert "agent_0 --&gt; agent_1" in mermaid


# -- the HTML page in a real headless browser ------------------------------------------------------


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    how = "install it with `apt-get install -y chromium` (scripts/test.sh does this when run as root)"
    if os.environ.get("AGENCY_SWARM_SKIP_CHROMIUM") == "1":  # asked for: skipped even in CI
        pytest.skip(f"Chromium is not installed and AGENCY_SWARM_SKIP_CHROMIUM=1; to run this test, unset it and "
                    f"{how}.")
    if os.environ.get("CI") == "true":
        pytest.fail(f"Chromium is missing in CI; {how}.")
    pytest.skip(f"Chromium is not installed; {how}.")


class DomCounter(HTMLParser):
    """Collects, from Chromium's serialised DOM, the chart's nodes and edges and every script element."""

    def __init__(self) -> None:
        super().__init__()
        self.agents: list[str] = []
        self.entry_agents: list[str] = []
        self.flows: list[tuple[str, str]] = []
        self.entry_edges: list[str] = []
        self.users = 0
        self.scripts = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if tag == "script":
            self.scripts += 1
        elif tag == "title" and not self.title:
            self._in_title = True
        elif tag == "g" and "agent" in classes:
            self.agents.append(attributes["data-name"] or "")
            if "entry" in classes:
                self.entry_agents.append(attributes["data-name"] or "")
        elif tag == "g" and "user" in classes:
            self.users += 1
        elif tag == "path" and "flow" in classes:
            self.flows.append((attributes["data-from"] or "", attributes["data-to"] or ""))
        elif tag == "path" and "entry-edge" in classes:
            self.entry_edges.append(attributes["data-to"] or "")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False


def png_pixels(data: bytes) -> tuple[int, int, set[tuple[int, ...]]]:
    """Width, height and the set of distinct colours of an 8-bit RGB/RGBA PNG (a small decoder, no Pillow)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    position, idat, header = 8, b"", b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    width, height, bit_depth, colour_type = struct.unpack(">IIBB", header[:10])
    assert (bit_depth, colour_type) in {(8, 2), (8, 6)}, f"unexpected PNG: depth {bit_depth}, type {colour_type}"
    channels = 3 if colour_type == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    colours: set[tuple[int, ...]] = set()
    previous = bytearray(stride)
    for row in range(height):
        start = row * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), previous, channels)
        colours.update(tuple(line[i : i + channels]) for i in range(0, stride, channels))
        previous = line
    return width, height, colours


def _unfilter(kind: int, line: bytearray, previous: bytearray, channels: int) -> bytearray:
    for i in range(len(line)):
        left = line[i - channels] if i >= channels else 0
        up = previous[i]
        upper_left = previous[i - channels] if i >= channels else 0
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            estimate = left + up - upper_left
            distances = (abs(estimate - left), abs(estimate - up), abs(estimate - upper_left))
            line[i] = (line[i] + (left, up, upper_left)[distances.index(min(distances))]) & 0xFF
    return line


def run_chromium(tmp_path: Path, page: Path, *arguments: str) -> str:
    done = subprocess.run(
        [
            chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}", *arguments, page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_html_page_renders_in_headless_chromium(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ceo = agent("CEO", "Talks to the user and delegates the work.")
    dev, qa, ops = agent("Developer", "Writes code."), agent(HOSTILE, "Reviews code."), agent("Ops")
    agency = Agency([ceo, ops, [ceo, dev, qa], [qa, ceo], [ops, dev]])
    page = tmp_path / "chart.html"
    page.write_text(agency.visualize("html"), encoding="utf-8")

    dom = DomCounter()
    dom.feed(run_chromium(tmp_path, page, "--dump-dom"))
    assert sorted(dom.agents) == sorted(agency.agents)  # one node per agent
    assert dom.entry_agents == ["CEO", "Ops"]
    assert sorted(dom.flows) == sorted(agency.communication_flows)  # one edge per flow
    assert dom.entry_edges == ["CEO", "Ops"]
    assert dom.users == 1
    assert dom.scripts == 0  # the hostile name stayed text
    assert dom.title == "Agency chart: CEO, Ops"

    screenshot = tmp_path / "chart.png"
    run_chromium(tmp_path, page, f"--screenshot={screenshot}", "--window-size=1000,800")
    with capsys.disabled():
        print(f"\nchart screenshot: {screenshot}")
    width, height, colours = png_pixels(screenshot.read_bytes())
    assert (width, height) == (1000, 800)
    assert len(colours) > 20, "the screenshot is (nearly) blank"
    # The chart itself was drawn: the entry points' blue border and the user's node fill are on screen.
    assert (0x25, 0x63, 0xEB) in {colour[:3] for colour in colours}
    assert (0xFF, 0xF7, 0xE6) in {colour[:3] for colour in colours}
