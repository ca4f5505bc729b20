"""MkDocs hook: the site's home page is the README, so the two never drift apart.

``docs/index.md`` only names its source; its text is the README's, with the README's links into
``docs/`` made relative to the site (``docs/ci.md`` → ``ci.md``, ``CHANGELOG.md`` →
``changelog.md``). The strict build then checks the README's links as it checks every page's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[2] / "README.md"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != "index.md":
        return markdown
    text = README.read_text(encoding="utf-8")
    return text.replace("](docs/", "](").replace("](CHANGELOG.md)", "](changelog.md)")
