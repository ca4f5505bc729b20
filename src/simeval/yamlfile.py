"""YAML files users give (eval definitions, engines files), read safely and within bounds:
PyYAML's safe loader (no Python objects), at most ``MAX_ALIASES`` aliases (``*name``), and at
most ``MAX_VALUES`` values once every alias is written out: a "billion laughs" file, a few
lines whose aliases nest into billions of values, is refused before anything walks it.
Errors are ``InvalidInput`` naming the file and the place."""

from __future__ import annotations

from typing import Any

from simeval.errors import InvalidInput

MAX_ALIASES = 100
MAX_VALUES = 1_000_000


def _expanded(node: Any, sizes: dict[int, int]) -> int:
    # the values a node stands for with its aliases written out (each node counted once)
    got = sizes.get(id(node))
    if got is not None:
        return got
    sizes[id(node)] = 1  # a node that holds itself: counted once
    total = 1
    value = node.value
    if isinstance(value, list):
        for item in value:
            pair = item if isinstance(item, tuple) else (item,)
            for child in pair:
                total += _expanded(child, sizes)
                if total > MAX_VALUES:
                    break
    sizes[id(node)] = total
    return total


class _TooManyAliases(Exception):
    pass


class _TooManyValues(Exception):
    pass


def read_yaml(text: str, source: str) -> object:
    """The document in ``text`` (the file ``source``), or ``InvalidInput`` naming the problem.

    >>> read_yaml("a: [1, 2]", "x.yaml")
    {'a': [1, 2]}
    >>> read_yaml("a: &a [1]\\nb: [" + ", ".join(["*a"] * 101) + "]", "x.yaml")
    Traceback (most recent call last):
    simeval.errors.InvalidInput: x.yaml uses more than 100 YAML aliases (*name)
    """
    import yaml

    class Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    raise _TooManyAliases
            return super().compose_node(parent, index)

        def construct_document(self, node: Any) -> object:
            if self.aliases and _expanded(node, {}) > MAX_VALUES:
                raise _TooManyValues
            return super().construct_document(node)

    try:
        return yaml.load(text, Loader=Loader)
    except _TooManyAliases:
        raise InvalidInput(f"{source} uses more than {MAX_ALIASES} YAML aliases (*name)") from None
    except _TooManyValues:
        raise InvalidInput(
            f"{source} stands for more than {MAX_VALUES:,} values once its aliases are written out"
        ) from None
    except RecursionError:  # a document nested thousands of levels deep
        raise InvalidInput(f"{source} is nested too deep to read") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InvalidInput(f"invalid YAML in {source}{where}: {problem}") from None
