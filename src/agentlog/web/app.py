"""The viewer's routes: sessions, one session, its events, its live feed; static assets.

Every route is GET, renders through Jinja2 with autoescaping, and prints session strings with
terminal and bidi controls shown as escapes (``agentlog.core.visible``), so a hostile
transcript is shown as text. Session ids come from the path, percent-encoded in every link.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, unquote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentlog.core.jsonvalue import dumps
from agentlog.core.request_header import canonical_header, event_header
from agentlog.core.visible import visible
from agentlog.errors import AgentlogError, SessionNotFoundError
from agentlog.store.base import Store
from agentlog.web.chart import pressure_chart
from agentlog.web.guard import Guard
from agentlog.web.live import Feeds
from agentlog.web.outline import outline
from agentlog.web.rows import PAGE_SIZE, SORTS, last_end, select, status_of
from agentlog.web.viewer import SEARCH_HITS, Viewer
from agentlog.web.views import (
    EVENTS_PAGE,
    NODES_PAGE,
    TURNS_PAGE,
    event_rows,
    surface_items,
    turn_views,
    unseen_items,
)

__all__ = ["create_app"]

HERE: Final = Path(__file__).parent
UNSEEN_SHOWN: Final = 500
"""Messages the "no longer seen" page renders at most (the inspector has every event)."""


def _finalize(value: Any) -> Any:
    """Every printed value: strings with controls shown as escapes (then autoescaped), JSON values
    as JSON (never a Python repr such as ``FrozenDict({...})``), None as nothing; markup passes."""
    if isinstance(value, Markup):
        return value
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return visible(dumps(value).decode())
    return visible(value) if isinstance(value, str) else value


def _tool_name(tool: Any) -> str:
    """A tool's name in any provider's shape (``name``, or OpenAI's ``function.name``), else its JSON."""
    if isinstance(tool, dict):
        for holder in (tool, tool.get("function")):
            if isinstance(holder, dict) and isinstance(holder.get("name"), str):
                return str(holder["name"])
    return tool if isinstance(tool, str) else dumps(tool).decode()


def _iso(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _duration(ms: int | None) -> str:
    if ms is None:
        return "open"
    return f"{ms / 1000:.1f} s" if ms < 120_000 else f"{ms / 60_000:.1f} min"


def _size(value: int | None) -> str:
    if value is None:
        return "—"
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value //= 1024
    return ""


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                      finalize=_finalize, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(qid=lambda value: quote(str(value), safe=""), iso=_iso, duration=_duration, size=_size,
                       tool_name=_tool_name)
    return env


def _number(request: Request, name: str, default: int = 0) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or len(raw) > 15:
        raise _BadRequestError(f"{name} must be a non-negative integer, got {raw[:40]!r}")
    return int(raw)


def _session_id(request: Request) -> str:
    """The id in the path, percent-decoded exactly once (from the raw path when the server gives
    it: a decoded path cannot tell ``%252e`` from ``%2e``)."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes) and raw.count(b"/") >= 2:
        return unquote(raw.decode("latin-1").split("/", 2)[2])
    return str(request.path_params["session_id"])


class _BadRequestError(Exception):
    """A query parameter the viewer cannot use (answered 400)."""


class _Pages:
    """The route handlers over one ``Viewer``."""

    def __init__(self, viewer: Viewer, env: Environment) -> None:
        self.viewer = viewer
        self.env = env
        self.feeds = Feeds(viewer)

    def render(self, template: str, code: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(template).render(**context), status_code=code)

    async def sessions(self, request: Request) -> Response:
        query = request.query_params.get("q", "")[:200]
        sort = request.query_params.get("sort", "activity")
        sort = sort if sort in SORTS else "activity"
        descending = request.query_params.get("order", "desc") != "asc"
        page_number = _number(request, "page", 1)
        rows = await run_in_threadpool(self.viewer.rows)
        listing = await run_in_threadpool(self.viewer.listing)
        page = select(rows, query, sort, descending, page_number)
        missing = [row.header for row in page.rows if row.summary is None and row.error is None]
        if missing:  # the indexer has not reached them yet: read this page's rows now
            await run_in_threadpool(self.viewer.summarize, missing)
            rows = await run_in_threadpool(self.viewer.rows)
            page = select(rows, query, sort, descending, page.page)
        read = sum(1 for row in rows if row.summary is not None or row.error is not None)
        statuses = await run_in_threadpool(self.viewer.statuses, page.rows)
        return self.render("sessions.html", page=page, query=query, sort=sort, descending=descending,
                           sorts=list(SORTS), unreadable=listing.unreadable, read=read,
                           statuses=statuses, page_size=PAGE_SIZE)

    async def session(self, request: Request) -> Response:
        session_id = _session_id(request)
        loaded = await run_in_threadpool(self.viewer.load, session_id)
        events, index = loaded.inspection.events, loaded.index
        turn = min(_number(request, "turn"), max(len(index.turns) - 1, 0))
        node = min(_number(request, "node"), max(len(index.nodes) - 1, 0))
        fragment = request.query_params.get("fragment")
        turns = await run_in_threadpool(turn_views, events, index, turn)
        nodes = await run_in_threadpool(surface_items, events, index, node)
        writer = await run_in_threadpool(self.viewer.writer, session_id)
        context: dict[str, Any] = dict(session_id=session_id, loaded=loaded, index=index, turns=turns,
                                       nodes=nodes, turn=turn, node=node, turns_page=TURNS_PAGE,
                                       nodes_page=NODES_PAGE, live=writer is not None,
                                       fragment=fragment)
        if fragment == "transcript":
            return self.render("transcript.html", **context)
        if fragment == "surface":
            return self.render("surface.html", **context)
        ancestors, children = await run_in_threadpool(self.viewer.lineage, loaded.header)
        family = await run_in_threadpool(self.viewer.family, loaded.header)
        forks = [child.seed_length - 1 for child in children if child.seed_length]
        turn_outline = await run_in_threadpool(lambda: outline(events, index, forks, live=writer is not None))
        request_header = (canonical_header(event_header(events[index.header_seq]))
                          if index.header_seq is not None else None)
        chart = Markup(pressure_chart(index.steps, index.brackets, index.context_window))
        status = status_of(loaded.inspection.recovery, writer, last_end(index))
        return self.render("session.html", ancestors=ancestors, children=children, chart=chart,
                           outline=turn_outline, family=family,
                           ancestor_ids={ancestor.id for ancestor in ancestors},
                           request_header=request_header,
                           status=status, recovery=loaded.inspection.recovery, **context)

    async def unseen(self, request: Request) -> Response:
        session_id = _session_id(request)
        loaded = await run_in_threadpool(self.viewer.load, session_id)
        items, total = await run_in_threadpool(unseen_items, loaded.inspection.events, loaded.index)
        return self.render("unseen.html", session_id=session_id, index=loaded.index, items=items,
                           total=total, limit=UNSEEN_SHOWN)

    async def search(self, request: Request) -> Response:
        text = request.query_params.get("q", "")[:200]
        session = request.query_params.get("session") or None
        result = None
        if text.strip():
            result = await run_in_threadpool(self.viewer.search, text, session)
        return self.render("search.html", text=text, session=session, result=result, limit=SEARCH_HITS)

    async def events(self, request: Request) -> Response:
        session_id = _session_id(request)
        loaded = await run_in_threadpool(self.viewer.load, session_id)
        events = loaded.inspection.events
        start = _number(request, "from")
        expand = request.query_params.get("expand") == "1"
        rows = await run_in_threadpool(event_rows, events, start, expand=expand)
        following = rows[-1].seq + rows[-1].count if rows else len(events)
        return self.render("events.html", session_id=session_id, loaded=loaded, rows=rows, start=start,
                           expand=expand, following=following if following < len(events) else None,
                           previous=max(0, start - EVENTS_PAGE) if start > 0 else None,
                           stored=loaded.index.stored)

    async def live(self, request: Request) -> Response:
        session_id = _session_id(request)
        await run_in_threadpool(self.viewer.known, session_id)
        start = _number(request, "from")

        async def stream() -> AsyncIterator[bytes]:
            yield b": live\n\n"
            async for message in self.feeds.follow(session_id, start, request.is_disconnected):
                yield message

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def not_found(self, request: Request, exc: Exception) -> Response:
        message = str(exc) if isinstance(exc, AgentlogError) else "no such page"
        return self.render("error.html", code=404, title="not found", message=message)

    async def failed(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, _BadRequestError):
            return self.render("error.html", code=400, title="bad request", message=str(exc))
        return self.render("error.html", code=500, title="cannot read this session",
                           message=f"{type(exc).__name__}: {exc}")


def create_app(store: Store, *, token: str | None = None, index_in_background: bool = True) -> Any:
    """The viewer as an ASGI app over ``store`` (read-only; the caller closes the store).

    ``token``: required on every request (see ``agentlog.web.guard``). ``index_in_background``:
    read every session's summary in a thread, so that sorting by title, turns or size sees all.
    """
    viewer = Viewer(store)
    pages = _Pages(viewer, _environment())
    routes = [
        Route("/", pages.sessions, methods=["GET"]),
        Route("/s/{session_id:path}", pages.session, methods=["GET"]),
        Route("/events/{session_id:path}", pages.events, methods=["GET"]),
        Route("/search", pages.search, methods=["GET"]),
        Route("/unseen/{session_id:path}", pages.unseen, methods=["GET"]),
        Route("/live/{session_id:path}", pages.live, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={
        404: pages.not_found, SessionNotFoundError: pages.not_found,
        _BadRequestError: pages.failed, AgentlogError: pages.failed, OSError: pages.failed,
    }, lifespan=_lifespan(viewer, index_in_background))
    app.state.viewer = viewer
    return Guard(app, token=token)


def _lifespan(viewer: Viewer, index_in_background: bool) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if index_in_background:
            viewer.start_indexer()
        try:
            yield
        finally:
            viewer.close()

    return lifespan
