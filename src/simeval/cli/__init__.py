"""The ``simeval`` command line: click commands that parse, call the library and print."""

from simeval.cli.main import cli, main

__all__ = ["cli", "main"]
