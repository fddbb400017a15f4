"""What a committed compaction returns (spec compaction §2 T18)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentlog.compaction.region import Region

__all__ = ["CompactionResult"]


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
