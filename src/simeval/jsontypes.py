"""The types of JSON data as Python holds it: what ``json.loads`` gives back and ``json.dumps``
takes. Metadata, options, summaries and API answers are JSON; typing them so (rather than
``Any``) lets mypy check the code that reads them.

>>> import json
>>> value: JSONObject = json.loads('{"a": [1, 2.5, "x", null, true]}')
>>> value["a"]
[1, 2.5, 'x', None, True]
"""

from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = str | int | float | bool | list["JSONValue"] | dict[str, "JSONValue"] | None
"""Any JSON value."""

JSONObject: TypeAlias = dict[str, JSONValue]
"""A JSON object."""

__all__ = ["JSONObject", "JSONValue"]
