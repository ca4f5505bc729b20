"""`simeval run --dask`: the same numbers on a Dask cluster as in a local run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from simeval import runs
from simeval.cli import cli
from simeval.errors import InvalidInput
from simeval.scoring.bench import synthetic_texts

distributed = pytest.importorskip("dask.distributed")  # the optional extra: simeval[dask]


def make_cases(path: Path, n: int) -> Path:
    texts = synthetic_texts(n + 50, words=30, seed=9)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            refs = [texts[(i * 7 + 3) % n], texts[i]] if i % 5 == 0 else texts[(i * 3 + 1) % n]
            fh.write(json.dumps({"id": i, "output": texts[i], "reference": refs}) + "\n")
    return path


@pytest.mark.process
@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_dask_cluster_gives_the_local_numbers(tmp_path: Path, processes: bool) -> None:
    src = make_cases(tmp_path / "cases.jsonl", 2300)  # three chunks of the CLI's 1000 rows
    local_out, dask_out = tmp_path / "local.jsonl", tmp_path / "dask.jsonl"
    local = CliRunner().invoke(
        cli, ["run", str(src), "--workers", "1", "-o", str(local_out), "--json"]
    )
    assert local.exit_code == 0, local.output
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=None
    ) as cluster:
        remote = CliRunner().invoke(
            cli,
            ["run", str(src), "--dask", cluster.scheduler_address, "-o", str(dask_out), "--json"],
        )
    assert remote.exit_code == 0, remote.output
    assert dask_out.read_bytes() == local_out.read_bytes()  # every score, in input order
    a, b = json.loads(local.output), json.loads(remote.output)
    for key in ("rows", "results", "passed", "mean_score", "worst", "most_missing"):
        assert a[key] == b[key]
    assert b["dask"] == cluster.scheduler_address


@pytest.mark.process
def test_dask_reports_bad_rows_like_a_local_run(tmp_path: Path) -> None:
    src = make_cases(tmp_path / "cases.jsonl", 120)
    lines = src.read_text().splitlines()
    lines[77] = '{"id": 77, "output": 5, "reference": "x"}'
    src.write_text("\n".join(lines) + "\n")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        with pytest.raises(InvalidInput, match=r"cases.jsonl line 78: column 'output'"):
            runs.run_file(str(src), runs.RunOptions(dask=cluster.scheduler_address, chunk_rows=20))
        summary = runs.run_file(
            str(src),
            runs.RunOptions(
                dask=cluster.scheduler_address, chunk_rows=20, on_error="skip", write_results=False
            ),
        )
    assert summary.skipped == 1 and summary.results == 119
    assert not list(tmp_path.glob("*.results.*")) and not list(tmp_path.glob(".*tmp"))
