"""`simeval score` through the CLI runner."""

from __future__ import annotations

import json

from click.testing import CliRunner

import simeval
from simeval.cli import cli


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def test_pass_and_fail_exit_codes() -> None:
    ok = run("score", "Paris is the capital of France", "The capital of France is Paris")
    assert ok.exit_code == 0 and "PASS" in ok.output
    bad = run("score", "bananas are yellow", "The capital of France is Paris")
    assert bad.exit_code == 1 and "FAIL" in bad.output


def test_threshold_and_json_and_explain() -> None:
    res = run(
        "score",
        "Paris is a city",
        "Paris is the capital of France",
        "-t",
        "0.5",
        "--json",
        "--explain",
    )
    data = json.loads(res.output)
    assert data["threshold"] == 0.5 and data["pass"] is (data["score"] >= 0.5)
    assert res.exit_code == (0 if data["pass"] else 1)
    assert data["explanation"]["missing"][0]["term"] == "capital"
    assert len(data["fingerprint"]) == 12 and data["options"]["idf"] == "background"
    text = run("score", "Paris is a city", "Paris is the capital of France", "--explain")
    assert "missing from output: capital" in text.output.replace("\n", " ")


def test_files_stdin_and_several_references(tmp_path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("water boils at 100 degrees", encoding="utf-8")
    ref = tmp_path / "ref.txt"
    ref.write_text("Water boils at 100 degrees Celsius.", encoding="utf-8")
    res = run(
        "score",
        "--output-file",
        str(out),
        "the sky is blue",
        "--reference-file",
        str(ref),
        "--json",
    )
    assert json.loads(res.output)["matched_reference"] == 1
    res = run("score", "-", "the sky is blue", input="the sky is blue\n")
    assert res.exit_code == 0 and res.output.startswith("1.0000 PASS")


def test_options_flags() -> None:
    a = json.loads(run("score", "cats running", "cat runs", "--json").output)
    b = json.loads(
        run(
            "score",
            "cats running",
            "cat runs",
            "--no-stemming",
            "--prefix",
            "0",
            "--idf",
            "pair",
            "--json",
        ).output
    )
    assert a["score"] == 1.0 and b["score"] == 0.0 and a["fingerprint"] != b["fingerprint"]


def test_bad_input_is_one_line_exit_2(tmp_path) -> None:
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9".encode("latin-1"))
    cases = [
        (["score", "a", "b", "-t", "1.5"], "threshold must be a number in [0, 1]"),
        (["score", "a", "b", "-t", "nan"], "threshold must be a number in [0, 1]"),
        (["score", "a", "b", "-t", "-0.1"], "threshold must be a number in [0, 1]"),
        (["score", "a", ""], "reference answer is empty"),
        (["score", "a"], "missing REFERENCE"),
        (["score"], "missing OUTPUT"),
        (["score", "a", "b", "--language", "xx"], "unsupported language 'xx'"),
        (["score", "a", "b", "--ngram", "7"], "option 'ngram' must be in [1, 3]"),
        (["score", "--output-file", str(tmp_path / "nope.txt"), "b"], "output file not found"),
        (["score", "--output-file", str(latin1), "b"], "is not UTF-8 text"),
        (["score", "a", "b", "--idf", str(tmp_path / "t.json")], "IDF table file not found"),
    ]
    for args, message in cases:
        res = run(*args)
        assert res.exit_code == 2, (args, res.output)
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert message in res.output, (args, res.output)
        assert "Traceback" not in res.output
        assert len(lines) <= 3, res.output  # click usage errors add a usage line


def test_help_has_an_example() -> None:
    res = run("score", "--help")
    assert res.exit_code == 0 and "Examples:" in res.output


def test_input_and_the_new_options() -> None:
    out, ref = "A prototype program is a prototype program.", "A prototype simulates the product."
    question = "What is the role of a prototype program?"
    plain = json.loads(CliRunner().invoke(cli, ["score", out, ref, "--json"]).output)
    res = CliRunner().invoke(cli, ["score", out, ref, "-i", question, "--json", "--explain"])
    asked = json.loads(res.output)
    assert asked["score"] == simeval.score(out, ref, question) < plain["score"]
    assert "prototype" in asked["explanation"]["demoted"]
    same = CliRunner().invoke(
        cli, ["score", out, ref, "-i", question, "--input-weight", "1", "--no-answer"]
    )
    assert same.output.startswith(f"{plain['score']:.4f}")
    res = CliRunner().invoke(
        cli, ["score", "It is not valid", "It is valid", "--negation", "0.5", "--json"]
    )
    assert json.loads(res.output)["score"] == simeval.score(
        "It is not valid", "It is valid", negation=0.5
    )
    bad = CliRunner().invoke(cli, ["score", "a", "b", "--negation", "2"])
    assert bad.exit_code == 2 and "negation" in bad.output
