"""SessionHeader: the metadata kept beside a session's log (spec session-core §4.3)."""

from __future__ import annotations

import os
import time as _time
from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.core.events import is_safe_int
from agentlog.core.jsonvalue import FrozenDict, freeze, frozen_dict, valid_text
from agentlog.errors import InvalidEventError, InvalidHeaderError

__all__ = ["FORMAT_VERSION", "SessionHeader"]

FORMAT_VERSION: Final = 0
"""The only log format this build reads and writes (DSH format v0)."""

_WIRE_FIELDS: Final = {
    "version": "version",
    "id": "id",
    "createdAt": "created_at",
    "cwd": "cwd",
    "parentSession": "parent_session",
    "seedLength": "seed_length",
    "origin": "origin",
    "delegationDepth": "delegation_depth",
    "agentPreset": "agent_preset",
}


def now_ms() -> int:
    """Wall-clock epoch milliseconds."""
    return _time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """Who a session is: id, creation time, working directory and fork lineage.

    ``extra`` keeps unknown wire keys (frozen) so they round-trip.
    """

    id: str
    created_at: int = field(default_factory=now_ms)
    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int | None = None
    origin: str | None = None
    delegation_depth: int | None = None
    agent_preset: str | None = None
    version: int = FORMAT_VERSION
    extra: FrozenDict = field(default_factory=lambda: frozen_dict(()))

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def from_wire(cls, wire: Any, *, session_id: str | None = None) -> SessionHeader:
        """Validate a wire header (camelCase keys); ``session_id`` must match its id if given."""
        if type(wire) is not dict and type(wire) is not FrozenDict:
            raise InvalidHeaderError("session header is not a plain JSON record",
                                     session_id=session_id)
        try:
            frozen = freeze(wire, root="header", what="session header is not losslessly JSON-serializable")
        except InvalidEventError as exc:
            raise InvalidHeaderError(exc.detail, session_id=session_id, path=exc.path) from None
        version = frozen.get("version")
        if version != FORMAT_VERSION or not is_safe_int(version):
            raise InvalidHeaderError(
                f"unsupported header version {version!r} (this build reads {FORMAT_VERSION})",
                session_id=session_id,
            )
        if session_id is not None and frozen.get("id") != session_id:
            raise InvalidHeaderError(
                f"header id {frozen.get('id')!r} does not match session id {session_id!r}",
                session_id=session_id,
            )
        if "createdAt" not in frozen:
            raise InvalidHeaderError("header createdAt must be a non-negative safe integer",
                                     session_id=session_id)
        known = {_WIRE_FIELDS[key]: value for key, value in frozen.items() if key in _WIRE_FIELDS}
        extra = frozen_dict((key, value) for key, value in frozen.items()
                            if key not in _WIRE_FIELDS and key != "type")
        try:
            return cls(**known, extra=extra)
        except TypeError:
            raise InvalidHeaderError("header id must be a string", session_id=session_id) from None

    def to_wire(self) -> dict[str, Any]:
        """The wire header: camelCase keys, absent optional fields omitted, extras last."""
        wire: dict[str, Any] = {"version": self.version, "id": self.id, "createdAt": self.created_at}
        for key, attr in _WIRE_FIELDS.items():
            if key in wire:
                continue
            value = getattr(self, attr)
            if value is not None:
                wire[key] = value
        wire.update(self.extra)
        return wire


def _check(header: SessionHeader) -> None:
    """Every header rule of spec §4.3 (H1), in a stable order."""
    sid = header.id if isinstance(header.id, str) and valid_text(header.id) else None

    def bad(detail: str) -> InvalidHeaderError:
        return InvalidHeaderError(detail, session_id=sid)

    if header.version != FORMAT_VERSION or not is_safe_int(header.version):
        raise bad(f"unsupported header version {header.version!r} (this build reads {FORMAT_VERSION})")
    if type(header.id) is not str or not header.id:
        raise bad("header id must be a non-empty string")
    _check_text(header, sid)
    if not is_safe_int(header.created_at) or header.created_at < 0:
        raise bad("header createdAt must be a non-negative safe integer")
    if header.cwd is not None:
        if type(header.cwd) is not str:
            raise bad("header cwd must be a string")
        if not os.path.isabs(header.cwd):
            raise bad(f"header cwd must be an absolute path, got {header.cwd!r}")
    if header.parent_session is not None and type(header.parent_session) is not str:
        raise bad("header parentSession must be a string")
    if header.seed_length is not None and (
        not is_safe_int(header.seed_length) or header.seed_length < 0
    ):
        raise bad("header seedLength must be a non-negative safe integer")
    if header.origin is not None and header.origin != "subagent":
        raise bad('header origin must be "subagent"')
    if header.delegation_depth is not None and (
        not is_safe_int(header.delegation_depth) or header.delegation_depth < 0
    ):
        raise bad("header delegationDepth must be a non-negative safe integer")
    if header.agent_preset is not None and type(header.agent_preset) is not str:
        raise bad("header agentPreset must be a string")
    object.__setattr__(header, "extra", _frozen_extra(header.extra, sid))


def _check_text(header: SessionHeader, session_id: str | None) -> None:
    """The header's own strings must be writable (UTF-8): no lone surrogates."""
    for name, value in (("id", header.id), ("cwd", header.cwd), ("parentSession", header.parent_session),
                        ("agentPreset", header.agent_preset)):
        if type(value) is str and not valid_text(value):
            raise InvalidHeaderError(
                f"header {name} {value!r} is not valid Unicode: it contains a lone surrogate",
                session_id=session_id,
            )


def _frozen_extra(extra: Any, session_id: str | None) -> FrozenDict:
    """The unknown wire keys of a header, validated as lossless JSON and frozen (a FrozenDict
    too: ``frozen_dict`` builds one without checks)."""
    if not isinstance(extra, dict):
        raise InvalidHeaderError("header extra must be a JSON object", session_id=session_id)
    try:
        frozen: FrozenDict = freeze(dict(extra) if type(extra) is FrozenDict else extra, root="header",
                                    what="session header is not losslessly JSON-serializable")
    except InvalidEventError as exc:
        raise InvalidHeaderError(exc.detail, session_id=session_id, path=exc.path) from None
    return frozen
