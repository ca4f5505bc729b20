"""Package faces that import a name's module when the name is first used.

A face lists each public name beside the module it lives in; ``import simeval.store`` then costs
almost nothing, and a process (the run writer, a pool worker) loads only the modules it uses.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_face(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names live in ``homes``
    (name -> module). A name loaded once is kept in the package's globals.

    >>> getattr_, dir_ = lazy_face("simeval", {"InvalidInput": "simeval.errors"})
    >>> getattr_("InvalidInput").__name__
    'InvalidInput'
    """

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted([*vars(sys.modules[package]), *homes])

    return getattr_, dir_
