"""The web chat page's routes: the page and its assets (public), and the agency's chart as SVG (an API call)."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Response
from fastapi.responses import RedirectResponse

from ..._agency._agency import Agency
from ..._agency._visualize import ChartView, to_svg

UI_PUBLIC_PATHS = frozenset({"/", "/ui", "/ui/app.js", "/ui/app.css"})
"""The page and its assets need no token (they hold no data); every call the page makes does."""

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}
_ASSETS = {"/ui": ("index.html", "text/html"), "/ui/app.js": ("app.js", "text/javascript"),
           "/ui/app.css": ("app.css", "text/css")}
_CHART_STYLE = """<style>
text { font-family: system-ui, sans-serif; text-anchor: middle; font-size: 12px; fill: #52606d; }
text.name { font-size: 14px; font-weight: 600; fill: #1f2933; }
.agent rect { fill: #f5f7fa; stroke: #7b8794; stroke-width: 1.5; }
.agent.entry rect { fill: #e6f0ff; stroke: #2563eb; stroke-width: 3; }
.user ellipse { fill: #fff7e6; stroke: #d97706; stroke-width: 2; }
.edge { fill: none; stroke: #52606d; stroke-width: 1.6; }
.edge.entry-edge { stroke: #d97706; stroke-dasharray: 5 4; }
.arrow-head { fill: #52606d; }
</style>"""


def _asset(name: str) -> bytes:
    return files(__package__).joinpath("static", name).read_bytes()


def chart_svg(agency: Agency) -> str:
    """The agency's chart as a standalone SVG document (its style inside: an <img> loads it alone)."""
    svg = to_svg(ChartView.of(agency))
    head, _, rest = svg.partition("\n")
    return f"{head}\n{_CHART_STYLE}\n{rest}"


def add_ui_routes(app: FastAPI, agency: Agency) -> None:
    """GET /ui (the page), /ui/app.js, /ui/app.css, / (to /ui), and GET /ui/chart.svg (behind the token)."""
    bodies = {path: (_asset(name), media) for path, (name, media) in _ASSETS.items()}  # read once, at start

    def asset(path: str) -> Response:
        body, media = bodies[path]
        return Response(body, media_type=media, headers=_HEADERS)

    for path in bodies:
        app.add_api_route(path, lambda path=path: asset(path), methods=["GET"], include_in_schema=False)

    @app.get("/", include_in_schema=False)
    async def root() -> Response:
        return RedirectResponse("/ui", status_code=307)

    svg = chart_svg(agency)

    @app.get("/ui/chart.svg", include_in_schema=False)
    async def chart() -> Response:
        return Response(svg, media_type="image/svg+xml", headers=_HEADERS)
