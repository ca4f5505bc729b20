"""Where things live: a module's file name says what it is, one API package
(``simeval.web.api``) holds every ``/api`` route, and the store holds every query.

Outside the thin layers (``cli/``, ``web/api/``, ``web/pages/``, whose modules are named after
the commands, resources and pages they expose), no two modules share a file name: a name met in
a traceback or an import leads to one file. ``tests/test_imports.py`` holds the arrows between
the packages; this holds the rooms.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.routing import BaseRoute

import simeval
from simeval.web import create_app
from simeval.web.proxy import create_proxy_app

PACKAGE = Path(simeval.__file__).parent
API_PACKAGE = "simeval.web.api"
# named after what they expose: a command, a resource, a page
THIN_LAYERS = ("cli", "web/api", "web/pages")


def _named_alike() -> dict[str, list[str]]:
    """File names held by more than one module outside the thin layers, with their modules."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        inside = path.relative_to(PACKAGE)
        if path.name == "__init__.py" or "__pycache__" in inside.parts:
            continue
        if any(inside.as_posix().startswith(layer + "/") for layer in THIN_LAYERS):
            continue
        where[path.name].append(inside.as_posix())
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def test_no_two_modules_outside_the_thin_layers_share_a_file_name() -> None:
    assert _named_alike() == {}


def test_the_thin_layers_exist() -> None:
    # a layer renamed away would silently widen the check above
    assert all((PACKAGE / layer).is_dir() for layer in THIN_LAYERS)


def test_no_api_module_beside_the_api_package() -> None:
    beside = sorted(p.name for p in (PACKAGE / "web").glob("api_*.py"))
    assert beside == [], f"move {beside} into web/api/"


def _flat(routes: Iterable[BaseRoute], prefix: str = "") -> Iterator[tuple[str, BaseRoute]]:
    """Every route of an app with its full path; an included router (FastAPI lists it as one
    entry holding ``original_router``) is opened, with the prefix it was included under."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            extra = getattr(getattr(route, "include_context", None), "prefix", "") or ""
            yield from _flat(inner.routes, prefix + extra)
        else:
            yield prefix + str(getattr(route, "path", "")), route


def _api_routes(app: FastAPI) -> list[tuple[str, BaseRoute]]:
    return [(p, r) for p, r in _flat(app.routes) if p == "/api" or p.startswith("/api/")]


def _outside(app: FastAPI) -> list[str]:
    """The ``/api`` routes (or mounts) whose endpoint is not declared in the API package."""
    found = []
    for path, route in _api_routes(app):
        endpoint = getattr(route, "endpoint", None) or getattr(route, "app", None)
        module = getattr(endpoint, "__module__", None) or type(endpoint).__module__
        if not (module == API_PACKAGE or module.startswith(API_PACKAGE + ".")):
            found.append(f"{path}: {module}.{getattr(endpoint, '__qualname__', endpoint)}")
    return sorted(found)


@pytest.mark.parametrize("upstream", [None, "http://127.0.0.1:9/v1"], ids=["serve", "upstream"])
def test_every_api_route_of_the_server_is_the_api_packages(
    tmp_path: Path, upstream: str | None
) -> None:
    app = create_app(db=str(tmp_path / "evals.db"), upstream=upstream)
    with TestClient(app, base_url="http://127.0.0.1:8000"):
        assert len(list(_api_routes(app))) > 40  # the walk sees the API
        assert _outside(app) == []


def test_the_standalone_proxy_serves_the_api_packages_health(tmp_path: Path) -> None:
    app = create_proxy_app("http://127.0.0.1:9/v1", str(tmp_path / "evals.db"))
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        assert [path for path, _ in _api_routes(app)] == ["/api/health"]
        assert _outside(app) == []
        body = c.get("/api/health").json()
        assert body["status"] == "ok" and body["proxy"]["upstream"] == "http://127.0.0.1:9/v1"


# the query methods of a SQLAlchemy session, connection or result, and of a DB-API cursor
QUERY_METHODS = frozenset(
    {"execute", "executemany", "scalar", "scalars", "add_all", "flush", "query",
     "connection", "get_bind", "fetchone", "fetchall", "fetchmany"}
)  # fmt: skip


def _modules_outside_the_store() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        inside = path.relative_to(PACKAGE)
        if inside.parts[0] != "store" and "__pycache__" not in inside.parts:
            yield inside.as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def test_no_module_outside_the_store_imports_sqlalchemy() -> None:
    # at the top, in a function or for type checking alike: the store owns every query, and
    # the rest holds a transaction (``simeval.store.Tx``) only to pass it to the store
    found = []
    for name, tree in _modules_outside_the_store():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            found += [f"{name}: {m}" for m in modules if m.split(".")[0] == "sqlalchemy"]
    assert found == []


def test_the_service_runs_no_statement_of_its_own() -> None:
    # a method of a session, connection or cursor called in the service: a query written
    # outside the store (a dict's or a set's ``add``/``get``/``delete`` are not among these)
    found = []
    for name, tree in _modules_outside_the_store():
        if not name.startswith("service/"):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in QUERY_METHODS
            ):
                found.append(f"{name}:{node.lineno} .{node.func.attr}()")
    assert found == []


def test_only_the_packing_module_knows_the_packed_layout() -> None:
    # the header and its version are what every hand decoding of a capture's packed results
    # starts from: outside ``store/packing.py`` a reader calls one of its readers instead
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        inside = path.relative_to(PACKAGE).as_posix()
        if inside == "store/packing.py" or "__pycache__" in inside:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
            imported = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            for seen in [name, *imported]:
                if seen in ("PACK_HEAD", "PACK_VERSION"):
                    found.append(f"{inside}:{getattr(node, 'lineno', 0)} {seen}")
    assert found == []


def _parts() -> list[type]:
    """Every part of the service: the classes of ``simeval.service`` built over ``Part``."""
    import importlib
    import inspect

    from simeval.service.base import Part

    found = []
    for path in sorted((PACKAGE / "service").glob("*.py")):
        module = importlib.import_module(f"simeval.service.{path.stem}")
        found += [
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, Part) and c is not Part and c.__module__ == module.__name__
        ]
    return found


def test_the_service_is_a_facade_over_parts_that_inherit_nothing_of_each_other() -> None:
    from simeval.service import Service
    from simeval.service.base import Part

    assert len(Service.__mro__) - 1 <= 4  # composed, not 21 mixins deep
    parts = _parts()
    assert len(parts) >= 15
    assert [c.__name__ for c in parts if c.__bases__ != (Part,)] == []


def test_the_facade_offers_at_most_95_public_members(tmp_path: Path) -> None:
    from simeval.service import Service

    with Service(str(tmp_path / "evals.db")) as svc:
        public = [name for name in dir(svc) if not name.startswith("_")]
    assert len(public) <= 95, sorted(public)
