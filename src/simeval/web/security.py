"""Security defaults of the studio and the API: token, same-origin checks, CSRF, body limit.

The threat model is a local web app: by default it listens on 127.0.0.1 and any page the user
visits in the same browser could try to talk to it. So, in order:

- ``check_bind``: listening on anything but loopback needs a token (``SIMEVAL_TOKEN``) or
  users (``simeval users``).
- Once one user exists, every request but ``GET /api/health`` (and the sign-in form and the
  assets) needs a user with the role its route needs (``simeval.web.access``): a key
  (``Authorization: Bearer KEY``) or a session signed in with a name and password; the token
  then opens nothing. Who the user is, is read from the database at most a second earlier
  (``simeval.web.identity``), so a disabled user or a replaced key stops everywhere at once.
- ``GuardMiddleware``: without a token, only loopback host names are served (a DNS-rebinding
  page cannot reach the app under its own name); unsafe methods from another origin are
  refused; with a token, every API call needs it (``Authorization: Bearer``,
  ``X-Simeval-Token`` or the session cookie set by the login form) and pages redirect to the
  login form without it. A session cookie holds a random id the server issued at login
  (``SessionStore``), not anything derived from the token: logging out revokes it on the
  server, so a copied cookie stops working.
- CSRF: the ``simeval_csrf`` cookie holds a random 32-byte browser session id signed with the
  server's secret (random per process); every HTML form carries a token derived from that
  session id with the secret (HMAC), checked against the session on post. An equal
  cookie/field pair made up by someone else (even empty) is refused: without the secret no one
  can make a session the server accepts or the token that goes with it. The cookie is
  HttpOnly and SameSite=Strict.
- Cookies are ``Secure`` when the request came over HTTPS (directly, or through a TLS proxy
  whose ``X-Forwarded-Proto`` uvicorn trusts: ``simeval serve --forwarded-allow-ips``).
  JSON API calls are covered by the content-type rule: a body must be ``application/json``,
  which a cross-site page can only send after a CORS preflight the app never grants.
- ``BodyLimitMiddleware``: bodies over ``max_body`` bytes get 413, by Content-Length up front
  and by counting the bytes actually streamed.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import ipaddress
import json
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from simeval.errors import InvalidInput, SimevalError
from simeval.service.actor import acting_as
from simeval.web.access import PUBLIC, allows, required_role
from simeval.web.health import OUTAGE_RETRY_S

if TYPE_CHECKING:
    from simeval.service.users import Identity
    from simeval.web.identity import Identities
    from simeval.web.sso import UserHeader

T = TypeVar("T")

SESSION_COOKIE = "simeval_session"
CSRF_COOKIE = "simeval_csrf"
CSRF_FIELD = "csrf_token"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Paths served to anyone: assets carry no data, the login form must be reachable, and the health
# probe only says the server is up.
PUBLIC_PREFIXES = ("/static/", "/vendor/", "/login", "/favicon.ico", "/api/health")


def is_loopback(host: str) -> bool:
    """True for a host name or address that only this machine can reach."""
    name = host.strip().lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def is_api_path(path: str) -> bool:
    """The JSON API and its schema: errors there are JSON, not pages."""
    # /v1: OpenTelemetry traces and the OpenAI-compatible proxy, whose clients read JSON too
    return path.startswith(("/api/", "/v1/")) or path in ("/api", "/openapi.json")


def check_bind(host: str, token: str | None, users: bool = False) -> None:
    """Refuse to listen on a non-loopback address without a token or users
    (``InvalidInput``)."""
    if not is_loopback(host) and not token and not users:
        raise InvalidInput(
            f"refusing to listen on {host} without a token or users: set SIMEVAL_TOKEN or add "
            "a user (simeval users add NAME --role admin), or listen on 127.0.0.1"
        )


class SessionStore:
    """The studio's logged-in sessions: random ids issued at login, each valid until it is
    revoked (logout) or ``max_age`` seconds have passed; at most ``limit`` at once (the
    oldest dropped first). A session signed in by a user keeps the user's name. Kept in the
    server's memory: a restart logs everyone out."""

    def __init__(self, max_age: float = 30 * 86400, limit: int = 10_000):
        self.max_age = max_age
        self.limit = limit
        self._expires: dict[str, tuple[float, str | None]] = {}

    def new(self, user: str | None = None) -> str:
        """A new session's id (what its cookie holds), signed in as ``user`` (None: by the
        token)."""
        sid = secrets.token_urlsafe(32)
        while len(self._expires) >= self.limit:
            self._expires.pop(next(iter(self._expires)))
        self._expires[sid] = (time.monotonic() + self.max_age, user)
        return sid

    def _live(self, sid: str | None) -> tuple[float, str | None] | None:
        if not sid:
            return None
        entry = self._expires.get(sid)
        if entry is None:
            return None
        if entry[0] < time.monotonic():
            self._expires.pop(sid, None)
            return None
        return entry

    def valid(self, sid: str | None) -> bool:
        """Whether ``sid`` is a live session issued here."""
        return self._live(sid) is not None

    def user(self, sid: str | None) -> str | None:
        """The user a live session ``sid`` was signed in as (None: none, or not live)."""
        entry = self._live(sid)
        return None if entry is None else entry[1]

    def revoke(self, sid: str | None) -> None:
        """End session ``sid`` (logout): its cookie no longer authorises anything."""
        if sid:
            self._expires.pop(sid, None)


def session_id(cookie_header: str) -> str | None:
    """The session id a request's ``Cookie`` header carries, if any."""
    return _cookies(cookie_header).get(SESSION_COOKIE)


def secret_matches(a: str | None, b: str | None) -> bool:
    """Both given and equal, compared in constant time."""
    return a is not None and b is not None and hmac.compare_digest(a.encode(), b.encode())


def _headers(scope: Scope) -> dict[str, str]:
    # Later duplicates win; none of the headers read here is legitimately repeated.
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookies(header: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            out[name] = value
    return out


def _host_name(host_header: str) -> str:
    """The name part of a Host header ("127.0.0.1:8000" -> "127.0.0.1", "[::1]:80" -> "::1")."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


async def _send_json(
    send: Send, status: int, data: Mapping[str, object], extra: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(data).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *extra]})
    await send({"type": "http.response.body", "body": body})


async def _send_redirect(
    send: Send, location: str, extra: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    headers = [(b"location", location.encode("latin-1")), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 303, "headers": [*headers, *extra]})
    await send({"type": "http.response.body", "body": b""})


def session_cookie_header(sid: str, secure: bool = False) -> tuple[bytes, bytes]:
    """The Set-Cookie header that logs a browser in to session ``sid`` (``SessionStore``;
    ``Secure`` over HTTPS)."""
    value = f"{SESSION_COOKIE}={sid}; Path=/; HttpOnly; SameSite=Strict"
    if secure:
        value += "; Secure"
    return (b"set-cookie", value.encode("latin-1"))


class GuardMiddleware:
    """Host, origin, token and user checks in front of every request (see the module
    docstring).

    ``identities`` (``simeval.web.identity.Identities``): once any user exists, every request
    but the public ones (``simeval.web.access``) needs a user with the role its route needs:
    an API key (``Authorization: Bearer KEY`` or ``X-Simeval-Token: KEY``) or a signed-in
    session; then ``SIMEVAL_TOKEN`` no longer opens anything. ``refuse_page(request, status,
    message)`` renders a 403 for a page. ``user_header``: the user named by the team's SSO
    proxy (``simeval.web.sso``); users are then required even before any exists."""

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        allowed_hosts: Iterable[str] | None = None,
        sessions: SessionStore | None = None,
        identities: Identities | None = None,
        refuse_page: Callable[[Request, int, str], Response] | None = None,
        user_header: UserHeader | None = None,
    ):
        self.app = app
        self.token = token or None
        self.sessions = sessions if sessions is not None else SessionStore()
        hosts = set(LOOPBACK_NAMES) if allowed_hosts is None else set(allowed_hosts)
        self.allowed_hosts = {h.lower() for h in hosts}
        self.identities = identities
        self.refuse_page = refuse_page
        self.user_header = user_header

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        path: str = scope["path"]
        host = headers.get("host", "")
        try:
            users = self.identities is not None and (
                self.user_header is not None or await self.identities.users_exist_now()
            )
        except SimevalError as exc:  # the database down: say so, as the routes would
            if required_role(scope["method"], path) == PUBLIC:
                await self.app(scope, receive, send)  # /api/health says it for itself
            else:
                await self._failed(scope, receive, send, exc)
            return
        # With a token or users anyone who reaches the port must sign in, so any name may be
        # used; without, only loopback names are served (DNS rebinding defence).
        if (
            self.token is None
            and not users
            and "*" not in self.allowed_hosts
            and _host_name(host).lower() not in self.allowed_hosts
        ):
            await _send_json(
                send,
                400,
                {"error": f"unknown host {host!r}: open the studio on 127.0.0.1 or localhost"},
            )
            return
        method = scope["method"]
        if method in UNSAFE_METHODS and not self._same_origin(headers, host):
            await _send_json(send, 403, {"error": "cross-origin request refused"})
            return
        if users:
            await self._as_user(scope, receive, send, headers)
            return
        if (
            self.token is not None
            and not path.startswith(PUBLIC_PREFIXES)
            and not self._authorised(headers)
        ):
            await self._refuse(scope, send)
            return
        await self.app(scope, receive, send)

    async def _as_user(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> None:
        """Serve the request as the user it comes from, if that user may."""
        assert self.identities is not None
        method, path = scope["method"], scope["path"]
        needed = required_role(method, path)
        if needed == PUBLIC:
            await self.app(scope, receive, send)
            return
        try:
            user = await self._user(scope, headers)
        except SimevalError as exc:
            await self._failed(scope, receive, send, exc)
            return
        if user is None or user.disabled:
            await self._unsigned(scope, send, "disabled" if user is not None else None)
            return
        scope.setdefault("state", {})["user"] = user  # for the page's header, a 403's too
        if not allows(user.role, needed):
            message = f"this needs the {needed} role; {user.name} is {user.role}"
            if is_api_path(path) or self.refuse_page is None:
                await _send_json(send, 403, {"error": message, "role_needed": needed})
            else:
                await self.refuse_page(Request(scope), 403, message)(scope, receive, send)
            return
        if self.identities.due_touch(user.name):
            with contextlib.suppress(Exception):  # "last used" is never worth a failed call
                await _off_loop(self.identities.seen, user.name)
        with acting_as(user.name, signed_in=True):
            await self.app(scope, receive, send)

    async def _user(self, scope: Scope, headers: dict[str, str]) -> Identity | None:
        """The user of a request: its API key, else its SSO header (from a trusted proxy),
        else its session."""
        assert self.identities is not None
        auth = headers.get("authorization", "")
        key = headers.get("x-simeval-token") or (
            auth[7:].strip() if auth[:7].lower() == "bearer " else None
        )
        if key:
            return await self.identities.by_key_now(key)
        if self.user_header is not None:
            named = self.user_header.user_of(scope, headers)
            if named is not None:
                return await _off_loop(self.user_header.sign_in, self.identities, named)
        name = self.sessions.user(session_id(headers.get("cookie", "")))
        if name is None:
            return None
        return await self.identities.by_name_now(name)

    async def _failed(self, scope: Scope, receive: Receive, send: Send, exc: SimevalError) -> None:
        """The database cannot say who a request comes from: its error as a route would
        answer it (an outage is 503 with Retry-After), as JSON for the API, a page for a page."""
        retry = {"Retry-After": str(OUTAGE_RETRY_S)} if exc.status_code == 503 else {}
        if is_api_path(scope["path"]) or self.refuse_page is None:
            extra = [(k.lower().encode(), v.encode()) for k, v in retry.items()]
            await _send_json(send, exc.status_code, {"error": str(exc)}, extra)
            return
        page = self.refuse_page(Request(scope), exc.status_code, str(exc))
        page.headers.update(retry)
        await page(scope, receive, send)

    async def _unsigned(self, scope: Scope, send: Send, why: str | None) -> None:
        """401 for the API (and any post), the sign-in form for a page."""
        if is_api_path(scope["path"]) or scope["method"] != "GET":
            message = (
                "this user is disabled"
                if why == "disabled"
                else "missing or unknown API key: send 'Authorization: Bearer <key>' "
                "(simeval users key NAME makes one)"
            )
            await _send_json(send, 401, {"error": message}, [(b"www-authenticate", b"Bearer")])
            return
        query = scope.get("query_string", b"").decode("latin-1")
        target = scope["path"] + (f"?{query}" if query else "")
        await _send_redirect(send, "/login?" + urlencode({"next": target}))

    @staticmethod
    def _same_origin(headers: dict[str, str], host: str) -> bool:
        if headers.get("sec-fetch-site") == "cross-site":
            return False
        origin = headers.get("origin")
        if origin is None:  # not a browser, or a same-origin navigation of an old browser
            return True
        if origin == "null":
            return False
        return urlsplit(origin).netloc.lower() == host.lower()

    def _authorised(self, headers: dict[str, str]) -> bool:
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and secret_matches(auth[7:].strip(), self.token):
            return True
        if secret_matches(headers.get("x-simeval-token"), self.token):
            return True
        return self.sessions.valid(session_id(headers.get("cookie", "")))

    async def _refuse(self, scope: Scope, send: Send) -> None:
        assert self.token is not None
        if is_api_path(scope["path"]) or scope["method"] != "GET":
            await _send_json(
                send,
                401,
                {"error": "missing or wrong token: send 'Authorization: Bearer <SIMEVAL_TOKEN>'"},
                [(b"www-authenticate", b"Bearer")],
            )
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.pop("token", None)
        target = scope["path"] + (f"?{urlencode(query)}" if query else "")
        if secret_matches(given, self.token):
            # ?token= works once: trade it for the session cookie and drop it from the URL.
            secure = scope.get("scheme") == "https"
            cookie = session_cookie_header(self.sessions.new(), secure)
            await _send_redirect(send, target, [cookie])
        else:
            await _send_redirect(send, "/login?" + urlencode({"next": target}))


async def _off_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker thread: a database read never holds the event loop."""
    return await run_in_threadpool(fn, *args)


DOCS_PATHS = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})
_INLINE_SCRIPT = re.compile(rb"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.S | re.I)


def docs_csp(body: bytes, page_csp: str) -> str:
    """The pages' policy for an API docs page: its own inline scripts allowed by their hash
    (not 'unsafe-inline'), Redoc's search worker from a blob."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(m.group(1)).digest()).decode() + "'"
        for m in _INLINE_SCRIPT.finditer(body)
    )
    policy = page_csp.replace("script-src 'self'", f"script-src 'self' {hashes}".rstrip())
    return policy + "; worker-src 'self' blob:"


class DocsHeadersMiddleware:
    """``/docs`` and ``/redoc`` get the pages' Content-Security-Policy (with
    ``frame-ancestors 'none'``), ``X-Frame-Options: DENY`` and ``nosniff``: they cannot be
    framed by another site (clickjacking) or run a script they did not ship."""

    def __init__(self, app: ASGIApp, page_csp: str):
        self.app = app
        self.page_csp = page_csp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in DOCS_PATHS:
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def buffered(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            assert start is not None
            body = b"".join(chunks)
            headers = [
                (k, v)
                for k, v in start.get("headers", [])
                if k.lower()
                not in (b"content-security-policy", b"x-frame-options", b"content-length")
            ]
            headers += [
                (b"content-security-policy", docs_csp(body, self.page_csp).encode("latin-1")),
                (b"x-frame-options", b"DENY"),
                (b"x-content-type-options", b"nosniff"),
                (b"referrer-policy", b"same-origin"),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, buffered)


class BodyTooLarge(HTTPException):
    """A request body over the configured limit (413)."""

    def __init__(self, limit: int):
        super().__init__(413, f"request body too large: the limit is {limit} bytes")


class BodyLimitMiddleware:
    """413 for bodies over ``max_body`` bytes: declared (Content-Length) or streamed; the
    paths of ``limits`` (a path prefix and its bound) have their own."""

    def __init__(self, app: ASGIApp, max_body: int, limits: dict[str, int] | None = None):
        self.app = app
        self.max_body = max_body
        self.limits = limits or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = next(
            (n for prefix, n in self.limits.items() if path.startswith(prefix)), self.max_body
        )
        for key, value in scope["headers"]:
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _send_json(send, 400, {"error": "invalid Content-Length header"})
                    return
                if declared > limit:
                    await _send_json(send, 413, {"error": BodyTooLarge(limit).detail})
                    return
        seen = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLarge as exc:
            # Raised where no exception handler catches it (e.g. a body read by a middleware).
            if started:
                raise
            await _send_json(send, 413, {"error": exc.detail})


class CsrfError(HTTPException):
    """A form post without the matching CSRF token (403)."""

    def __init__(self) -> None:
        super().__init__(403, "form expired or forged (CSRF token mismatch): reload the page")


def _secret(request: Request) -> bytes:
    secret: bytes | None = getattr(request.app.state, "csrf_secret", None)
    if secret is None:
        secret = request.app.state.csrf_secret = secrets.token_bytes(32)
    return secret


def _sign(secret: bytes, purpose: str, value: str) -> str:
    return hmac.new(secret, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def _csrf_session(request: Request) -> str | None:
    """The browser's CSRF session id, when its cookie was issued by this server."""
    cookie = request.cookies.get(CSRF_COOKIE) or ""
    sid, _, sig = cookie.partition(".")
    if len(sid) < 43 or not secret_matches(sig, _sign(_secret(request), "session", sid)):
        return None
    return sid


def csrf_token(request: Request) -> str:
    """The CSRF token of this browser's session (a new session is set by ``render``)."""
    sid = _csrf_session(request)
    if sid is None:
        sid = getattr(request.state, "new_csrf_sid", None)
        if sid is None:
            sid = request.state.new_csrf_sid = secrets.token_urlsafe(32)  # 32 random bytes
            request.state.new_csrf = f"{sid}.{_sign(_secret(request), 'session', sid)}"
    return _sign(_secret(request), "csrf", sid)


def set_csrf_cookie(request: Request, response: Response) -> None:
    """Set the CSRF cookie on a response when this request created the session."""
    value = getattr(request.state, "new_csrf", None)
    if value:
        response.set_cookie(
            CSRF_COOKIE,
            value,
            httponly=True,
            samesite="strict",
            path="/",
            secure=request.url.scheme == "https",
        )


async def checked_form(request: Request) -> FormData:
    """The posted form, after checking its CSRF token against the cookie (else ``CsrfError``)."""
    form = await request.form()
    sent = form.get(CSRF_FIELD)
    sid = _csrf_session(request)
    if sid is None or not isinstance(sent, str):
        raise CsrfError()
    if not secret_matches(sent, _sign(_secret(request), "csrf", sid)):
        raise CsrfError()
    return form
