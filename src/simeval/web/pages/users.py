"""The admin's Users page (add a user, change a role, disable or enable, a new key shown once)
and the Activity page (the audit log, for the whole database or one target)."""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from simeval.errors import SimevalError
from simeval.service.credentials import ROLES
from simeval.service.user_models import AuditPage, NewKey
from simeval.web.pages._render import form_text, render, service_of
from simeval.web.security import checked_form

router = APIRouter(include_in_schema=False)


def _users_page(
    request: Request,
    *,
    new_key: NewKey | None = None,
    error: str | None = None,
    done: str | None = None,
    status: int = 200,
) -> Response:
    context = {
        "users": service_of(request).users.list_users(),
        "roles": ROLES,
        "new_key": new_key,
        "error": error,
        "done_text": done,
    }
    return render(request, "users.html", context, status)


@router.get("/users")
def users_page(request: Request) -> Response:
    """Every user, and the forms that change them (admin)."""
    return _users_page(request)


@router.post("/users")
async def add_user(request: Request) -> Response:
    """Add a user; its new key is on the page this once."""
    form = await checked_form(request)
    service = service_of(request)
    password = form_text(form, "password") or None
    try:
        made = await run_in_threadpool(
            service.users.add_user,
            form_text(form, "name").strip(),
            form_text(form, "role"),
            password,
        )
    except SimevalError as exc:
        return _users_page(request, error=str(exc), status=exc.status_code)
    request.app.state.identities.forget()
    return _users_page(request, new_key=made, done=f"User {made.user.name} added.")


@router.post("/users/{name}")
async def change_user(request: Request, name: str) -> Response:
    """One change of user ``name``: ``action`` is role (with ``role``), disable, enable or
    key (a new key, shown once)."""
    form = await checked_form(request)
    service = service_of(request)
    action = form_text(form, "action")
    new_key = None
    try:
        if action == "role":
            service.users.set_user_role(name, form_text(form, "role"))
            done = f"{name} is now {form_text(form, 'role')}."
        elif action in ("disable", "enable"):
            service.users.set_user_disabled(name, action == "disable")
            done = f"{name} is {action}d."
        elif action == "key":
            new_key = service.users.new_user_key(name)
            done = f"New key for {name}: the old one no longer works."
        else:
            return _users_page(request, error=f"unknown action {action[:40]!r}", status=400)
    except SimevalError as exc:
        return _users_page(request, error=str(exc), status=exc.status_code)
    request.app.state.identities.forget()
    return _users_page(request, new_key=new_key, done=done)


@router.get("/activity")
def activity_page(
    request: Request,
    actor: str = "",
    action: str = "",
    target: str = "",
    since: str = "",
    cursor: str = "",
) -> Response:
    """The audit log, newest first, filtered; a page of 100 at a time."""
    filters = {"actor": actor, "action": action, "target": target, "since": since}
    page: AuditPage | None = None
    error: str | None = None
    try:
        page = service_of(request).audit_log(cursor=cursor or None, limit=100, **filters)
    except SimevalError as exc:
        error = str(exc)
    query = urlencode({k: v for k, v in filters.items() if v})
    return render(
        request,
        "activity.html",
        {"page": page, "f": filters, "error": error, "query": query},
        400 if error else 200,
    )
