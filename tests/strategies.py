"""Hypothesis strategies and small builders shared by the core test-suite.

Session operations are generated against a tiny model, so every generated sequence is
valid; operations refer to earlier operations by index (not seq), so log-only noise can
be interleaved anywhere without invalidating a replace or a citation.
"""

from __future__ import annotations

import collections
import decimal
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from agentlog import Event, Replace, Session
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER

# -- builders ---------------------------------------------------------------------------


def user_message(msg_id: str, text: str = "hi", source: Any = None) -> dict[str, Any]:
    """A ``user/message`` payload (the data *is* the message)."""
    return {
        "id": msg_id,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": source if source is not None else {"kind": "user"},
    }


def assistant_data(
    msg_id: str,
    text: str | None = "ok",
    *,
    calls: tuple[str, ...] = (),
    turn: int = 1,
    step: int = 1,
    usage: Any = None,
) -> dict[str, Any]:
    """An ``assistant/message`` payload; ``text=None`` and no calls gives empty content."""
    content: list[Any] = [] if text is None else [{"type": "text", "text": text}]
    content += [{"type": "tool-call", "id": call, "name": "read", "arguments": "{}"} for call in calls]
    data: dict[str, Any] = {
        "turn": turn,
        "step": step,
        "message": {
            "id": msg_id,
            "role": "assistant",
            "content": content,
            "source": {"kind": "model", "provider": "p", "model": "m"},
        },
    }
    if usage is not None:
        data["usage"] = usage
    return data


def tool_result_data(
    call_id: str,
    text: str = "result",
    *,
    msg_id: str | None = None,
    is_error: Any = None,
    meta: Any = None,
    error: Any = None,
    turn: int = 1,
    step: int = 1,
) -> dict[str, Any]:
    """A ``tool/result`` payload whose single block answers ``call_id``."""
    block: dict[str, Any] = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": [{"type": "text", "text": text}],
    }
    if is_error is not None:
        block["isError"] = is_error
    data: dict[str, Any] = {
        "turn": turn,
        "step": step,
        "message": {
            "id": msg_id or f"result-{call_id}",
            "role": "user",
            "content": [block],
            "source": {"kind": "tool", "callId": call_id},
        },
    }
    if error is not None:
        data["error"] = error
    if meta is not None:
        data["meta"] = meta
    return data


def header_wire(session_id: str = "s", **extra: Any) -> dict[str, Any]:
    """A minimal valid wire session header."""
    return {"version": 0, "id": session_id, "createdAt": 1, **extra}


def fixed_clock(start: int = 1_000) -> Any:
    """A deterministic millisecond clock that ticks by one per call."""
    ticks = iter(range(start, start + 10**9))
    return lambda: next(ticks)


def snapshot(session: Session) -> tuple[Any, ...]:
    """Everything a refused append must leave unchanged (compare with ``assert_unchanged``)."""
    surface = session.surface
    return (
        session.events,
        list(session.events),
        session.seq,
        surface.nodes,
        list(surface.nodes),
        surface.replace_generation,
        [id(m) for m in session.derive_messages()],
    )


def assert_unchanged(session: Session, before: tuple[Any, ...]) -> None:
    """The log, its snapshot object, the seq, the surface (identity and value) are as before."""
    events, event_list, seq, view, nodes, generation, message_ids = before
    assert session.events is events
    assert list(session.events) == event_list
    assert all(a is b for a, b in zip(session.events, event_list, strict=True))
    assert session.seq == seq == len(event_list)
    assert session.surface.nodes is view
    assert list(session.surface.nodes) == nodes
    assert session.surface.replace_generation == generation
    assert [id(m) for m in session.derive_messages()] == message_ids


# -- lossless JSON values ---------------------------------------------------------------

safe_ints = st.one_of(
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
    st.sampled_from([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, 2**31, -(2**31), 2**32, 0]),
)
finite_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda value: not (value == 0.0 and str(value).startswith("-"))
)
json_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)
json_scalars = st.one_of(st.none(), st.booleans(), safe_ints, finite_floats, json_text)


def json_values(max_leaves: int = 20, tuples: bool = True) -> st.SearchStrategy[Any]:
    """Lossless JSON values; arrays are lists (and tuples when ``tuples``)."""

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        arrays = [st.lists(children, max_size=4)]
        if tuples:
            arrays.append(st.lists(children, max_size=4).map(tuple))
        return st.one_of(*arrays, st.dictionaries(json_text, children, max_size=4))

    return st.recursive(json_scalars, extend, max_leaves=max_leaves)


class DictSubclass(dict):  # type: ignore[type-arg]
    """A dict subclass: not a plain JSON object."""


class ListSubclass(list):  # type: ignore[type-arg]
    """A list subclass: not a plain JSON array."""


class StrSubclass(str):
    """A str subclass: not a plain JSON string."""


class IntSubclass(int):
    """An int subclass: not a plain JSON number."""


Pair = collections.namedtuple("Pair", "a b")


def bad_leaves() -> st.SearchStrategy[Any]:
    """Values ``freeze`` must refuse wherever they sit (fresh objects on each draw)."""
    return st.one_of(
        st.sampled_from([-0.0, float("nan"), float("inf"), float("-inf")]),
        st.integers(min_value=MAX_SAFE_INTEGER + 1),
        st.integers(max_value=-MAX_SAFE_INTEGER - 1),
        st.sampled_from(["\ud800", "a\udfffb", "\udc00x"]),
        st.builds(set),
        st.builds(lambda: frozenset({1})),
        st.builds(lambda: b"bytes"),
        st.builds(lambda: bytearray(b"x")),
        st.builds(lambda: decimal.Decimal("1.5")),
        st.builds(lambda: 1 + 2j),
        st.builds(object),
        st.builds(lambda: DictSubclass(a=1)),
        st.builds(lambda: ListSubclass([1])),
        st.builds(lambda: StrSubclass("s")),
        st.builds(lambda: IntSubclass(3)),
        st.builds(lambda: Pair(1, 2)),
        st.builds(lambda: collections.OrderedDict(a=1)),
        st.just(len),
    )


@st.composite
def values_with_bad_member(draw: st.DrawFn) -> tuple[Any, str]:
    """A value with one refused member buried in valid siblings, and that member's path."""
    value = draw(bad_leaves())
    path_parts: list[str] = []
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            siblings = draw(st.lists(json_scalars, max_size=3))
            index = draw(st.integers(0, len(siblings)))
            siblings.insert(index, value)
            value = siblings if draw(st.booleans()) else tuple(siblings)
            path_parts.append(f"[{index}]")
        else:
            key = draw(st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True))
            siblings_map = draw(st.dictionaries(json_text, json_scalars, max_size=3))
            siblings_map[key] = value
            value = siblings_map
            path_parts.append(f".{key}")
    return value, "data" + "".join(reversed(path_parts))


# -- session operations -----------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One append; ``replace`` and ``cites`` name earlier ops by their index in the list."""

    type: str
    data: Any
    replace: tuple[int, int] | None = None
    cites: tuple[int, ...] | None = None


NOISE_TYPES = (
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "assistant/chunk",
    "tool/call",
    "todo/write",
    "request/header",
    "request/context",
    "session/title",
    "plugin/event",
)


@st.composite
def noise_ops(draw: st.DrawFn) -> Op:
    """A log-only event (no surface markers) with an arbitrary lossless payload."""
    kind = draw(st.sampled_from(NOISE_TYPES))
    if kind == "request/header":
        data: Any = {
            "header": {"config": {"provider": "p", "model": draw(json_text) or "m"}},
            "reason": "change",
        }
    else:
        data = draw(json_values(max_leaves=6, tuples=False))
    return Op(kind, data)


def _cites(draw: st.DrawFn, count: int, *, allow_empty: bool) -> tuple[int, ...] | None:
    if count == 0 or draw(st.booleans()):
        return () if allow_empty and draw(st.booleans()) else None
    chosen = draw(
        st.lists(st.integers(0, count - 1), min_size=0 if allow_empty else 1, max_size=3, unique=True)
    )
    if not chosen and not allow_empty:
        return None
    return tuple(chosen)


@st.composite
def session_ops(draw: st.DrawFn, max_ops: int = 25) -> list[Op]:
    """A valid sequence of surface appends, replaces and tool-result rewrites (no noise)."""
    ops: list[Op] = []
    nodes: list[int] = []  # model surface, as op indices
    for _ in range(draw(st.integers(0, max_ops))):
        index = len(ops)
        text = draw(json_text)
        results = [pos for pos, ref in enumerate(nodes) if ops[ref].type == "tool/result"]
        kinds = ["user", "assistant", "empty-assistant", "tool-result"]
        if nodes:
            kinds += ["replace", "replace"]
        if results:
            kinds.append("rewrite")
        kind = draw(st.sampled_from(kinds))
        op: Op
        if kind == "user":
            source = draw(st.sampled_from([{"kind": "user"}, {"kind": "plugin", "plugin": "ctx"}]))
            op = Op(
                "user/message",
                user_message(f"u{index}", text, source),
                cites=_cites(draw, index, allow_empty=False),
            )
        elif kind in ("assistant", "empty-assistant"):
            body = None if kind == "empty-assistant" else text
            usage = {"inputTokens": draw(st.integers(0, 99)), "outputTokens": 1}
            calls = (f"call{index}",) if body is not None and draw(st.booleans()) else ()
            op = Op(
                "assistant/message",
                assistant_data(f"a{index}", body, calls=calls, usage=usage),
                cites=_cites(draw, index, allow_empty=True),
            )
        elif kind == "tool-result":
            op = Op(
                "tool/result",
                tool_result_data(f"call{index}", text, meta=draw(st.none() | json_values(4, False))),
                cites=_cites(draw, index, allow_empty=False),
            )
        elif kind == "replace":
            start = draw(st.integers(0, len(nodes) - 1))
            end = draw(st.integers(start, len(nodes) - 1))
            shadowed = nodes[start : end + 1]
            extra = draw(st.lists(st.integers(0, index - 1), max_size=2))
            cites = list(dict.fromkeys([*shadowed, *extra]))
            cites = draw(st.permutations(cites))
            replacer = draw(st.sampled_from(["user/message", "assistant/message"]))
            data = (
                user_message(f"c{index}", text, {"kind": "plugin", "plugin": "compact"})
                if replacer == "user/message"
                else assistant_data(f"r{index}", text)
            )
            op = Op(replacer, data, replace=(nodes[start], nodes[end]), cites=tuple(cites))
        else:  # rewrite one current tool/result, changing only its block-0 content
            position = draw(st.sampled_from(results))
            target = ops[nodes[position]]
            data = _rewritten(target.data, text)
            op = Op("tool/result", data, replace=(nodes[position], nodes[position]), cites=(nodes[position],))
        ops.append(op)
        if op.replace is None:
            nodes.append(index)
        else:
            start_pos, end_pos = nodes.index(op.replace[0]), nodes.index(op.replace[1])
            nodes[start_pos : end_pos + 1] = [index]
    return ops


def _rewritten(data: dict[str, Any], text: str) -> dict[str, Any]:
    message = data["message"]
    block = {**message["content"][0], "content": [{"type": "text", "text": f"[pruned] {text}"}]}
    return {**data, "message": {**message, "content": [block]}}


@st.composite
def interleaved(draw: st.DrawFn, ops: list[Op]) -> list[Op]:
    """``ops`` with log-only noise inserted anywhere; references are renumbered."""
    result: list[Op] = []
    new_index: list[int] = []
    for op in ops:
        result.extend(draw(st.lists(noise_ops(), max_size=2)))
        new_index.append(len(result))
        result.append(
            Op(
                op.type,
                op.data,
                None if op.replace is None else (new_index[op.replace[0]], new_index[op.replace[1]]),
                None if op.cites is None else tuple(new_index[ref] for ref in op.cites),
            )
        )
    result.extend(draw(st.lists(noise_ops(), max_size=2)))
    return result


def run_ops(session: Session, ops: list[Op], after: Callable[[], None] | None = None) -> list[Event]:
    """Append ``ops`` to ``session`` (calling ``after`` after each); returns the logged events."""
    events: list[Event] = []
    for op in ops:
        surface_op: Any = None
        if op.type in ("user/message", "assistant/message", "tool/result"):
            surface_op = "append"
            if op.replace is not None:
                surface_op = Replace(events[op.replace[0]].seq, events[op.replace[1]].seq)
        cites = None if op.cites is None else [events[ref].seq for ref in op.cites]
        events.append(session.append(op.type, op.data, surface_op=surface_op, source_event_seqs=cites))
        if after is not None:
            after()
    return events


def model_nodes(ops: list[Op]) -> list[int]:
    """The expected surface, as op indices, by the plain rules of spec S9/S10."""
    nodes: list[int] = []
    for index, op in enumerate(ops):
        if op.type not in ("user/message", "assistant/message", "tool/result"):
            continue
        if op.replace is None:
            nodes.append(index)
        else:
            start, end = nodes.index(op.replace[0]), nodes.index(op.replace[1])
            nodes[start : end + 1] = [index]
    return nodes


# -- wire events ------------------------------------------------------------------------


@st.composite
def wire_events(draw: st.DrawFn) -> dict[str, Any]:
    """A valid wire event of any type, with valid markers for its seq."""
    seq = draw(st.integers(0, MAX_SAFE_INTEGER))
    kind = draw(st.sampled_from(["user/message", "assistant/message", "tool/result", *NOISE_TYPES]))
    wire: dict[str, Any] = {
        "type": kind,
        "seq": seq,
        "time": draw(safe_ints),
        "data": draw(json_values(max_leaves=15, tuples=False)),
    }
    if kind in ("user/message", "assistant/message", "tool/result"):
        if seq > 0 and draw(st.booleans()):
            cites = draw(st.lists(st.integers(0, seq - 1), min_size=1, max_size=4, unique=True))
            wire["sourceEventSeqs"] = cites
        elif kind == "assistant/message" and draw(st.booleans()):
            wire["sourceEventSeqs"] = []
        if draw(st.booleans()):
            wire["surfaceOp"] = "append"
        else:
            start = draw(st.integers(0, MAX_SAFE_INTEGER))
            wire["surfaceOp"] = {
                "op": "replace",
                "start": start,
                "end": draw(st.integers(0, MAX_SAFE_INTEGER)),
            }
    if draw(st.integers(0, 4)) == 0:
        wire["ignorable"] = True
    return wire


# -- conversations (exports) ------------------------------------------------------------

_TOOL_NAMES = st.sampled_from(["run", "read_file", "search"])
_TEXTS = st.one_of(st.sampled_from(["", " ", "\n\t", "ok "]), json_text)
_ARGUMENTS = st.one_of(st.just(""), st.just("{}"), st.just("not json"), st.just("[1, 2]"),
                       st.dictionaries(st.sampled_from(["cmd", "path", "q"]), json_text, max_size=2).map(
                           json.dumps))


@st.composite
def _content(draw: st.DrawFn, *, assistant: bool, call_ids: list[str]) -> list[Any]:
    """Content blocks of one message: text, images, and for an assistant reasoning and tool calls."""
    kinds = ["text", "text", "image"] + (["reasoning", "call", "call"] if assistant else [])
    blocks: list[Any] = []
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=4)):
        if kind == "text":
            blocks.append({"type": "text", "text": draw(_TEXTS)})
        elif kind == "reasoning":
            blocks.append({"type": "reasoning", "text": draw(_TEXTS)})
        elif kind == "image":
            attachment = {"attachmentId": "att-1", "mediaType": "image/png"}
            blocks.append({"type": "image", "attachment": attachment})
        else:
            call_id = f"call-{len(call_ids)}"
            call_ids.append(call_id)
            blocks.append({"type": "tool-call", "id": call_id, "name": draw(_TOOL_NAMES),
                           "arguments": draw(_ARGUMENTS)})
    return blocks


@st.composite
def conversations(draw: st.DrawFn, max_messages: int = 14) -> Session:
    """A session of user, assistant and tool-result messages in any order a log may hold them.

    Tool calls answered, left unanswered or answered late; results for calls that never were;
    reasoning with and without Anthropic signatures; images; empty messages; an optional request
    header with a system prompt and tools; and compaction checkpoints replacing any range.
    """
    session = Session.create("conv")
    if draw(st.booleans()):
        header: dict[str, Any] = {"config": {"provider": "p", "model": "m"}}
        if draw(st.booleans()):
            header["system"] = draw(json_text)
        if draw(st.booleans()):
            header["tools"] = [{"name": "run", "description": draw(json_text),
                                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
        session.append("request/header", {"header": header, "reason": "initial"})
    call_ids: list[str] = []
    nodes: list[int] = []
    for index in range(draw(st.integers(0, max_messages))):
        kind = draw(st.sampled_from(["user", "assistant", "assistant", "result", "result"]
                                    + (["compact"] if nodes else [])))
        if kind == "user":
            data: Any = {"id": f"u{index}", "role": "user", "source": {"kind": "user"},
                         "content": draw(_content(assistant=False, call_ids=call_ids))}
            event = session.append("user/message", data, surface_op="append")
        elif kind == "assistant":
            content = draw(_content(assistant=True, call_ids=call_ids))
            source: dict[str, Any] = {"kind": "model", "provider": "p", "model": "m"}
            thoughts = sum(1 for block in content if block["type"] == "reasoning")
            if thoughts and draw(st.booleans()):
                source["replayState"] = {"anthropic": {"signatures": [f"sig{n}" for n in range(thoughts)]}}
            event = session.append("assistant/message", {"turn": 1, "step": 1, "message": {
                "id": f"a{index}", "role": "assistant", "content": content, "source": source}},
                surface_op="append", source_event_seqs=[])  # a surface node even when empty
        elif kind == "result":
            call_id = draw(st.sampled_from([*call_ids, "never-called"]))
            error = draw(st.booleans())
            data = tool_result_data(call_id, draw(json_text), msg_id=f"r{index}", is_error=error)
            event = session.append("tool/result", data, surface_op="append")
        else:
            start = draw(st.integers(0, len(nodes) - 1))
            end = draw(st.integers(start, len(nodes) - 1))
            data = user_message(f"c{index}", draw(json_text), {"kind": "plugin", "plugin": "compact"})
            event = session.append("user/message", data, surface_op=Replace(nodes[start], nodes[end]),
                                   source_event_seqs=nodes[start:end + 1])
            nodes[start:end + 1] = [event.seq]
            continue
        nodes.append(event.seq)
    return session
