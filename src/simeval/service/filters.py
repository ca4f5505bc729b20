"""The one filter of results: ``ResultFilter``, taken by every listing, count and export of
results, built the same way by the CLI's flags, the API's query string and the studio's form.

No database here: the eval a filter names is looked up by the service when it lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from simeval.checks import check_id, check_storable, parse_time
from simeval.errors import InvalidInput, InvalidType
from simeval.store.meta_index import meta_text


def parse_meta(values: str | Iterable[object] | None) -> tuple[tuple[str, str], ...]:
    """``["engine=v2", "region:eu"]`` (or one such string) as filter pairs.

    >>> parse_meta(["engine=v2", "region:eu"])
    (('engine', 'v2'), ('region', 'eu'))
    """
    if values is None:
        return ()
    items: Iterable[object] = [values] if isinstance(values, str) else values
    out = []
    for item in items:
        if isinstance(item, tuple | list) and len(item) == 2:
            key, value = str(item[0]), str(item[1])
        elif isinstance(item, str):
            cut = [i for i in (item.find("="), item.find(":")) if i > 0]
            if not cut:
                raise InvalidInput(f"metadata filter {item!r}: give KEY=VALUE (or KEY:VALUE)")
            key, value = item[: min(cut)], item[min(cut) + 1 :]
        else:
            raise InvalidInput(f"metadata filter must be KEY=VALUE, not {item!r}")
        if not key.strip():
            raise InvalidInput(f"metadata filter {item!r}: the key is empty")
        out.append((key.strip(), value.strip()))
    return tuple(out)


def meta_matches(meta: Mapping[str, object] | None, pairs: tuple[tuple[str, str], ...]) -> bool:
    """Whether capture metadata ``meta`` holds every ``(key, value)`` of ``pairs``."""
    if not pairs:
        return True
    if not isinstance(meta, dict):
        return False
    return all(k in meta and meta_text(meta[k]) == v for k, v in pairs)


@dataclass(frozen=True)
class ResultFilter:
    """Which results a listing, count or export takes: every given filter must hold.

    - ``eval_name``: the eval's name or id (looked up when the service lists);
    - ``passed``: the effective verdict (a review's score decides when there is one);
    - ``since`` / ``until``: the result's time, ``since`` inclusive, ``until`` exclusive;
    - ``reviewed``: only reviewed (True) or unreviewed (False) results;
    - ``run_id``: only this stored run's rows;
    - ``meta``: capture metadata ``(key, value)`` pairs (``meta_text`` of the value); a
      data-set run's rows have no metadata, so a metadata filter leaves them out;
    - ``conversation_id``: only captures of this conversation.

    The fields hold checked values: build one from what a user typed with ``parse``, which
    reads ISO times and ages (``7d``), ``KEY=VALUE`` strings and id digits, raising
    ``InvalidInput`` naming the bad value.

    >>> ResultFilter.parse(eval_name="capital", passed=False, meta=["engine=v2"]).meta
    (('engine', 'v2'),)
    """

    eval_name: str | int | None = None
    passed: bool | None = None
    since: datetime | None = None
    until: datetime | None = None
    reviewed: bool | None = None
    run_id: int | None = None
    meta: tuple[tuple[str, str], ...] = ()
    conversation_id: str | None = None

    def __post_init__(self) -> None:
        # the values as given are checked and read here, so a filter holds only checked ones
        # (parse_time and the others give back a value that is already checked unchanged)
        set_ = object.__setattr__
        set_(self, "since", parse_time(self.since, "since"))
        set_(self, "until", parse_time(self.until, "until"))
        set_(self, "run_id", None if self.run_id is None else check_id(self.run_id, "run"))
        set_(self, "meta", parse_meta(self.meta or None))
        if self.conversation_id is not None:  # compared in the database: no NUL there
            check_storable(str(self.conversation_id), "conversation_id")

    @classmethod
    def parse(
        cls,
        eval_name: str | int | None = None,
        passed: bool | None = None,
        since: Any = None,
        until: Any = None,
        reviewed: bool | None = None,
        run_id: Any = None,
        meta: Any = None,
        conversation_id: str | None = None,
    ) -> ResultFilter:
        """A filter from the forms a user types: times as ISO 8601 text or an age (``7d``),
        ``meta`` as ``KEY=VALUE`` strings (or None), ``run_id`` as digits."""
        return cls(
            eval_name,
            passed,
            since,
            until,
            reviewed,
            run_id,
            meta,
            conversation_id,
        )

    @property
    def captures_only(self) -> bool:
        """Whether only captured results can match (run rows carry no metadata and belong
        to no conversation)."""
        return bool(self.meta) or self.conversation_id is not None


def filter_of(where: ResultFilter | None, fields: dict[str, Any]) -> ResultFilter:
    """The filter a service method was given: ``where``, or ``ResultFilter.parse(**fields)``
    for the keyword form (``list_results(eval_name="capital", since="7d")``)."""
    if where is None:
        return ResultFilter.parse(**fields)
    if fields:
        raise TypeError(f"give a ResultFilter or its fields, not both ({sorted(fields)[0]})")
    if not isinstance(where, ResultFilter):
        raise InvalidType(f"a result filter must be a ResultFilter, not {type(where).__name__}")
    return where
