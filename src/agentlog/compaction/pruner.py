"""The tool-result pruner: cut the middle out of oversized tool results (spec compaction §5).

Length is counted in Unicode code points of ``text`` blocks (Python's ``len``), unlike the
token meter's UTF-16 units. A pruned result keeps ``head`` code points, the fixed marker and
``tail`` code points, so a second pass changes nothing. Each rewrite is a ``tool/result``
replace of exactly one node, announced by a ``compaction/prune`` price event just before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentlog.compaction.config import PRUNE_MARKER, PrunerConfig
from agentlog.compaction.events import COMPACTION_PRUNE, prune_data
from agentlog.compaction.tokens import Pricer, TokenMeter
from agentlog.core.events import TOOL_RESULT, Event, Replace
from agentlog.core.jsonvalue import FrozenDict, frozen_dict
from agentlog.core.repair import interrupted_turn_closers
from agentlog.errors import InvariantError

if TYPE_CHECKING:
    from agentlog.core.session import Session

__all__ = ["PruneResult", "PrunedResult", "ToolResultPruner", "prune_content", "text_code_points"]


def text_code_points(blocks: Sequence[Any]) -> int:
    """Code points in the ``text`` blocks of ``blocks`` (other blocks count 0)."""
    return sum(len(block["text"]) for block in blocks if _is_text(block))


def _is_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and type(block.get("text")) is str


def prune_content(blocks: Sequence[Any], config: PrunerConfig | None = None) -> tuple[Any, ...] | None:
    """P3: remove code points ``[head, total - tail)`` across the text blocks, or None if within budget.

    Non-text blocks keep their place; the marker goes into the first text block that overlaps
    the removed range; text blocks left empty are dropped.
    """
    config = config or PrunerConfig()
    total = text_code_points(blocks)
    if total <= config.threshold_chars:
        return None
    cut_from, cut_to = config.head_chars, total - config.tail_chars
    out: list[Any] = []
    offset = 0
    marked = False
    for block in blocks:
        if not _is_text(block):
            out.append(block)
            continue
        text: str = block["text"]
        start, end = offset, offset + len(text)
        offset = end
        head = text[: max(0, min(len(text), cut_from - start))]
        tail = text[max(0, cut_to - start):] if cut_to < end else ""
        overlaps = start < cut_to and end > cut_from
        if overlaps and not marked:
            marked = True
            kept = head + PRUNE_MARKER + tail
        elif overlaps:
            kept = head + tail
        else:
            kept = text
        if kept:
            out.append(block if kept is text else frozen_dict({**block, "text": kept}))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PrunedResult:
    """One rewritten tool result."""

    original_seq: int
    replacement_seq: int
    call_id: str | None
    chars_before: int
    chars_after: int


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What one pass rewrote, and how many code points it removed in total."""

    pruned: tuple[PrunedResult, ...]
    chars_removed: int


class ToolResultPruner:
    """Prunes every oversized tool result on a session's surface, the newest included (P4)."""

    __slots__ = ("config",)

    def __init__(self, config: PrunerConfig | None = None) -> None:
        self.config = config or PrunerConfig()

    def prune_content(self, blocks: Sequence[Any]) -> tuple[Any, ...] | None:
        return prune_content(blocks, self.config)

    def prune_session(self, session: Session, meter: TokenMeter | None = None) -> PruneResult:
        """Rewrite each oversized result: ``compaction/prune`` (its price), then the replacement.

        A replacement needs an open turn (P5): outside one the pass is refused before it writes
        anything, checked or not. An append that throws propagates; earlier rewrites stay.
        """
        pricer = meter.pricer if meter is not None else Pricer()
        events = session.events
        pruned: list[PrunedResult] = []
        for seq in list(session.surface.nodes):
            event = events[seq]
            plan = self._plan(event)
            if plan is None:
                continue
            if not pruned and not interrupted_turn_closers(session.events):
                raise InvariantError("tool/result surface replacement appended outside any open turn "
                                     "(prune inside a turn)", session_id=session.id,
                                     seq=session.seq + 1, event_type=TOOL_RESULT)
            message, data, inner, replacement = plan
            session.append(COMPACTION_PRUNE, prune_data(seq, pricer.message(message)))
            rewritten = session.append(TOOL_RESULT, data, surface_op=Replace(seq, seq),
                                       source_event_seqs=(seq,))
            source = message.get("source")
            call_id = source.get("callId") if isinstance(source, dict) else None
            pruned.append(PrunedResult(seq, rewritten.seq, call_id if type(call_id) is str else None,
                                       text_code_points(inner), text_code_points(replacement)))
        removed = sum(item.chars_before - item.chars_after for item in pruned)
        return PruneResult(tuple(pruned), removed)

    def _plan(self, event: Event) -> tuple[FrozenDict, FrozenDict, Sequence[Any], tuple[Any, ...]] | None:
        """The replacement data of a prunable tool result (every other field copied), else None."""
        if event.type != TOOL_RESULT or not isinstance(event.data, dict):
            return None
        message = event.data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        block: Any = content[0] if isinstance(content, tuple) and content else None
        if not isinstance(block, dict) or block.get("type") != "tool-result":
            return None
        inner = block.get("content")
        if not isinstance(inner, tuple):
            return None
        replacement = prune_content(inner, self.config)
        if replacement is None:
            return None
        assert isinstance(message, FrozenDict) and isinstance(block, dict) and content is not None
        new_block = frozen_dict({**block, "content": replacement})
        new_message = frozen_dict({**message, "content": (new_block, *content[1:])})
        data = frozen_dict({**event.data, "message": new_message})
        return message, data, inner, replacement
