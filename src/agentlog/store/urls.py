"""``open_store(url)``: one string names a store backend and its location."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlencode, urlsplit, urlunsplit

from agentlog.errors import UsageError
from agentlog.store.base import DEFAULT_WRITE_DELAY_MS, Store

__all__ = ["default_store_url", "open_store"]


def default_store_url() -> str:
    """``$AGENTLOG_STORE``, else a JSONL store under the user's data directory.

    ``$AGENTLOG_STORE`` set but empty (or blank) is a ``UsageError``, not the default store.
    """
    configured = os.environ.get("AGENTLOG_STORE")
    if configured is not None and not configured.strip():
        raise UsageError("the store URL (--store or $AGENTLOG_STORE) is empty (an unset variable?): name a "
                         "store, or unset AGENTLOG_STORE for the default one")
    if configured:
        return configured
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return f"jsonl://{Path(base, 'agentlog', 'sessions')}"


def _refuse_a_host(url: str, scheme: str, netloc: str, path: str) -> None:
    """``jsonl://tmp/x`` reads as host ``tmp``: refuse it (it used to mean ``./tmp/x`` silently)."""
    if scheme not in ("jsonl", "sqlite") or netloc in ("", "localhost", "~") or path == ":memory:":
        return
    raise UsageError(
        f"{url!r} names {netloc!r} as a host, and a {scheme} store is a path on this machine: write "
        f"{scheme}:///{path} for /{path}, or {scheme}:{path} (or a bare path for jsonl) for ./{path}"
    )


def open_store(url: str, *, create: bool = True) -> Store:
    """Open the store a URL names; ``create=False`` (readers) refuses one that does not exist yet
    ("no store at ...") instead of creating it, and never initialises an empty one.

    - ``jsonl:///path/to/root`` (or a bare path): JSONL transcripts, zstd frames by default;
      ``?compression=none`` for raw lines, ``?pack_chunks=false`` for one event per line;
    - ``sqlite:///path/to/file.db``: one SQLite database for every session;
    - ``postgresql://user@host:port/db`` (or ``postgres://``): a PostgreSQL store shared by many
      hosts (needs ``pip install 'agentlog[postgres]'``); libpq environment variables apply;
    - ``memory:``: in-process only;
    - every scheme accepts ``?write_delay_ms=N`` (the write-behind window, default 200).
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed "[" reads as an IPv6 host
        raise UsageError(f"{url!r} is not a store URL ({exc})") from None
    scheme = parts.scheme.lower()
    if not scheme or (len(scheme) == 1 and os.name == "nt"):
        scheme, path = "jsonl", url
    else:
        path = unquote(parts.netloc + parts.path)
        _refuse_a_host(url, scheme, parts.netloc, path)
        if path.startswith("//"):  # sqlite:////abs/db (SQLAlchemy's spelling) is /abs/db too
            path = "/" + path.lstrip("/")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    try:
        delay = int(query.pop("write_delay_ms", DEFAULT_WRITE_DELAY_MS))
    except ValueError:
        raise UsageError(f"write_delay_ms must be an integer in {url!r}") from None
    if scheme == "memory":
        from agentlog.store.memory import MemoryStore

        store: Store = MemoryStore(write_delay_ms=delay)
    elif scheme == "jsonl":
        from agentlog.store.jsonl.store import JsonlStore

        if not path:
            raise UsageError(f"jsonl store URL needs a directory: {url!r}")
        compression = query.pop("compression", "zstd")
        if compression not in ("zstd", "none"):
            raise UsageError(f'compression must be "zstd" or "none" in {url!r}')
        pack = query.pop("pack_chunks", "true").lower() not in ("false", "0", "no")
        store = JsonlStore(os.path.expanduser(path), compression="zstd" if compression == "zstd" else "none",
                           pack_chunks=pack, write_delay_ms=delay, create=create)
    elif scheme == "sqlite":
        from agentlog.store.sqlite.store import SqliteStore

        if not path:
            raise UsageError(f"sqlite store URL needs a file path: {url!r}")
        store = SqliteStore(os.path.expanduser(path), write_delay_ms=delay, create=create)
    elif scheme in ("postgresql", "postgres"):
        try:
            from agentlog.store.postgres.store import PostgresStore
        except ImportError as exc:
            raise UsageError(
                "the PostgreSQL store needs psycopg: pip install 'agentlog[postgres]'"
            ) from exc
        schema = query.pop("schema", "agentlog")
        dsn = urlunsplit(parts._replace(query=urlencode(query)))  # libpq options pass through
        query = {}
        store = PostgresStore(dsn, schema=schema, write_delay_ms=delay, create=create)
    else:
        raise UsageError(
            f"unknown store scheme {scheme!r} in {url!r} (expected jsonl:, sqlite:, postgresql:, memory:)"
        )
    if query:
        raise UsageError(f"unknown store option(s) {', '.join(sorted(query))} in {url!r}")
    return store
