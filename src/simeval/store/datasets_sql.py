"""The SQL of datasets (``simeval.service.datasets``, migration 0007): a case's states are
rows valid over a range of versions (``version_from`` up to ``version_to``), so a change
writes only the cases it touches and version N is one indexed query. The dataset row is read
``FOR UPDATE`` for a change (PostgreSQL; SQLite's writer lock does the same)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from simeval.errors import Conflict
from simeval.store.tables import Dataset, DatasetCase, DatasetVersion


def _in_version(dataset_id: int, version: int) -> ColumnElement[bool]:
    """The condition selecting the case rows of ``version``."""
    return (
        (DatasetCase.dataset_id == dataset_id)
        & (DatasetCase.version_from <= version)
        & or_(DatasetCase.version_to.is_(None), DatasetCase.version_to > version)
    )


def dataset_by_name(s: Session, name: str, lock: bool = False) -> Dataset | None:
    """The dataset named ``name`` (locked ``FOR UPDATE`` with ``lock``), None if none is."""
    q = select(Dataset).where(Dataset.name == name)
    return s.scalar(q.with_for_update() if lock else q)


def dataset_id_by_name(s: Session, name: str) -> int | None:
    """The id of the dataset named ``name``, None if none is."""
    return s.scalar(select(Dataset.id).where(Dataset.name == name))


def add_dataset(s: Session, name: str, now: datetime) -> Dataset:
    """A new dataset ``name`` at version 1, added and flushed; ``Conflict`` when another
    process has just made one so named (a race lost: the name is unique)."""
    ds = Dataset(name=name, version=1, created_at=now, updated_at=now)
    s.add(ds)
    try:
        s.flush()
    except IntegrityError as exc:
        if "unique" in str(exc).lower() and "name" in str(exc).lower():
            raise Conflict(f"a dataset named {name!r} exists") from None
        raise
    return ds


def dataset_version(s: Session, dataset_id: int, version: int) -> DatasetVersion | None:
    """Version ``version`` of the dataset ``dataset_id``, None if it has none."""
    return s.scalar(
        select(DatasetVersion).where(
            DatasetVersion.dataset_id == dataset_id, DatasetVersion.version == version
        )
    )


def newest_versions(s: Session) -> dict[int, DatasetVersion]:
    """Each dataset's newest version, by dataset id."""
    return {
        v.dataset_id: v
        for v in s.scalars(
            select(DatasetVersion)
            .join(Dataset, Dataset.id == DatasetVersion.dataset_id)
            .where(DatasetVersion.version == Dataset.version)
        )
    }


def datasets_by_name(s: Session) -> list[Dataset]:
    """Every dataset, by name."""
    return list(s.scalars(select(Dataset).order_by(Dataset.name)))


def dataset_versions(s: Session, dataset_id: int) -> list[DatasetVersion]:
    """Every version of the dataset ``dataset_id``, newest first."""
    return list(
        s.scalars(
            select(DatasetVersion)
            .where(DatasetVersion.dataset_id == dataset_id)
            .order_by(DatasetVersion.version.desc())
        )
    )


def version_cases(
    s: Session, dataset_id: int, version: int, limit: int, offset: int
) -> list[DatasetCase]:
    """A page of version ``version``'s case rows, in the dataset's order."""
    return list(
        s.scalars(
            select(DatasetCase)
            .where(_in_version(dataset_id, version))
            .order_by(DatasetCase.position, DatasetCase.id)
            .limit(limit)
            .offset(offset)
        )
    )


def cases_after(
    s: Session, dataset_id: int, version: int, after: tuple[int, int], limit: int
) -> list[DatasetCase]:
    """Up to ``limit`` case rows of version ``version`` past ``after`` (a row's position and
    id), in the dataset's order: the next page of a version read by keyset."""
    return list(
        s.scalars(
            select(DatasetCase)
            .where(_in_version(dataset_id, version))
            .where(
                or_(
                    DatasetCase.position > after[0],
                    (DatasetCase.position == after[0]) & (DatasetCase.id > after[1]),
                )
            )
            .order_by(DatasetCase.position, DatasetCase.id)
            .limit(limit)
        )
    )


def case_row(s: Session, dataset_id: int, version: int, case_id: str) -> DatasetCase | None:
    """The row of case ``case_id`` in version ``version``, None if it has none."""
    return s.scalar(
        select(DatasetCase).where(_in_version(dataset_id, version), DatasetCase.case_id == case_id)
    )


def most_references(s: Session, dataset_id: int, version: int) -> int:
    """The most references a case of version ``version`` has (0 for no case)."""
    q = select(DatasetCase.references).where(_in_version(dataset_id, version))
    return max([0, *(len(refs) for refs in s.scalars(q))])


def count_cases(s: Session, dataset_id: int, version: int, drafts: bool = False) -> int:
    """How many cases version ``version`` has (with ``drafts``: how many of them are drafts)."""
    q = select(func.count()).select_from(DatasetCase).where(_in_version(dataset_id, version))
    if drafts:
        q = q.where(DatasetCase.draft)
    return int(s.scalar(q) or 0)


def add_version(s: Session, ds: Dataset, note: str) -> None:
    """Nothing: the row of ``ds``'s version ``ds.version`` added, with its case and draft
    counts (the session's changes flushed first)."""
    s.flush()
    cases = count_cases(s, ds.id, ds.version)
    drafts = count_cases(s, ds.id, ds.version, drafts=True)
    s.add(
        DatasetVersion(
            dataset_id=ds.id,
            version=ds.version,
            note=note[:500],
            cases=cases,
            drafts=drafts,
            created_at=ds.updated_at,
        )
    )


def add_case_rows(
    s: Session, dataset_id: int, version: int, cases: Sequence[dict[str, Any]]
) -> None:
    """Nothing: ``cases`` (checked) added at the end of the dataset, from ``version`` on."""
    start = s.scalar(
        select(func.max(DatasetCase.position)).where(DatasetCase.dataset_id == dataset_id)
    )
    position = int(start or 0)
    for case in cases:
        position += 1
        s.add(
            DatasetCase(
                dataset_id=dataset_id,
                case_id=case["id"],
                position=position,
                version_from=version,
                version_to=None,
                input=case["input"],
                references=case["references"],
                meta=case["metadata"] or None,
                draft=bool(case["draft"]),
                capture_id=case.get("capture_id"),
            )
        )


def replace_case_row(s: Session, old: DatasetCase, version: int, **values: Any) -> None:
    """Nothing: ``old`` ends before ``version`` and a row with ``values`` (``input``,
    ``references``, ``metadata``, ``draft``) takes its place from ``version`` on."""
    old.version_to = version
    s.flush()  # the old state leaves the current cases before the new one joins them
    s.add(
        DatasetCase(
            dataset_id=old.dataset_id,
            case_id=old.case_id,
            position=old.position,
            version_from=version,
            version_to=None,
            input=values["input"],
            references=values["references"],
            meta=values["metadata"] or None,
            draft=values["draft"],
            capture_id=old.capture_id,
        )
    )


def end_current_cases(s: Session, dataset_id: int, version: int) -> None:
    """Nothing: every current case of the dataset ends before ``version``."""
    s.execute(
        update(DatasetCase)
        .where(DatasetCase.dataset_id == dataset_id, DatasetCase.version_to.is_(None))
        .values(version_to=version)
    )


def current_case_ids(s: Session, dataset_id: int, case_ids: Sequence[object]) -> set[str]:
    """Which of ``case_ids`` the dataset's newest cases have."""
    return set(
        s.scalars(
            select(DatasetCase.case_id).where(
                DatasetCase.dataset_id == dataset_id,
                DatasetCase.version_to.is_(None),
                DatasetCase.case_id.in_(case_ids),
            )
        )
    )


def current_case_taken(s: Session, dataset_id: int, case_id: str) -> bool:
    """Whether the dataset's newest cases have one with id ``case_id``."""
    taken = s.scalar(
        select(DatasetCase.id).where(
            DatasetCase.dataset_id == dataset_id,
            DatasetCase.version_to.is_(None),
            DatasetCase.case_id == case_id,
        )
    )
    return taken is not None
