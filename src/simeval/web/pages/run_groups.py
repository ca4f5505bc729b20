"""Run group pages: the groups of runs made together (one run per engine on one data set), a
group side by side (cases as rows, engines as columns, with the filters "only where they
differ", "only failing" and a search), and one case with each engine's explanation.

A group's name may hold a slash: it is the path's rest, so the case route comes first.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.web.pages._render import PER_PAGE, page_count, render, service_of
from simeval.web.pages.highlight import explained

router = APIRouter(include_in_schema=False)


def group_url(name: str, **query: object) -> str:
    """The page of the group ``name`` (with the filters and paging in ``query``, those set)."""
    shown = {k: v for k, v in query.items() if v not in (None, "", False)}
    tail = "?" + urlencode(shown) if shown else ""
    return "/run-groups/" + quote(name, safe="") + tail


def case_url(name: str, key: str) -> str:
    """The page of one case (its key) of the group ``name``."""
    return group_url(name) + "/cases/" + quote(key, safe="")


@router.get("/run-groups")
def run_groups_page(request: Request, page: int = 1) -> Response:
    """The stored groups of runs, newest first, with each engine's pass rate."""
    service = service_of(request)
    page = max(page, 1)
    groups = service.list_run_groups(limit=PER_PAGE, offset=(page - 1) * PER_PAGE)
    total = service.count_run_groups()
    return render(
        request,
        "run_groups.html",
        {
            "groups": groups,
            "total": total,
            "page": page,
            "pages": page_count(total),
            "group_url": group_url,
        },
    )


@router.get("/run-groups/{name:path}/cases/{key}")
def run_group_case_page(request: Request, name: str, key: str) -> Response:
    """One case of a group: its input and reference, then each engine's verdict and
    explanation (matched and missing terms highlighted)."""
    detail = service_of(request).run_group_case(name, key)
    full = request.query_params.get("full") == "1"
    views = [
        None if r is None else explained(r.explanation, r.output, r.matched_reference, opts, full)
        for r, opts in zip(detail.results, detail.options, strict=True)
    ]
    return render(
        request,
        "run_group_case.html",
        {
            "d": detail,
            "views": views,
            "back": group_url(detail.group),
            "group_url": group_url,
        },
    )


@router.get("/run-groups/{name:path}")
def run_group_page(
    request: Request,
    name: str,
    differ: bool = False,
    failing: bool = False,
    q: str = "",
    after: str = "",
) -> Response:
    """A group side by side: a page of cases (rows) by engines (columns), each cell the
    output with its score, pass/fail and missing terms; filters and keyset paging."""
    service = service_of(request)
    group = service.get_run_group(name)
    page = service.run_group_cases(
        name,
        differ=differ,
        failing=failing,
        search=q or None,
        after=after or None,
        limit=PER_PAGE,
    )
    filters = {"differ": "1" if differ else "", "failing": "1" if failing else "", "q": q}
    return render(
        request,
        "run_group.html",
        {
            "g": group,
            "page": page,
            "f": {"differ": differ, "failing": failing, "q": q, "after": after},
            "first_url": group_url(group.name, **filters) if after else None,
            "next_url": group_url(group.name, **filters, after=page.next) if page.next else None,
            "case_url": lambda key: case_url(group.name, key),
        },
    )
