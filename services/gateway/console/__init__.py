"""The operator console: the spec's Studio review flow as pages the gateway serves under /console.

The console is static: two HTML pages, a few plain JavaScript modules and one style sheet shipped
in this package. The
page calls the gateway's public JSON routes from the browser with the operator's own bearer token,
so the console holds no identity, no session and no privileged path of its own: every decision
stays with the services, exactly as for curl. Nothing is fetched from outside at run time, and the
Content-Security-Policy says so to the browser.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

STATIC = Path(str(resources.files(__package__) / "static"))
SCRIPTS = (
    "console.js",
    "common.js",
    "run.js",
    "timeline.js",
    "admission.js",
    "recoveries.js",
    "reconciliation.js",
    "landing.js",
)
ASSETS = {"console.css": "text/css", **dict.fromkeys(SCRIPTS, "text/javascript")}
HEADERS = {
    # Only this origin: no external script, style, font or image, no framing, no form posts away.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
}


def _page(name: str) -> Response:
    return FileResponse(STATIC / name, media_type="text/html; charset=utf-8", headers=HEADERS)


async def index(_request: Request) -> Response:
    return _page("index.html")


async def run_page(_request: Request) -> Response:
    # The run id is read by the script from the path; the page itself is the same for every run.
    return _page("run.html")


async def asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ASSETS:
        return Response(b"not found", status_code=404, media_type="text/plain", headers=HEADERS)
    return FileResponse(STATIC / name, media_type=ASSETS[name], headers=HEADERS)


async def to_index(_request: Request) -> Response:
    return RedirectResponse("/console/", status_code=308)


def console_routes() -> list[BaseRoute]:
    """The console's routes, mounted before the gateway's catch-all transcoding route."""
    return [
        Route("/console", to_index, methods=["GET"]),
        Route("/console/", index, methods=["GET"]),
        Route("/console/runs/{run_id}", run_page, methods=["GET"]),
        Route("/console/static/{name}", asset, methods=["GET"]),
    ]
