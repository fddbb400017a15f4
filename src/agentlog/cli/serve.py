"""``agentlog serve``: the read-only web viewer of a store (``pip install 'agentlog[web]'``)."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

import click

from agentlog.cli.app import State, handled, interrupted
from agentlog.cli.render import console, errors, plural, safe
from agentlog.errors import AgentlogError


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``: the addresses only this machine reaches."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback requires --token.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="Port to bind (0: any free port).")
@click.option("--token", envvar="AGENTLOG_SERVE_TOKEN", default=None, metavar="TOKEN",
              help="Require this token on every request (Authorization: Bearer TOKEN, or open "
                   "/?token=TOKEN once: it sets a cookie). Also $AGENTLOG_SERVE_TOKEN.")
@click.pass_obj
@handled
def serve(state: State, host: str, port: int, token: str | None) -> None:
    """Serve a read-only web viewer of the store: sessions, transcripts beside their surface,
    compactions, forks, token pressure, every event, live updates.

    Binds 127.0.0.1 by default and never writes to the store. Ctrl-C stops it (status 130),
    saying how long it ran and how many requests it answered.
    """
    try:
        import uvicorn

        from agentlog.web import create_app
    except ImportError as exc:
        raise AgentlogError("agentlog serve needs the web extra: pip install 'agentlog[web]' "
                            f"({exc})") from exc
    if not is_loopback(host) and not token:
        raise click.UsageError(f"--host {host} is not a loopback address: serving other machines "
                               "requires --token")
    with state.store(create=False) as store, listening(host, port) as sock:
        app = Counted(create_app(store, token=token))
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        server = uvicorn.Server(config)
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{sock.getsockname()[1]}/" + (f"?token={token}" if token else "")
        console.print(f"agentlog viewer of {safe(state.store_label)} at {url}  (Ctrl-C stops)")
        started = time.monotonic()
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:  # uvicorn shut down first, then re-raised the signal: the usual stop
            interrupted(f"serve: viewer stopped after {_uptime(time.monotonic() - started)}, "
                        f"{plural(app.requests, 'request')} (Ctrl-C)")
        errors.print(f"serve: viewer stopped after {_uptime(time.monotonic() - started)}, "
                     f"{plural(app.requests, 'request')}")


_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class Counted:
    """The viewer's ASGI app, counting the HTTP requests it was asked (for the line ``serve`` ends with)."""

    def __init__(self, app: Callable[[_Scope, _Receive, _Send], Awaitable[None]]) -> None:
        self.app = app
        self.requests = 0

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] == "http":
            self.requests += 1
        await self.app(scope, receive, send)


def _uptime(seconds: float) -> str:
    """``12 s``, ``3 m``, ``2 h 05 m``: how long the viewer ran."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    return f"{minutes} m" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} m"


@contextlib.contextmanager
def listening(host: str, port: int) -> Iterator[socket.socket]:
    """A socket bound and listening on ``host:port``, or one line saying why not (before any banner)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise AgentlogError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(128)
        except OSError as exc:
            hint = " (another server holds it: choose --port, or --port 0 for any free one)" if (
                exc.errno == errno.EADDRINUSE) else ""
            raise AgentlogError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None
        yield sock
