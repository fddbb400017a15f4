"""What a compaction entry point returns (spec compaction §2 T18), or why manual compaction declined."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agentlog.compaction.region import Region

__all__ = ["CompactionResult", "CompactionSkipped"]


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """The seqs of the bracket, the summary, and the span it shadowed with its token price."""

    compaction_id: str
    source_command_id: str | None
    start_seq: int
    summary_seq: int
    checkpoint_seq: int
    end_seq: int
    summary: tuple[Any, ...]
    shadowed_range: Region
    shadowed_seqs: tuple[int, ...]
    shadowed_token_count: int

    @property
    def compacted(self) -> Literal[True]:
        """Always True: a bracket was committed (``CompactionSkipped.compacted`` is False)."""
        return True


@dataclass(frozen=True, slots=True)
class CompactionSkipped:
    """Manual compaction declined, writing nothing: the span is a previous checkpoint and too little else.

    Re-summarizing a checkpoint with nothing (or less than ``CompactionConfig.min_new_tokens``) new
    would only replace a summary with a summary of it, losing detail for no gain.
    """

    session_id: str
    reason: str
    shadowed_range: Region  # the span that would have been replaced
    checkpoint_seqs: tuple[int, ...]  # the checkpoints inside it, in surface order
    new_tokens: int  # the meter's price of the span outside those checkpoints

    @property
    def compacted(self) -> Literal[False]:
        """Always False: nothing was written."""
        return False
