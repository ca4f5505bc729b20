"""Required terms and synonyms (issue 17, parts 3 and 4): through the library, the service on a
real SQLite file, the API (the real app, in process), the CLI runner and the studio pages; and
the synonym suggestions from real reviews."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

import simeval
from simeval.cli import cli
from simeval.errors import InvalidOption
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.required import missing_required
from simeval.scoring.scorer import get_scorer
from simeval.service import Service
from simeval.web import create_app

BASE = "http://127.0.0.1:8000"
REF = "The capital of France is Paris, on the Seine."
WITH_PUNCTUATION = "Paris, on the Seine! That is France's capital."
WITHOUT_SEINE = "The capital of France is Paris."
GROUP = [["begin", "commence", "start"]]


# -- the library ----------------------------------------------------------------------------
def test_a_missing_required_term_fails_whatever_the_score() -> None:
    spec = EvalSpec(1, "capital", 1, (REF,), 0.3, None, (("required", ("paris", "seine")),))
    (scored,) = EvalSet([spec]).score(WITHOUT_SEINE)
    assert scored.score >= 0.3  # the score alone would pass
    assert not scored.passed
    assert scored.missing_required == ("seine",)
    exp = simeval.explain(WITHOUT_SEINE, REF, required=["paris", "seine"])
    assert exp.missing_required == ["seine"]
    assert "required term missing: seine" in str(exp)


def test_a_required_term_with_punctuation_and_case_passes() -> None:
    spec = EvalSpec(1, "capital", 1, (REF,), 0.3, None, (("required", ("paris", "Seine")),))
    (scored,) = EvalSet([spec]).score(WITH_PUNCTUATION)
    assert scored.passed and scored.missing_required == ()
    scorer = get_scorer(required="paris, Seine")  # one comma-separated string works too
    assert missing_required(scorer, "PARIS, on the seine.") == []
    assert missing_required(scorer, "") == ["paris", "Seine"]
    # the same analysis as scoring: "capitals" meets a required "capital" (stemming)
    assert missing_required(get_scorer(required=["capital"]), "two capitals") == []


def test_required_terms_change_neither_score_nor_fingerprint() -> None:
    plain = get_scorer()
    required = get_scorer(required=["seine"])
    assert required.fingerprint == plain.fingerprint
    assert required.score(WITHOUT_SEINE, REF) == plain.score(WITHOUT_SEINE, REF)


def test_a_required_term_without_a_scorable_word_is_refused() -> None:
    with pytest.raises(InvalidOption, match="required term 'the' has no scorable word"):
        EvalSet(
            [EvalSpec(1, "x", 1, (REF,), 0.8, None, (("required", ("the",)), ("stop_words", 100)))]
        )


def test_a_synonym_group_scores_as_one_term() -> None:
    out, ref = "We begin at nine", "We commence at nine"
    without = simeval.score(out, ref)
    assert without < 1.0
    assert simeval.score(out, ref, synonyms=GROUP) == 1.0
    assert simeval.score("We start at nine", ref, synonyms=GROUP) == 1.0
    # after stemming: other forms of the words meet too
    forms = ("We are beginning at nine", "We are commencing at nine")
    assert simeval.score(*forms) < 1.0
    assert simeval.score(*forms, synonyms=GROUP) == 1.0
    # the batch path gives the same numbers
    assert simeval.score_many([out], [ref], synonyms=GROUP) == [1.0]


def test_the_explanation_shows_a_synonym_match() -> None:
    exp = simeval.explain("We begin at nine", "We commence at nine", synonyms=GROUP)
    assert "begin ~ commence" in [t.term for t in exp.shared]
    assert not exp.missing and not exp.extra
    assert "begin ~ commence" in str(exp)
    # n-grams take the other explanation path: the same mark
    exp2 = simeval.explain("We begin at nine", "We commence at nine", synonyms=GROUP, ngram=2)
    assert "begin ~ commence" in [t.term for t in exp2.shared]
    # a word matched as itself is not marked
    same = simeval.explain("We begin at nine", "We begin at ten", synonyms=GROUP)
    assert "begin" in [t.term for t in same.shared]


def test_synonyms_are_part_of_the_fingerprint_in_any_order() -> None:
    base = simeval.fingerprint()
    one = simeval.fingerprint(synonyms=[["begin", "commence"]])
    assert one != base
    assert simeval.fingerprint(synonyms=[["Commence", "begin"]]) == one
    assert simeval.fingerprint(synonyms="begin, commence") == one
    assert simeval.fingerprint(synonyms=[["begin", "start"]]) != one


@pytest.mark.parametrize(
    "groups, message",
    [
        ([["begin"]], "at least two different words"),
        ([["begin", "new york"]], "must be one word"),
        (42, "must be a list of groups"),
    ],
)
def test_bad_synonyms_are_refused(groups: Any, message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        simeval.score("a", "b", synonyms=groups)


# -- the service, the API, exports ----------------------------------------------------------
@pytest.fixture
def client(new_sqlite: Callable[..., str]) -> Iterator[TestClient]:
    with TestClient(create_app(db=new_sqlite("terms.db")), base_url=BASE) as c:
        yield c


def test_required_terms_through_the_api(client: TestClient) -> None:
    made = client.post(
        "/api/evals",
        json={"name": "capital", "references": [REF], "threshold": 0.5, "required": ["Seine"]},
    )
    assert made.status_code == 201, made.text
    assert made.json()["required"] == ["Seine"]
    assert made.json()["options"]["required"] == ["Seine"]
    failed = client.post("/api/evals/capital/test", json={"output": WITHOUT_SEINE}).json()
    assert failed["passed"] is False and failed["missing_required"] == ["Seine"]
    passed = client.post("/api/evals/capital/test", json={"output": WITH_PUNCTUATION}).json()
    assert passed["passed"] is True and passed["missing_required"] == []
    assert client.post("/api/evals/capital/activate").status_code == 200
    cap = client.post("/api/capture", json={"input": "q", "output": WITHOUT_SEINE}).json()
    (result,) = cap["results"]
    assert result["passed"] is False
    shown = client.get(f"/api/results/{result['id']}").json()
    assert shown["passed"] is False
    assert shown["explanation"]["missing_required"] == ["Seine"]
    # the export names it, and says why in its reasoning
    rows = list(csv.DictReader(io.StringIO(client.get("/api/results/export?format=csv").text)))
    assert rows[0]["missing_required"] == "Seine"
    assert "required term missing: Seine" in rows[0]["reasoning"]
    # the result page says so
    page = client.get(f"/results/{result['id']}").text
    assert "required term missing: Seine" in page
    # a patch of the required terms makes a new version; [] removes them
    patched = client.patch("/api/evals/capital", json={"required": []}).json()
    assert patched["version"] == 2 and patched["required"] == []
    bad = client.post(
        "/api/evals",
        json={
            "name": "x",
            "references": [REF],
            "options": {"stop_words": 100},
            "required": ["the"],
        },
    )
    assert bad.status_code == 400 and "required term 'the'" in bad.json()["error"]


def test_synonyms_through_the_api(client: TestClient) -> None:
    made = client.post(
        "/api/evals",
        json={"name": "meet", "references": ["We commence at nine"], "synonyms": GROUP},
    ).json()
    assert made["synonyms"] == [["begin", "commence", "start"]]
    assert made["fingerprint"] != simeval.fingerprint()
    tested = client.post("/api/evals/meet/test", json={"output": "We begin at nine"}).json()
    assert tested["score"] == 1.0 and tested["passed"] is True
    shared = [t["term"] for t in tested["explanation"]["shared"]]
    assert "begin ~ commence" in shared


def test_eval_files_take_required_and_named_synonym_lists(tmp_path: Path) -> None:
    path = tmp_path / "evals.yaml"
    path.write_text(
        "synonyms:\n"
        "  time: [[begin, commence, start]]\n"
        "evals:\n"
        "  - name: meet\n"
        "    references: [We commence at nine]\n"
        "    synonyms: [time, [nine, 9]]\n"
        "    required: [nine]\n",
        encoding="utf-8",
    )
    svc = Service(str(tmp_path / "files.db"))
    report = svc.import_evals(str(path))
    assert report.created == ["meet"]
    ev = svc.get_eval("meet")
    assert ev.required == ["nine"]
    assert ["begin", "commence", "start"] in ev.synonyms and ["9", "nine"] in ev.synonyms
    assert svc.test_eval("meet", "", "We begin at 9").passed
    bad = tmp_path / "bad.yaml"
    bad.write_text("evals:\n  - name: a\n    references: [x]\n    synonyms: [nope]\n")
    with pytest.raises(Exception, match="unknown synonym list 'nope'"):
        svc.import_evals(str(bad))
    svc.close()


def test_a_run_with_an_eval_file_fails_a_row_missing_a_required_term(tmp_path: Path) -> None:
    evals = tmp_path / "evals.yaml"
    evals.write_text(
        f"evals:\n  - name: capital\n    references: [{json.dumps(REF)}]\n"
        "    threshold: 0.3\n    required: [seine]\n",
        encoding="utf-8",
    )
    data = tmp_path / "rows.jsonl"
    data.write_text(
        json.dumps({"output": WITHOUT_SEINE}) + "\n" + json.dumps({"output": WITH_PUNCTUATION})
    )
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(cli, ["run", str(data), "--evals", str(evals), "-o", str(out)])
    assert res.exit_code == 0, res.output  # no gate asked for
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["pass"] for r in rows] == [False, True]
    assert rows[0]["missing_terms"][0] == "seine"


# -- the CLI --------------------------------------------------------------------------------
def run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--db", str(db)])


def test_required_terms_through_the_cli(new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("cli.db"))
    made = run(db, "evals", "create", "capital", "-r", REF, "-t", "0.3", "--require", "Seine",
               "--require", "paris", "--json")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["required"] == ["Seine", "paris"]
    failed = run(db, "evals", "test", "capital", WITHOUT_SEINE)
    assert failed.exit_code == 1
    assert "FAIL" in failed.stdout and "required term missing: Seine" in failed.stdout
    passed = run(db, "evals", "test", "capital", WITH_PUNCTUATION)
    assert passed.exit_code == 0, passed.output
    edited = run(db, "evals", "edit", "capital", "--synonyms", "begin,commence", "--json")
    assert edited.exit_code == 0, edited.output
    data = json.loads(edited.stdout)
    assert data["version"] == 2 and data["synonyms"] == [["begin", "commence"]]
    assert data["required"] == ["Seine", "paris"]  # kept: options given are merged
    bad = run(db, "evals", "create", "x", "-r", REF, "--require", "the", "--stop-words", "100")
    assert bad.exit_code == 2
    assert "required term 'the' has no scorable word" in bad.stderr
    assert "Traceback" not in bad.output
    score = CliRunner().invoke(cli, ["score", WITHOUT_SEINE, REF, "--require", "seine", "--json"])
    assert score.exit_code == 1
    assert json.loads(score.stdout)["missing_required"] == ["seine"]


# -- the studio: the form, the suggestions ---------------------------------------------------
def csrf_of(client: TestClient, path: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert match, "the page carries a CSRF token"
    return match.group(1)


def test_the_form_stores_required_terms_and_synonyms(client: TestClient) -> None:
    token = csrf_of(client, "/evals/new/similarity")
    form = {
        "csrf_token": token,
        "name": "capital",
        "references": REF,
        "threshold": "0.5",
        "advanced": "1",
        "language": "english",
        "idf": "background",
        "prefix": "4",
        "stop_words": "0",
        "ngram": "1",
        "stemming": "on",
        "sublinear_tf": "on",
        "required": "Paris, Seine",
        "synonyms": "begin, commence\nbig, large",
    }
    r = client.post("/evals", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    ev = client.get("/api/evals/capital").json()
    assert ev["required"] == ["Paris", "Seine"]
    assert ev["synonyms"] == [["begin", "commence"], ["big", "large"]]
    page = client.get("/evals/capital").text
    assert 'value="Paris, Seine"' in page and "begin, commence\nbig, large" in page


def _reviewed(svc: Service, outputs: list[str]) -> None:
    for output in outputs:
        (result,) = svc.capture("When do we start?", output).results
        if not result.passed:
            svc.review_result(result.id, 1.0, "right answer, other words")


def test_synonym_suggestions_from_real_reviews(new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("reviews.db"))
    svc = Service(str(db))
    svc.create_eval("meet", ["The meeting will commence at nine in the hall."], threshold=0.99)
    svc.test_eval("meet", "", "The meeting will commence at nine in the hall.")
    svc.activate_eval("meet")
    _reviewed(
        svc,
        [
            "The meeting will begin at nine in the hall.",
            "The meeting will begin at nine, hall A.",
            "Meeting begins at nine in the hall.",
            "The meeting will start at nine in the hall.",
        ],
    )
    # a failing result nobody overrode says nothing
    (unreviewed,) = svc.capture("When do we start?", "Lunch is at noon.").results
    assert not unreviewed.passed
    pairs = svc.synonym_suggestions("meet")
    assert pairs[0].reference == "commence" and pairs[0].output == "begin"
    assert pairs[0].results == 3
    assert ("commence", "start") in [(p.reference, p.output) for p in pairs]
    assert all(p.output not in ("lunch", "noon") for p in pairs)
    svc.close()

    # on the eval's page, one click accepts a pair: a new version with the synonym
    with TestClient(create_app(db=str(db)), base_url=BASE) as client:
        page = client.get("/evals/meet").text
        assert 'data-suggestion="commence~begin"' in page
        token = csrf_of(client, "/evals/meet")
        r = client.post(
            "/evals/meet/synonyms",
            data={"csrf_token": token, "words": ["commence", "begin"]},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
        ev = client.get("/api/evals/meet").json()
        assert ev["version"] == 2 and ev["synonyms"] == [["begin", "commence"]]
        assert ev["pending_version"] == 2  # it needs a passing test like any change
        page = client.get("/evals/meet").text
        assert 'data-suggestion="commence~begin"' not in page  # now known: not suggested
        tested = client.post(
            "/api/evals/meet/test", json={"output": "The meeting will begin at nine in the hall."}
        ).json()
        assert tested["score"] == 1.0


def test_required_terms_and_synonyms_are_kept_per_version(db: str) -> None:
    """On SQLite and PostgreSQL (the ``db`` fixture): each version keeps its own."""
    svc = Service(db)
    svc.create_eval("meet", ["We commence at nine"], options={"required": ["nine"]})
    svc.edit_eval("meet", options={"required": ["nine"], "synonyms": GROUP})
    versions = svc.eval_versions("meet")
    assert [v.options.get("synonyms") for v in versions] == [None, GROUP]
    assert [v.options.get("required") for v in versions] == [["nine"], ["nine"]]
    assert versions[0].fingerprint != versions[1].fingerprint
    test = svc.test_eval("meet", "", "We begin at ten")
    assert not test.passed and test.missing_required == ["nine"]
    svc.close()
