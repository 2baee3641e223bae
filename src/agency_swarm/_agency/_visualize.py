"""Draws an agency's chart: Mermaid text, or a self-contained HTML page with the chart as inline SVG (no scripts)."""

from __future__ import annotations

import html
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from .._base._errors import ConfigError
from .._base._names import USER


class _Described(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str | None: ...


class Charted(Protocol):
    """What a drawing reads from an agency (the agency module imports this one, not the other way round)."""

    @property
    def agents(self) -> Mapping[str, _Described]: ...

    @property
    def entry_points(self) -> Sequence[_Described]: ...

    @property
    def communication_flows(self) -> list[tuple[str, str]]: ...

ChartFormat = Literal["mermaid", "html"]
FORMATS: tuple[ChartFormat, ...] = ("mermaid", "html")

MERMAID_DESCRIPTION_CHARS = 80
"""Longer descriptions are cut: a box is a reminder of what the agent does, not its documentation."""

# SVG geometry, in pixels.
NODE_WIDTH, NODE_HEIGHT = 210, 66
USER_RX, USER_RY = 46, 20
COLUMN_GAP, ROW_GAP, MARGIN = 36, 84, 28
NAME_CHARS, DESCRIPTION_LINE_CHARS, DESCRIPTION_LINES = 23, 32, 2
# How far an edge's control point moves sideways; the curve's middle moves half as far.
PAIR_BEND = 16
"""Two agents that may message each other get two gently bent arrows instead of one line with two heads."""
UP_BEND = 44
"""One row up: bow out so the arrow does not lie on top of the downward one."""
ROW_BEND = NODE_HEIGHT + 24
"""Along a row past other boxes: the middle clears half a box height."""
LONG_BEND = NODE_WIDTH + 2 * COLUMN_GAP
"""Across two rows or more: the middle clears half a box width, around any box sitting on the straight line."""


@dataclass(kw_only=True)
class ChartView:
    """What a drawing needs from an agency: agents (in chart order) with descriptions, entry points, flows."""

    agents: dict[str, str | None]
    entry_points: list[str]
    flows: list[tuple[str, str]]

    @classmethod
    def of(cls, agency: Charted) -> ChartView:
        return cls(
            agents={name: agent.description for name, agent in agency.agents.items()},
            entry_points=[agent.name for agent in agency.entry_points],
            flows=agency.communication_flows,
        )


def visualize(agency: Charted, format: str = "mermaid") -> str:
    """The chart of `agency` as Mermaid text (`"mermaid"`) or as a self-contained HTML page (`"html"`)."""
    if format not in FORMATS:
        raise ConfigError(f"Unknown chart format {format!r}; use one of: {', '.join(FORMATS)}.")
    view = ChartView.of(agency)
    return to_mermaid(view) if format == "mermaid" else to_html(view)


# -- Mermaid -----------------------------------------------------------------------------------------


def to_mermaid(view: ChartView) -> str:
    """`flowchart TD` with a `user` node pointing at every entry point and one arrow per flow.

    Agent names can hold anything (spaces, quotes, brackets, unicode), so nodes get generated ids (`agent_0`, ...)
    and names only ever appear inside quoted, entity-escaped labels.
    """
    ids = {name: f"agent_{index}" for index, name in enumerate(view.agents)}
    lines = ["flowchart TD", f'    {USER}(["{USER}"])']
    for name, description in view.agents.items():
        label = _mermaid_text(name)
        if description and description.strip():
            label += "<br/>" + _mermaid_text(_shorten(description, MERMAID_DESCRIPTION_CHARS))
        lines.append(f'    {ids[name]}["{label}"]')
    lines.extend(f"    {USER} --> {ids[name]}" for name in view.entry_points)
    lines.extend(f"    {ids[sender]} --> {ids[recipient]}" for sender, recipient in view.flows)
    lines.append("    classDef entry stroke-width:3px")
    lines.append(f"    class {','.join(ids[name] for name in view.entry_points)} entry")
    return "\n".join(lines) + "\n"


_MERMAID_UNSAFE = frozenset('"#&<>`')


def _mermaid_text(text: str) -> str:
    """Text safe inside a quoted Mermaid label: markup and quote characters become Mermaid's `#code;` entities."""
    flat = " ".join(text.split())
    return "".join(f"#{ord(char)};" if char in _MERMAID_UNSAFE else char for char in flat if char.isprintable())


def _shorten(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


# -- layout --------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Layout:
    """Agents placed in rows: row 0 is the user, row n the agents n messages away from the user."""

    rows: list[list[str]]
    centers: dict[str, tuple[float, float]] = field(default_factory=dict)
    width: float = 0.0
    height: float = 0.0


def layers(view: ChartView) -> dict[str, int]:
    """Distance from the user (entry points are 1). Agents the user cannot reach start their own part at 1."""
    recipients: dict[str, list[str]] = {name: [] for name in view.agents}
    for sender, recipient in view.flows:
        recipients[sender].append(recipient)
    layer: dict[str, int] = {}
    roots: Iterable[str] = view.entry_points
    while True:
        queue = deque(name for name in roots if name not in layer)
        for name in queue:
            layer[name] = 1
        while queue:
            name = queue.popleft()
            for recipient in recipients[name]:
                if recipient not in layer:
                    layer[recipient] = layer[name] + 1
                    queue.append(recipient)
        unplaced = [name for name in view.agents if name not in layer]
        if not unplaced:
            return layer
        roots = unplaced[:1]


def layout(view: ChartView) -> Layout:
    layer = layers(view)
    rows: list[list[str]] = [[USER]] + [[] for _ in range(max(layer.values(), default=0))]
    for name in view.agents:
        rows[layer[name]].append(name)
    senders: dict[str, list[str]] = {}
    for name in view.entry_points:
        senders.setdefault(name, []).append(USER)
    for sender, recipient in view.flows:
        senders.setdefault(recipient, []).append(sender)
    _order_rows(rows, senders)
    widest = max(len(row) for row in rows)
    width = 2 * MARGIN + widest * NODE_WIDTH + (widest - 1) * COLUMN_GAP
    result = Layout(rows=rows, width=width, height=2 * MARGIN + len(rows) * NODE_HEIGHT + (len(rows) - 1) * ROW_GAP)
    for index, row in enumerate(rows):
        row_width = len(row) * NODE_WIDTH + (len(row) - 1) * COLUMN_GAP
        left = (width - row_width) / 2
        y = MARGIN + index * (NODE_HEIGHT + ROW_GAP) + NODE_HEIGHT / 2
        for column, name in enumerate(row):
            result.centers[name] = (left + column * (NODE_WIDTH + COLUMN_GAP) + NODE_WIDTH / 2, y)
    return result


def _order_rows(rows: list[list[str]], senders: dict[str, list[str]]) -> None:
    """Fewer crossings: each row is sorted by the mean column of its agents' senders in the rows above."""
    column: dict[str, float] = {USER: 0.0}
    for row in rows[1:]:
        def mean_sender_column(name: str) -> float:
            placed = [column[sender] for sender in senders.get(name, []) if sender in column]
            return sum(placed) / len(placed) if placed else math.inf

        row.sort(key=mean_sender_column)  # stable: ties keep chart order
        # Centre the row on the rows above so a lone agent under the middle of a wide row sorts fairly.
        for index, name in enumerate(row):
            column[name] = index - (len(row) - 1) / 2


# -- SVG / HTML ----------------------------------------------------------------------------------


def to_html(view: ChartView) -> str:
    """A standalone page: the chart drawn as inline SVG, and the Mermaid text. No scripts and no network."""
    summary = (
        f"{_count(len(view.agents), 'agent')}, {_count(len(view.flows), 'flow')}; "
        f"the user may address {', '.join(view.entry_points)}."
    )
    return _PAGE.format(
        title=_escape("Agency chart: " + ", ".join(view.entry_points)),
        summary=_escape(summary),
        svg=to_svg(view),
        mermaid=_escape(to_mermaid(view)),
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def to_svg(view: ChartView) -> str:
    placed = layout(view)
    pairs = set(view.flows)
    edges = [_edge(USER, name, "entry-edge", placed, bend=0.0) for name in view.entry_points]
    edges.extend(
        _edge(sender, recipient, "flow", placed, bend=_bend(sender, recipient, placed, pairs))
        for sender, recipient in view.flows
    )
    # Curves that bow around boxes may leave the rows' rectangle: grow the canvas to hold them.
    left = min([0.0, *(edge.left - MARGIN for edge in edges)])
    top = min([0.0, *(edge.top - MARGIN for edge in edges)])
    width = max([placed.width, *(edge.right + MARGIN for edge in edges)]) - left
    height = max([placed.height, *(edge.bottom + MARGIN for edge in edges)]) - top
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="{left:.0f} {top:.0f} {width:.0f} {height:.0f}">',
        "<title>Agency chart</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrow-head"/></marker></defs>',
        *(edge.svg for edge in edges),
    ]
    x, y = placed.centers[USER]
    parts.append(
        f'<g class="user" data-name="{USER}"><title>{USER}: the person talking to the agency</title>'
        f'<ellipse cx="{x:.1f}" cy="{y:.1f}" rx="{USER_RX}" ry="{USER_RY}"/>'
        f'<text x="{x:.1f}" y="{y + 5:.1f}" class="name">{USER}</text></g>'
    )
    entry_points = set(view.entry_points)
    parts.extend(
        _node(name, description, placed.centers[name], entry=name in entry_points)
        for name, description in view.agents.items()
    )
    parts.append("</svg>")
    return "\n".join(parts)


def _bend(sender: str, recipient: str, placed: Layout, pairs: set[tuple[str, str]]) -> float:
    (sender_x, sender_y), (recipient_x, recipient_y) = placed.centers[sender], placed.centers[recipient]
    rows_down = round((recipient_y - sender_y) / (NODE_HEIGHT + ROW_GAP))
    columns_apart = round(abs(recipient_x - sender_x) / (NODE_WIDTH + COLUMN_GAP))
    paired = PAIR_BEND if (recipient, sender) in pairs else 0.0
    if rows_down == 1 or (rows_down == 0 and columns_apart == 1):  # nothing in between: straight
        return paired
    if rows_down == 0:  # same row, boxes in between: arc through the gap between rows
        return ROW_BEND
    if rows_down == -1:
        return UP_BEND
    return LONG_BEND  # two or more rows apart: boxes may sit on the straight line


@dataclass(kw_only=True)
class Edge:
    svg: str
    left: float
    top: float
    right: float
    bottom: float


def _edge(sender: str, recipient: str, css_class: str, placed: Layout, *, bend: float) -> Edge:
    """A quadratic curve between the two boxes' borders; `bend` pushes its middle sideways (0: a straight line)."""
    (x1, y1), (x2, y2) = placed.centers[sender], placed.centers[recipient]
    length = math.hypot(x2 - x1, y2 - y1) or 1.0
    # The normal on the same side for both directions of a pair puts a->b and b->a on opposite sides.
    control = ((x1 + x2) / 2 + bend * (y2 - y1) / length, (y1 + y2) / 2 - bend * (x2 - x1) / length)
    start = _border_point(sender, (x1, y1), control)
    end = _border_point(recipient, (x2, y2), control)
    middle = ((start[0] + 2 * control[0] + end[0]) / 4, (start[1] + 2 * control[1] + end[1]) / 4)
    label = _escape(f"{sender} may message {recipient}")
    xs, ys = (start[0], middle[0], end[0]), (start[1], middle[1], end[1])
    return Edge(
        svg=f'<path class="edge {css_class}" data-from="{_escape(sender)}" data-to="{_escape(recipient)}" '
        f'd="M{start[0]:.1f},{start[1]:.1f} Q{control[0]:.1f},{control[1]:.1f} {end[0]:.1f},{end[1]:.1f}" '
        f'marker-end="url(#arrow)"><title>{label}</title></path>',
        left=min(xs), top=min(ys), right=max(xs), bottom=max(ys),
    )


def _border_point(name: str, center: tuple[float, float], toward: tuple[float, float]) -> tuple[float, float]:
    """Where the line from a box's centre toward `toward` leaves the box (the user's ellipse, or an agent's box)."""
    dx, dy = toward[0] - center[0], toward[1] - center[1]
    if dx == 0 and dy == 0:
        return center
    if name == USER:
        scale = 1 / math.hypot(dx / USER_RX, dy / USER_RY)
    else:
        scale = min(NODE_WIDTH / 2 / abs(dx) if dx else math.inf, NODE_HEIGHT / 2 / abs(dy) if dy else math.inf)
    return center[0] + dx * scale, center[1] + dy * scale


def _node(name: str, description: str | None, center: tuple[float, float], *, entry: bool) -> str:
    x, y = center
    lines = _wrap(description or "", DESCRIPTION_LINE_CHARS, DESCRIPTION_LINES)
    name_y = y - 6 * len(lines) + 5
    texts = [f'<text x="{x:.1f}" y="{name_y:.1f}" class="name">{_escape(_shorten(name, NAME_CHARS))}</text>']
    texts.extend(
        f'<text x="{x:.1f}" y="{name_y + 17 * (index + 1):.1f}" class="description">{_escape(line)}</text>'
        for index, line in enumerate(lines)
    )
    tooltip = f"{name}: {description}" if description else name
    css_class = "agent entry" if entry else "agent"
    return (
        f'<g class="{css_class}" data-name="{_escape(name)}"><title>{_escape(tooltip)}</title>'
        f'<rect x="{x - NODE_WIDTH / 2:.1f}" y="{y - NODE_HEIGHT / 2:.1f}" width="{NODE_WIDTH}" '
        f'height="{NODE_HEIGHT}" rx="10"/>{"".join(texts)}</g>'
    )


def _wrap(text: str, width: int, max_lines: int) -> list[str]:
    """Greedy word wrap into at most `max_lines` lines; a line that does not fit ends with an ellipsis."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    if len(lines) > max_lines:
        lines[max_lines - 1 :] = [" ".join(lines[max_lines - 1 :])]
    return [_shorten(line, width) for line in lines]


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #1f2933; background: #ffffff; }}
h1 {{ font-size: 20px; margin: 0 0 4px; }}
p.summary {{ margin: 0 0 16px; color: #52606d; }}
svg.chart {{ max-width: 100%; height: auto; display: block; }}
svg.chart text {{ text-anchor: middle; font-size: 12px; fill: #52606d; }}
svg.chart text.name {{ font-size: 14px; font-weight: 600; fill: #1f2933; }}
svg.chart .agent rect {{ fill: #f5f7fa; stroke: #7b8794; stroke-width: 1.5; }}
svg.chart .agent.entry rect {{ fill: #e6f0ff; stroke: #2563eb; stroke-width: 3; }}
svg.chart .user ellipse {{ fill: #fff7e6; stroke: #d97706; stroke-width: 2; }}
svg.chart .edge {{ fill: none; stroke: #52606d; stroke-width: 1.6; }}
svg.chart .edge.entry-edge {{ stroke: #d97706; stroke-dasharray: 5 4; }}
svg.chart .arrow-head {{ fill: #52606d; }}
h2 {{ font-size: 16px; margin: 24px 0 8px; }}
pre {{ background: #f5f7fa; padding: 12px; overflow-x: auto; }}
</style>
</head>
<body>
<h1>Agency chart</h1>
<p class="summary">{summary} Blue boxes are entry points; an arrow means the sender may message the recipient.</p>
{svg}
<h2>Mermaid</h2>
<pre class="mermaid-source">{mermaid}</pre>
</body>
</html>
"""
