"""Responses API items (``message``, ``reasoning``, ``function_call``, ``*_call_output``, ...).

Two shapes: a JSON list of input/output items, or a request body ``{"input": [...],
"instructions", "tools", "model"}``; one session per file. The items go through
``agentlog.integrations.responses_events`` (the mapping the stream adapter and the Agents SDK session
use), which keeps every item's shell, so exporting ``openai-responses`` gives the items back.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, Final

from agentlog.core.bulk import gc_paused
from agentlog.core.events import REQUEST_HEADER, USER_MESSAGE, Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import freeze
from agentlog.errors import AgentlogError
from agentlog.integrations.responses_events import responses_events
from agentlog.io.importers.builder import Imported
from agentlog.io.importers.openai_chat import content_id
from agentlog.io.importers.source import SourceFile, json_document

__all__ = ["import_openai_responses"]

EXPECTED: Final = ('Responses API items: a JSON list of {"type": ...} / {"role", "content"} items, '
                   'or a request body {"input": [items], "instructions", "tools", "model"}')
PROVIDER: Final = "openai"
ORPHAN_OUTPUT: Final = "tool output that answers no open call (kept as a user message)"
"""The unmapped note of an output whose call is not before it, or was answered already."""
_ROLES: Final = frozenset({"user", "assistant", "system", "developer"})
_BODY_KEYS: Final = frozenset({"input", "instructions", "tools", "model"})
_TOOL_KEYS: Final = frozenset({"type", "name", "description", "parameters"})


def _checked_item(source: SourceFile, item: Any, where: str) -> None:
    """Refuse what is not a Responses item: a non-object, a message of another API, an untyped object."""
    if not isinstance(item, dict):
        raise source.error(f"{where} is a JSON {type(item).__name__}, not an object; expected {EXPECTED}")
    kind = item.get("type", "message")
    if kind == "message":
        role, content = item.get("role"), item.get("content")
        if not isinstance(role, str) or role not in _ROLES:
            raise source.error(f"{where} is a message with role {role!r} (Responses roles: "
                               f"{', '.join(sorted(_ROLES))}); expected {EXPECTED}")
        if not isinstance(content, (str, list)):
            shape = type(content).__name__
            raise source.error(f"{where} is a {role} message whose content is a JSON {shape}, "
                               f"not a string or a list of parts; expected {EXPECTED}")
        extra = sorted(set(item) - {"type", "role", "content", "id", "status", "phase"})
        if extra:
            raise source.error(f"{where} is a {role} message with keys {extra} no Responses message has; "
                               f"expected {EXPECTED}")
    elif not isinstance(kind, str) or not kind:
        raise source.error(f"{where} has no item type (\"type\": {kind!r}); expected {EXPECTED}")


def _tools(tools: Any, unmapped: dict[str, int]) -> list[dict[str, Any]] | None:
    """Function tools as agentlog schemas; other tools and keys are counted."""
    schemas = []
    for tool in tools if isinstance(tools, list) else ():
        kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
        if not isinstance(tool, dict) or kind != "function" or not isinstance(tool.get("name"), str):
            _count(unmapped, f"tool of type {kind!r}")
            continue
        for key in sorted(set(tool) - _TOOL_KEYS):
            if key != "strict" or tool[key] is not False:  # the export writes strict: false
                _count(unmapped, f"function tool key {key!r}")
        description = tool.get("description")
        schemas.append({"name": tool["name"],
                        "description": description if isinstance(description, str) else "",
                        "parameters": tool.get("parameters") or {"type": "object", "properties": {}}})
    return schemas or None


def _count(unmapped: dict[str, int], kind: str) -> None:
    unmapped[kind] = unmapped.get(kind, 0) + 1


def _request_header(body: Mapping[str, Any], model: str, unmapped: dict[str, int]) -> dict[str, Any]:
    header: dict[str, Any] = {"config": {"provider": PROVIDER, "model": model}}
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        header["system"] = instructions
    elif instructions is not None and not isinstance(instructions, str):
        _count(unmapped, "instructions that are not a string")
    tools = _tools(body.get("tools"), unmapped)
    if tools:
        header["tools"] = tools
    return header


def _with_header(wire: list[dict[str, Any]], header: dict[str, Any]) -> list[dict[str, Any]]:
    """``wire`` with a ``request/header`` right after its first ``turn/start`` (seqs shifted by one)."""
    def shifted(event: dict[str, Any]) -> dict[str, Any]:
        moved = {**event, "seq": event["seq"] + 1}
        if "sourceEventSeqs" in event:
            moved["sourceEventSeqs"] = [seq + 1 if seq >= 1 else seq for seq in event["sourceEventSeqs"]]
        return moved

    first, *rest = wire
    logged = {"type": REQUEST_HEADER, "seq": 1, "time": first["time"], "data": {"header": header,
                                                                              "reason": "initial"}}
    return [first, logged, *(shifted(event) for event in rest)]


def _document(source: SourceFile) -> tuple[list[Any], Mapping[str, Any], str]:
    """The items, the request body around them (``{}`` for a bare list) and how errors name an item."""
    document = json_document(source, EXPECTED)
    if isinstance(document, dict) and isinstance(document.get("input"), list):
        items, body, prefix = document["input"], document, "input item"
    elif isinstance(document, list):
        items, body, prefix = document, {}, "item"
    else:
        raise source.error(f"a JSON {type(document).__name__} of another shape; expected {EXPECTED}")
    if not items:
        raise source.error(f"no items; expected {EXPECTED}")
    return items, body, prefix


def _frozen_items(source: SourceFile, items: list[Any], prefix: str) -> list[Any]:
    """Each item checked and frozen once: the adapter reuses frozen values instead of copying them."""
    frozen = []
    for index, item in enumerate(items):
        _checked_item(source, item, f"{prefix} {index}")
        try:
            frozen.append(freeze(item, root=f"{prefix} {index}", what=f"{prefix} {index} is not plain JSON"))
        except AgentlogError as exc:
            raise source.error(f"{exc}; expected {EXPECTED}") from None
    return frozen


def import_openai_responses(source: SourceFile) -> list[Imported]:
    """The one session of a list of Responses items or a request body (pure).

    Built with the cyclic GC paused (``agentlog.core.bulk``): its full collections re-scan every
    value built so far, which made a long import quadratic."""
    with gc_paused():
        return _import(source)


def _import(source: SourceFile) -> list[Imported]:
    items, body, prefix = _document(source)
    items = _frozen_items(source, items, prefix)
    unmapped: dict[str, int] = {}
    for key in sorted(set(body) - _BODY_KEYS):
        _count(unmapped, f"request key {key!r}")
    named = body.get("model")
    model = named if isinstance(named, str) and named else "unknown"
    session_id = content_id("openai-responses", source.data)
    header = SessionHeader(id=session_id, created_at=0, extra=freeze(
        {"importedFrom": {"format": "openai-responses", "file": source.name}}))
    ids = itertools.count(1)
    wire = responses_events(items, time=0, provider=PROVIDER, model=model, new_id=lambda: f"i{next(ids)}")
    orphans = sum(e["type"] == USER_MESSAGE and e["data"]["source"]["kind"] == "tool" for e in wire)
    if orphans:
        unmapped[ORPHAN_OUTPUT] = orphans
    wire = _with_header(wire, _request_header(body, model, unmapped))
    events = []
    for event in wire:
        try:
            events.append(Event.from_wire(event))
        except AgentlogError as exc:
            raise exc.locate(session_id=session_id, seq=event["seq"], event_type=event["type"]) from None
    return [Imported(header, tuple(events), dict(sorted(unmapped.items())))]
