"""Real sessions with no compaction of their own, cut where a context threshold was crossed.

A cut probe set names a Codex or Claude Code transcript and ``before_line``: the history is what
the importer makes of the lines before it (the first model call whose input went over the
threshold, and everything before it), the point where a pressure compaction would have run.
With no summary to compare against, every candidate gets the set's ``budget_chars`` and
``budget_tokens``, fixed when the probes were written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from agentlog.compaction.fidelity_report import ClaudeCompaction
from agentlog.core.session import Session
from agentlog.io.importers.claude_code import import_claude_code
from agentlog.io.importers.codex import import_codex
from agentlog.io.importers.source import SourceFile

__all__ = ["CUT_IMPORTERS", "load_cut_session"]

CUT_IMPORTERS: Final = {"codex": import_codex, "claude-code": import_claude_code}
"""The transcript formats a cut probe set may name."""


def load_cut_session(path: Path, fmt: str, before_line: int) -> ClaudeCompaction:
    """The derived messages of the first ``before_line - 1`` lines of ``path`` (no summary)."""
    importer = CUT_IMPORTERS.get(fmt)
    if importer is None:
        raise ValueError(f"{path}: unknown cut format {fmt!r}; expected one of {sorted(CUT_IMPORTERS)}")
    lines = path.read_bytes().splitlines(keepends=True)
    if not 1 < before_line <= len(lines) + 1:
        raise ValueError(f"{path}: before_line {before_line} outside 2..{len(lines) + 1}")
    first = importer(SourceFile(str(path), b"".join(lines[:before_line - 1])))[0]
    session = Session.restore(first.header.id, [event.to_wire() for event in first.events], first.header)
    return ClaudeCompaction(first.header.id, tuple(session.derive_messages()), "", "cut", None,
                            first.header.cwd)
