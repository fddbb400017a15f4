"""Request headers: the full model-request state logged as ``request/header`` snapshots.

A header is ``{config, adapterDefaults?, system?, tools?}``; the latest snapshot wins and
snapshots are never merged (spec session-core §7).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentlog.core.events import REQUEST_HEADER, Event
from agentlog.core.jsonvalue import FrozenDict, dumps, frozen_dict
from agentlog.errors import InvalidEventError

__all__ = [
    "canonical_header",
    "check_request_header_shape",
    "event_header",
    "fold_request_header",
    "header_equals",
]

_CONFIG_FIELDS = ("provider", "model", "reasoningEffort", "temperature", "maxTokens")


def canonical_header(header: Any) -> FrozenDict:
    """``{config}`` plus ``adapterDefaults`` (if a flag is true), non-empty ``system`` and ``tools``."""
    parts: list[tuple[str, Any]] = [("config", header.get("config"))]
    defaults = header.get("adapterDefaults")
    if isinstance(defaults, dict) and (
        defaults.get("reasoningEffort") is True or defaults.get("maxTokens") is True
    ):
        parts.append(("adapterDefaults", defaults))
    if header.get("system"):
        parts.append(("system", header["system"]))
    if header.get("tools"):
        parts.append(("tools", header["tools"]))
    return frozen_dict(parts)


def _flag(defaults: Any, key: str) -> bool:
    return isinstance(defaults, dict) and defaults.get(key) is True


def _strict_equal(a: Any, b: Any) -> bool:
    """JavaScript ``===`` on scalars: equal value and same kind (``1 !== true``)."""
    return (type(a) is type(b) and a == b) or (
        type(a) in (int, float) and type(b) in (int, float) and a == b
    )


def header_equals(a: Any, b: Any) -> bool:
    """Spec R2: would a request built from ``a`` equal one built from ``b``?"""
    ca, cb = a.get("config") or {}, b.get("config") or {}
    for key in _CONFIG_FIELDS:
        if (key in ca) != (key in cb) or not _strict_equal(ca.get(key), cb.get(key)):
            return False
    if ("stop" in ca) != ("stop" in cb):
        return False
    if "stop" in ca and list(ca["stop"]) != list(cb["stop"]):
        return False
    da, db = a.get("adapterDefaults"), b.get("adapterDefaults")
    for key in ("reasoningEffort", "maxTokens"):
        if _flag(da, key) != _flag(db, key):
            return False
    if ("system" in a) != ("system" in b) or not _strict_equal(a.get("system"), b.get("system")):
        return False
    tools_a, tools_b = a.get("tools") or (), b.get("tools") or ()
    if tools_a is tools_b and tools_a.__class__ is tuple:  # frozen (valid JSON) and the same object:
        return True  # a recorder resending one header each step, whose tools need no dumps
    if len(tools_a) != len(tools_b):
        return False
    return all(dumps(x) == dumps(y) for x, y in zip(tools_a, tools_b, strict=True))


def event_header(event: Event) -> Any:
    """The header object a ``request/header`` event carries, or None.

    Append does not check header shapes (spec A2), so a logged event may lack an object
    ``data.header``; such an event is not a header snapshot and folds skip it.
    """
    data = event.data
    header = data.get("header") if event.type == REQUEST_HEADER and isinstance(data, dict) else None
    return header if isinstance(header, dict) else None


def fold_request_header(events: Iterable[Event], start: Any = None) -> Any:
    """The canonical form of the last ``request/header`` in ``events``, else ``start`` itself."""
    latest = None
    for event in events:
        if event.type == REQUEST_HEADER:
            header = event_header(event)
            if header is not None:
                latest = header
    if latest is None:
        return start
    return canonical_header(latest)


def check_request_header_shape(data: Any, subject: str) -> None:
    """The restore-time rules for ``request/header`` data (spec C5, C7)."""
    header: Any = data.get("header") if isinstance(data, dict) else None
    config = header.get("config") if isinstance(header, dict) else None
    if not isinstance(config, dict) or not all(
        type(config.get(key)) is str and config.get(key) for key in ("provider", "model")
    ):
        raise InvalidEventError(f"{subject} lacks provider/model", path="data.header.config")
    if "reasoningEffort" in config and not (
        type(config["reasoningEffort"]) is str and config["reasoningEffort"]
    ):
        raise InvalidEventError(f"{subject} has an invalid reasoningEffort",
                                path="data.header.config.reasoningEffort")
    if "adapterDefaults" in header:
        defaults = header["adapterDefaults"]
        if (
            not isinstance(defaults, dict)
            or not set(defaults) <= {"reasoningEffort", "maxTokens"}
            or any(value is not True for value in defaults.values())
            or any(key not in config for key in defaults)
        ):
            raise InvalidEventError(f"{subject} has invalid adapterDefaults",
                                    path="data.header.adapterDefaults")
    if isinstance(data, dict) and data.get("reason") == "fallback":
        raise InvalidEventError('unsupported legacy request/header reason "fallback"')
