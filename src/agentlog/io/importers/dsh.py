"""DeepSeek Harness session files (a ``session.jsonl`` or ``session.jsonl.zstd`` from anywhere, or
a DSH SQLite store: ``agentlog.io.importers.dsh_sqlite``).

The file is read with the JSONL store's own reader (packed chunk rows, zstd frames, a torn
tail ignored as a load would), so the session lands in any store exactly as DSH wrote it;
in a JSONL store it is placed at ``<root>/--<project>--/<id>/session.jsonl.zstd``. Test
snapshots whose header still holds template placeholders (``"cwd": "{{cwd}}"``) are refused.
"""

from __future__ import annotations

import re
from typing import Final

import orjson

from agentlog.core.packed import resolve_entries
from agentlog.errors import AgentlogError
from agentlog.io.importers.builder import Imported
from agentlog.io.importers.dsh_sqlite import SQLITE_MAGIC, import_dsh_sqlite
from agentlog.io.importers.source import SourceFile
from agentlog.store.jsonl.format import first_stored_seq, read_first_line, scan_log
from agentlog.store.jsonl.zstd_frames import ZSTD_MAGIC

__all__ = ["import_dsh"]

EXPECTED: Final = ('a DSH session file: a header line {"type":"session","version":0,"id":...} then one '
                   "event per line, raw or in zstd frames")
_PLACEHOLDER: Final = re.compile(rb"\{\{\s*[A-Za-z_][\w.-]*\s*\}\}")


def _first_line(source: SourceFile, compressed: bool) -> bytes:
    """The header line, decompressed when needed (empty when the file has none)."""
    if not compressed:
        return source.data.split(b"\n", 1)[0]
    try:
        return read_first_line(source.data, path=source.path)
    except AgentlogError:
        return b""


def _with_depth(data: bytes) -> bytes:
    """A raw transcript whose header omits ``delegationDepth`` (older DSH snapshots) with it set to 0,
    as DSH reads an absent depth; the reader's header rule requires the key."""
    head, newline, rest = data.partition(b"\n")
    try:
        header = orjson.loads(head)
    except orjson.JSONDecodeError:
        return data
    if not isinstance(header, dict) or header.get("type") != "session" or "delegationDepth" in header:
        return data
    return orjson.dumps({**header, "delegationDepth": 0}) + newline + rest


def import_dsh(source: SourceFile) -> list[Imported]:
    """The session of one DSH transcript, its events as stored (a torn tail counted, not kept), or
    every session of a DSH SQLite store."""
    if source.data.startswith(SQLITE_MAGIC):
        return import_dsh_sqlite(source)
    compressed = source.data.startswith(ZSTD_MAGIC)
    placeholder = _PLACEHOLDER.search(_first_line(source, compressed))
    if placeholder is not None:
        raise source.error(f"the header holds the template placeholder {placeholder.group().decode()}: "
                           "this is a test snapshot, not a session; fill its placeholders in first",
                           line=1, offset=0)
    data = source.data if compressed else _with_depth(source.data)
    try:
        scan = scan_log(data, compressed=compressed, path=source.path)
    except AgentlogError as exc:
        raise source.error(f"not a readable DSH transcript ({exc.detail}); expected {EXPECTED}",
                           offset=exc.offset) from None
    if first_stored_seq(scan.header) != 0:
        raise source.error(f"a fork that shares its parent's first {scan.header.seed_length} events by "
                           f"reference (parent {scan.header.parent_session!r}): materialize it in its own "
                           "store before importing it")
    events = resolve_entries(scan.events)
    unmapped: dict[str, int] = {}
    if scan.torn is not None:
        events += scan.torn.recovered
        unmapped["bytes of a torn tail (ignored, as a load ignores them)"] = scan.torn.size
    return [Imported(scan.header, tuple(events), unmapped)]
