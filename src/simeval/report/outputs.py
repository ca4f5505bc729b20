"""Where a report goes: its paths checked before any work is done (a run of an hour must not
end on a directory that does not exist), the HTML written whole or not at all, the Markdown
summary appended to GitHub's job summary file and written whole anywhere else.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from simeval.errors import InvalidInput
from simeval.runs.result_files import AtomicFile

if TYPE_CHECKING:
    from simeval.report.build import Report

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


def appends(path: str) -> bool:
    """Whether ``path`` is the job summary file GitHub names in ``$GITHUB_STEP_SUMMARY``:
    every step appends to that one (the convention GitHub documents); any other file is
    replaced."""
    named = os.environ.get(STEP_SUMMARY)
    if not named:
        return False
    try:
        return os.path.samefile(path, named)
    except OSError:
        return os.path.abspath(path) == os.path.abspath(named)


def check_output(path: str, what: str) -> None:
    """``InvalidInput`` naming the problem when ``path`` cannot be written: a directory, in a
    directory that does not exist or cannot be written to, or a file that cannot be."""
    target = Path(path)
    if not path or target.is_dir():
        raise InvalidInput(f"cannot write the {what} to {path!r}: it is a directory")
    parent = target.parent
    if not parent.is_dir():
        raise InvalidInput(f"cannot write the {what} to {path}: directory {parent} does not exist")
    if appends(path) and target.exists():
        if not os.access(target, os.W_OK):
            raise InvalidInput(f"cannot write the {what} to {path}: the file is not writable")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidInput(f"cannot write the {what} to {path}: directory {parent} is not writable")


def write_text(path: str, text: str) -> int:
    """Write ``text`` as UTF-8 (a character no encoder takes, a lone surrogate, as "?"):
    appended to GitHub's job summary file (``appends``), else written whole or not at all.
    Returns the bytes written."""
    data = text.encode("utf-8", "replace")
    if appends(path):
        with open(path, "ab") as fh:
            fh.write(data)
        return len(data)
    out = AtomicFile(path)
    try:
        out.fh.write(data)
        # a report is for sharing: the mode an ordinary new file gets (or the old one's),
        # not the temporary file's owner-only one
        os.chmod(out.tmp, _mode(Path(path)))
        out.commit()
    except BaseException:
        out.discard()
        raise
    return len(data)


def _mode(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0o022)  # read by setting it: put back at once
        os.umask(umask)
        return 0o666 & ~umask


def write_report(
    report: Report, html: str | None = None, markdown: str | None = None
) -> dict[str, int]:
    """Write ``report`` as HTML to ``html`` and as Markdown to ``markdown`` (either may be
    None); returns the bytes written to each path."""
    from simeval.report.html import render_html
    from simeval.report.markdown import render_markdown

    written: dict[str, int] = {}
    if html is not None:
        written[html] = write_text(html, render_html(report))
    if markdown is not None:
        written[markdown] = write_text(markdown, render_markdown(report))
    return written
