"""The Jinja2 environment every HTML simeval writes is rendered with: the studio's pages
(``simeval.web.pages``) and the static run report (``simeval.report``).

Autoescaping is on for every template: a user's text (an output, a reference, an eval name)
is escaped wherever a template puts it, and only values marked safe on purpose (JSON escaped
for a ``<script>`` element) go in as they are.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader


def environment(directory: Path) -> Environment:
    """A Jinja2 environment of the templates in ``directory``: autoescaped, and blocks
    trimmed (a ``{% if %}`` line leaves no blank line behind)."""
    return Environment(
        loader=FileSystemLoader(directory),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
