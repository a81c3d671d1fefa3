"""The first URLs a person opens: ``/`` goes to the console, and the API's root (the prefix every
contract route shares, derived from the route table rather than spelled here) answers an index
that links to the OpenAPI document, the console and the health route instead of a 404."""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute
from starlette.routing import Route as StarletteRoute

from services.gateway.observed import ROUTE_KEY
from services.gateway.routes import Route

DISTRIBUTION = "forge-continuity"
CONSOLE = "/console/"
OPENAPI = "/openapi.json"
HEALTH = "/healthz"


def api_root(routes: Sequence[Route]) -> str:
    """The leading path segments every route template shares (the API's root), without any
    segment holding a variable; "" when the routes share none."""
    split = [route.template.text.strip("/").split("/") for route in routes]
    shared: list[str] = []
    for segments in zip(*split, strict=False):
        if len(set(segments)) != 1 or "{" in segments[0]:
            break
        shared.append(segments[0])
    return "/" + "/".join(shared) if shared else ""


def _version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was not installed
        return "unknown"


def index_document(root: str, route_count: int) -> dict[str, object]:
    return {
        "name": DISTRIBUTION,
        "version": _version(),
        "api_root": root,
        "routes": route_count,
        "links": {"openapi": OPENAPI, "console": CONSOLE, "health": HEALTH},
    }


def index_routes(routes: Sequence[Route]) -> list[BaseRoute]:
    """``/`` (a redirect to the console) and the API root with and without its trailing slash;
    mounted before the gateway's catch-all transcoding route."""
    root = api_root(routes)
    body = json.dumps(index_document(root, len(routes)), indent=2).encode()

    async def to_console(request: Request) -> Response:
        request.scope[ROUTE_KEY] = "/"
        return RedirectResponse(CONSOLE, status_code=307)

    async def index(request: Request) -> Response:
        request.scope[ROUTE_KEY] = root
        return Response(body, media_type="application/json")

    found: list[BaseRoute] = [StarletteRoute("/", to_console, methods=["GET"])]
    if root:
        found += [
            StarletteRoute(root, index, methods=["GET"]),
            StarletteRoute(root + "/", index, methods=["GET"]),
        ]
    return found
