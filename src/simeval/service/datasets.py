"""Datasets: named sets of cases (id, input, references, metadata), every change a new version.

A dataset is made from a file (``import_dataset``, the columns ``simeval run`` reads), from
cases given as objects (``create_dataset``) or from captures (``dataset_from_captures``: the
captured output becomes a *draft* reference, marked so until a person edits or accepts it).
Editing, adding or deleting a case, accepting a draft, or importing a file again with
``replace`` each make a new version; every version stays readable (``show_dataset``,
``export_dataset``, ``dataset_cases``), so a run can say which version it scored.

Storage (migration 0007): a case's states are rows valid over a range of versions
(``version_from`` up to ``version_to``), so a change writes only the cases it touches and
version N is one indexed query. The dataset row is locked for the change (``FOR UPDATE`` on
PostgreSQL; SQLite's writer lock does the same), so two edits at once make two versions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from enum import Enum
from typing import Any, Final, TypeVar

from simeval.checks import MAX_ID, UNSET, as_utc, check_lookup, check_name, check_page, utc_now
from simeval.errors import Conflict, InvalidInput, NotFound, SimevalError
from simeval.service.actor import record
from simeval.service.base import Part
from simeval.service.dataset_files import (
    check_case,
    check_case_id,
    check_input,
    check_metadata,
    check_references,
    export_lines,
    read_cases,
)
from simeval.service.dataset_models import (
    DatasetCaseOut,
    DatasetChangeOut,
    DatasetOut,
    DatasetVersionInfo,
    DatasetVersionOut,
)
from simeval.store import Dataset, DatasetCase, DatasetVersion, Tx
from simeval.store.captures_sql import captures_by_id
from simeval.store.datasets_sql import (
    add_case_rows,
    add_dataset,
    add_version,
    case_row,
    cases_after,
    count_cases,
    current_case_ids,
    current_case_taken,
    dataset_by_name,
    dataset_id_by_name,
    dataset_version,
    dataset_versions,
    datasets_by_name,
    end_current_cases,
    most_references,
    newest_versions,
    replace_case_row,
    version_cases,
)

_T = TypeVar("_T")

MAX_FROM_CAPTURES = 1000  # captures added to a dataset at once
READ_PAGE = 1000  # cases read per query while a version is streamed


def check_dataset_name(name: object) -> str:
    """A dataset name: the rules of an eval name (1-200 letters, digits, '-', '_', '.',
    spaces), so every name is a safe URL segment and a ``dataset:NAME`` source."""
    try:
        return check_name(name)
    except SimevalError as exc:
        raise type(exc)(str(exc).replace("eval name", "dataset name")) from None


def _case_out(row: DatasetCase) -> DatasetCaseOut:
    return DatasetCaseOut(
        id=row.case_id,
        input=row.input,
        references=list(row.references),
        metadata=dict(row.meta or {}),
        draft=row.draft,
        capture_id=row.capture_id,
        since_version=row.version_from,
    )


class DatasetService(Part):
    """Datasets and their versions."""

    # -- reading -------------------------------------------------------------------------------
    def _find_dataset(self, s: Tx, name: object, lock: bool = False) -> Dataset:
        if not isinstance(name, str):
            raise InvalidInput(f"dataset name must be a string, not {type(name).__name__}")
        if check_lookup(name, "dataset name") is None:
            raise NotFound(f"no dataset named {name!r}")
        found = dataset_by_name(s, name.strip(), lock)
        if found is None:
            raise NotFound(f"no dataset named {name.strip()!r}")
        return found

    def _version(self, s: Tx, ds: Dataset, version: object) -> DatasetVersion:
        if version is None:
            version = ds.version
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidInput(f"version must be a positive integer, not {version!r}")
        if not 1 <= version <= MAX_ID:
            raise InvalidInput(f"version must be a positive integer, not {version!r}")
        row = dataset_version(s, ds.id, version)
        if row is None:
            raise NotFound(f"dataset {ds.name!r} has no version {version} (newest: {ds.version})")
        return row

    def _dataset_out(self, s: Tx, ds: Dataset) -> DatasetOut:
        v = self._version(s, ds, None)
        return DatasetOut(
            name=ds.name,
            version=ds.version,
            cases=v.cases,
            drafts=v.drafts,
            created_at=as_utc(ds.created_at),
            updated_at=as_utc(ds.updated_at),
        )

    def list_datasets(self) -> list[DatasetOut]:
        """Every dataset by name, with its newest version's case and draft counts."""
        with self.store.read() as s:
            newest = newest_versions(s)
            return [
                DatasetOut(
                    name=ds.name,
                    version=ds.version,
                    cases=newest[ds.id].cases,
                    drafts=newest[ds.id].drafts,
                    created_at=as_utc(ds.created_at),
                    updated_at=as_utc(ds.updated_at),
                )
                for ds in datasets_by_name(s)
            ]

    def get_dataset(self, name: str) -> DatasetOut:
        """The dataset ``name`` (``NotFound`` if there is none)."""
        with self.store.read() as s:
            return self._dataset_out(s, self._find_dataset(s, name))

    def show_dataset(
        self, name: str, version: int | None = None, limit: int = 100, offset: int = 0
    ) -> DatasetVersionOut:
        """Version ``version`` (default: the newest) of dataset ``name``: a page of its cases
        in the dataset's order and the list of every version."""
        limit, offset = check_page(limit, offset)
        with self.store.read() as s:
            ds = self._find_dataset(s, name)
            v = self._version(s, ds, version)
            rows = version_cases(s, ds.id, v.version, limit, offset)
            versions = dataset_versions(s, ds.id)
            return DatasetVersionOut(
                name=ds.name,
                version=v.version,
                latest=ds.version,
                note=v.note,
                created_at=as_utc(v.created_at),
                total=v.cases,
                drafts=v.drafts,
                limit=limit,
                offset=offset,
                cases=[_case_out(r) for r in rows],
                versions=[
                    DatasetVersionInfo(
                        version=x.version,
                        note=x.note,
                        cases=x.cases,
                        drafts=x.drafts,
                        created_at=as_utc(x.created_at),
                    )
                    for x in versions
                ],
            )

    def get_dataset_case(
        self, name: str, case_id: str, version: int | None = None
    ) -> DatasetCaseOut:
        """One case of a version of dataset ``name`` (``NotFound`` when it has none so named)."""
        with self.store.read() as s:
            ds = self._find_dataset(s, name)
            v = self._version(s, ds, version)
            return _case_out(self._case_row(s, ds, case_id, v.version))

    def _case_row(self, s: Tx, ds: Dataset, case_id: object, version: int) -> DatasetCase:
        cid = check_case_id(case_id)
        row = case_row(s, ds.id, version, cid)
        if row is None:
            raise NotFound(f"dataset {ds.name!r} version {version} has no case {cid!r}")
        return row

    def iter_dataset(
        self, name: str, version: int | None = None, count_references: bool = False
    ) -> tuple[int, int, Iterator[DatasetCaseOut]]:
        """(version used, the most references a case has (1 unless ``count_references``:
        a CSV export's columns), the version's cases in order), read a page at a time: a
        large version is never held in memory at once."""
        with self.store.read() as s:
            ds = self._find_dataset(s, name)
            v = self._version(s, ds, version).version
            most = 1
            if count_references:
                most = max(1, most_references(s, ds.id, v))
            dataset_id = ds.id

        def cases() -> Iterator[DatasetCaseOut]:
            after = (-1, -1)
            while True:
                with self.store.read() as s:
                    rows = cases_after(s, dataset_id, v, after, READ_PAGE)
                yield from (_case_out(r) for r in rows)
                if len(rows) < READ_PAGE:
                    return
                after = (rows[-1].position, rows[-1].id)

        return v, most, cases()

    def dataset_cases(
        self, name: str, version: int | None = None
    ) -> tuple[int, Iterator[dict[str, object]]]:
        """(the version used, its cases as rows the way ``simeval.datafiles.read`` yields a file's
        rows): ``{"id", "input", "reference": [texts], "metadata": {...}}``. What
        ``simeval run dataset:NAME[@VERSION]`` reads.

        >>> svc.dataset_cases("golden", 2)  # doctest: +SKIP
        (2, <generator ...>)
        """
        used, _, cases = self.iter_dataset(name, version)
        rows: Iterator[dict[str, object]] = (
            {"id": c.id, "input": c.input, "reference": c.references, "metadata": c.metadata}
            for c in cases
        )
        return used, rows

    def export_dataset(
        self, name: str, version: int | None = None, fmt: str = "jsonl"
    ) -> tuple[int, Iterator[str]]:
        """(the version used, its cases as JSONL lines or CSV rows), the columns
        ``import_dataset`` reads, so an export imports again unchanged."""
        used, most, cases = self.iter_dataset(name, version, count_references=fmt == "csv")
        return used, export_lines((c.model_dump() for c in cases), fmt, most)

    # -- making a version ----------------------------------------------------------------------
    def _change(
        self, name: str, note: str, fn: Callable[[Tx, Dataset, int], _T]
    ) -> tuple[DatasetOut, _T]:
        """Run ``fn(session, dataset, new_version)`` and record the new version, in one
        transaction with the dataset locked."""

        def write(s: Tx) -> tuple[DatasetOut, _T]:
            ds = self._find_dataset(s, name, lock=True)
            version = ds.version + 1
            extra = fn(s, ds, version)
            if extra is _UNCHANGED:
                return self._dataset_out(s, ds), extra
            ds.version = version
            ds.updated_at = utc_now()
            self._record_version(s, ds, note)
            return self._dataset_out(s, ds), extra

        out: tuple[DatasetOut, _T] = self.store.run_write(write)
        return out

    def _record_version(self, s: Tx, ds: Dataset, note: str) -> None:
        add_version(s, ds, note)
        action = "dataset.create" if ds.version == 1 else "dataset.change"
        record(s, action, f"dataset:{ds.name}", version=ds.version, note=note[:200])

    def _add_rows(self, s: Tx, ds: Dataset, version: int, cases: Sequence[dict[str, Any]]) -> None:
        add_case_rows(s, ds.id, version, cases)

    def _new_dataset(self, name: str, cases: Sequence[dict[str, Any]], note: str) -> DatasetOut:
        clean = check_dataset_name(name)
        _unique_ids(cases)

        def write(s: Tx) -> DatasetOut:
            if dataset_id_by_name(s, clean) is not None:
                raise Conflict(
                    f"a dataset named {clean!r} exists; import with replace (--replace) to "
                    "make a new version of it"
                )
            now = utc_now()
            ds = add_dataset(s, clean, now)  # a race lost to another process: Conflict
            self._add_rows(s, ds, 1, cases)
            self._record_version(s, ds, note)
            return self._dataset_out(s, ds)

        out: DatasetOut = self.store.run_write(write)
        return out

    def create_dataset(self, name: str, cases: Sequence[object]) -> DatasetOut:
        """A new dataset ``name`` (version 1) from cases given as objects (``id``, ``input``,
        ``references``, ``metadata``; a missing id is the case's number)."""
        if not isinstance(cases, list | tuple) or not cases:
            raise InvalidInput("a dataset needs at least one case")
        checked = []
        for i, case in enumerate(cases):
            try:
                checked.append(check_case(case, default_id=str(i + 1)))
            except SimevalError as exc:
                raise type(exc)(f"case {i + 1}: {exc}") from None
        return self._new_dataset(name, checked, f"created with {len(checked)} cases")

    def import_dataset(
        self,
        name: str,
        path: str,
        fmt: str | None = None,
        quoting: bool = True,
        replace: bool = False,
        source: str | None = None,
    ) -> DatasetOut:
        """Dataset ``name`` from a file read as ``simeval run`` reads it (JSONL, CSV/TSV,
        Parquet). A new name is version 1; with ``replace``, an existing dataset gets a new
        version holding exactly the file's cases (its older versions are kept). A bad row
        stores nothing. ``source`` names the file in the version's note (default: ``path``)."""
        cases = read_cases(path, fmt, quoting, label=source)
        note = f"imported {len(cases)} cases from {source or path}"
        if not replace or not self._exists(name):
            return self._new_dataset(name, cases, note)

        def swap(s: Tx, ds: Dataset, version: int) -> None:
            end_current_cases(s, ds.id, version)
            self._add_rows(s, ds, version, cases)

        return self._change(name, note, swap)[0]

    def _exists(self, name: str) -> bool:
        clean = check_dataset_name(name)
        with self.store.read() as s:
            return dataset_id_by_name(s, clean) is not None

    def dataset_from_captures(self, name: str, capture_ids: Sequence[object]) -> DatasetChangeOut:
        """Add captures to dataset ``name`` as cases (made as version 1 when there is no such
        dataset, else a new version): case id ``capture-<id>``, the capture's input, its output
        as a *draft* reference, its metadata (and conversation id). A capture already in the
        dataset is skipped and named in ``skipped``. Cases are added in capture order."""
        ids = sorted(_capture_ids(capture_ids))  # oldest first, however they were picked
        with self.store.read() as s:
            caps = captures_by_id(s, ids)
        missing = [i for i in ids if i not in caps]
        if missing:
            raise NotFound("no capture with id " + ", ".join(map(str, missing[:10])))
        cases = []
        for i in ids:
            cap = caps[i]
            if not cap.output.strip():
                raise InvalidInput(f"capture {i} has an empty output: it cannot be a reference")
            meta = dict(cap.meta or {})
            if cap.conversation_id:
                meta.setdefault("conversation_id", cap.conversation_id)
            cases.append(
                {
                    "id": f"capture-{i}",
                    "input": cap.input,
                    "references": [cap.output],
                    "metadata": meta,
                    "draft": True,
                    "capture_id": i,
                }
            )
        if not self._exists(name):
            out = self._new_dataset(name, cases, f"created from {len(cases)} captures")
            return DatasetChangeOut(**out.model_dump(), added=len(cases))

        def add(s: Tx, ds: Dataset, version: int) -> list[str] | _Unchanged:
            have = current_case_ids(s, ds.id, [c["id"] for c in cases])
            fresh = [c for c in cases if c["id"] not in have]
            if not fresh:
                return _UNCHANGED
            self._add_rows(s, ds, version, fresh)
            return sorted(have)

        noted = f"added {len(cases)} captures"
        ds_out, skipped = self._change(name, noted, add)
        if skipped is _UNCHANGED:
            skipped = [f"capture-{i}" for i in ids]  # every case's id
        return DatasetChangeOut(
            **ds_out.model_dump(), added=len(cases) - len(skipped), skipped=skipped
        )

    # -- editing cases -------------------------------------------------------------------------
    def edit_dataset_case(
        self,
        name: str,
        case_id: str,
        *,
        input: object = UNSET,
        references: object = UNSET,
        metadata: object = UNSET,
    ) -> DatasetOut:
        """Change a case of the newest version: a new version (nothing else changes). New
        references are a person's: the case is no longer a draft. Nothing changed: no new
        version."""
        fields: dict[str, object] = {}
        if input is not UNSET:
            fields["input"] = check_input(input)
        if references is not UNSET:
            fields["references"] = check_references(references)
        if metadata is not UNSET:
            fields["metadata"] = check_metadata(metadata)

        def edit(s: Tx, ds: Dataset, version: int) -> _Unchanged | None:
            old = self._case_row(s, ds, case_id, ds.version)
            new = {
                "input": fields.get("input", old.input),
                "references": fields.get("references", list(old.references)),
                "metadata": fields.get("metadata", dict(old.meta or {})),
            }
            same = (
                new["input"] == old.input
                and new["references"] == list(old.references)
                and new["metadata"] == dict(old.meta or {})
            )
            if same:
                return _UNCHANGED
            self._replace_row(
                s, old, version, **new, draft=old.draft and "references" not in fields
            )
            return None

        return self._change(name, f"edited case {check_case_id(case_id)!r}", edit)[0]

    def _replace_row(self, s: Tx, old: DatasetCase, version: int, **values: object) -> None:
        replace_case_row(s, old, version, **values)

    def accept_dataset_draft(self, name: str, case_id: str) -> DatasetOut:
        """Accept a draft case's reference as it is (a person checked it): a new version in
        which the case is no longer a draft. ``Conflict`` when it is not a draft."""

        def accept(s: Tx, ds: Dataset, version: int) -> None:
            old = self._case_row(s, ds, case_id, ds.version)
            if not old.draft:
                raise Conflict(f"case {old.case_id!r} of dataset {ds.name!r} is not a draft")
            self._replace_row(
                s,
                old,
                version,
                input=old.input,
                references=list(old.references),
                metadata=dict(old.meta or {}),
                draft=False,
            )

        return self._change(name, f"accepted draft {check_case_id(case_id)!r}", accept)[0]

    def add_dataset_case(self, name: str, case: object) -> DatasetOut:
        """Add a case (an object: ``id``, ``input``, ``references``, ``metadata``) at the end:
        a new version. ``Conflict`` when the id is taken."""
        checked = check_case(case)

        def add(s: Tx, ds: Dataset, version: int) -> None:
            if current_case_taken(s, ds.id, checked["id"]):
                raise Conflict(f"dataset {ds.name!r} has a case {checked['id']!r} already")
            self._add_rows(s, ds, version, [checked])

        return self._change(name, f"added case {checked['id']!r}", add)[0]

    def delete_dataset_case(self, name: str, case_id: str) -> DatasetOut:
        """Remove a case from the newest version: a new version (older ones keep it)."""

        def delete(s: Tx, ds: Dataset, version: int) -> None:
            row = self._case_row(s, ds, case_id, ds.version)
            if count_cases(s, ds.id, ds.version) == 1:
                raise Conflict(
                    f"case {row.case_id!r} is the last case of {ds.name!r}; a dataset needs one"
                )
            row.version_to = version

        return self._change(name, f"deleted case {check_case_id(case_id)!r}", delete)[0]


class _Unchanged(Enum):
    """The type of ``_UNCHANGED``."""

    UNCHANGED = 0


_UNCHANGED: Final = _Unchanged.UNCHANGED  # a change that changed nothing: no new version


def _unique_ids(cases: Sequence[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for case in cases:
        if case["id"] in seen:
            raise InvalidInput(f"case id {case['id']!r} appears twice; a case id must be unique")
        seen.add(case["id"])


def _capture_ids(values: object) -> list[int]:
    if not isinstance(values, list | tuple) or not values:
        raise InvalidInput("give at least one capture id")
    if len(values) > MAX_FROM_CAPTURES:
        raise InvalidInput(f"at most {MAX_FROM_CAPTURES} captures at once, not {len(values)}")
    ids: list[int] = []
    for value in values:
        ok = isinstance(value, int) and not isinstance(value, bool)
        if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
            value, ok = int(value.strip()), True
        if not ok or not 1 <= value <= MAX_ID:
            raise InvalidInput(f"a capture id must be a positive integer, not {value!r}")
        if value not in ids:
            ids.append(value)
    return ids
