"""405 for a method the API's path does not take, with an ``Allow`` naming every method it does.

Two things the router alone gets wrong. An eval's name may hold ``/`` (names made before they
were limited), so ``PATCH /api/evals/{name:path}`` also matches ``/api/evals/x/activate``: a
``PATCH`` there reached the edit route and answered 422 for its body instead of 405. And
Starlette's own 405 names only the methods of the first route whose path matched
(``OPTIONS /api/evals``: ``Allow: GET``, though ``POST`` is served too).

Here the most specific path template that matches the request's path decides (the one with
the most literal characters: ``/api/evals/{name:path}/activate`` over
``/api/evals/{name:path}``); a method none of its routes takes gets 405 with the methods they
do take, before any route reads the body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from starlette.responses import JSONResponse
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

_PARAM = re.compile(r"{[^}]*}")


class _Template:
    """One path template under ``/api`` and the methods its routes take."""

    def __init__(self, path: str, regex: re.Pattern[str]):
        self.path = path
        self.regex = regex
        self.literal = len(_PARAM.sub("", path))
        self.methods: set[str] = set()


def api_templates(routes: Iterable[BaseRoute], prefix: str = "/api/") -> list[_Template]:
    """The path templates of the routes under ``prefix``, each with the methods its routes
    take."""
    found: dict[str, _Template] = {}
    for route in routes:
        # Starlette's Route and FastAPI's APIRoute alike (not one class: duck-typed)
        path, regex = getattr(route, "path", None), getattr(route, "path_regex", None)
        methods = getattr(route, "methods", None)
        if not isinstance(path, str) or not path.startswith(prefix) or regex is None:
            continue
        if not methods:  # a mount or a websocket: not a method's route
            continue
        template = found.setdefault(path, _Template(path, regex))
        template.methods |= set(methods)
    return list(found.values())


class MethodMiddleware:
    """Answers 405 with the right ``Allow`` under ``/api`` (see the module doc); every other
    request passes through untouched. The templates are read from the app's routes on the
    first request (all routes are in place by then)."""

    def __init__(self, app: ASGIApp, routes: Callable[[], Iterable[BaseRoute]]):
        self.app = app
        self._routes = routes
        self._templates: list[_Template] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith("/api/"):
            await self.app(scope, receive, send)
            return
        if self._templates is None:
            self._templates = api_templates(self._routes())
        allow = self._allowed(path)
        if allow is not None and scope["method"] not in allow:
            shown = ", ".join(sorted(allow))
            response = JSONResponse(
                {"error": f"method {scope['method']} is not allowed here; allowed: {shown}"},
                status_code=405,
                headers={"Allow": shown},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _allowed(self, path: str) -> set[str] | None:
        """The methods of the most specific template matching ``path`` (None: none does)."""
        assert self._templates is not None
        best: _Template | None = None
        for template in self._templates:
            if template.regex.match(path) and (best is None or template.literal > best.literal):
                best = template
        return None if best is None else best.methods
