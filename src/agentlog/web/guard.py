"""What every response of the viewer passes through: GET only, the token, the Host, the headers.

A pure ASGI middleware (server-sent events stream through it unbuffered). The token is taken
from ``Authorization: Bearer``, from the ``agentlog_token`` cookie, or once from ``?token=``,
which answers with a redirect to the same URL without it and sets the cookie (HttpOnly,
SameSite=Strict), so the token leaves the address bar and the history. Every comparison is
constant-time. Without a token the server answers only to loopback Host names, which keeps
DNS-rebinding pages from reading it.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlencode

__all__ = ["COOKIE", "HEADERS", "LOOPBACK_NAMES", "TOKEN_ALPHABET", "Guard", "check_token"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE: Final = "agentlog_token"
LOOPBACK_NAMES: Final = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
HEADERS: Final = (
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
     b"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)
"""Sent with every response, errors and static files included."""
TOKEN_ALPHABET: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def check_token(token: str) -> str:
    """A token must be 16+ URL- and cookie-safe characters (``secrets.token_urlsafe()`` makes one)."""
    if len(token) < 16 or not set(token) <= TOKEN_ALPHABET:
        raise ValueError("--token must be at least 16 characters of A-Z a-z 0-9 - . _ ~ "
                         "(python -c 'import secrets; print(secrets.token_urlsafe())' makes one)")
    return token


def _host_name(value: str) -> str:
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """Refuses what the viewer never serves and adds the security headers to the rest."""

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = check_token(token).encode() if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            await _plain(secured, *refusal)
            return
        if self.token is not None and self._query_token(scope) is not None:
            await self._adopt_token(scope, secured)
            return
        await self.app(scope, receive, secured)

    def _refusal(self, scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        if scope["method"] not in ("GET", "HEAD"):
            return 405, "the viewer is read-only: GET only\n", [(b"allow", b"GET, HEAD")]
        headers = dict(scope.get("headers", []))
        if self.token is None:
            host = _host_name(headers.get(b"host", b"").decode("latin-1")).lower()
            if host not in LOOPBACK_NAMES:
                return 421, "this viewer answers on 127.0.0.1/localhost only (start it with --token " \
                            "to serve other hosts)\n", []
            return None
        if self._query_token(scope) is not None:
            return None if self._matches(self._query_token(scope)) else (401, "wrong token\n", [])
        offered = _bearer(headers.get(b"authorization", b"")) or _cookie(headers.get(b"cookie", b""))
        if offered is None or not self._matches(offered):
            return 401, "a token is required: open the URL agentlog serve printed (…/?token=…)\n", []
        return None

    def _matches(self, offered: bytes | None) -> bool:
        assert self.token is not None
        return offered is not None and hmac.compare_digest(offered, self.token)

    @staticmethod
    def _query_token(scope: Scope) -> bytes | None:
        for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
            if key == "token":
                return str(value).encode()
        return None

    async def _adopt_token(self, scope: Scope, send: Send) -> None:
        assert self.token is not None
        rest = [(key, value) for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                                                         keep_blank_values=True) if key != "token"]
        raw = scope.get("raw_path")
        path = raw.decode("latin-1") if raw else quote(scope.get("root_path", "") + scope["path"])
        location = _same_origin(path) + ("?" + urlencode(rest) if rest else "")
        cookie = f"{COOKIE}={self.token.decode()}; HttpOnly; SameSite=Strict; Path=/"
        await _plain(send, 303, "token accepted\n",
                     [(b"location", location.encode("latin-1")), (b"set-cookie", cookie.encode())])


def _same_origin(path: str) -> str:
    """``path`` as a redirect target that stays on this viewer: one leading ``/``, never ``//host``.

    A browser reads ``//evil.example/`` (or ``/\\evil.example/``) as another site; characters
    that are not safe in a path are percent-encoded, so nothing in it ends the path either.
    """
    return "/" + quote(path.lstrip("/\\"), safe="/%:@!$&'()*+,;=-._~")


def _bearer(value: bytes) -> bytes | None:
    scheme, _, credential = value.partition(b" ")
    return credential.strip() if scheme.lower() == b"bearer" and credential.strip() else None


def _cookie(value: bytes) -> bytes | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(value.decode("latin-1"))
    except Exception:  # a malformed cookie header is no token
        return None
    morsel = jar.get(COOKIE)
    return str(morsel.value).encode("latin-1") if morsel is not None else None


async def _plain(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
