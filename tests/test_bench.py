"""`simeval bench` on small files in the sts-dev layout (the real data is not in the repo)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from simeval.bench import classify, pearson, ranks, roc_auc, spearman
from simeval.cli import cli

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


def test_quality_bad_directory(tmp_path) -> None:
    res = CliRunner().invoke(cli, ["bench", "quality", "--data", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "data directory not found" in res.output
    res = CliRunner().invoke(cli, ["bench", "quality", "--data", str(tmp_path)])
    assert res.exit_code == 2 and "no STS files" in res.output


def test_speed_report_small() -> None:
    res = CliRunner().invoke(
        cli, ["bench", "speed", "--pairs", "5000", "--single", "100", "--json"]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["batch"]["pairs"] == 5000
    assert report["single"]["speedup_vs_sklearn_per_pair"] > 0


def test_statistics_helpers() -> None:
    assert ranks([3.0, 1.0, 3.0]) == [2.5, 1.0, 2.5]
    assert pearson([1, 2, 3], [2, 4, 6]) == 1.0
    assert spearman([1, 2, 3], [1, 4, 9]) == 1.0
    assert roc_auc([0.9, 0.8, 0.1, 0.2], [1, 1, 0, 0]) == 1.0
    assert roc_auc([0.5, 0.5], [1, 0]) == 0.5
    m = classify([0.9, 0.4, 0.7], [1, 0, 0], 0.6)
    assert m["accuracy"] == 2 / 3 and m["precision"] == 0.5 and m["recall"] == 1.0
