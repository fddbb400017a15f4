"""Narrow legacy upgrades: old DSH log shapes read as current events (spec persistence §6.2).

DSH logs written before messages had identities, or before the react-loop refactor, hold a
few shapes the current vocabulary lacks. Cold reads (``load``, ``inspect``, ``read_from``,
``open``) rewrite them in memory, after the retired-type refusal and before the Session
restore validator; the stored log is never rewritten. The upgrades:

- a message event whose message has no ``id`` gets ``legacy-message:<session-id>:<seq>``;
  a ``tool/result`` that replaces an earlier message inherits that message's id;
- ``turn/start`` loses its old ``trigger``;
- ``steering/message`` becomes ``user/message``;
- old ``turn/end`` reasons map to current ones (``aborted`` -> aborted/legacy, ``disposed``
  -> aborted/disposed, old error shapes -> ``{kind: error, error: {message, code, ...}}``).

Anything that looks legacy but does not match an old shape exactly is refused rather than
guessed at, and so is a message event left without an identified message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, NoReturn, TypeVar, cast

from agentlog.core.events import (
    ASSISTANT_MESSAGE,
    LEGACY_STEERING,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
    Replace,
    is_safe_int,
    make_event,
)
from agentlog.core.jsonvalue import freeze
from agentlog.core.packed import ChunkRun, LogEntry
from agentlog.core.storable import EXAMINED_TYPES, identified, is_current
from agentlog.errors import InvalidEventError

__all__ = [
    "chain_writers",
    "legacy_message_id",
    "needs_prefix",
    "upgrade_legacy",
    "upgrade_legacy_chain",
]

_TURN_END_KEYS: Final = frozenset({"turn", "reason"})
_TURN_START_KEYS: Final = frozenset({"turn", "trigger"})
_WRAPPED_STEERING_KEYS: Final = frozenset({"turn", "message"})
_FLAT_STEERING_KEYS: Final = frozenset({"turn", "content", "source"})
_BARE_REASONS: Final = frozenset({"completed", "blocked", "max-tokens", "interrupted"})
_FAILURE_FORM_KEYS: Final = frozenset({"kind", "step", "failure"})
_FAILURE_KEYS: Final = frozenset({"message", "code"})
_FAILURE_OPTIONAL_KEYS: Final = frozenset({"status", "providerRetryAfterMs", "requestId"})
_MESSAGE_FORM_KEYS: Final = frozenset({"kind", "step", "message"})
_CODED_MESSAGE_FORM_KEYS: Final = _MESSAGE_FORM_KEYS | {"code"}


_Events = TypeVar("_Events", bound=Sequence[LogEntry])


def legacy_message_id(session_id: str, seq: int) -> str:
    """The stable id minted for a message stored before messages had ids."""
    return f"legacy-message:{session_id}:{seq}"


def upgrade_legacy(session_id: str, events: _Events) -> _Events | list[LogEntry]:
    """``events`` with every legacy shape upgraded to its current form.

    Returns ``events`` itself when nothing needs upgrading (one pass: a set lookup per event,
    an id check per message, a shape check per ``turn/end``); otherwise a new list sharing
    every unchanged event. Never changes ``events`` (stores may share it). Raises
    ``InvalidEventError`` naming the session, seq and broken rule for a malformed legacy
    shape or a message event without an identified message.
    """
    examined = EXAMINED_TYPES  # never a packed chunk run's type: runs pass by their ``type``
    for index, event in enumerate(events):
        if event.type in examined and not is_current(cast(Event, event)) and (
            _upgrade_event(session_id, cast(Event, event), events, index) is not event
        ):
            return _upgrade_from(session_id, events, index)
    return events


def upgrade_legacy_chain(session_id: str, events: Sequence[LogEntry],
                         writers: Sequence[tuple[int, str]], first_seq: int = 0) -> Sequence[LogEntry]:
    """``upgrade_legacy`` for a log that other sessions wrote part of (a fork sharing its
    ancestors' prefix): ``writers`` gives ``(first seq, session id)`` of each segment in log
    order, the session's own last. A segment's pre-identity messages are named after the
    session that wrote it, as a copied fork's are; ``events`` start at ``first_seq``.
    """
    if not writers:
        return upgrade_legacy(session_id, events)
    if writers[0][0] > first_seq:  # events before the first named segment are the session's own
        writers = [(first_seq, session_id), *writers]
    starts = [min(max(seq - first_seq, 0), len(events)) for seq, _writer in writers]
    done: Sequence[LogEntry] = []
    for index, (start, (_seq, writer)) in enumerate(zip(starts, writers, strict=True)):
        end = starts[index + 1] if index + 1 < len(starts) else len(events)
        if start < end:
            done = upgrade_legacy(writer, [*done, *events[start:end]])
    return done


def chain_writers(shared: Iterable[tuple[int, str]], own_start: int,
                  session_id: str) -> list[tuple[int, str]]:
    """The ``writers`` of ``upgrade_legacy_chain`` for a fork: ``(first seq, ancestor id)`` of each
    shared segment, oldest first, then the session's own part; empty when nothing is shared."""
    writers = list(shared)
    if writers:
        writers.append((own_start, session_id))
    return writers


def needs_prefix(events: Sequence[LogEntry]) -> bool:
    """True when upgrading ``events`` needs earlier events: a legacy ``tool/result`` replacement.

    Such a replacement inherits the id of the message it replaces, so a suffix read
    (``read_from``) must upgrade the whole log to name it.
    """
    for event in events:
        if isinstance(event, Event) and event[0] == TOOL_RESULT and isinstance(event[4], Replace) and (
            _is_legacy_tool_result(event[3])
        ):
            return True
    return False


def _upgrade_from(session_id: str, events: Sequence[LogEntry], start: int) -> list[LogEntry]:
    """The upgraded list, given that ``events[:start]`` needs no upgrade."""
    out = list(events[:start])
    examined = EXAMINED_TYPES
    for event in events[start:]:
        out.append(_upgrade_event(session_id, cast(Event, event), out, len(out))
                   if event.type in examined else event)
    return out


def _upgrade_event(session_id: str, event: Event, prior: Sequence[LogEntry], count: int) -> Event:
    """One event upgraded; ``prior[:count]`` are the (already upgraded) events before it."""
    kind = event[0]
    if kind == TURN_END:
        return _upgrade_turn_end(session_id, event)
    if kind == TURN_START:
        return _upgrade_turn_start(session_id, event)
    if kind == LEGACY_STEERING:
        event = _upgrade_steering(session_id, event)
    return _upgrade_message(session_id, event, prior, count)


# -- turns ----------------------------------------------------------------------------------------


def _malformed(session_id: str, event: Event, rule: str) -> NoReturn:
    raise InvalidEventError(f"malformed pre-react-loop {event[0]}: {rule}",
                            session_id=session_id, seq=event[1], event_type=event[0])


def _is_turn(value: Any) -> bool:
    return is_safe_int(value) and bool(value >= 1)


def _upgrade_turn_start(session_id: str, event: Event) -> Event:
    """Drop the old ``trigger`` after checking the whole old envelope ``{turn, trigger: {kind}}``."""
    data = event[3]
    if not isinstance(data, dict) or "trigger" not in data:
        return event
    trigger = data["trigger"]
    if data.keys() != _TURN_START_KEYS or not _is_turn(data["turn"]):
        _malformed(session_id, event, "data must be exactly {turn, trigger} with a positive integer turn")
    if not isinstance(trigger, dict) or type(trigger.get("kind")) is not str or not trigger["kind"]:
        _malformed(session_id, event, "trigger must be an object with a non-empty string kind")
    return _with_data(event, {"turn": data["turn"]})


def _upgrade_turn_end(session_id: str, event: Event) -> Event:
    """Map an old ``turn/end`` reason to its current form; current reasons pass unchanged.

    Every ``turn/end`` is checked against the envelope both eras share, ``{turn, reason}``.
    """
    data = event[3]
    if not isinstance(data, dict):
        return event  # no legacy shape is a non-object: the restore validator judges it
    reason = data.get("reason")
    if data.keys() != _TURN_END_KEYS or not _is_turn(data["turn"]):
        _malformed(session_id, event, "data must be exactly {turn, reason} with a positive integer turn")
    if not isinstance(reason, dict) or type(reason.get("kind")) is not str:
        _malformed(session_id, event, "reason must be an object with a string kind")
    kind = reason["kind"]
    if kind in _BARE_REASONS:
        if len(reason) != 1:
            _malformed(session_id, event, f"a {kind} reason has no keys besides kind")
        return event
    if kind == "aborted":
        if "reason" in reason:
            return event
        if len(reason) != 1:
            _malformed(session_id, event, "an old aborted reason has no keys besides kind")
        current: dict[str, Any] = {"kind": "aborted", "reason": {"kind": "legacy"}}
    elif kind == "disposed":
        if len(reason) != 1:
            _malformed(session_id, event, "a disposed reason has no keys besides kind")
        current = {"kind": "aborted", "reason": {"kind": "disposed"}}
    elif kind == "error":
        if "error" in reason:
            return event
        current = {"kind": "error", "error": _old_error(session_id, event, reason)}
    else:
        return event  # the reason union is open: unknown current kinds pass through
    return _with_data(event, {key: current if key == "reason" else value for key, value in data.items()})


def _old_error(session_id: str, event: Event, reason: Any) -> Any:
    """The current ``error`` object of an old error reason (``failure`` object or flat message)."""
    step = reason.get("step")
    if not is_safe_int(step) or step < 0:
        _malformed(session_id, event, "an old error reason needs a non-negative integer step")
    failure = reason.get("failure")
    if reason.keys() == _FAILURE_FORM_KEYS and isinstance(failure, dict) and _is_failure(failure):
        return failure
    code = reason.get("code")
    if reason.keys() != (_MESSAGE_FORM_KEYS if "code" not in reason else _CODED_MESSAGE_FORM_KEYS) or (
        type(reason["message"]) is not str or ("code" in reason and type(code) is not str)
    ):
        _malformed(session_id, event, "an old error reason is {kind, step, failure} or "
                                      "{kind, step, message, code?} with string message and code")
    return {"message": reason["message"], "code": "UNKNOWN" if code is None else code}


def _is_failure(failure: Any) -> bool:
    """An old LLM failure: string message and code; optional numeric status/retry, string requestId."""
    keys = failure.keys()
    return (
        keys >= _FAILURE_KEYS and keys <= _FAILURE_KEYS | _FAILURE_OPTIONAL_KEYS
        and type(failure["message"]) is str and type(failure["code"]) is str
        and ("status" not in failure or _is_number(failure["status"]))
        and ("providerRetryAfterMs" not in failure or _is_number(failure["providerRetryAfterMs"]))
        and ("requestId" not in failure or type(failure["requestId"]) is str)
    )


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


# -- messages -------------------------------------------------------------------------------------


def _upgrade_steering(session_id: str, event: Event) -> Event:
    """A ``user/message`` from a ``steering/message``: ``{turn, message}`` or ``{turn, content, source}``."""
    data = event[3]
    if not isinstance(data, dict):
        _malformed(session_id, event, "data must be an object")
    turn_ok = is_safe_int(data.get("turn"))
    if turn_ok and data.keys() == _WRAPPED_STEERING_KEYS and isinstance(data["message"], dict):
        return _retyped(event, USER_MESSAGE, data["message"])
    if not turn_ok or data.keys() != _FLAT_STEERING_KEYS:
        _malformed(session_id, event, "data must be {turn, message} or exactly {turn, content, source}")
    message = {key: value for key, value in data.items() if key != "turn"}
    message["id"] = legacy_message_id(session_id, event[1])
    message["role"] = "user"
    return _retyped(event, USER_MESSAGE, message)


def _is_legacy_user_message(data: Any) -> bool:
    return ("content" in data and "source" in data
            and "id" not in data and "role" not in data and "message" not in data)


def _is_legacy_tool_result(data: Any) -> bool:
    return (isinstance(data, dict) and "message" not in data
            and "callId" in data and "content" in data and "isError" in data)


def _upgrade_message(session_id: str, event: Event, prior: Sequence[LogEntry], count: int) -> Event:
    """Give a pre-identity message event its current wrapper and id; refuse one left unidentified."""
    kind, data = event[0], event[3]
    if not isinstance(data, dict):
        _unidentified(session_id, event)
    if kind == USER_MESSAGE:
        if identified(data):
            return event
        if _is_legacy_user_message(data):
            return _with_data(event, {**data, "id": legacy_message_id(session_id, event[1]), "role": "user"})
    elif identified(data.get("message")):
        return event
    elif kind == ASSISTANT_MESSAGE:
        if "message" not in data and "content" in data and "provenance" in data:
            return _with_data(event, _assistant_data(session_id, event, data))
    elif _is_legacy_tool_result(data):
        ident = _inherited_id(event, prior, count) if isinstance(event[4], Replace) else (
            legacy_message_id(session_id, event[1])
        )
        if ident is not None:
            return _with_data(event, _tool_result_data(data, ident))
    _unidentified(session_id, event)


def _unidentified(session_id: str, event: Event) -> NoReturn:
    raise InvalidEventError(f"{event[0]} lacks an identified message", session_id=session_id,
                            seq=event[1], event_type=event[0],
                            path="data" if event[0] == USER_MESSAGE else "data.message")


def _assistant_data(session_id: str, event: Event, data: Any) -> dict[str, Any]:
    """``{..., message: {id, role, content, source: {...provenance, kind: model}}}``."""
    provenance = data["provenance"]
    rest = {key: value for key, value in data.items() if key != "content" and key != "provenance"}
    rest["message"] = {
        "id": legacy_message_id(session_id, event[1]),
        "role": "assistant",
        "content": data["content"],
        "source": {**(provenance if isinstance(provenance, dict) else {}), "kind": "model"},
    }
    return rest


def _tool_result_data(data: Any, ident: str) -> dict[str, Any]:
    """``{..., message: {id, role, content: [one tool-result block], source: {kind: tool, callId}}}``."""
    call_id = data["callId"]
    rest = {key: value for key, value in data.items() if key not in ("callId", "content", "isError")}
    rest["message"] = {
        "id": ident,
        "role": "user",
        "content": [{"type": "tool-result", "toolCallId": call_id, "content": data["content"],
                     "isError": data["isError"]}],
        "source": {"kind": "tool", "callId": call_id},
    }
    return rest


def _inherited_id(event: Event, prior: Sequence[LogEntry], count: int) -> str | None:
    """The id of the message at the replacement's ``start`` seq among the earlier events, if any."""
    start = event[4].start
    if count == 0:
        return None
    first = prior[0]  # a log's first slot: a packed run there starts at that slot's seq
    position = start - (first.seq0 if isinstance(first, ChunkRun) else first[1])
    target = prior[position] if 0 <= position < count else None
    if not isinstance(target, Event) or target[1] != start:
        return None
    data = target[3]
    message = data if target[0] == USER_MESSAGE else (data.get("message") if isinstance(data, dict) else None)
    ident = message.get("id") if isinstance(message, dict) else None
    return ident if type(ident) is str else None


# -- building -------------------------------------------------------------------------------------


def _with_data(event: Event, data: Any) -> Event:
    return _retyped(event, event[0], data)


def _retyped(event: Event, kind: str, data: Any) -> Event:
    """``event`` with a new type and data (frozen; unchanged parts are reused, not copied)."""
    return make_event(kind, event[1], event[2], freeze(data, root="data"), event[4], event[5], event[6],
                      event[7])
