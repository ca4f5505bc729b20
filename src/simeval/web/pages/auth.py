"""Signing in and out (with a user's name and password once users exist, else with the token
when one is set), and the favicon browsers ask for. Failed sign-ins are throttled per name
(``simeval.web.identity.SignInThrottle``): past 10 a minute, 429 with ``Retry-After``."""

from __future__ import annotations

import math

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from simeval.web.identity import SignInThrottle
from simeval.web.pages._render import form_text, redirect, render
from simeval.web.security import (
    SESSION_COOKIE,
    checked_form,
    secret_matches,
    session_cookie_header,
    session_id,
)

router = APIRouter(include_in_schema=False)


def _safe_next(target: str) -> str:
    # Only local paths: never redirect to another site after login.
    return target if target.startswith("/") and not target.startswith("//") else "/"


@router.get("/login")
async def login_page(request: Request, next: str = "/") -> Response:
    """Ask for a user's name and password (or for the token)."""
    users = await request.app.state.identities.users_exist_now()
    return render(request, "login.html", {"next": _safe_next(next), "error": None, "users": users})


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the name and password (or the token) and set the session cookie."""
    form = await checked_form(request)
    token = request.app.state.token
    target = _safe_next(form_text(form, "next") or "/")
    if await request.app.state.identities.users_exist_now():
        return await _user_login(request, form_text(form, "name").strip(), form, target)
    if not token:
        return redirect(target)
    if not secret_matches(form_text(form, "token").strip(), token):
        return render(
            request, "login.html", {"next": target, "error": "wrong token", "users": False}, 401
        )
    response = redirect(target)
    sid = request.app.state.sessions.new()
    response.raw_headers.append(session_cookie_header(sid, request.url.scheme == "https"))
    return response


async def _user_login(request: Request, name: str, form: FormData, target: str) -> Response:
    """Sign ``name`` in when the password is theirs; throttled per name."""
    throttle: SignInThrottle = request.app.state.sign_ins
    wait = throttle.wait(name)
    context = {"next": target, "users": True, "name": name}
    if wait > 0:
        message = "too many failed sign-ins for this name: try again in a minute"
        response = render(request, "login.html", {**context, "error": message}, 429)
        response.headers["Retry-After"] = str(max(1, math.ceil(wait)))
        return response
    service = request.app.state.service
    user = await run_in_threadpool(
        service.users.identity_by_password, name, form_text(form, "password")
    )
    if user is None or user.disabled:
        throttle.failed(name)
        return render(request, "login.html", {**context, "error": "wrong name or password"}, 401)
    response = redirect(target)
    sid = request.app.state.sessions.new(user.name)
    response.raw_headers.append(session_cookie_header(sid, request.url.scheme == "https"))
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session: revoked on the server (a copy of its cookie stops working too), and
    the cookie deleted."""
    await checked_form(request)
    request.app.state.sessions.revoke(session_id(request.headers.get("cookie", "")))
    response = redirect("/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/favicon.ico")
def favicon() -> Response:
    """No favicon (and no 404 noise in the log)."""
    return Response(status_code=204)
