"""`simeval bench` on small files in the sts-dev layout (the real data is not in the repo)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from simeval.cli import cli
from simeval.scoring.bench import (
    classify,
    median_rounds,
    pearson,
    ranks,
    roc_auc,
    spearman,
    synthetic_chinese,
    with_quotes,
)

STS = [
    ("5.0", "A man is playing a guitar.", "A man plays the guitar."),
    ("4.2", "Stocks fell 3 percent on Monday.", "On Monday, stocks dropped 3 percent."),
    ("", "unlabeled rows are skipped", "yes"),
    ("2.0", "A woman is slicing an onion.", "A man is cutting a tomato."),
    ("0.5", 'He said "no" to the offer.', "The cat sleeps on the warm mat."),
    ("3.1", "The president visited China.", "China was visited by the president last week."),
]


def make_data(root) -> None:
    (root / "2012.toy.test.tsv").write_text(
        "\n".join("\t".join(r) for r in STS) + "\n", encoding="utf-8"
    )
    (root / "sick.toy.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        "1\tA kid plays\tA child is playing\t4.5\tNEUTRAL\n"
        "2\tA dog runs\tA man cooks food\t1.2\tNEUTRAL\n"
        "3\tA cat sleeps\tA cat is sleeping\t4.9\tNEUTRAL\n",
        encoding="utf-8",
    )
    (root / "msrp.toy.tsv").write_bytes(
        (
            "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
            "1\t1\t2\tThe cat sat on the mat.\tOn the mat sat the cat.\n"
            "0\t3\t4\tShares rose 5 percent.\tThe weather was cold.\n"
            "1\t5\t6\tHe bought a car.\tHe purchased a car.\n"
            "0\t7\t8\tA bird sings.\tThe bank closed early.\n"
        ).encode()
        + b"0\t9\t10\tbad \xff byte\tother text\n"  # a stray byte, as in the real files
    )


def test_quality_report(tmp_path) -> None:
    make_data(tmp_path)
    res = CliRunner().invoke(cli, ["bench", "quality", "--data", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    default = report["configs"]["default"]
    assert default["sts_pooled"]["pairs"] == 5
    assert -1 <= default["sts_pooled"]["pearson"] <= 1
    assert default["files"]["sick.toy"]["pairs"] == 3
    msrp = default["files"]["msrp.toy"]
    assert msrp["pairs"] == 5 and 0 <= msrp["roc_auc"] <= 1
    assert set(msrp["at_0.80"]) >= {"accuracy", "f1", "threshold"}
    assert report["options"]["pair"]["idf"] == "pair"
    table = CliRunner().invoke(cli, ["bench", "quality", "--data", str(tmp_path)])
    assert "STS pooled" in table.output and "default - pair" in table.output


def test_quality_cjk_and_answers_beside_the_previous_default(tmp_path) -> None:
    (tmp_path / "cjk").mkdir()
    (tmp_path / "answers").mkdir()
    (tmp_path / "cjk" / "zh-toy.tsv").write_text(
        "5\t东京是日本的首都。\t日本的首都是东京。\n"
        "1\t北京是中国的首都\t北京是中国最大的沙漠\n"
        "0\t一个女人在弹吉他。\t猫在睡觉。\n",
        encoding="utf-8",
    )
    (tmp_path / "cjk" / "zh-lcqmc-toy.tsv").write_text(
        "1\t人和畜生的区别是什么？\t人与畜生的区别是什么！\n0\t谁知道她是谁\t这是什么歌\n",
        encoding="utf-8",
    )
    (tmp_path / "answers" / "graded.csv").write_text(
        "id,question,desired_answer,student_answer,score_avg\n"
        "1,What does a compiler do?,It translates source code to machine code.,"
        "A compiler is what does compiling.,1\n"
        "2,What does a compiler do?,It translates source code to machine code.,"
        "Translates source code into machine code.,5\n"
        "3,What is a stack?,A last-in first-out list.,A list where the last in is first out.,4.5\n",
        encoding="utf-8",
    )
    args = ["bench", "quality", "--data", str(tmp_path / "cjk")]
    res = CliRunner().invoke(cli, [*args, "--data", str(tmp_path / "answers"), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert list(report["configs"]) == ["default", "0.1.0", "cosine", "previous", "pair"]
    at = report["configs"]["default"]["files"]["zh-toy"]["at_0.80"]
    assert at["same_content"] == "rated >= 4 of 5" and at["positives"] == 1
    assert at["balanced_accuracy"] == 0.5 * (at["pass_same"] + 1 - at["pass_other"])
    assert list(at["band_mean_grade"]) == ["< 0.70", "0.70-0.79", "0.80-0.89", "0.90+"]
    lcqmc = report["configs"]["cosine"]["files"]["zh-lcqmc-toy"]["at_0.80"]
    assert lcqmc["same_content"].startswith("labelled 1") and "f1" in lcqmc
    assert report["options"]["previous"]["tokenizer"] == "words"
    default, previous = report["configs"]["default"], report["configs"]["previous"]
    assert default["files"]["zh-toy"]["pearson"] > previous["files"]["zh-toy"]["pearson"]
    assert 0 <= default["files"]["zh-lcqmc-toy"]["roc_auc"] <= 1
    graded = default["files"]["graded"]
    assert graded["pairs"] == 3 and {"pearson", "pearson_no_input"} <= set(graded)
    assert previous["files"]["graded"]["pearson"] == previous["files"]["graded"]["pearson_no_input"]
    assert "sts_pooled" not in default
    table = CliRunner().invoke(cli, args)
    assert table.exit_code == 0 and "zh-toy" in table.output
    assert "mean grade per band" in table.output


def test_quality_bad_directory(tmp_path) -> None:
    res = CliRunner().invoke(cli, ["bench", "quality", "--data", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "data directory not found" in res.output
    res = CliRunner().invoke(cli, ["bench", "quality", "--data", str(tmp_path)])
    assert res.exit_code == 2 and "no benchmark files" in res.output


@pytest.mark.process
def test_speed_report_small() -> None:
    res = CliRunner().invoke(
        cli, ["bench", "speed", "--pairs", "5000", "--single", "100", "--json"]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["batch"]["pairs"] == 5000
    assert report["single"]["speedup_vs_sklearn_per_pair"] > 0
    latency = report["latency"]
    assert latency["statistic"] == "median of interleaved rounds"
    assert set(latency["ratios"]) == {
        "default_vs_cosine_scale",
        "default_vs_previous_warm",
        "default_vs_previous_cold",
        "after_1mb_vs_before",
        "curly_vs_ascii_quotes",
        "chinese_100_chars_vs_english_100_words",
    }
    assert all(r > 0 for r in latency["ratios"].values())  # figures, not timing assertions


@pytest.mark.slow
def test_benchmark_texts() -> None:
    zh = synthetic_chinese(3)
    assert [len(t) for t in zh] == [100, 100, 100] and zh == synthetic_chinese(3)
    assert with_quotes("a b c", curly=True, every=2) == "“a” b “c”"
    assert with_quotes("a b c", curly=False, every=2) == '"a" b "c"'
    calls: list[int] = []
    got = median_rounds({"x": calls.append, "y": lambda i: None}, 2, 3)
    assert calls == [0, 1] * 3 and set(got) == {"x", "y"}


def test_statistics_helpers() -> None:
    assert ranks([3.0, 1.0, 3.0]) == [2.5, 1.0, 2.5]
    assert pearson([1, 2, 3], [2, 4, 6]) == 1.0
    assert spearman([1, 2, 3], [1, 4, 9]) == 1.0
    assert roc_auc([0.9, 0.8, 0.1, 0.2], [1, 1, 0, 0]) == 1.0
    assert roc_auc([0.5, 0.5], [1, 0]) == 0.5
    m = classify([0.9, 0.4, 0.7], [1, 0, 0], 0.6)
    assert m["accuracy"] == 2 / 3 and m["precision"] == 0.5 and m["recall"] == 1.0


def test_quality_judged_answers_contradictions_and_padding(tmp_path) -> None:
    rows = [
        ("Who wrote Hamlet?", "Hamlet was written by William Shakespeare around 1600.", True),
        ("Who wrote Hamlet?", "Hamlet was written by Christopher Marlowe.", False),
        ("Who wrote Hamlet?", "I don't know.", False),
        ("When did the war end?", "It ended in 1945, with the surrender of Japan.", True),
    ]
    gold = {
        "Who wrote Hamlet?": ["William Shakespeare", "Shakespeare"],
        "When did the war end?": ["1945"],
    }
    with (tmp_path / "toy.jsonl").open("w", encoding="utf-8") as fh:
        for i, (q, out, ok) in enumerate(rows):
            system = "short" if i % 2 else "long"
            row = {"input": q, "output": out, "reference": gold[q], "correct": ok, "system": system}
            fh.write(json.dumps(row) + "\n")
    (tmp_path / "sick.toy.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        "1\tA man is playing a guitar\tA man is not playing a guitar\t3.5\tCONTRADICTION\n"
        "2\tA man is playing a guitar\tA man plays the guitar\t4.8\tENTAILMENT\n",
        encoding="utf-8",
    )
    res = CliRunner().invoke(cli, ["bench", "quality", "--data", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    judged = report["configs"]["default"]["judged"]["toy"]
    assert judged["answers"] == 4 and judged["systems"]["all"]["accuracy"] == 1.0
    assert judged["systems"]["all"]["right_rate"] == 0.5
    assert set(judged["systems"]) == {"all", "short", "long"}
    sick = report["configs"]["default"]["files"]["sick.toy"]["entailment"]
    assert sick == {
        "contradictions": 1,
        "contradictions_pass": 0.0,
        "entailments_rated_4": 1,
        "entailments_pass": 1.0,
    }
    assert (
        report["configs"]["0.1.0"]["files"]["sick.toy"]["entailment"]["contradictions_pass"] == 1.0
    )
    table = CliRunner().invoke(cli, ["bench", "quality", "--data", str(tmp_path)])
    assert "toy / short" in table.output and "contradictions 0.000" in table.output
