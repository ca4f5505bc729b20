"""The shape of the package: no import cycles, and the layers point one way.

Each module is imported first in a fresh interpreter (a cycle often shows only for one entry
point), and the imports written in the source, those inside functions too, must form no cycle:
a lazy import hides a cycle from the interpreter but not from a reader.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import simeval

PACKAGE = Path(simeval.__file__).parent
# run by Alembic inside a migration context, never imported on its own
NOT_IMPORTABLE = {"simeval.store.migrations.env"}
# the scoring engine knows nothing of storage, the service, HTTP or the CLI
SCORING = (
    "simeval.scoring.analyzer",
    "simeval.scoring.idf",
    "simeval.scoring.scorer",
    "simeval.scoring._vector",
    "simeval.scoring.options",
)
ABOVE_SCORING = ("simeval.service", "simeval.store", "simeval.web", "simeval.cli")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(p): p
    for p in sorted(PACKAGE.rglob("*.py"))
    if _module_name(p) not in NOT_IMPORTABLE and "__pycache__" not in p.parts
}


def _imports(name: str, path: Path) -> set[str]:
    """The simeval modules ``name``'s source imports, anywhere in the file."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            # `from pkg import module` imports the module; `from pkg import name`, the package
            subs = {f"{base}.{a.name}" for a in node.names}
            found.update(subs & MODULES.keys())
            if subs - MODULES.keys():
                found.add(base)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


@pytest.mark.process
def test_every_module_imports_alone_in_a_fresh_interpreter() -> None:
    def load(name: str) -> tuple[str, str]:
        proc = subprocess.run(
            [sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=120
        )
        return name, proc.stderr.strip().splitlines()[-1] if proc.returncode else ""

    with ThreadPoolExecutor(max_workers=8) as pool:
        failures = {name: err for name, err in pool.map(load, MODULES) if err}
    assert not failures, failures


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_even_through_lazy_imports() -> None:
    # a package's __init__ re-exporting its own modules is not a cycle: leave those edges out
    graph = {
        name: {m for m in deps if not m.startswith(name + ".")} for name, deps in GRAPH.items()
    }
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


@pytest.mark.parametrize("name", [m for m in SCORING if m in MODULES])
def test_the_scoring_layer_imports_nothing_above_it(name: str) -> None:
    seen: set[str] = set()
    todo = [name]
    while todo:  # everything it reaches, directly or not
        for dep in GRAPH[todo.pop()] - seen:
            seen.add(dep)
            todo.append(dep)
    above = sorted(m for m in seen if m.startswith(ABOVE_SCORING))
    assert not above, f"{name} reaches {above}"


def _private_imports() -> list[str]:
    """``from simeval.x import _name`` where ``_name`` is private to another module."""
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level:
                continue
            if not (node.module or "").startswith("simeval") or node.module == name:
                continue
            found += [
                f"{name} imports {node.module}.{a.name}"
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
            ]
    return found


def test_no_private_name_is_imported_from_another_module() -> None:
    assert _private_imports() == []


def test_imports_point_down_the_layers() -> None:
    # the floors are import-linter's contract in pyproject.toml ([tool.importlinter]): every
    # import counts, those inside a function or for type checking too. Its use case, not its
    # command: the command configures logging anew, which silences the loggers of the tests
    # that follow (a dictConfig disables the loggers it does not name)
    from importlinter import configuration
    from importlinter.application import use_cases

    configuration.configure()
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    assert use_cases.lint_imports(config_filename=str(pyproject), cache_dir=None)


def test_the_faces_reach_the_store_only_through_the_service() -> None:
    direct = sorted(
        f"{name} -> {dep}"
        for name, deps in GRAPH.items()
        if name.startswith(("simeval.cli", "simeval.web"))
        for dep in deps
        if dep.startswith("simeval.store")
    )
    assert direct == []


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return set(proc.stdout.split())


@pytest.mark.process
def test_the_client_imports_neither_sqlalchemy_nor_fastapi() -> None:
    loaded = _loaded_after("import simeval; simeval.Client")
    assert not {m for m in loaded if m.split(".")[0] in ("sqlalchemy", "fastapi", "alembic")}


MODULE_LINES = 800
FUNCTION_LINES = 120


def test_no_module_over_800_lines_and_no_function_over_120() -> None:
    too_long = []
    for name, path in MODULES.items():
        source = path.read_text(encoding="utf-8")
        if (lines := len(source.splitlines())) > MODULE_LINES:
            too_long.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert too_long == []
