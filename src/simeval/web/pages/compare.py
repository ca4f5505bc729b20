"""Compare (A/B): two stored runs, or captured results selected by eval, time and metadata."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.errors import InvalidInput, SimevalError
from simeval.service.compare_sides import META_RECENT, parse_side
from simeval.web.pages._render import render, service_of

router = APIRouter(include_in_schema=False)

# the time pickers: "since" and "until" as ages (what a side spec takes: since=7d)
AGES = ("1h", "24h", "7d", "14d", "30d")


def side_of(prefix: str, picks: dict[str, str]) -> str:
    """The side spec the pickers of side ``prefix`` ("a" or "b") make: ``run:ID`` or
    ``captures:KEY=VALUE,since=…,until=…``; ``InvalidInput`` when a picker is missing or
    holds something no picker offers."""
    side = prefix.upper()
    kind = picks.get(f"{prefix}_kind", "")
    if kind == "run":
        run = picks.get(f"{prefix}_run", "")
        if run != "latest" and not run.isdigit():
            raise InvalidInput(f"side {side}: pick a stored run")
        return f"run:{run}"
    if kind != "captures":
        raise InvalidInput(f"side {side}: pick a stored run or captured results")
    parts = []
    meta = picks.get(f"{prefix}_meta", "")
    if meta:
        if "=" not in meta:
            raise InvalidInput(f"side {side}: the metadata picker gives KEY=VALUE, not {meta!r}")
        parts.append(meta)
    for field in ("since", "until"):
        age = picks.get(f"{prefix}_{field}", "")
        if age and age not in AGES:
            raise InvalidInput(f"side {side}: {field} must be one of {', '.join(AGES)}")
        if age:
            parts.append(f"{field}={age}")
    return "captures" + (":" + ",".join(parts) if parts else "")


def picks_of(spec: str) -> dict[str, str]:
    """The picker state a side spec shows (what the pickers cannot show stays unpicked)."""
    try:
        kind, what = parse_side(spec)
    except InvalidInput:
        return {}
    if kind == "run":
        return {"kind": "run", "run": str(what)}
    if kind != "captures":
        return {}
    meta = what["meta"]
    return {
        "kind": "captures",
        "meta": f"{meta[0][0]}={meta[0][1]}" if len(meta) == 1 else "",
        "since": what["since"] or "",
        "until": what["until"] or "",
    }


@router.get("/compare")
def compare_page(
    request: Request,
    a: str | None = None,
    b: str | None = None,
    eval: str | None = None,
) -> Response:
    """Compare two sides: stored runs or captured results selected by eval, time and metadata,
    typed as side specs (``a``, ``b``) or chosen with the pickers (``a_kind``, ``a_run``,
    ``a_meta``, ``a_since``, ``a_until``, the same for ``b``)."""
    service = service_of(request)
    params = dict(request.query_params)
    picked = not (a or b) and ("a_kind" in params or "b_kind" in params)
    report, error, status = None, None, 200
    try:
        if picked:
            a, b = side_of("a", params), side_of("b", params)
    except InvalidInput as exc:
        error, status = str(exc), exc.status_code
    if a and b and error is None:
        try:
            report = service.compare(a, b, eval_name=eval or None, keep=20)
        except SimevalError as exc:
            error, status = str(exc), exc.status_code
    elif (a or b) and error is None:
        error, status = "give both sides, A and B", 400
    evals = service.list_evals(include_archived=True)
    return render(
        request,
        "compare.html",
        {
            # typed specs fill the text fields; picked ones are shown by the pickers
            "f": {
                "a": "" if picked else a or "",
                "b": "" if picked else b or "",
                "eval": eval or "",
            },
            "picked": picked,
            "picks": {
                "a": picks_of(a or "") if a else {"kind": "captures"},
                "b": picks_of(b or "") if b else {"kind": "captures"},
            },
            "report": report,
            "error": error,
            # each eval's current threshold, for the line on its histograms
            "thresholds": {e.name: e.threshold for e in evals},
            "ages": AGES,
            "metadata": service.metadata_values(),
            "meta_recent": META_RECENT,
            "runs": service.list_runs(limit=50),
            "evals": evals,
        },
        status=status,
    )
