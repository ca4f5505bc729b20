"""Signing in and out (only used when a token is set), and the favicon browsers ask for."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

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
def login_page(request: Request, next: str = "/") -> Response:
    """Ask for the token."""
    return render(request, "login.html", {"next": _safe_next(next), "error": None})


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the token and set the session cookie."""
    form = await checked_form(request)
    token = request.app.state.token
    target = _safe_next(form_text(form, "next") or "/")
    if not token:
        return redirect(target)
    if not secret_matches(form_text(form, "token").strip(), token):
        return render(request, "login.html", {"next": target, "error": "wrong token"}, 401)
    response = redirect(target)
    sid = request.app.state.sessions.new()
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
