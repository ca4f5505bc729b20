"""Sign-in through the team's SSO proxy (``simeval serve --user-header X-Forwarded-User``).

Behind oauth2-proxy, Authelia or a cloud access proxy, the proxy signs people in and names
them in a header. simeval takes that header as the user only when the request came straight
from an address of ``--forwarded-allow-ips``: from anywhere else the header is ignored (anyone
can send one), and the request needs a key or a session as usual. A name with no user yet is
made a ``viewer`` on first sight (unless ``--user-header-create no``; then it is refused).

The peer address is the connection's own, taken before uvicorn's proxy-headers middleware
rewrites the client from ``X-Forwarded-For`` (``PeerMiddleware``, with that middleware
applied inside it by ``simeval.web.app``): a forwarded address must never make a request
look as if it came from the proxy.

>>> header = UserHeader("X-Forwarded-User", "10.0.0.5, 192.168.0.0/16")
>>> header.trusts("10.0.0.5"), header.trusts("192.168.3.4"), header.trusts("10.0.0.6")
(True, True, False)
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from simeval.errors import InvalidInput
from simeval.service.credentials import check_user_name
from simeval.service.users import Identity
from simeval.web.identity import Identities

PEER_KEY = "simeval.peer"  # where the connection's own address is kept in the scope


def _networks(
    trusted: str | Iterable[str],
) -> tuple[bool, list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    items = trusted.split(",") if isinstance(trusted, str) else list(trusted)
    everyone = False
    networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        if item == "*":
            everyone = True
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise InvalidInput(
                f"--forwarded-allow-ips: {item[:80]!r} is not an IP address or network"
            ) from None
    return everyone, networks


class UserHeader:
    """The header naming the user, trusted from the addresses ``trusted`` lists (IPs or
    networks, comma-separated; ``*`` any); ``create``: a name not yet a user is made one, a
    viewer."""

    def __init__(self, header: str, trusted: str | Iterable[str], create: bool = True):
        name = header.strip()
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise InvalidInput(f"--user-header: {header[:80]!r} is not a header name")
        self.header = name.lower()
        self.create = create
        self.everyone, self.networks = _networks(trusted)
        if not self.everyone and not self.networks:
            raise InvalidInput(
                "--user-header needs --forwarded-allow-ips: the addresses of the proxy whose "
                "header is believed"
            )

    def trusts(self, address: str | None) -> bool:
        """Whether a request straight from ``address`` may name its user in the header."""
        if self.everyone:
            return True
        if not address:
            return False
        try:
            ip = ipaddress.ip_address(address.strip("[]"))
        except ValueError:
            return False
        return any(ip in net for net in self.networks)

    def user_of(self, scope: Scope, headers: dict[str, str]) -> str | None:
        """The name the header gives, when the request came from a trusted address."""
        value = headers.get(self.header)
        if value is None:
            return None
        client = scope.get("client")
        peer = scope.get(PEER_KEY, client[0] if client else None)
        return value.strip() if self.trusts(peer) else None

    def sign_in(self, identities: Identities, name: str) -> Identity | None:
        """The user ``name``, made a viewer first when there is none and ``create``; None for
        a name no user may have, or an unknown one without ``create``."""
        try:
            check_user_name(name)
        except InvalidInput:
            return None
        found = identities.by_name(name)
        if found is None and self.create:
            found = identities.service.users.ensure_user(name, "viewer")
            identities.forget()
        return found


class PeerMiddleware:
    """Keeps the connection's own address in the scope (``PEER_KEY``) before anything inside
    rewrites the client from forwarded headers."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            scope[PEER_KEY] = client[0] if client else None
        await self.app(scope, receive, send)
