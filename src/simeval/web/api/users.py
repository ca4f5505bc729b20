"""Users and the audit log (admin), and who the caller is (``/api/me``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from simeval.service.credentials import MAX_PASSWORD, ROLES
from simeval.service.user_models import AuditPage, NewKey, Role, UserOut
from simeval.web import schema as declared
from simeval.web.api.common import ServiceDep, json_reply
from simeval.web.schema import Body, StrictBool

router = APIRouter(prefix="/api", responses=declared.ERRORS)

UserName = Annotated[str, Path(description="The user's name.", max_length=64)]
_PASSWORD = Field(None, max_length=MAX_PASSWORD, description="The studio password (8+).")


class UserIn(Body):
    """A new user: its name, role and (for the studio's sign-in) password."""

    name: str = Field(max_length=64, description="1-64 letters, digits, '.', '-', '_', '@'.")
    role: Role = Field(description=f"One of {', '.join(ROLES)}.")
    password: str | None = _PASSWORD


class UserChange(Body):
    """What to change of a user; fields left out stay as they are."""

    role: Role | None = None
    disabled: StrictBool | None = None
    password: str | None = _PASSWORD


def _changed(request: Request) -> None:
    # this process sees a change at once (the others within the identity cache's second)
    request.app.state.identities.forget()


@router.get("/me", tags=["users"])
def me(request: Request) -> JSONResponse:
    """Who the caller is: its name and role (both null without users: local mode or the
    token)."""
    user = getattr(request.state, "user", None)
    data: dict[str, str | None] = {
        "name": user.name if user else None,
        "role": user.role if user else None,
    }
    return JSONResponse(data)


@router.get("/users", response_model=list[UserOut], tags=["users"])
def list_users(service: ServiceDep) -> JSONResponse:
    """Every user (never a key or password: the key's first characters only)."""
    return json_reply(service.users.list_users())


@router.post("/users", response_model=NewKey, status_code=201, tags=["users"])
def add_user(body: UserIn, service: ServiceDep, request: Request) -> JSONResponse:
    """Add a user; the answer holds its API key, shown this once."""
    made = service.users.add_user(body.name, body.role, body.password)
    _changed(request)
    return json_reply(made, 201)


@router.patch("/users/{name}", response_model=UserOut, tags=["users"])
def change_user(
    name: UserName, body: UserChange, service: ServiceDep, request: Request
) -> JSONResponse:
    """Change a user's role, disable or enable it, or set its password."""
    out = service.users.get_user(name)
    if body.role is not None:
        out = service.users.set_user_role(name, body.role)
    if body.disabled is not None:
        out = service.users.set_user_disabled(name, body.disabled)
    if body.password is not None:
        out = service.users.set_user_password(name, body.password)
    _changed(request)
    return json_reply(out)


@router.post("/users/{name}/key", response_model=NewKey, tags=["users"])
def new_key(name: UserName, service: ServiceDep, request: Request) -> JSONResponse:
    """Give a user a new API key (in the answer, shown this once); the old one stops."""
    made = service.users.new_user_key(name)
    _changed(request)
    return json_reply(made)


@router.get("/audit", response_model=AuditPage, tags=["users"])
def audit(
    service: ServiceDep,
    actor: Annotated[str | None, Query(max_length=64)] = None,
    action: Annotated[str | None, Query(max_length=64)] = None,
    target: Annotated[str | None, Query(max_length=300)] = None,
    since: Annotated[str | None, Query(max_length=64, description="ISO time or 7d.")] = None,
    cursor: Annotated[str | None, Query(max_length=2000)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> JSONResponse:
    """The audit log, newest first; ``next_cursor`` continues it."""
    page = service.audit_log(
        actor=actor, action=action, target=target, since=since, cursor=cursor, limit=limit
    )
    return json_reply(page)
