"""A serde ``msgpack`` payload as readable JSON, exactly: ``as_json`` and its inverse ``as_msgpack``.

LangGraph's ``JsonPlusSerializer`` writes most values (LangChain messages included) as msgpack,
whose base64 is unreadable in the log and compresses poorly beside the same text in the
transcript. The JSON form mirrors the msgpack tree: arrays, string-keyed maps and scalars as
themselves, ``{"$bin": base64}`` for bytes, ``{"$ext": code, "$data": json}`` for an extension
type whose data is msgpack itself (``"$b64"`` when it is not). A payload is logged in this form
only when packing it back gives the very same bytes (checked on write), so the serde reads what
it wrote; anything else (non-string keys, a key starting with ``$``, floats JSON cannot hold,
integers outside ±(2**53 - 1), deep nesting) stays base64.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import ormsgpack

from agentlog.core.jsonvalue import MAX_SAFE_INTEGER

__all__ = ["as_json", "as_msgpack"]

MAX_DEPTH: Final = 40
"""Deeper trees stay base64 (agentlog's lossless-JSON check then has nothing to refuse)."""


class _NotJsonError(Exception):
    """This msgpack tree has no exact JSON form."""


class _Ext:
    """An extension value as unpacked: its type code and raw data."""

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data


def as_json(raw: bytes) -> Any | None:
    """The JSON form of msgpack ``raw``, or None when it has none that packs back to ``raw``."""
    try:
        value = _to_json(_unpack(raw), 0)
        if ormsgpack.packb(_to_msgpack(value)) != raw:
            return None
    except (_NotJsonError, ormsgpack.MsgpackDecodeError, ormsgpack.MsgpackEncodeError, TypeError, ValueError,
            RecursionError):
        return None
    return value


def as_msgpack(value: Any) -> bytes:
    """The msgpack bytes of a JSON form ``as_json`` made (frozen containers accepted)."""
    return ormsgpack.packb(_to_msgpack(value))


def _unpack(raw: bytes) -> Any:
    return ormsgpack.unpackb(raw, ext_hook=_Ext)


def _to_json(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise _NotJsonError("too deep")
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise _NotJsonError("integer out of range")
    if kind is float:
        if math.isfinite(value) and not (value == 0.0 and math.copysign(1.0, value) < 0):
            return value
        raise _NotJsonError("float")
    if kind is list:
        return [_to_json(item, depth + 1) for item in value]
    if kind is dict:
        if any(type(key) is not str or key.startswith("$") for key in value):
            raise _NotJsonError("keys")
        return {key: _to_json(item, depth + 1) for key, item in value.items()}
    if kind is bytes:
        return {"$bin": base64.b64encode(value).decode("ascii")}
    if kind is _Ext:
        try:
            inner = _to_json(_unpack(value.data), depth + 1)
        except (_NotJsonError, ormsgpack.MsgpackDecodeError, TypeError, ValueError):
            return {"$ext": value.code, "$b64": base64.b64encode(value.data).decode("ascii")}
        return {"$ext": value.code, "$data": inner}
    raise _NotJsonError(kind.__name__)


def _to_msgpack(value: Any) -> Any:
    if isinstance(value, Mapping):
        if "$bin" in value:
            return base64.b64decode(value["$bin"])
        if "$ext" in value:
            data = (base64.b64decode(value["$b64"]) if "$b64" in value
                    else ormsgpack.packb(_to_msgpack(value["$data"])))
            return ormsgpack.Ext(value["$ext"], data)
        return {key: _to_msgpack(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_to_msgpack(item) for item in value]
    return value
