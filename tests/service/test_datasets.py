"""Datasets in the service, on both backends: versions (an edit makes version 2, version 1
reads as before), import of every file type the run reads, bad input that stores nothing,
cases from captures as drafts, export that imports again unchanged, and the rows a run on
``dataset:NAME@V`` reads."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from dbhelp import sql, table_counts
from simeval.errors import Conflict, InvalidInput, NotFound
from simeval.service import Service

CASES = [
    {"id": "fr", "input": "Capital of France?", "reference": "Paris is the capital of France."},
    {
        "id": "es",
        "input": "Capital of Spain?",
        "references": ["Madrid.", "Madrid is the capital of Spain."],
        "metadata": {"topic": "geo"},
    },
    {"id": "sum", "input": "2 + 2?", "reference": "Four.", "lang": "en"},
]
TABLES = ("datasets", "dataset_versions", "dataset_cases")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def svc(db: str) -> Any:
    service = Service(db)
    yield service
    service.close()


def refs(version: Any) -> dict[str, list[str]]:
    return {c.id: c.references for c in version.cases}


def test_an_edit_makes_version_2_and_version_1_reads_as_before(
    svc: Service, tmp_path: Path
) -> None:
    made = svc.import_dataset("golden", str(write_jsonl(tmp_path / "g.jsonl", CASES)))
    assert (made.name, made.version, made.cases, made.drafts) == ("golden", 1, 3, 0)
    v1_export = "".join(svc.export_dataset("golden", 1)[1])

    edited = svc.edit_dataset_case("golden", "fr", references=["Paris."])
    assert edited.version == 2
    v1, v2 = svc.show_dataset("golden", 1), svc.show_dataset("golden")
    assert v2.version == v2.latest == 2 and v1.latest == 2
    assert refs(v1)["fr"] == ["Paris is the capital of France."]
    assert refs(v2)["fr"] == ["Paris."]
    assert refs(v2)["es"] == ["Madrid.", "Madrid is the capital of Spain."]
    assert [c.id for c in v1.cases] == [c.id for c in v2.cases] == ["fr", "es", "sum"]
    assert "".join(svc.export_dataset("golden", 1)[1]) == v1_export
    assert [(v.version, v.note) for v in v2.versions] == [
        (2, "edited case 'fr'"),
        (1, f"imported 3 cases from {tmp_path / 'g.jsonl'}"),
    ]
    # the edit wrote one new case row, closed one, copied nothing else
    assert table_counts(svc.url, TABLES) == {
        "datasets": 1,
        "dataset_versions": 2,
        "dataset_cases": 4,
    }
    # an edit that changes nothing makes no version
    assert svc.edit_dataset_case("golden", "fr", references=["Paris."]).version == 2
    used, rows = svc.dataset_cases("golden", 1)
    assert used == 1
    assert next(iter(rows)) == {
        "id": "fr",
        "input": "Capital of France?",
        "reference": ["Paris is the capital of France."],
        "metadata": {},
    }
    assert svc.dataset_cases("golden")[0] == 2


def test_add_delete_and_versions_in_between(svc: Service) -> None:
    svc.create_dataset("g", [{"id": "a", "input": "q1", "references": "one"}])
    assert svc.add_dataset_case("g", {"id": "b", "input": "q2", "references": ["two"]}).version == 2
    assert svc.delete_dataset_case("g", "a").version == 3
    assert [c.id for c in svc.show_dataset("g", 1).cases] == ["a"]
    assert [c.id for c in svc.show_dataset("g", 2).cases] == ["a", "b"]
    assert [c.id for c in svc.show_dataset("g", 3).cases] == ["b"]
    # a deleted id may come back; a taken one may not
    assert svc.add_dataset_case("g", {"id": "a", "input": "q1", "references": "uno"}).version == 4
    with pytest.raises(Conflict, match="has a case 'b' already"):
        svc.add_dataset_case("g", {"id": "b", "input": "x", "references": "y"})
    with pytest.raises(NotFound, match="no case 'zz'"):
        svc.edit_dataset_case("g", "zz", input="x")
    with pytest.raises(NotFound, match="has no version 9 \\(newest: 4\\)"):
        svc.show_dataset("g", 9)
    with pytest.raises(Conflict, match="exists"):
        svc.create_dataset("g", [{"input": "q", "references": "r"}])
    assert [d.name for d in svc.list_datasets()] == ["g"]


def test_captures_become_draft_cases_until_accepted_or_edited(svc: Service) -> None:
    a = svc.capture("What is 2+2?", "It is four.", conversation_id="c1", metadata={"app": "x"})
    b = svc.capture("Capital of Peru?", "Lima.")
    out = svc.dataset_from_captures("from-prod", [a.id, str(b.id)])
    assert (out.version, out.cases, out.drafts, out.added, out.skipped) == (1, 2, 2, 2, [])
    case = svc.get_dataset_case("from-prod", f"capture-{a.id}")
    assert case.draft and case.capture_id == a.id
    assert (case.input, case.references) == ("What is 2+2?", ["It is four."])
    # the capture's metadata (the store may add keys of its own vocabulary) and conversation
    assert case.metadata.items() >= {"app": "x", "conversation_id": "c1"}.items()

    again = svc.dataset_from_captures("from-prod", [a.id])
    assert (again.version, again.added, again.skipped) == (1, 0, [f"capture-{a.id}"])

    assert svc.accept_dataset_draft("from-prod", f"capture-{a.id}").drafts == 1
    with pytest.raises(Conflict, match="not a draft"):
        svc.accept_dataset_draft("from-prod", f"capture-{a.id}")
    # editing the input keeps a draft a draft; new references are a person's
    svc.edit_dataset_case("from-prod", f"capture-{b.id}", input="Capital city of Peru?")
    assert svc.get_dataset_case("from-prod", f"capture-{b.id}").draft
    done = svc.edit_dataset_case("from-prod", f"capture-{b.id}", references="Lima is the capital.")
    assert (done.version, done.drafts) == (4, 0)
    # version 1 still has both drafts
    assert svc.show_dataset("from-prod", 1).drafts == 2

    c = svc.capture("Third?", "Three.")
    more = svc.dataset_from_captures("from-prod", [a.id, c.id])
    assert (more.version, more.added, more.skipped) == (5, 1, [f"capture-{a.id}"])
    with pytest.raises(NotFound, match="no capture with id 999"):
        svc.dataset_from_captures("from-prod", [999])
    with pytest.raises(InvalidInput, match="positive integer"):
        svc.dataset_from_captures("from-prod", [0])


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv", "parquet"])
def test_import_of_every_file_type_the_run_reads(svc: Service, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"golden.{fmt}"
    rows = [
        {"id": "fr", "input": "Capital of France?", "reference": "Paris.", "topic": "geo"},
        {"id": "es", "input": "Capital of Spain?", "reference": "Madrid.", "topic": "geo"},
    ]
    if fmt == "jsonl":
        write_jsonl(path, rows)
    elif fmt in {"csv", "tsv"}:
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(
                fh, fieldnames=list(rows[0]), delimiter="," if fmt == "csv" else "\t"
            )
            writer.writeheader()
            writer.writerows(rows)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table(
            {
                "id": [r["id"] for r in rows],
                "input": [r["input"] for r in rows],
                # a list cell: several references, as the run reads them
                "references": [["Paris.", "Paris is the capital."], ["Madrid."]],
                "topic": ["geo", "geo"],
            }
        )
        pq.write_table(table, path)
    svc.import_dataset("golden", str(path))
    shown = svc.show_dataset("golden")
    want_fr = ["Paris.", "Paris is the capital."] if fmt == "parquet" else ["Paris."]
    assert refs(shown) == {"fr": want_fr, "es": ["Madrid."]}
    assert all(c.metadata == {"topic": "geo"} for c in shown.cases)


def test_export_imports_again_unchanged(svc: Service, tmp_path: Path) -> None:
    svc.import_dataset("a", str(write_jsonl(tmp_path / "a.jsonl", CASES)))
    cap = svc.capture("Draft?", "A draft answer.")
    svc.dataset_from_captures("a", [cap.id])
    want = [
        c.model_dump(exclude={"since_version", "capture_id"}) for c in svc.show_dataset("a").cases
    ]
    for fmt in ("jsonl", "csv"):
        out = tmp_path / f"out.{fmt}"
        out.write_text("".join(svc.export_dataset("a", fmt=fmt)[1]), encoding="utf-8")
        svc.import_dataset(f"b-{fmt}", str(out))
        got = svc.show_dataset(f"b-{fmt}").cases
        assert [c.model_dump(exclude={"since_version", "capture_id"}) for c in got] == want
    assert svc.get_dataset_case("b-csv", f"capture-{cap.id}").draft


def test_import_with_replace_makes_a_new_version(svc: Service, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "g.jsonl", CASES)
    svc.import_dataset("g", str(path))
    write_jsonl(path, CASES[:1])
    with pytest.raises(Conflict, match="--replace"):
        svc.import_dataset("g", str(path))
    out = svc.import_dataset("g", str(path), replace=True)
    assert (out.version, out.cases) == (2, 1)
    assert len(svc.show_dataset("g", 1).cases) == 3


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('{"id": "a", "input": "q"}\n', "line 1: missing column 'reference' or 'references'"),
        ('{"id": "a", "reference": "r"}\n', "line 1: missing column 'input'"),
        ('{"id": "a", "input": "q", "reference": ""}\n', "line 1: reference answer is empty"),
        ('{"id": "a", "input": "q", "reference": 3}\n', "must be a string or a list"),
        ('{"id": [1], "input": "q", "reference": "r"}\n', "column 'id' must be a string"),
        ('{"id": "a", "input": "q", "reference": "r", "metadata": 5}\n', "'metadata' must be"),
        ('{"id": "a", "input": "q", "reference": "r", "draft": "maybe"}\n', "'draft' must be"),
        (
            '{"id": "a", "input": "q", "reference": "r"}\n'
            '{"id": "a", "input": "q", "reference": "s"}\n',
            "line 2: case id 'a' is also at",
        ),
        ('{"id": "a", "input": "q", "reference": "r"}\n{oops\n', "line 2: malformed JSON"),
        ("\n", "the file has no cases"),
    ],
)
def test_a_bad_file_stores_nothing(svc: Service, tmp_path: Path, lines: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(lines, encoding="utf-8")
    with pytest.raises(InvalidInput, match=message):
        svc.import_dataset("bad", str(path))
    assert table_counts(svc.url, TABLES) == dict.fromkeys(TABLES, 0)


def test_bad_names_files_and_cases(svc: Service, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="input file not found"):
        svc.import_dataset("x", str(tmp_path / "missing.jsonl"))
    with pytest.raises(InvalidInput, match="cannot tell the format"):
        svc.import_dataset("x", str(tmp_path / "data.txt"))
    with pytest.raises(InvalidInput, match="dataset name contains '/'"):
        svc.create_dataset("a/b", [{"input": "q", "references": "r"}])
    with pytest.raises(InvalidInput, match="case 1: a case has unknown fields: output"):
        svc.create_dataset("x", [{"input": "q", "references": "r", "output": "o"}])
    with pytest.raises(InvalidInput, match="appears twice"):
        svc.create_dataset(
            "x", [{"id": "2", "input": "q", "references": "r"}, {"input": "q", "references": "r"}]
        )
    with pytest.raises(NotFound, match="no dataset named 'nope'"):
        svc.show_dataset("nope")
    svc.create_dataset("x", [{"input": "q", "references": "r"}])
    with pytest.raises(Conflict, match="last case"):
        svc.delete_dataset_case("x", "1")
    with pytest.raises(InvalidInput, match="reference answer is empty"):
        svc.edit_dataset_case("x", "1", references=[" "])
    assert table_counts(svc.url, TABLES)["dataset_versions"] == 1


def test_a_large_version_streams_in_order(svc: Service, tmp_path: Path) -> None:
    rows = [{"id": f"c{i}", "input": f"q{i}", "reference": f"answer {i}"} for i in range(2500)]
    svc.import_dataset("big", str(write_jsonl(tmp_path / "big.jsonl", rows)))
    svc.edit_dataset_case("big", "c0", references="changed")
    used, cases = svc.dataset_cases("big")
    got = list(cases)
    assert used == 2 and len(got) == 2500
    assert [r["id"] for r in got] == [f"c{i}" for i in range(2500)]
    assert got[0]["reference"] == ["changed"]


def test_the_models_match_the_migration(svc: Service) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from simeval.store import Base

    with svc.store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    ours = [d for d in diff if "dataset" in repr(d)]
    assert ours == []
    from simeval.store import head_revision

    assert sql(svc.url, "SELECT version_num FROM alembic_version") == [(head_revision(),)]


def test_edits_at_once_make_one_version_each(db: str) -> None:
    """Two services (two connection pools) editing one dataset at once: the dataset row is
    locked for a change, so every edit gets a version of its own and none is lost."""
    import threading

    first = Service(db)
    cases = [{"id": f"c{i}", "input": f"q{i}", "references": f"answer {i}"} for i in range(8)]
    first.create_dataset("shared", cases)
    second = Service(db)
    errors: list[BaseException] = []

    def edit(svc: Service, ids: range) -> None:
        try:
            for i in ids:
                svc.edit_dataset_case("shared", f"c{i}", references=f"edited {i}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=edit, args=(first, range(0, 4))),
        threading.Thread(target=edit, args=(second, range(4, 8))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    shown = first.show_dataset("shared")
    assert shown.version == 9
    assert [v.version for v in shown.versions] == list(range(9, 0, -1))
    assert all(c.references == [f"edited {c.id[1:]}"] for c in shown.cases)
    assert first.show_dataset("shared", 1).cases[0].references == ["answer 0"]
    first.close()
    second.close()
