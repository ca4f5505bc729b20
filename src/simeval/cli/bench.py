"""``simeval bench``: the quality and speed benchmarks."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from simeval.cli.common import Group, console, err_console, json_flag, print_json
from simeval.scoring import bench as bench_mod


@click.group(cls=Group)
def bench() -> None:
    """Quality and speed benchmarks.

    \b
    Examples:
        simeval bench quality --data ../shared/data/sts-dev --data ../shared/data/cjk-dev
        simeval bench speed --pairs 100000
    """


@bench.command()
@click.option(
    "--data",
    "data_dirs",
    required=True,
    multiple=True,
    help="Data directory (sts-dev, cjk-dev or answers-dev layout); repeatable.",
)
@json_flag("Print the report as JSON.")
def quality(data_dirs: tuple[str, ...], as_json: bool) -> None:
    """Agreement with human judgements: the default (the bands scale) beside its raw cosine,
    the previous default and the naive `pair` baseline, in one run; per file, at 0.80, the
    shares of "same content" pairs and of the others that pass, and balanced accuracy. Graded
    answers with a question column are scored with the question and without.

    \b
    Example:
        simeval bench quality --data ../shared/data/sts-dev --data ../shared/data/cjk-dev \\
            --data ../shared/data/answers-dev --json
    """
    with err_console.status("scoring") as status:
        report = bench_mod.quality(list(data_dirs), progress=lambda m: status.update(m))
    if as_json:
        print_json(report)
        return
    names = list(report["configs"])
    table = Table(
        title="Pearson / Spearman (STS, SICK, CJK); ROC AUC, accuracy (MSRP, LCQMC); "
        "Pearson with the question / without (answers)"
    )
    table.add_column("file")
    for n in names:
        table.add_column(n, justify="right")
    first = report["configs"][names[0]]["files"]
    for f in first:
        cells = []
        for n in names:
            e = report["configs"][n]["files"][f]
            if "pearson_no_input" in e:
                cells.append(f"{e['pearson']:.3f} / no input {e['pearson_no_input']:.3f}")
            elif "roc_auc" in e:
                cells.append(
                    f"AUC {e['roc_auc']:.3f} acc {e['best_accuracy']['accuracy']:.3f}"
                    f"@{e['best_accuracy']['threshold']:.2f} / "
                    f"{e['at_0.80']['accuracy']:.3f}@0.80"
                )
            else:
                cells.append(f"{e['pearson']:.3f} / {e['spearman']:.3f}")
        table.add_row(f, *cells)
    pooled = "sts_pooled" in report["configs"][names[0]]
    if pooled:
        table.add_row(
            "STS pooled",
            *(
                f"[bold]{report['configs'][n]['sts_pooled']['pearson']:.3f}[/bold] / "
                f"{report['configs'][n]['sts_pooled']['spearman']:.3f}"
                for n in names
            ),
        )
    console.print(table)
    console.print(_at_default_table(report))
    for extra in (_judged_table(report), _checks_table(report)):
        if extra is not None:
            console.print(extra)
    for other in ("previous", "pair"):
        base = report["configs"].get(other)
        if base and pooled:
            d = (
                report["configs"]["default"]["sts_pooled"]["pearson"]
                - base["sts_pooled"]["pearson"]
            )
            console.print(f"default - {other}, pooled STS Pearson: {d:+.3f}")


def _judged_table(report: dict[str, Any]) -> Table | None:
    """Answers judged right or wrong by people: per file and system, the accuracy of pass/fail
    at 0.80 and the pass rate beside the share judged right, for the default and 0.1.0; the
    lexical match (a gold answer inside the answer) beside them."""
    configs = report["configs"]
    names = [n for n in ("default", "0.1.0") if n in configs and "judged" in configs[n]]
    if not names:
        return None
    table = Table(
        title="Judged answers at 0.80: accuracy (pass rate vs share judged right); "
        "lexical: a normalised gold answer inside the answer"
    )
    table.add_column("file / system")
    for n in names:
        table.add_column(n, justify="right")
    table.add_column("lexical", justify="right")
    for f, rep in configs[names[0]]["judged"].items():
        for system, first in rep["systems"].items():
            cells = []
            for n in names:
                e = configs[n]["judged"][f]["systems"][system]
                cells.append(
                    f"[bold]{e['accuracy']:.3f}[/bold] ({e['pass_rate']:.3f} vs "
                    f"{e['right_rate']:.3f})"
                )
            table.add_row(f"{f} / {system}", *cells, f"{first['lexical_accuracy']:.3f}")
    return table


def _checks_table(report: dict[str, Any]) -> Table | None:
    """SICK's contradictions and entailments passing at 0.80, and wrong graded answers padded
    with ten answers to other questions (pass rate before -> after, share of scores raised)."""
    configs = report["configs"]
    names = [n for n in ("default", "0.1.0") if n in configs]
    rows: list[tuple[str, list[str]]] = []
    for f, first in configs[names[0]]["files"].items():
        if "entailment" in first:
            cells = []
            for n in names:
                e = configs[n]["files"][f]["entailment"]
                cells.append(
                    f"contradictions {_share(e['contradictions_pass'])}, "
                    f"entailments >= 4 {_share(e['entailments_pass'])}"
                )
            rows.append((f"{f}: pass at 0.80", cells))
        if first.get("padding", {}).get("wrong_answers"):
            cells = []
            for n in names:
                e = configs[n]["files"][f]["padding"]
                cells.append(
                    f"pass {e['pass_before']:.3f} -> {e['pass_after']:.3f}, "
                    f"raised {e['raised']:.3f}"
                )
            rows.append((f"{f}: wrong answers padded", cells))
    if not rows:
        return None
    table = Table(title="Contradictions and padding")
    table.add_column("check")
    for n in names:
        table.add_column(n, justify="right")
    for label, cells in rows:
        table.add_row(label, *cells)
    return table


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _at_default_table(report: dict[str, Any]) -> Table:
    """Per file, at the default threshold 0.80: of the pairs people judged "same content",
    the share that pass; of the others, the share that pass; balanced accuracy; and the mean
    human grade in each strictness band of the default's scores."""
    configs = report["configs"]
    names = [n for n in ("default", "cosine") if n in configs] or list(configs)
    table = Table(
        title="At 0.80: pass same content / pass others / balanced accuracy (same content: "
        "rated >= 4 of 5; MSRP, LCQMC: labelled 1); mean grade per band < .70, .70, .80, .90+"
    )
    table.add_column("file")
    for n in names:
        table.add_column(n, justify="right")
    table.add_column(f"{names[0]}: mean grade per band", justify="right")
    rows = [(f, configs[n]["files"][f]["at_0.80"]) for n in names[:1] for f in configs[n]["files"]]
    if "sts_pooled" in configs[names[0]]:
        rows.append(("STS pooled", configs[names[0]]["sts_pooled"]["at_0.80"]))
    for f, first in rows:
        cells = []
        for n in names:
            where = configs[n]["sts_pooled"] if f == "STS pooled" else configs[n]["files"][f]
            e = where["at_0.80"]
            cell = f"{e['pass_same']:.3f} / {e['pass_other']:.3f} / [bold]"
            cell += f"{e['balanced_accuracy']:.3f}[/bold]"
            if "f1" in e:  # a 0/1 file: its accuracy at 0.80 too
                cell += f", acc {e['accuracy']:.3f}"
            cells.append(cell)
        means = " ".join(
            "-" if m is None else f"{m:.2f}" for m in first["band_mean_grade"].values()
        )
        table.add_row(f, *cells, means + ("" if first["band_means_rising"] else " (not rising)"))
    return table


@bench.command()
@click.option("--pairs", default=100_000, show_default=True, help="Pairs in the batch test.")
@click.option("--single", default=2000, show_default=True, help="Pairs in the latency test.")
@click.option(
    "--workers", type=int, default=None, help="Processes for score_many (default: cores)."
)
@json_flag("Print the report as JSON.")
def speed(pairs: int, single: int, workers: int | None, as_json: bool) -> None:
    """Latency and throughput against scikit-learn and the previous default, in one run.

    \b
    Example:
        simeval bench speed --pairs 100000
    """
    with err_console.status("timing") as status:
        report = bench_mod.speed(pairs, single, workers, progress=lambda m: status.update(m))
    if as_json:
        print_json(report)
        return
    s: dict[str, Any] = report["single"]
    b: dict[str, Any] = report["batch"]
    console.print(
        f"single pair (100 words each): simeval {s['simeval_us']:.1f} us, "
        f"tokenising only {s['tokenize_only_us']:.1f} us, "
        f"scikit-learn per pair {s['sklearn_per_pair_us']:.0f} us"
    )
    console.print(
        f"  {s['speedup_vs_sklearn_per_pair']:.0f}x faster than scikit-learn per pair;"
        f" {s['ratio_to_tokenize_only']:.2f}x the time of tokenising only"
    )
    lat: dict[str, Any] = report["latency"]
    us, r = lat["us"], lat["ratios"]
    console.print(
        f"medians of {lat['rounds']} interleaved rounds of {lat['pairs_per_round']:,} pairs:"
    )
    console.print(
        f"  default {us['default']:.1f} us, previous default {us['previous']:.1f} us:"
        f" {r['default_vs_previous_warm']:.2f}x warm;"
        f" cold cache {us['cold_default']:.1f} vs {us['cold_previous']:.1f} us:"
        f" {r['default_vs_previous_cold']:.2f}x"
    )
    console.print(
        f"  scale=cosine {us['cosine']:.1f} us: the default (bands) takes"
        f" {r['default_vs_cosine_scale']:.3f}x its time"
    )
    console.print(
        f"  after a 1 MB text {us['after_1mb']:.1f} us: {r['after_1mb_vs_before']:.2f}x;"
        f" typographic quotes {us['curly_quotes']:.1f} us vs ASCII {us['ascii_quotes']:.1f} us:"
        f" {r['curly_vs_ascii_quotes']:.2f}x"
    )
    console.print(
        f"  100-character Chinese pair {us['chinese_100_chars']:.1f} us:"
        f" {r['chinese_100_chars_vs_english_100_words']:.2f}x the 100-word English pair"
    )
    console.print(
        f"batch of {b['pairs']:,} pairs: simeval {b['simeval_pairs_per_s']:,.0f} pairs/s,"
        f" scikit-learn batch {b['sklearn_batch_pairs_per_s']:,.0f} pairs/s:"
        f" {b['throughput_ratio_vs_sklearn_batch']:.2f}x"
    )
    m: dict[str, Any] = report["memory"]
    console.print(
        f"peak memory streaming {m['pairs_small']:,} pairs: {m['peak_rss_mb_small']:.0f} MB;"
        f" {m['pairs_large']:,} pairs: {m['peak_rss_mb_large']:.0f} MB"
    )
