"""LangGraph checkpoints as agentlog plugin events: the event payloads, pure functions both ways.

A thread's session holds three plugin event types, each logged ``ignorable`` (a reader that does
not know them, DSH's included, skips them): ``langgraph/checkpoint`` (one checkpoint: its fields,
its metadata and the channel values whose version it changed), ``langgraph/writes`` (one task's
pending writes) and ``langgraph/removed`` (checkpoints that ``delete_for_runs`` or ``prune`` took
out of view; the log keeps them). Values go through LangGraph's serde protocol; a list channel
whose new value extends a stored version is logged as that version plus its new items.
"""

from __future__ import annotations

import base64
import operator
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from agentlog.core.jsonvalue import freeze, thaw
from agentlog.errors import InvalidEventError
from agentlog.integrations.langgraph_msgpack import as_json, as_msgpack

__all__ = [
    "CHECKPOINT",
    "EVENT_TYPES",
    "MSGPACK_JSON",
    "REMOVED",
    "WRITES",
    "Serde",
    "blob_record",
    "checkpoint_record",
    "decode_payload",
    "encode_payload",
    "extends",
    "from_plain_or_serde",
    "plain_or_serde",
    "removed_record",
    "writes_record",
]

CHECKPOINT: Final = "langgraph/checkpoint"
WRITES: Final = "langgraph/writes"
REMOVED: Final = "langgraph/removed"
EVENT_TYPES: Final = frozenset({CHECKPOINT, WRITES, REMOVED})


class Serde(Protocol):
    """LangGraph's ``SerializerProtocol``: typed bytes both ways."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes]) -> Any: ...


MSGPACK_JSON: Final = "msgpack-json"
"""The third member of a ``msgpack`` payload logged as its JSON form (``langgraph_msgpack``)."""


def encode_payload(typed: tuple[str, bytes]) -> list[Any]:
    """``[type, base64]``; readable when exact: ``[type, text, "utf-8"]`` for a ``json`` payload,
    ``["msgpack", json, "msgpack-json"]`` for a ``msgpack`` one that packs back to its bytes."""
    kind, raw = typed
    if kind == "json":
        try:
            return [kind, bytes(raw).decode("utf-8"), "utf-8"]
        except UnicodeDecodeError:
            pass
    elif kind == "msgpack":
        value = as_json(bytes(raw))
        if value is not None:
            return [kind, value, MSGPACK_JSON]
    return [kind, base64.b64encode(raw).decode("ascii")]


def decode_payload(payload: Sequence[Any]) -> tuple[str, bytes]:
    """The serde's ``(type, bytes)`` back from ``encode_payload``'s form."""
    if len(payload) == 3:
        if payload[2] == MSGPACK_JSON:
            return payload[0], as_msgpack(payload[1])
        return payload[0], payload[1].encode("utf-8")
    return payload[0], base64.b64decode(payload[1])


def plain_or_serde(value: Any, serde: Serde) -> dict[str, Any]:
    """``{"json": value}`` when JSON holds it exactly (readable, filterable), else ``{"serde": payload}``."""
    try:
        frozen = freeze(value)
    except InvalidEventError:
        return {"serde": encode_payload(serde.dumps_typed(value))}
    if _same(thaw(frozen), value):
        return {"json": frozen}
    return {"serde": encode_payload(serde.dumps_typed(value))}


def _same(plain: Any, value: Any) -> bool:
    """``==`` that also tells a list from a tuple and ``1`` from ``True`` or ``1.0`` (JSON would not)."""
    if type(plain) is not type(value):
        return False
    if type(value) is dict:
        return plain.keys() == value.keys() and all(_same(plain[key], value[key]) for key in value)
    if type(value) is list:
        return len(plain) == len(value) and all(map(_same, plain, value))
    return bool(plain == value)


def from_plain_or_serde(record: Mapping[str, Any], serde: Serde) -> Any:
    """The value ``plain_or_serde`` logged (a fresh, mutable copy)."""
    if "json" in record:
        return thaw(record["json"])
    return serde.loads_typed(decode_payload(record["serde"]))


def extends(value: Any, base: Any) -> bool:
    """True when list ``value`` starts with the very objects of the non-empty list ``base``.

    Identity, not equality: ``1 == True`` would rebuild the wrong value, and LangGraph's reducers
    (``add_messages``, ``operator.add``) carry the earlier items over as they are.
    """
    return (type(value) is list and type(base) is list and 0 < len(base) <= len(value)
            and all(map(operator.is_, value, base)))


def blob_record(channel: str, version: Any, values: Mapping[str, Any], serde: Serde,
                base: tuple[Any, list[Any]] | None,
                written: Mapping[tuple[str, bytes], list[Any]] | None = None) -> dict[str, Any]:
    """One changed channel: its whole value, or ``base``'s version plus the items after it, or none.

    ``base`` is a kept value the channel's value ``extends`` (``ThreadIndex.base_for`` tested it).

    Items whose serde bytes are a pending write's (``written``: ``(type, bytes)`` -> ``[checkpoint,
    task, index]``, the writes that produced this checkpoint) name that write instead of a copy.
    """
    if channel not in values:
        return {"channel": channel, "version": version}
    value = values[channel]
    if base is not None and base[0] != version:
        kind, raw = serde.dumps_typed(value[len(base[1]):])
        found = written.get((kind, bytes(raw))) if written else None
        if found is not None:
            return {"channel": channel, "version": version, "base": base[0], "itemsOf": found}
        return {"channel": channel, "version": version, "base": base[0], "items": encode_payload((kind, raw))}
    return {"channel": channel, "version": version, "value": encode_payload(serde.dumps_typed(value))}


def checkpoint_record(ns: str, checkpoint: Mapping[str, Any], parent: str | None,
                      metadata: Mapping[str, Any], blobs: list[dict[str, Any]], serde: Serde,
                      messages: Sequence[str] = ()) -> dict[str, Any]:
    """The data of a ``langgraph/checkpoint`` event (the channel values are in ``blobs``).

    ``messages`` names the LangChain messages logged as agentlog messages just before it.
    """
    fields = {key: value for key, value in checkpoint.items() if key != "channel_values"}
    record = {"ns": ns, "id": checkpoint["id"], "parent": parent, "checkpoint": plain_or_serde(fields, serde),
              "metadata": plain_or_serde(dict(metadata), serde), "blobs": blobs}
    if messages:
        record["messages"] = list(messages)
    return record


def writes_record(ns: str, checkpoint_id: str, task_id: str, task_path: str,
                  writes: Sequence[tuple[int, str, Any]], serde: Serde) -> dict[str, Any]:
    """The data of a ``langgraph/writes`` event: ``[index, channel, payload]`` per write."""
    return {"ns": ns, "checkpoint": checkpoint_id, "task": task_id, "path": task_path,
            "writes": [[index, channel, encode_payload(serde.dumps_typed(value))]
                       for index, channel, value in writes]}


def removed_record(checkpoints: Sequence[tuple[str, str]], reason: str) -> dict[str, Any]:
    """The data of a ``langgraph/removed`` event: ``[ns, id]`` pairs leaving the thread's view."""
    return {"checkpoints": [[ns, checkpoint_id] for ns, checkpoint_id in checkpoints], "reason": reason}
