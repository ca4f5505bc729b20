"""Run groups read side by side, on SQLite and PostgreSQL: runs stored through the run
storing API (``RunStore``, ``RunStoreProcess``, ``store_run``) with an engine and a group,
then a group's cases as rows and engines as columns, its filters, keyset paging, reviews,
missing answers, one case's explanations, and a 100,000-case group read a page at a time."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from simeval import runs
from simeval.errors import InvalidInput, InvalidType, NotFound
from simeval.service import Service

CASES = [
    ("paris", "What is the capital of France?", "Paris is the capital of France."),
    ("water", "At what temperature does water boil?", "Water boils at 100 degrees Celsius."),
    ("jupiter", "Which is the largest planet?", "Jupiter is the largest planet of all."),
    ("tokyo", "What is the capital of Japan?", "Tokyo is the capital of Japan."),
    ("pct", "What does 100% mean?", "One hundred percent means all of it."),
    ("moon", "What orbits the Earth?", "The Moon orbits the Earth."),
]  # fmt: skip
# each engine's answers, by case: a echoes the reference but for jupiter; b is wrong on
# paris and jupiter; c answers like a
ANSWERS = {
    "a": {"jupiter": "Saturn has rings."},
    "b": {"paris": "Lyon is a city in France.", "jupiter": "Mars is a red planet."},
    "c": {"jupiter": "Saturn has rings."},
}


def _write(path: Path, engine: str, skip: tuple[str, ...] = ()) -> Path:
    lines = []
    for cid, question, ref in CASES:
        if cid in skip:
            continue
        out = ANSWERS[engine].get(cid, ref)
        lines.append(json.dumps({"id": cid, "input": question, "reference": ref, "output": out}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _store_group(
    svc: Service, tmp_path: Path, group: str, engines: str = "abc", skip: tuple[str, ...] = ()
) -> list[int]:
    """Each engine's run stored through ``RunStore`` in ``group`` (``skip``: cases the last
    engine has no row for)."""
    ids = []
    for engine in engines:
        path = tmp_path / f"{group.replace('/', '_')}-{engine}.jsonl"
        src = _write(path, engine, skip if engine == engines[-1] else ())
        labels = {"engine": engine, "group": group, "dataset": "golden", "dataset_version": 2}
        sink = runs.RunStore(svc, f"golden {engine}", str(src), labels)
        summary = runs.run_file(str(src), runs.RunOptions(store=sink, threshold=0.8))
        assert summary.run_id is not None
        ids.append(summary.run_id)
    return ids


def _keys(page: object) -> list[str]:
    return [c.key for c in page.cases]  # type: ignore[attr-defined]


def test_a_group_side_by_side_with_its_filters(db: str, tmp_path: Path) -> None:
    with Service(db) as svc:
        ids = _store_group(svc, tmp_path, "nightly/2026-12-01")
        other = runs.RunStore(svc, "plain", str(_write(tmp_path / "plain.jsonl", "a")))
        plain = runs.run_file(str(tmp_path / "plain.jsonl"), runs.RunOptions(store=other))
        assert plain.run_id is not None

        run = svc.get_run(ids[1])
        assert (run.engine, run.group, run.dataset_name, run.dataset_version) == (
            "b", "nightly/2026-12-01", "golden", 2,
        )  # fmt: skip
        assert svc.get_run(plain.run_id).group is None  # a plain run has no group
        assert svc.count_run_groups() == 1
        (listed,) = svc.list_run_groups()
        assert listed.name == "nightly/2026-12-01" and listed.dataset_version == 2
        assert [(e.engine, e.run_id, e.results, e.passed) for e in listed.engines] == [
            ("a", ids[0], 6, 5), ("b", ids[1], 6, 4), ("c", ids[2], 6, 5),
        ]  # fmt: skip

        page = svc.run_group_cases("nightly/2026-12-01")
        assert page.engines == ["a", "b", "c"] and page.next is None
        assert [c.case_id for c in page.cases] == [c[0] for c in CASES]
        by_id = {c.case_id: c for c in page.cases}
        paris = by_id["paris"]
        assert [cell.passed for cell in paris.cells if cell] == [True, False, True]
        assert paris.differs and paris.failing and paris.input == CASES[0][1]
        assert paris.reference == CASES[0][2]
        wrong = paris.cells[1]
        assert wrong is not None and wrong.output == "Lyon is a city in France."
        assert wrong.score < 0.8 and "paris" in wrong.missing_terms and not wrong.reviewed
        assert paris.cells[0] is not None and paris.cells[0].missing_terms == []  # passes
        jupiter = by_id["jupiter"]
        assert not jupiter.differs and jupiter.failing  # every engine fails it
        assert all(c is not None and "jupiter" in c.missing_terms for c in jupiter.cells)
        assert not by_id["water"].differs and not by_id["water"].failing

        differ = svc.run_group_cases("nightly/2026-12-01", differ=True)
        assert [c.case_id for c in differ.cases] == ["paris"]
        failing = svc.run_group_cases("nightly/2026-12-01", failing=True)
        assert [c.case_id for c in failing.cases] == ["paris", "jupiter"]
        both = svc.run_group_cases("nightly/2026-12-01", failing=True, differ=True)
        assert [c.case_id for c in both.cases] == ["paris"]

        # the search: case-insensitive, over the id, the input and every engine's output;
        # its wildcards are plain characters
        def found(text: str, **kw: bool) -> list[str | None]:
            return [
                c.case_id
                for c in svc.run_group_cases("nightly/2026-12-01", search=text, **kw).cases
            ]

        assert found("LYON") == ["paris"]  # engine b's output
        assert found("japan") == ["tokyo"]  # the input
        assert found("moo") == ["moon"]  # the id (and the output)
        assert found("100%") == ["pct"] and found("%") == ["pct"] and found("_") == []
        assert found("saturn", differ=True) == [] and found("saturn", failing=True) == ["jupiter"]
        assert found("of all") == []  # only in the reference

        # keyset paging: pages of two make the same list, filtered or not
        for kw in ({}, {"failing": True}):
            seen, after = [], None
            for _ in range(10):
                part = svc.run_group_cases("nightly/2026-12-01", after=after, limit=2, **kw)
                seen += _keys(part)
                after = part.next
                if after is None:
                    break
            assert seen == _keys(svc.run_group_cases("nightly/2026-12-01", **kw))

        detail = svc.run_group_case("nightly/2026-12-01", paris.key)
        assert detail.engines == ["a", "b", "c"] and detail.case.case_id == "paris"
        assert [r.id for r in detail.results if r] == [c.result_id for c in paris.cells if c]
        explained = detail.results[1]
        assert explained is not None and explained.explanation is not None
        assert "paris" in [m["term"] for m in explained.explanation["missing"]]
        assert detail.options[1] == {}  # the run's scorer options (the defaults)


def test_reviews_decide_and_a_missing_answer_differs(db: str, tmp_path: Path) -> None:
    with Service(db) as svc:
        _store_group(svc, tmp_path, "g", engines="ab", skip=("moon",))
        page = svc.run_group_cases("g")
        moon = next(c for c in page.cases if c.case_id == "moon")
        assert moon.cells[1] is None and moon.differs and moon.failing
        assert [c.case_id for c in svc.run_group_cases("g", differ=True).cases] == ["paris", "moon"]

        paris = page.cases[0]
        cell = paris.cells[1]
        assert cell is not None and not cell.passed
        svc.review_result(cell.result_id, 0.95, "Lyon is fine here")
        again = svc.run_group_cases("g").cases[0]
        reviewed = again.cells[1]
        assert reviewed is not None and reviewed.passed and reviewed.reviewed
        assert reviewed.score == 0.95 and reviewed.automated_score == cell.score
        assert reviewed.missing_terms == [] and not again.differs and not again.failing
        assert [c.case_id for c in svc.run_group_cases("g", differ=True).cases] == ["moon"]


def test_an_eval_file_run_has_a_case_per_eval(db: str, tmp_path: Path) -> None:
    evals_file = tmp_path / "evals.json"
    evals_file.write_text(
        json.dumps(
            {
                "evals": [
                    {"name": "capital", "references": ["Paris is the capital of France."]},
                    {"name": "city", "references": ["Paris is a city."], "threshold": 0.5},
                ]
            }
        )
    )
    evals = runs.load_evals(str(evals_file))
    with Service(db) as svc:
        for engine, answer in (("a", "Paris is the capital of France."), ("b", "Lyon.")):
            src = tmp_path / f"{engine}.jsonl"
            src.write_text(json.dumps({"id": "q1", "output": answer}) + "\n")
            sink = runs.RunStore(svc, engine, str(src), {"engine": engine, "group": "evals"})
            runs.run_file(str(src), runs.RunOptions(store=sink, evals=evals))
        page = svc.run_group_cases("evals")
        assert [(c.key, c.eval_name) for c in page.cases] == [
            ("0:capital", "capital"), ("0:city", "city"),
        ]  # fmt: skip
        lyon = page.cases[0].cells[1]
        assert lyon is not None and not lyon.passed and "paris" in lyon.missing_terms
        detail = svc.run_group_case("evals", "0:capital")
        assert detail.case.eval_name == "capital" and detail.results[1] is not None
        assert "paris" in [m["term"] for m in (detail.results[1].explanation or {})["missing"]]


@pytest.mark.process
def test_the_writer_process_and_store_run_keep_the_labels(db: str, tmp_path: Path) -> None:
    src = _write(tmp_path / "a.jsonl", "a")
    labels = {"engine": "a", "group": "g2", "dataset": "golden", "dataset_version": 3}
    sink = runs.RunStoreProcess(db, "through the writer", str(src), labels)
    summary = runs.run_file(str(src), runs.RunOptions(store=sink))
    row = (None, None, 0.5, False, 0.8, "fp", 0, "q", "out", "ref", '{"case": {"ordinal": 0}}')
    with Service(db) as svc:
        other = runs.store_run(
            svc, "at once", "b.jsonl", [[row]], {}, {}, labels={"engine": "b", "group": "g2"}
        )
        assert summary.run_id is not None
        first = svc.get_run(summary.run_id)
        assert (first.engine, first.group, first.dataset_version) == ("a", "g2", 3)
        assert svc.get_run(other).engine == "b"
        page = svc.run_group_cases("g2")
        assert page.engines == ["a", "b"] and len(page.cases) == len(CASES)
        assert [c is not None for c in page.cases[0].cells] == [True, True]
        assert [c is None for c in page.cases[1].cells] == [False, True]


def test_labels_and_queries_are_checked(db: str, tmp_path: Path) -> None:
    with Service(db) as svc:
        for bad in (
            {"engine": ""},
            {"group": "x" * 201},
            {"dataset": "  "},
            {"dataset_version": 0},
            {"dataset_version": "two"},
            {"group": "a\x00b"},
        ):
            with pytest.raises(InvalidInput):
                svc.create_run("r", "f.jsonl", **bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidType):
            svc.create_run("r", "f.jsonl", engine=3)  # type: ignore[arg-type]
        assert svc.count_runs() == 0  # nothing half-stored
        run_id = svc.create_run("r", "f.jsonl", engine=" a ", group=" g ")
        assert (svc.get_run(run_id).engine, svc.get_run(run_id).group) == ("a", "g")

        _store_group(svc, tmp_path, "checked", engines="ab")
        with pytest.raises(NotFound, match="no run group named 'nope'"):
            svc.run_group_cases("nope")
        with pytest.raises(NotFound):
            svc.get_run_group("nope")
        with pytest.raises(NotFound, match="no case '99'"):
            svc.run_group_case("checked", "99")
        for kw in (
            {"after": "x1"},
            {"after": "1:" + "e" * 300},
            {"limit": 0},
            {"limit": 501},
            {"limit": True},
            {"search": "s" * 201},
        ):
            with pytest.raises(InvalidInput):
                svc.run_group_cases("checked", **kw)  # type: ignore[arg-type]
        for name in ("", "   ", "n" * 201):
            with pytest.raises(InvalidInput):
                svc.run_group_cases(name)
        with pytest.raises(NotFound):  # a name no database can hold names nothing
            svc.run_group_cases("a\x00b")
        with pytest.raises(InvalidInput):
            svc.run_group_case("checked", "first")
        # an ordinal past any stored one is an empty page, not an error
        assert svc.run_group_cases("checked", after="999999999").cases == []


BIG = 100_000


def _big_rows(engine: str) -> Iterator[list[tuple[object, ...]]]:
    """A 100,000-case run's rows as ``simeval run`` stores them: a passes a case unless its
    ordinal is a multiple of 7, b unless it is a multiple of 5."""
    step = 7 if engine == "a" else 5
    batch: list[tuple[object, ...]] = []
    for i in range(BIG):
        passed = i % step != 0
        origin = json.dumps({"case": {"id": f"case-{i}", "row": f"line {i + 1}", "ordinal": i}})
        batch.append(
            (None, None, 0.9 if passed else 0.2, passed, 0.5, "fp", 0,
             f"question {i}", f"answer {engine} {i}", f"reference {i}", origin)
        )  # fmt: skip
        if len(batch) == 10_000:
            yield batch
            batch = []


@pytest.mark.slow
def test_a_100000_case_group_is_read_a_page_at_a_time(db: str) -> None:
    """Each page is chosen by the database and only its cells are read: the memory a page
    takes does not grow with the group (a whole group's rows would take over 50 MB here)."""
    with Service(db) as svc:
        for engine in "ab":
            labels = {"engine": engine, "group": "big"}
            runs.store_run(
                svc, f"big {engine}", "big.jsonl", _big_rows(engine), {}, {}, labels=labels
            )

        def differs(i: int) -> bool:
            return (i % 7 == 0) != (i % 5 == 0)

        svc.run_group_cases("big", after="10")  # what a first read imports is not the page's
        tracemalloc.start()
        try:
            first = svc.run_group_cases("big")
            middle = svc.run_group_cases("big", after=str(BIG // 2 - 1))
            last = svc.run_group_cases("big", after=str(BIG - 51))
            diff = svc.run_group_cases("big", differ=True, limit=100)
            diff2 = svc.run_group_cases("big", differ=True, after=diff.next, limit=100)
            fails = svc.run_group_cases("big", failing=True, after="60000")
            found = svc.run_group_cases("big", search="case-9999")
            one = svc.run_group_case("big", str(BIG - 1))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 8_000_000, f"{peak:,} bytes at the peak of reading pages"

        assert _keys(first) == [str(i) for i in range(50)] and first.next == "49"
        assert _keys(middle) == [str(i) for i in range(BIG // 2, BIG // 2 + 50)]
        assert _keys(last) == [str(i) for i in range(BIG - 50, BIG)] and last.next is None
        expected = [str(i) for i in range(BIG) if differs(i)]
        assert _keys(diff) + _keys(diff2) == expected[:200]
        assert all(c.differs for c in diff.cases)
        assert _keys(fails) == [str(i) for i in range(60001, BIG) if i % 7 == 0 or i % 5 == 0][:50]
        assert _keys(found) == ["9999", *[str(i) for i in range(99990, BIG)]]
        assert one.case.case_id == f"case-{BIG - 1}" and len(one.results) == 2
        assert one.results[0] is not None and one.results[0].output == f"answer a {BIG - 1}"
