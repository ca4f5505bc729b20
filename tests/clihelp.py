"""The CLI tests' runner and their check of a user mistake's answer."""

from __future__ import annotations

from click.testing import CliRunner, Result

from simeval.cli import cli


def invoke(*args: str, input: str | None = None) -> Result:
    """``simeval ARGS`` through click's runner."""
    return CliRunner().invoke(cli, list(args), input=input)


def one_line_error(res: Result, *needles: str) -> None:
    """Exit 2, one line on stderr starting ``error:``, naming the problem; no traceback."""
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output
    for needle in needles:
        assert needle in res.stderr, res.stderr
