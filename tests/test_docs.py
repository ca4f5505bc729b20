"""The README is a landing page and the documentation site holds the rest.

The README stays short with the two newcomer commands on its first screen, and every link in it
leads somewhere; the Internals page names every module of the tree and no module that is gone;
and the site's strict build really fails on a broken link (`make docs`, run by `make test`, is
the build itself).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PACKAGE = ROOT / "src" / "simeval"

FIRST_SCREEN = 40
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_is_a_landing_page_under_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines; move the rest into docs/"


def test_readme_first_screen_holds_the_two_commands_and_make_has_them() -> None:
    first = README.read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN]
    commands = [line.split("#")[0].strip() for line in first]
    assert "make run" in commands and "make test" in commands, first
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("run", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), f"Makefile has no {target} target"


def test_readme_links_lead_to_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    links = [link for link in LINK.findall(text) if not re.match(r"[a-z]+:", link)]
    assert links
    for link in links:
        path = link.split("#")[0]
        assert (ROOT / path).exists(), f"README.md links to {link}, which does not exist"


def module_names() -> set[str]:
    """Every module, C source and data file of the package, by file name."""
    names = set()
    for path in PACKAGE.rglob("*"):
        if "__pycache__" in path.parts or "migrations" in path.parts:
            continue
        if path.suffix in (".py", ".c", ".h", ".json") and path.name != "__init__.py":
            names.add(path.name)
    return names


def test_internals_names_every_module_of_the_tree() -> None:
    internals = (DOCS / "internals.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w.-]+\.(?:py|c|h|json))`", internals))
    missing = sorted(module_names() - named)
    assert not missing, f"docs/internals.md does not name {missing}"


def test_internals_names_no_file_that_is_gone() -> None:
    internals = (DOCS / "internals.md").read_text(encoding="utf-8")
    trees = (PACKAGE, ROOT / "tests", ROOT / "benchmarks")
    existing = {p.name for tree in trees for p in tree.rglob("*")}
    named = set(re.findall(r"`([\w./-]+\.(?:py|c|h|json))`", internals))
    gone = sorted(
        n
        for n in named
        if ("/" in n and not any((base / n).exists() for base in (ROOT, PACKAGE)))
        or ("/" not in n and n not in existing)
    )
    assert not gone, f"docs/internals.md names {gone}, which are not in the tree"


def test_every_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = {next(iter(entry.values())) for entry in config["nav"]}
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages == in_nav, pages ^ in_nav


@pytest.mark.slow
def test_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    # The real build is `make docs`; this checks that its flags make a broken link fatal (a
    # --quiet once made --strict pass with every warning hidden).
    recipe = subprocess.run(
        ["make", "-n", "docs"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    build = next(line for line in recipe.splitlines() if "mkdocs build" in line)
    args = build.split("mkdocs build", 1)[1].split()
    assert "--strict" in args

    docs = tmp_path / "docs"
    docs.mkdir()
    for page in DOCS.glob("*.md"):
        (docs / page.name).write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    for image in DOCS.glob("*.png"):
        os.symlink(image, docs / image.name)
    with (docs / "alerts.md").open("a", encoding="utf-8") as f:
        f.write("\nSee [the rules](ci.md#no-such-section).\n")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["docs_dir"] = str(docs)
    config["site_dir"] = str(tmp_path / "site")
    config["exclude_docs"] = ""
    config["hooks"] = [str(ROOT / hook) for hook in config["hooks"]]
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            plugin["mkdocstrings"]["handlers"]["python"]["paths"] = [str(ROOT / "src")]
    for ext in config["markdown_extensions"]:
        if isinstance(ext, dict) and "pymdownx.snippets" in ext:
            ext["pymdownx.snippets"]["base_path"] = [str(ROOT)]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")

    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    mkdocs = [sys.executable, "-m", "mkdocs", "build", *args]
    res = subprocess.run(mkdocs, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert res.returncode == 1, res.stderr
    assert "no-such-section" in res.stderr, res.stderr
