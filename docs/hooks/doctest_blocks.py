"""MkDocs hook: doctest examples in docstrings shown as Python sessions.

The docstrings carry their examples as doctests (``>>>`` lines, run by pytest), with no
"Examples:" heading; left alone, Markdown reads ``>>>`` as three nested quotes. This turns each
run of ``>>>``/``...`` lines, and the output lines after them, into a ``pycon`` code block, in the
pages and in the API reference (mkdocstrings renders docstrings with the site's extensions).
"""

from __future__ import annotations

import re
from typing import Any

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor

PROMPT = re.compile(r"^(\s*)>>> ")


class DoctestBlocks(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fence = False
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.lstrip().startswith(("```", "~~~")):
                fence = not fence
            match = None if fence else PROMPT.match(line)
            if not match:
                out.append(line)
                i += 1
                continue
            indent = match.group(1)
            block = []
            # the session runs until a blank line, as a doctest does
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
                i += 1
            out += ["", indent + "```pycon", *(indent + b for b in block), indent + "```", ""]
        return out


class DoctestBlocksExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Markdown's name)
        # before the fenced-code preprocessor (priority 25) reads the fences it makes
        md.preprocessors.register(DoctestBlocks(md), "doctest_blocks", 30)


def on_config(config: Any) -> Any:
    config.markdown_extensions.append(DoctestBlocksExtension())
    return config
