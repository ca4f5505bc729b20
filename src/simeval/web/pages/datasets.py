"""Dataset pages: the list, one version's cases with inline edit and "accept draft", and the
"Add to dataset" form posted from the Results and Conversation pages' selected captures.

Every change is a new version; the page shows which version is on screen, and older
versions are read-only (a change always starts from the newest).
"""

from __future__ import annotations

import json
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.datastructures import FormData

from simeval.checks import UNSET
from simeval.errors import InvalidInput, NotFound, SimevalError
from simeval.jsontypes import JSONValue
from simeval.web.pages._render import (
    PER_PAGE,
    form_text,
    page_count,
    redirect,
    render,
    service_of,
)
from simeval.web.security import checked_form

router = APIRouter(include_in_schema=False)


def dataset_url(name: str) -> str:
    """The page of the dataset named ``name``."""
    return "/datasets/" + quote(name, safe="")


def _local_path(value: str) -> str | None:
    """``value`` if it is a path on this site (where to go back to), else None."""
    if value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return None


def dataset_names(request: Request) -> list[str]:
    """The datasets' names: the choices of the "Add to dataset" form (``_to_dataset.html``)."""
    return [d.name for d in service_of(request).list_datasets()]


@router.get("/datasets")
def datasets_page(request: Request) -> Response:
    """Every dataset with its newest version, cases and drafts."""
    return render(request, "datasets.html", {"items": service_of(request).list_datasets()})


def _dataset_page(
    request: Request,
    name: str,
    version: int | None = None,
    page: int = 1,
    error: str | None = None,
    status: int = 200,
) -> Response:
    service = service_of(request)
    page = max(page, 1)
    shown = service.show_dataset(name, version, limit=PER_PAGE, offset=(page - 1) * PER_PAGE)
    return render(
        request,
        "dataset.html",
        {
            "d": shown,
            "editable": shown.version == shown.latest,
            "page": page,
            "pages": page_count(shown.total),
            "error": error,
            "url": dataset_url(shown.name),
        },
        status=status,
    )


@router.get("/datasets/{name}")
def dataset_page(
    request: Request, name: str, version: int | None = None, page: int = 1
) -> Response:
    """A version of a dataset (default: the newest) with its cases, 50 a page."""
    return _dataset_page(request, name, version, page)


def _references(form: FormData) -> list[str]:
    return [r for r in form.getlist("references") if isinstance(r, str) and r.strip()]


def _metadata(text: str) -> JSONValue:
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        raise InvalidInput('metadata must be a JSON object, e.g. {"topic": "geo"}') from None


async def _change(request: Request, name: str, action: str) -> Response:
    """Run one change from a posted form; the page again with the error when it fails."""
    form = await checked_form(request)
    service = service_of(request)
    case_id = form_text(form, "case")
    done = f"dataset-{action}"
    try:
        if action == "edit":
            out = service.edit_dataset_case(
                name,
                case_id,
                input=form_text(form, "input") if "input" in form else UNSET,
                # every reference box emptied: refused by the service, not ignored
                references=_references(form) if "references" in form else UNSET,
                metadata=_metadata(form_text(form, "metadata")) if "metadata" in form else UNSET,
            )
            if str(out.version) == form_text(form, "version"):
                done = "unchanged"  # the form's version is still the newest: nothing changed
        elif action == "accept":
            service.accept_dataset_draft(name, case_id)
        elif action == "delete":
            service.delete_dataset_case(name, case_id)
        else:
            refs = _references(form)
            service.add_dataset_case(
                name,
                {
                    "id": case_id,
                    "input": form_text(form, "input"),
                    "references": refs or "",
                    "metadata": _metadata(form_text(form, "metadata")),
                },
            )
    except NotFound:
        raise
    except SimevalError as exc:
        return _dataset_page(request, name, error=str(exc), status=exc.status_code)
    anchor = "" if action == "delete" or not case_id else "#case-" + quote(case_id, safe="")
    return redirect(dataset_url(name), done, anchor)


@router.post("/datasets/{name}/edit")
async def edit_case(request: Request, name: str) -> Response:
    """Save a case's input, references and metadata: a new version."""
    return await _change(request, name, "edit")


@router.post("/datasets/{name}/accept")
async def accept_draft(request: Request, name: str) -> Response:
    """Accept a draft case's reference as it is: a new version."""
    return await _change(request, name, "accept")


@router.post("/datasets/{name}/delete")
async def delete_case(request: Request, name: str) -> Response:
    """Remove a case: a new version (older versions keep it)."""
    return await _change(request, name, "delete")


@router.post("/datasets/{name}/add")
async def add_case(request: Request, name: str) -> Response:
    """Add a case at the end: a new version."""
    return await _change(request, name, "add")


@router.post("/datasets-from-captures")
async def add_captures(request: Request) -> Response:
    """The captures selected on a Results or Conversation page, added to a dataset (a new one
    when no dataset has the name) as draft cases; back to the page with the error if any."""
    form = await checked_form(request)
    service = service_of(request)
    name = form_text(form, "dataset").strip()
    ids = [v for v in form.getlist("capture") if isinstance(v, str)]
    back = _local_path(form_text(form, "back")) or "/results"
    try:
        if not name:
            raise InvalidInput("name the dataset to add the selected captures to")
        if not ids:
            raise InvalidInput("select at least one capture to add")
        out = service.dataset_from_captures(name, ids)
    except SimevalError as exc:
        return render(
            request,
            "error.html",
            {"status": exc.status_code, "title": "Not added", "message": str(exc), "back": back},
            status=exc.status_code,
        )
    return redirect(dataset_url(out.name), "dataset-captures")
