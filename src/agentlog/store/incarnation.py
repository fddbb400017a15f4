"""Incarnation ids of database-stored sessions: UUIDv7 (RFC 9562), so each also says when it was stored.

A session row gets a fresh incarnation when a store creates it (a start, an import, a fork).
Its first 48 bits are the Unix time in milliseconds at that moment: ``gc`` judges a session's
age by it, not by the times inside its events (an import keeps its source's, which may be years
old or none at all). Ids written before (UUIDv4) carry no time: ``stored_at`` says None.
"""

from __future__ import annotations

import os
import uuid

from agentlog.core.header import now_ms

__all__ = ["new_incarnation", "stored_at"]

_VERSION = 7
_TIME_BITS = 48


def new_incarnation() -> uuid.UUID:
    """A UUIDv7: 48 bits of the current Unix time in ms, then version, variant and 74 random bits."""
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits; 6 of them are replaced below
    value = (now_ms() & ((1 << _TIME_BITS) - 1)) << 80 | rand
    value = (value & ~(0xF << 76)) | _VERSION << 76  # version nibble
    value = (value & ~(0x3 << 62)) | 0x2 << 62  # RFC 9562 variant
    return uuid.UUID(int=value)


def stored_at(incarnation: uuid.UUID | str) -> int | None:
    """When the store created the session (Unix ms), or None for an id that holds no time."""
    try:
        parsed = incarnation if isinstance(incarnation, uuid.UUID) else uuid.UUID(incarnation)
    except ValueError:
        return None
    if parsed.version != _VERSION or parsed.variant != uuid.RFC_4122:
        return None
    return parsed.int >> 80
