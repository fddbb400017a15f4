"""The compaction event family and the checkpoint message (spec compaction §1 E1-E7).

Four log-only types bracket and price surface rewrites; the checkpoint is the one
``user/message`` that replaces the shadowed span. Builders here produce frozen data in
DSH's key order so logs written by agentlog read like DSH's own.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Final

from agentlog.core.events import USER_MESSAGE, Event
from agentlog.core.jsonvalue import FrozenDict, freeze, frozen_dict

__all__ = [
    "CHECKPOINT_CLOSE",
    "CHECKPOINT_OPEN",
    "CHECKPOINT_PREAMBLE",
    "COMPACTION_END",
    "COMPACTION_EVENT_TYPES",
    "COMPACTION_PRUNE",
    "COMPACTION_START",
    "COMPACTION_SUMMARY",
    "checkpoint_message",
    "end_data",
    "error_text",
    "is_checkpoint",
    "is_checkpoint_event",
    "prune_data",
    "start_data",
    "summary_data",
]

COMPACTION_START: Final = "compaction/start"
COMPACTION_SUMMARY: Final = "compaction/summary"
COMPACTION_END: Final = "compaction/end"
COMPACTION_PRUNE: Final = "compaction/prune"
COMPACTION_EVENT_TYPES: Final = frozenset({COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END,
                                           COMPACTION_PRUNE})
"""The log-only compaction types: never surface events, never in model history (E1)."""

CHECKPOINT_PREAMBLE: Final = (
    "The following is an automatic checkpoint: a condensed record of an earlier stretch of this "
    "conversation, written so the work can go on in less context. Take what it records as settled "
    "background and build on it. Continue the work from the messages after it, without mentioning "
    "or acknowledging this checkpoint."
)
"""agentlog's own wording of the checkpoint preamble (E7 a)."""

CHECKPOINT_OPEN: Final = "<compacted-summary>"
CHECKPOINT_CLOSE: Final = "</compacted-summary>"

_COMPACT_PLUGIN: Final = "compact"
_OPEN_BLOCK: Final = frozen_dict({"type": "text", "text": f"{CHECKPOINT_PREAMBLE}\n\n{CHECKPOINT_OPEN}"})
_CLOSE_BLOCK: Final = frozen_dict({"type": "text", "text": CHECKPOINT_CLOSE})


def _lifecycle(compaction_id: str, command_id: str | None) -> list[tuple[str, Any]]:
    parts: list[tuple[str, Any]] = [("compactionId", compaction_id)]
    if command_id is not None:
        parts.append(("sourceCommandId", command_id))
    return parts


def start_data(compaction_id: str, command_id: str | None, turn: int | None) -> FrozenDict:
    """``compaction/start`` = ``{compactionId, sourceCommandId?, turn}`` (E2)."""
    return frozen_dict([*_lifecycle(compaction_id, command_id), ("turn", turn)])


def end_data(compaction_id: str, command_id: str | None, turn: int | None,
             error: str | None = None) -> FrozenDict:
    """``compaction/end`` = ``{compactionId, sourceCommandId?, turn, error?}`` (E4)."""
    parts = [*_lifecycle(compaction_id, command_id), ("turn", turn)]
    if error is not None:
        parts.append(("error", error))
    return frozen_dict(parts)


def summary_data(
    compaction_id: str,
    command_id: str | None,
    *,
    summary: tuple[Any, ...],
    shadowed_seqs: tuple[int, ...],
    shadowed_tokens: int,
    provider: str,
    model: str,
    raw_output: tuple[Any, ...] | None = None,
    llm_stream_call: bool = False,
    max_tokens: int | None = None,
    usage: Any = None,
) -> FrozenDict:
    """``compaction/summary`` in E3's key order; ``summary``/``raw_output``/``usage`` already frozen."""
    parts = [*_lifecycle(compaction_id, command_id), ("summary", summary)]
    if raw_output is not None:
        parts.append(("rawOutput", raw_output))
    if llm_stream_call:
        parts.append(("llmStreamCall", True))
    parts += [
        ("shadowedRange", frozen_dict({"start": shadowed_seqs[0], "end": shadowed_seqs[-1]})),
        ("shadowedSeqs", shadowed_seqs),
        ("shadowedTokenCount", shadowed_tokens),
        ("provider", provider),
        ("model", model),
    ]
    if max_tokens is not None:
        parts.append(("maxTokens", max_tokens))
    if usage is not None:
        parts.append(("usage", usage))
    return frozen_dict(parts)


def prune_data(seq: int, tokens: int) -> FrozenDict:
    """``compaction/prune``: the shadow price of one pruned tool result (E5)."""
    return frozen_dict({
        "shadowedRange": frozen_dict({"start": seq, "end": seq}),
        "shadowedSeqs": (seq,),
        "shadowedTokenCount": tokens,
    })


def checkpoint_message(summary: Sequence[Any], compaction_id: str, command_id: str | None = None,
                       *, message_id: str | None = None) -> FrozenDict:
    """The framed checkpoint ``user/message`` data (E7): preamble + open tag, summary, close tag."""
    source = frozen_dict([("kind", "plugin"), ("plugin", _COMPACT_PLUGIN),
                          *_lifecycle(compaction_id, command_id)])
    blocks = tuple(summary) if type(summary) is tuple else freeze(list(summary), root="summary")
    return frozen_dict({
        "content": (_OPEN_BLOCK, *blocks, _CLOSE_BLOCK),
        "source": source,
        "role": "user",
        "id": message_id if message_id is not None else str(uuid.uuid4()),
    })


def is_checkpoint(message: Any) -> bool:
    """A message whose source is ``{kind: 'plugin', plugin: 'compact'}``; ids are not checked."""
    source = message.get("source") if isinstance(message, dict) else None
    return (isinstance(source, dict) and source.get("kind") == "plugin"
            and source.get("plugin") == _COMPACT_PLUGIN)


def is_checkpoint_event(event: Event) -> bool:
    """A ``user/message`` event carrying a compaction checkpoint."""
    return event.type == USER_MESSAGE and is_checkpoint(event.data)


def _message_of(error: BaseException) -> str:
    text = str(error)
    return text if text else type(error).__name__


def error_text(error: object) -> str:
    """E4's rendering: the message, each new ``__cause__`` after ``": "``, group members in brackets.

    A cause whose text repeats the previous one verbatim is skipped; a non-exception value is
    rendered with ``str``.
    """
    if not isinstance(error, BaseException):
        return str(error)
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = _message_of(current)
        if isinstance(current, BaseExceptionGroup):
            members = "; ".join(_message_of(member) for member in current.exceptions)
            text = f"{current.message or type(current).__name__} [{members}]"
        if not parts or parts[-1] != text:
            parts.append(text)
        current = current.__cause__
    return ": ".join(parts)
