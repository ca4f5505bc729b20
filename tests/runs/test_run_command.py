"""`simeval run`: data-set files in, results, summaries, gates and JUnit out."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import simeval
from simeval import runs
from simeval.cli import cli
from simeval.scoring.bench import synthetic_texts
from simeval.scoring.explain import missing_terms

ROWS = [
    {
        "id": "eiffel",
        "input": "Where is the Eiffel Tower?",
        "output": "The Eiffel Tower is in Paris.",
        "reference": "The Eiffel Tower stands in Paris.",
    },
    {
        "id": "tokyo",
        "input": "What is the capital of Japan?",
        "output": "I like trains.",
        "reference": ["Tokyo is the capital of Japan.", "Japan's capital city is Tokyo."],
    },
    {
        "id": "water",
        "input": "What is water made of?",
        "output": "Water is hydrogen and oxygen.",
        "reference": "Water is made of hydrogen and oxygen.",
    },
    {
        "id": "sun",
        "input": "What is the sun?",
        "output": "The sun is a star at the centre of the solar system.",
        "reference": ["A planet.", "The sun is the star at the centre of our solar system."],
    },
]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def expected(row: dict[str, Any]) -> tuple[float, int]:
    # a row's input is the question: its terms count at input_weight, as in `simeval score`
    refs = row["reference"] if isinstance(row["reference"], list) else [row["reference"]]
    return simeval.get_scorer().score_detail(row["output"], refs, row.get("input"))


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".results." in p.name or ".tmp" in p.name)


# -- round trips -----------------------------------------------------------------------------
def test_jsonl_round_trip(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    res = invoke("run", str(src), "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    out = read_jsonl(tmp_path / "cases.results.jsonl")
    assert [r["id"] for r in out] == [r["id"] for r in ROWS]
    for row, got in zip(ROWS, out, strict=True):
        score, at = expected(row)
        assert {k: got[k] for k in row} == row  # the input columns, untouched
        assert got["score"] == score  # exactly simeval's number
        assert got["pass"] is (score >= 0.8)
        assert got["threshold"] == 0.8
        assert got["matched_index"] == at
        refs = row["reference"] if isinstance(row["reference"], list) else [row["reference"]]
        assert got["matched_reference"] == refs[at]
        assert got["fingerprint"] == simeval.fingerprint()
        # missing terms: filled for failing rows, empty for passing ones
        if got["pass"]:
            assert got["missing_terms"] == []
        else:
            assert got["missing_terms"] == [
                t.term for t in simeval.explain(row["output"], refs[at]).missing[:5]
            ]
    tokyo = out[1]
    assert not tokyo["pass"] and "tokyo" in tokyo["missing_terms"]
    assert out[3]["matched_index"] == 1  # several references: the best one is named
    assert summary["rows"] == summary["results"] == 4
    assert summary["passed"] == sum(r["pass"] for r in out)
    assert summary["mean_score"] == pytest.approx(sum(r["score"] for r in out) / 4)
    worst = summary["worst"][0]
    assert worst["id"] == "tokyo" and worst["where"].endswith("cases.jsonl line 2")
    assert "tokyo" in worst["missing_terms"]
    assert ["tokyo", 1] in summary["most_missing"]


def test_human_summary_names_worst_cases_and_missing_terms(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    res = invoke("run", str(src))
    assert res.exit_code == 0
    assert "pass rate" in res.output and "mean score" in res.output
    assert "worst cases" in res.output and "tokyo" in res.output
    assert "cases.results.jsonl" in res.output


def test_csv_round_trip_with_several_reference_columns(tmp_path: Path) -> None:
    src = tmp_path / "cases.csv"
    with src.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["case", "prompt", "answer", "gold1", "gold2"])
        w.writerow(["1", "q1", "The cat sat on the mat.", "A dog barked.", "The cat sat on a mat."])
        w.writerow(["2", "q2", 'Multi\nline, with "quotes"', "multi line with quotes", ""])
        w.writerow(["3", "q3", "", "something", ""])
    res = invoke(
        "run",
        str(src),
        "--output-col",
        "answer",
        "--reference-col",
        "gold1",
        "--reference-col",
        "gold2",
        "--input-col",
        "prompt",
        "--id-col",
        "case",
        "-t",
        "0.5",
    )
    assert res.exit_code == 0, res.output
    with (tmp_path / "cases.results.csv").open(newline="", encoding="utf-8") as fh:
        out = list(csv.DictReader(fh))
    assert list(out[0])[:5] == ["case", "prompt", "answer", "gold1", "gold2"]
    assert [r["case"] for r in out] == ["1", "2", "3"]
    assert out[0]["matched_index"] == "1" and out[0]["pass"] == "true"
    assert float(out[0]["score"]) == simeval.score(
        "The cat sat on the mat.", ["A dog barked.", "The cat sat on a mat."], input="q1"
    )
    assert out[1]["answer"] == 'Multi\nline, with "quotes"'  # quoting survives
    assert float(out[1]["score"]) == simeval.score(
        'Multi\nline, with "quotes"', "multi line with quotes", input="q2"
    )
    assert out[2]["score"] == "0.0" and out[2]["pass"] == "false"
    assert out[2]["missing_terms"] == "something"


def test_parquet_round_trip_keeps_column_types(tmp_path: Path) -> None:
    src = tmp_path / "cases.parquet"
    table = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "input": [r["input"] for r in ROWS],
            "output": [r["output"] for r in ROWS],
            "reference": [
                r["reference"] if isinstance(r["reference"], list) else [r["reference"]]
                for r in ROWS
            ],
            "weight": pa.array([0.5, 1.0, 1.5, 2.0]),
        }
    )
    pq.write_table(table, src)
    res = invoke("run", str(src))
    assert res.exit_code == 0, res.output
    out = pq.read_table(tmp_path / "cases.results.parquet")
    assert out.schema.field("id").type == pa.int64()
    assert out.schema.field("weight").type == pa.float64()
    assert out.schema.field("missing_terms").type == pa.list_(pa.string())
    rows = out.to_pylist()
    assert [r["id"] for r in rows] == [1, 2, 3, 4]
    for row, got in zip(ROWS, rows, strict=True):
        assert (got["score"], got["matched_index"]) == expected(row)
    assert rows[1]["pass"] is False and "tokyo" in rows[1]["missing_terms"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".tsv"])
def test_results_in_another_format(tmp_path: Path, suffix: str) -> None:
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    dest = tmp_path / f"scored{suffix}"
    res = invoke("run", str(src), "-o", str(dest))
    assert res.exit_code == 0, res.output
    if suffix == ".parquet":
        got = pq.read_table(dest).to_pylist()
        scores = [r["score"] for r in got]
        assert got[1]["reference"] == json.dumps(ROWS[1]["reference"])
    else:
        with dest.open(newline="", encoding="utf-8") as fh:
            delim = "\t" if suffix == ".tsv" else ","
            got = list(csv.DictReader(fh, delimiter=delim))
        scores = [float(r["score"]) for r in got]
    assert scores == [expected(r)[0] for r in ROWS]


def test_no_results_flag_writes_nothing(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    assert invoke("run", str(src), "--no-results").exit_code == 0
    assert leftovers(tmp_path) == []


@pytest.mark.process
def test_workers_and_chunks_give_the_same_file(tmp_path: Path) -> None:
    texts = synthetic_texts(400, words=30, seed=3)
    rows = [
        {"id": i, "output": texts[i], "reference": texts[(i * 7 + 1) % 400]} for i in range(300)
    ]
    rows[5]["reference"] = rows[5]["output"]
    src = write_jsonl(tmp_path / "big.jsonl", rows)
    one = runs.run_file(
        str(src), runs.RunOptions(results=str(tmp_path / "one.jsonl"), workers=1, chunk_rows=32)
    )
    two = runs.run_file(
        str(src), runs.RunOptions(results=str(tmp_path / "two.jsonl"), workers=2, chunk_rows=32)
    )
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
    for key in ("rows", "passed", "mean_score", "worst", "most_missing"):
        assert one.to_dict()[key] == two.to_dict()[key]
    assert [r["score"] for r in read_jsonl(tmp_path / "one.jsonl")] == simeval.score_many(
        [r["output"] for r in rows], [r["reference"] for r in rows], workers=1
    )


def test_missing_terms_match_explain() -> None:
    texts = synthetic_texts(120, words=25, seed=5)
    scorer = simeval.get_scorer()
    for i in range(0, 120, 2):
        a, b = texts[i], texts[i + 1]
        assert missing_terms(scorer, a, b, 8) == [
            t.term for t in scorer.explain(a, b, top=8).missing
        ]
    assert missing_terms(scorer, "", "Paris is the capital") == [
        t.term for t in scorer.explain("", "Paris is the capital").missing[:5]
    ]
    bigram = simeval.get_scorer(ngram=2)
    assert missing_terms(bigram, "the cat", "the black cat sat") == [
        t.term for t in bigram.explain("the cat", "the black cat sat").missing[:5]
    ]


@pytest.mark.parametrize("options", [(), (("ngram", 2),), (("idf", "pair"),)])
def test_an_eval_scores_like_score_detail_and_missing_terms(
    options: tuple[tuple[str, Any], ...],
) -> None:
    # an eval run vectorises its references once and ranks their terms once: same numbers
    texts = synthetic_texts(40, words=25, seed=9)
    refs = (texts[0], texts[1], "the of and", "?!")  # "?!" has no terms: an empty vector
    e = runs.EvalDef("e", refs, options=options)
    state = runs.chunk_state(runs.RunConfig(source="x", fmt="jsonl", evals=(e,)))
    scorer = simeval.get_scorer(**dict(options))
    outputs = [*texts[2:], texts[1], "", "  ", "the of and", "The OF and", "and", "?!", " ?! "]
    for output in outputs:
        rows: dict[int, Any] = {}
        ((pos, score, at, sc),) = state.hits(output, None, None)
        assert (score, at) == scorer.score_detail(output, list(refs))
        assert state.missing(pos, sc, output, at, rows, 8) == missing_terms(
            scorer, output, refs[at], 8
        )


# -- gates and exit codes --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "code"),
    [
        ([], 0),
        (["--min-pass-rate", "0.5"], 0),
        (["--min-pass-rate", "0.76"], 1),
        (["--min-mean-score", "0.5"], 0),
        (["--min-mean-score", "0.95"], 1),
        (["--min-pass-rate", "0.5", "--min-mean-score", "0.95"], 1),
        (["--min-pass-rate", "1.5"], 2),
        (["--min-mean-score", "-0.1"], 2),
        (["--threshold", "nan"], 2),
        (["--format", "xml"], 2),
        (["--max-regressions", "0"], 2),
        (["--workers", "0"], 2),
        (["--workers", "two"], 2),
        (["--idf", "nonexistent.table"], 2),
    ],
)
def test_gates_and_exit_codes(tmp_path: Path, args: list[str], code: int) -> None:
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)  # 3 of 4 pass
    res = invoke("run", str(src), "--json", *args)
    assert res.exit_code == code, res.output
    if code == 1:
        summary = json.loads(res.output)
        assert summary["ok"] is False
        assert any(not g["passed"] for g in summary["gates"])
        assert (tmp_path / "cases.results.jsonl").exists()  # a failed gate still reports
    if code == 2:
        assert "Traceback" not in res.output
        assert not (tmp_path / "cases.results.jsonl").exists()


def test_gate_result_is_printed(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    res = invoke("run", str(src), "--min-pass-rate", "0.9")
    assert res.exit_code == 1
    assert "gate min-pass-rate 0.9: FAILED" in res.output


# -- JUnit -----------------------------------------------------------------------------------
def test_junit_xml_counts(tmp_path: Path) -> None:
    rows = [*ROWS, {"id": "bad", "output": 7, "reference": "x"}]
    src = tmp_path / "cases.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n", encoding="utf-8")
    report = tmp_path / "report.xml"
    res = invoke("run", str(src), "--junit", str(report), "--on-error", "skip")
    assert res.exit_code == 0, res.output
    root = ET.parse(report).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == 6  # one per row, bad rows included as errors
    assert suite.get("tests") == "6" and root.get("tests") == "6"
    assert suite.get("failures") == "1" and suite.get("errors") == "2"
    failures = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failures] == ["tokyo"]
    failure = failures[0].find("failure")
    assert failure is not None
    assert "threshold 0.80" in (failure.get("message") or "")
    assert "tokyo" in (failure.text or "")
    errors = [c for c in cases if c.find("error") is not None]
    assert [c.get("name") for c in errors] == [f"{src} line 5", f"{src} line 6"]
    # every case has its time, and the suite's wall time holds them all
    times = [float(c.attrib["time"]) for c in cases]
    assert all(t >= 0 for t in times) and float(suite.attrib["time"]) >= sum(times)


def test_junit_escapes_markup_and_control_characters(tmp_path: Path) -> None:
    rows = [{"id": "<x>&\"'", "output": "a \x01 <b>", "reference": "zzz </testcase> ]]>"}]
    src = write_jsonl(tmp_path / "c.jsonl", rows)
    report = tmp_path / "r.xml"
    assert invoke("run", str(src), "--junit", str(report)).exit_code == 0
    case = ET.parse(report).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "<x>&\"'"


# -- bad input -------------------------------------------------------------------------------
BAD_INPUTS = [
    (
        "malformed.jsonl",
        '{"output": "a", "reference": "a"}\n{"output": "b", "ref\n',
        "malformed.jsonl line 2: malformed JSON",
    ),
    (
        "missing.jsonl",
        '{"output": "a", "reference": "a"}\n{"output": "b"}\n',
        "missing.jsonl line 2: missing column 'reference'",
    ),
    (
        "nonstring.jsonl",
        '{"output": "a", "reference": "a"}\n\n{"output": 42, "reference": "b"}\n',
        "nonstring.jsonl line 3: column 'output' must be a string, not a number (42)",
    ),
    (
        "nullref.jsonl",
        '{"output": "a", "reference": null}\n',
        "nullref.jsonl line 1: column 'reference' must be a string or a list of strings, not null",
    ),
    (
        "emptyref.jsonl",
        '{"output": "a", "reference": "  "}\n',
        "emptyref.jsonl line 1: reference answer is empty",
    ),
    ("array.jsonl", '["a", "b"]\n', "array.jsonl line 1: expected a JSON object, got a list"),
    ("empty.jsonl", "", "empty.jsonl: the file has no rows"),
    ("blank.jsonl", "\n\n", "blank.jsonl: the file has no rows"),
    ("empty.csv", "", "empty.csv: the file is empty"),
    ("header.csv", "output,reference\n", "header.csv: the file has no rows"),
    ("nocol.csv", "answer,reference\nx,y\n", "nocol.csv line 1: no column 'output'"),
    (
        "ragged.csv",
        "output,reference\nx,y\nx,y,z\n",
        "ragged.csv line 3: 3 fields where the header has 2",
    ),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_INPUTS)
def test_bad_input_exits_2_with_the_place(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    src = tmp_path / name
    src.write_text(content, encoding="utf-8")
    junit = tmp_path / "junit.xml"
    res = CliRunner().invoke(cli, ["run", str(src), "--junit", str(junit)])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "Traceback" not in res.output
    assert res.output.startswith("error: ")
    assert message in res.output
    assert leftovers(tmp_path) == [] and not junit.exists()


def test_not_utf8_row(tmp_path: Path) -> None:
    src = tmp_path / "latin.jsonl"
    src.write_bytes(
        b'{"output": "ok", "reference": "ok"}\n{"output": "caf\xe9", "reference": "x"}\n'
    )
    res = CliRunner().invoke(cli, ["run", str(src)])
    assert res.exit_code == 2 and "latin.jsonl line 2: not UTF-8 text" in res.output
    csv_src = tmp_path / "latin.csv"
    csv_src.write_bytes(b"output,reference\nok,ok\ncaf\xe9,x\n")
    res = CliRunner().invoke(cli, ["run", str(csv_src)])
    assert res.exit_code == 2 and "latin.csv line 3: not UTF-8 text" in res.output


def test_parquet_with_wrong_types(tmp_path: Path) -> None:
    src = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"output": pa.array([1, 2], pa.int64()), "reference": ["a", "b"]}), src)
    res = CliRunner().invoke(cli, ["run", str(src)])
    assert res.exit_code == 2
    assert "wrong.parquet row 1: column 'output' must be a string, not a number (1)" in res.output
    assert leftovers(tmp_path) == []
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"output": ["a", None], "reference": ["a", "b"]}), nulls)
    res = CliRunner().invoke(cli, ["run", str(nulls)])
    assert (
        res.exit_code == 2
        and "nulls.parquet row 2: column 'output' must be a string, not null" in res.output
    )
    nocol = tmp_path / "nocol.parquet"
    pq.write_table(pa.table({"text": ["a"], "reference": ["a"]}), nocol)
    res = CliRunner().invoke(cli, ["run", str(nocol)])
    assert res.exit_code == 2 and "nocol.parquet schema: no column 'output'" in res.output
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    res = CliRunner().invoke(cli, ["run", str(broken)])
    assert res.exit_code == 2 and "broken.parquet: not a readable Parquet file" in res.output


def test_missing_file_and_unknown_extension(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["run", str(tmp_path / "nope.jsonl")])
    assert res.exit_code == 2 and "input file not found" in res.output
    odd = tmp_path / "cases.txt"
    odd.write_text("x")
    res = CliRunner().invoke(cli, ["run", str(odd)])
    assert res.exit_code == 2 and "--format" in res.output
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    res = CliRunner().invoke(cli, ["run", str(src), "-o", str(tmp_path / "out.txt")])
    assert res.exit_code == 2 and "name it .jsonl, .csv, .tsv or .parquet" in res.output
    res = CliRunner().invoke(cli, ["run", str(src), "-o", str(tmp_path / "no" / "out.jsonl")])
    assert res.exit_code == 2 and "directory" in res.output and "does not exist" in res.output
    assert leftovers(tmp_path) == []


def test_on_error_skip_lists_and_skips_bad_rows(tmp_path: Path) -> None:
    src = tmp_path / "mixed.jsonl"
    src.write_text(
        json.dumps(ROWS[0])
        + "\n"
        + "{oops\n"
        + json.dumps({"output": None, "reference": "x"})
        + "\n"
        + json.dumps(ROWS[2])
        + "\n",
        encoding="utf-8",
    )
    res = invoke("run", str(src), "--on-error", "skip", "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["rows"] == 4 and summary["results"] == 2 and summary["skipped"] == 2
    assert [e["where"] for e in summary["skipped_rows"]] == [f"{src} line 2", f"{src} line 3"]
    assert "malformed JSON" in summary["skipped_rows"][0]["error"]
    out = read_jsonl(tmp_path / "mixed.results.jsonl")
    assert [r["id"] for r in out] == ["eiffel", "water"]
    human = invoke("run", str(src), "--on-error", "skip")
    assert "skipped 2 bad rows" in human.output and "line 2" in human.output


def test_all_rows_bad_with_skip_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text("{x\n{y\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(src), "--on-error", "skip"])
    assert res.exit_code == 2 and "no row could be scored: all 2 rows are bad" in res.output
    assert leftovers(tmp_path) == []


@pytest.mark.process
def test_bad_row_deep_in_a_parallel_run_leaves_nothing(tmp_path: Path) -> None:
    rows = [{"output": f"text {i}", "reference": f"text {i}"} for i in range(500)]
    src = tmp_path / "deep.jsonl"
    lines = [json.dumps(r) for r in rows]
    lines[437] = '{"output": "x", "reference": 3}'
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(simeval.InvalidInput, match=r"deep.jsonl line 438: column 'reference'"):
        runs.run_file(str(src), runs.RunOptions(workers=2, chunk_rows=50))
    assert leftovers(tmp_path) == []


def test_results_file_must_not_overwrite_input(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    res = CliRunner().invoke(cli, ["run", str(src), "-o", str(src)])
    assert res.exit_code == 2 and "would overwrite the input" in res.output
    assert read_jsonl(src) == ROWS


def test_existing_results_file_is_replaced_only_on_success(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    dest = tmp_path / "cases.results.jsonl"
    dest.write_text("previous run\n")
    bad = tmp_path / "cases2.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n{bad\n")
    assert CliRunner().invoke(cli, ["run", str(bad), "-o", str(dest)]).exit_code == 2
    assert dest.read_text() == "previous run\n"
    assert invoke("run", str(src)).exit_code == 0
    assert len(read_jsonl(dest)) == 4


# -- baseline comparison ---------------------------------------------------------------------
def test_baseline_comparison_on_a_hand_built_pair(tmp_path: Path) -> None:
    current = [
        {
            "id": "same",
            "output": "Paris is the capital of France.",
            "reference": "Paris is the capital of France.",
        },  # 1.0, was 1.0
        {
            "id": "better",
            "output": "Water is hydrogen and oxygen.",
            "reference": "Water is made of hydrogen and oxygen.",
        },  # passes now
        {
            "id": "worse",
            "output": "I like trains.",
            "reference": "Tokyo is the capital of Japan.",
        },  # fails now
        {
            "id": "drift",
            "output": "The sun is a star in our solar system.",
            "reference": "The sun is the star at the centre of our solar system.",
        },
        {"id": "fresh", "output": "new", "reference": "new"},
    ]
    scores = {r["id"]: simeval.score(r["output"], r["reference"]) for r in current}
    assert scores["better"] >= 0.8 > scores["worse"]
    baseline = [
        {"id": "same", "score": 1.0, "pass": True},
        {"id": "better", "score": 0.5, "pass": False},
        {"id": "worse", "score": 0.9, "pass": True},
        {"id": "drift", "score": scores["drift"] + 0.01, "pass": scores["drift"] >= 0.8},
        {"id": "gone", "score": 0.7, "pass": False},
    ]
    src = write_jsonl(tmp_path / "now.jsonl", current)
    base = write_jsonl(tmp_path / "base.jsonl", baseline)
    res = invoke("run", str(src), "--baseline", str(base), "--json", "--max-regressions", "1")
    assert res.exit_code == 0, res.output
    b = json.loads(res.output)["baseline"]
    assert (b["improved"], b["regressed"], b["unchanged"], b["new"], b["removed"]) == (
        1,
        1,
        2,
        1,
        1,
    )
    assert b["top_regressions"][0]["case"] == "worse"
    assert b["top_regressions"][0]["passed_before"] and not b["top_regressions"][0]["passed_after"]
    assert "tokyo" in b["top_regressions"][0]["missing_terms"]
    assert b["top_improvements"][0]["case"] == "better"
    assert b["removed_cases"] == ["gone"]
    before = (1.0 + 0.5 + 0.9 + scores["drift"] + 0.01) / 4
    assert b["mean_score_before"] == pytest.approx(before)
    after = (scores["same"] + scores["better"] + scores["worse"] + scores["drift"]) / 4
    assert b["mean_delta"] == pytest.approx(after - before)
    # the regression gate
    assert invoke("run", str(src), "--baseline", str(base), "--max-regressions", "0").exit_code == 1
    # a tolerance of 0 makes the small drop of "drift" a regression too
    res = invoke("run", str(src), "--baseline", str(base), "--tolerance", "0", "--json")
    assert json.loads(res.output)["baseline"]["regressed"] == 2
    human = invoke("run", str(src), "--baseline", str(base))
    assert "1 regressed" in human.output and "regressed worse" in human.output


def test_baseline_from_a_previous_results_file(tmp_path: Path) -> None:
    rows = [
        {"input": f"q{i}", "output": f"answer number {i}", "reference": f"answer number {i}"}
        for i in range(4)
    ]
    src = write_jsonl(tmp_path / "v1.jsonl", rows)
    assert invoke("run", str(src), "-o", str(tmp_path / "v1.results.csv")).exit_code == 0
    rows[2]["output"] = "something else entirely"
    rows.append(rows[0])  # a repeated input pairs with nothing: new
    src2 = write_jsonl(tmp_path / "v2.jsonl", rows)
    res = invoke("run", str(src2), "--baseline", str(tmp_path / "v1.results.csv"), "--json")
    b = json.loads(res.output)["baseline"]
    assert (b["regressed"], b["unchanged"], b["new"], b["removed"]) == (1, 3, 1, 0)
    assert b["comparable"] is True
    other = invoke(
        "run", str(src2), "--baseline", str(tmp_path / "v1.results.csv"), "--json", "--no-stemming"
    )
    assert json.loads(other.output)["baseline"]["comparable"] is False


def test_bad_baseline_file(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    base = write_jsonl(tmp_path / "base.jsonl", [{"id": "x"}])
    res = CliRunner().invoke(cli, ["run", str(src), "--baseline", str(base)])
    assert res.exit_code == 2 and "not a results file" in res.output
    res = CliRunner().invoke(cli, ["run", str(src), "--baseline", str(tmp_path / "no.jsonl")])
    assert res.exit_code == 2 and "not found" in res.output


def test_progress_only_on_a_terminal(tmp_path: Path) -> None:
    from simeval.cli.common import progress_bar

    with progress_bar("x") as progress:  # CliRunner's stderr is not a terminal
        assert progress is None


# -- eval definition files -------------------------------------------------------------------
EVALS_YAML = """\
simeval: 1
evals:
  - name: capital-japan
    input_scope: "What is the capital of Japan?"
    references: ["Tokyo is the capital of Japan.", "Japan's capital city is Tokyo."]
    threshold: 0.7
  - name: eiffel
    references: ["The Eiffel Tower stands in Paris."]
    input_scope: "Where is the Eiffel Tower?"
    threshold: 0.9
  - name: water
    references: ["Water is made of hydrogen and oxygen."]
    input_scope: "Never asked"
    options: {stemming: false}
  - name: retired
    status: archived
    references: ["Anything at all."]
"""


def test_evals_file_matches_rows_by_input_or_id(tmp_path: Path) -> None:
    evals = tmp_path / "evals.yaml"
    evals.write_text(EVALS_YAML, encoding="utf-8")
    rows = [
        # the input scope matches after case and whitespace folding
        {"input": "what is the  CAPITAL of Japan?", "output": "Tokyo is Japan's capital."},
        {"input": "Where is the Eiffel Tower?", "output": "The Eiffel Tower is in Paris."},
        # an id naming an eval wins over the input
        {"id": "water", "input": "H2O?", "output": "Water is hydrogen and oxygen."},
        {"id": "other", "input": "Unrelated?", "output": "No eval scores this row."},
    ]
    src = write_jsonl(tmp_path / "cases.jsonl", rows)
    res = invoke("run", str(src), "--evals", str(evals), "--json", "--allow-unmatched")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    out = read_jsonl(tmp_path / "cases.results.jsonl")
    assert [r["eval"] for r in out] == ["capital-japan", "eiffel", "water"]
    japan = simeval.get_scorer().score_detail(
        "Tokyo is Japan's capital.",
        ["Tokyo is the capital of Japan.", "Japan's capital city is Tokyo."],
        rows[0]["input"],
    )
    assert (out[0]["score"], out[0]["matched_index"]) == japan
    assert out[0]["threshold"] == 0.7 and out[0]["pass"] is (japan[0] >= 0.7)
    eiffel = simeval.score(
        "The Eiffel Tower is in Paris.", "The Eiffel Tower stands in Paris.", rows[1]["input"]
    )
    assert out[1]["score"] == eiffel and out[1]["pass"] is (eiffel >= 0.9)
    # each eval's own scorer options apply
    water = simeval.score(
        "Water is hydrogen and oxygen.",
        "Water is made of hydrogen and oxygen.",
        rows[2]["input"],
        stemming=False,
    )
    assert out[2]["score"] == water
    assert out[2]["fingerprint"] == simeval.get_scorer(stemming=False).fingerprint
    assert summary["rows"] == 4 and summary["results"] == 3 and summary["unmatched_rows"] == 1
    assert set(summary["evals"]) == {"capital-japan", "eiffel", "water"}  # archived: left out
    assert summary["evals"]["eiffel"]["threshold"] == 0.9
    human = invoke("run", str(src), "--evals", str(evals), "--allow-unmatched")
    assert "eval capital-japan: 1 results" in human.output
    assert "1 rows matched no eval" in human.output


def test_rows_that_match_no_eval_are_named_and_fail_the_gate(tmp_path: Path) -> None:
    evals = tmp_path / "evals.yaml"
    evals.write_text(EVALS_YAML, encoding="utf-8")
    rows = [
        {"input": "Where is the Eiffel Tower?", "output": "The Eiffel Tower is in Paris."},
        {"id": "other", "input": "Unrelated?", "output": "No eval scores this row."},
        {"input": "Who wrote Hamlet?", "output": "Shakespeare."},
    ]
    src = write_jsonl(tmp_path / "cases.jsonl", rows)
    res = invoke("run", str(src), "--evals", str(evals), "--json")
    assert res.exit_code == 1, res.output
    summary = json.loads(res.output)
    assert summary["unmatched_rows"] == 2 and summary["ok"] is False
    assert summary["unmatched"] == [
        {"where": f"{src} line 2", "id": "other", "input": "Unrelated?"},
        {"where": f"{src} line 3", "id": None, "input": "Who wrote Hamlet?"},
    ]
    gate = {"gate": "unmatched-rows", "limit": 0, "value": 2, "passed": False}
    assert summary["gates"] == [gate]
    human = invoke("run", str(src), "--evals", str(evals))
    assert human.exit_code == 1
    assert "2 rows matched no eval:" in human.output
    assert f"{src} line 2: other" in human.output
    assert f"{src} line 3: Who wrote Hamlet?" in human.output
    assert "gate unmatched-rows 0: FAILED (value 2)" in human.output
    allowed = invoke("run", str(src), "--evals", str(evals), "--json", "--allow-unmatched")
    assert allowed.exit_code == 0, allowed.output
    assert json.loads(allowed.output)["gates"] == [] and "unmatched" in allowed.output
    # the library's summary has them too, and a run with every row matched passes the gate
    summary_obj = runs.run_request(
        runs.RunRequest(str(src), evals_file=str(evals), write_results=False)
    )
    assert [u.where for u in summary_obj.unmatched or []] == [f"{src} line 2", f"{src} line 3"]
    matched = write_jsonl(tmp_path / "matched.jsonl", rows[:1])
    ok = invoke("run", str(matched), "--evals", str(evals), "--json")
    assert ok.exit_code == 0 and json.loads(ok.output)["gates"][0]["passed"] is True
    refs = invoke("run", str(matched), "--allow-unmatched")
    assert refs.exit_code == 2 and "--allow-unmatched needs --evals" in refs.output


def test_unscoped_eval_scores_every_row(tmp_path: Path) -> None:
    evals = tmp_path / "evals.json"
    evals.write_text(json.dumps([{"name": "any", "reference": "Paris is in France."}]))
    rows = [{"output": "Paris is in France."}, {"output": "x"}]
    src = write_jsonl(tmp_path / "cases.jsonl", rows)
    res = invoke("run", str(src), "--evals", str(evals), "--json")
    summary = json.loads(res.output)
    assert summary["results"] == 2 and summary["passed"] == 1 and summary["unmatched_rows"] == 0


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ("evals:\n  - name: a\n    references: [x\n", [], "invalid YAML in"),
        ("evals:\n  - name: a\n    references: []\n", [], "eval 1 ('a')"),
        ("evals:\n  - name: a\n    reference: x\n    threshold: 2\n", [], "threshold"),
        ("evals:\n  - name: a\n    reference: x\n", ["--reference-col", "gold"], "not both"),
        ("evals:\n  - name: a\n    reference: x\n", ["-t", "0.5"], "own threshold"),
        ("evals:\n  - name: a\n    reference: x\n", ["--no-stemming"], "own threshold"),
        ("evals:\n  - name: a\n    status: archived\n    reference: x\n", [], "no evals to run"),
    ],
)
def test_bad_evals_file(tmp_path: Path, content: str, args: list[str], message: str) -> None:
    evals = tmp_path / "evals.yaml"
    evals.write_text(content, encoding="utf-8")
    src = write_jsonl(tmp_path / "cases.jsonl", [{"output": "x"}])
    res = CliRunner().invoke(cli, ["run", str(src), "--evals", str(evals), *args])
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: ") and message in res.output
    assert leftovers(tmp_path) == []
    missing = CliRunner().invoke(cli, ["run", str(src), "--evals", str(tmp_path / "no.yaml")])
    assert missing.exit_code == 2 and "evals file not found" in missing.output


# -- stored runs -----------------------------------------------------------------------------
@pytest.mark.process
def test_store_a_run_and_compare_with_it_later(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    from simeval.service import Service

    db = new_sqlite("evals.db")
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    # no stored run of this name yet: run:latest is an empty baseline, every case is new
    res = invoke("run", str(src), "--store", "--db", db, "--baseline", "run:latest", "--json")
    assert res.exit_code == 0, res.output
    first = json.loads(res.output)
    assert first["baseline"]["new"] == 4 and first["baseline"]["regressed"] == 0
    assert "no stored run named 'cases.jsonl'" in first["baseline"]["baseline"]
    with Service(db) as svc:
        run = svc.get_run(first["run_id"])
        assert run.name == "cases.jsonl" and run.results == 4
        assert run.summary["status"] == "complete" and run.summary["passed"] == 3
        stored = sorted(svc.list_results(run_id=run.id, limit=10), key=lambda r: r.id)
        assert [r.score for r in stored] == [expected(r)[0] for r in ROWS]
        assert stored[1].input == ROWS[1]["input"] and not stored[1].passed
        assert stored[1].matched_reference == ROWS[1]["reference"][0]
        explanation = stored[1].explanation or {}
        assert "tokyo" in [t["term"] for t in explanation["missing"]]  # the studio's shape
        assert explanation["case"]["id"] == "tokyo"
    # the next run regresses one case: compared with the stored run by id
    changed = [dict(r) for r in ROWS]
    changed[0]["output"] = "Something else entirely."
    write_jsonl(src, changed)
    res = invoke(
        "run",
        str(src),
        "--store",
        "--db",
        db,
        "--baseline",
        "run:latest",
        "--max-regressions",
        "0",
        "--json",
    )
    assert res.exit_code == 1, res.output
    second = json.loads(res.output)
    b = second["baseline"]
    assert (b["regressed"], b["unchanged"], b["new"], b["removed"]) == (1, 3, 0, 0)
    assert b["top_regressions"][0]["case"] == "eiffel"
    assert b["baseline"].startswith(f"stored run {first['run_id']} (cases.jsonl")
    # a stored run by id; a named run
    res = invoke("run", str(src), "--db", db, "--baseline", f"run:{first['run_id']}", "--json")
    assert json.loads(res.output)["baseline"]["regressed"] == 1
    res = invoke("run", str(src), "--store", "--db", db, "--run-name", "nightly")
    assert "stored as run 3 (nightly)" in res.output
    with Service(db) as svc:
        runs_ = svc.list_runs()
        assert [r.name for r in runs_] == ["nightly", "cases.jsonl", "cases.jsonl"]
        assert runs_[1].summary["gates"][0]["gate"] == "max-regressions"


@pytest.mark.process
def test_store_with_evals_links_results_to_stored_evals(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    from simeval.service import Service

    db = new_sqlite("evals.db")
    evals = tmp_path / "evals.yaml"
    evals.write_text(EVALS_YAML, encoding="utf-8")
    with Service(db) as svc:
        svc.import_evals(str(evals))
    src = write_jsonl(
        tmp_path / "cases.jsonl",
        [{"input": "Where is the Eiffel Tower?", "output": "The Eiffel Tower is in Paris."}],
    )
    assert invoke("run", str(src), "--evals", str(evals), "--store", "--db", db).exit_code == 0
    with Service(db) as svc:
        (result,) = svc.list_results(eval_name="eiffel")
        assert result.run_id is not None and result.eval_name == "eiffel"


@pytest.mark.process
def test_bad_input_stores_nothing(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    from simeval.service import Service

    db = new_sqlite("evals.db")
    src = tmp_path / "cases.jsonl"
    src.write_text(json.dumps(ROWS[0]) + "\n{broken\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(src), "--store", "--db", db])
    assert res.exit_code == 2 and "cases.jsonl line 2: malformed JSON" in res.output
    with Service(db) as svc:
        assert svc.list_runs() == []
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baseline", "run:abc"], "give run:ID or run:latest"),
        (["--baseline", "run:99"], "no run with id 99"),
        (["--run-name", "x"], "--run-name needs --store"),
    ],
)
def test_bad_stored_baseline(tmp_path: Path, args: list[str], message: str) -> None:
    src = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    res = CliRunner().invoke(cli, ["run", str(src), "--db", str(tmp_path / "e.db"), *args])
    assert res.exit_code == 2 and message in res.output, res.output
    assert leftovers(tmp_path) == []


def test_progress_bar_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from simeval.cli import common as cli_common

    screen = io.StringIO()
    monkeypatch.setattr(cli_common, "err_console", Console(file=screen, force_terminal=True))
    rows = [{"output": f"text {i}", "reference": f"text {i}"} for i in range(3000)]
    src = write_jsonl(tmp_path / "cases.jsonl", rows)
    res = invoke("run", str(src), "--workers", "1")
    assert res.exit_code == 0
    assert "scoring cases.jsonl" in screen.getvalue() and "100%" in screen.getvalue()


def test_plain_tsv_with_literal_quotes(tmp_path: Path) -> None:
    src = tmp_path / "pairs.tsv"
    src.write_text(
        "label\toutput\treference\n"
        '1\t"We are at war.\t"We are at war," he said.\n'
        "0\tCats sleep.\tDogs bark.\n",
        encoding="utf-8",
    )
    res = CliRunner().invoke(cli, ["run", str(src)])
    assert res.exit_code == 2 and "pairs.tsv line 2: 2 fields where the header has 3" in res.output
    assert "--no-quoting" in res.output
    res = invoke("run", str(src), "--no-quoting", "--json", "--no-results")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["rows"] == 2
    worst = {w["where"].rsplit(" ", 1)[1]: w for w in summary["worst"]}
    assert worst["2"]["output"] == '"We are at war.'  # the quote is text
    assert worst["2"]["score"] == simeval.score('"We are at war.', '"We are at war," he said.')
