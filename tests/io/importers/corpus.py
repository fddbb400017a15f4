"""The real files of the shared corpus, per format (``../shared/data``)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SHARED_DATA

GLOBS = {
    "claude-code": ("transcripts/claude-code/**/*.jsonl", "transcripts-more/claude-code/**/*.jsonl"),
    "codex": ("transcripts/codex-rollout/**/*.jsonl", "transcripts-more/codex/**/*.jsonl"),
    "openai-chat": ("transcripts/openai-chat-tool-calls/**/*.json", "transcripts-more/openai-chat/**/*.json"),
    "swe-agent": ("transcripts/swe-agent-traj/**/*.traj", "transcripts-more/swe-agent/**/*.traj"),
    "mini-swe-agent": ("transcripts/mini-swe-agent-traj/**/*.traj.json",
                       "transcripts-more/mini-swe-agent/**/*.traj.json"),
}


def real_files(fmt: str) -> list[str]:
    """Paths relative to the corpus root (empty when the corpus is absent: the tests then skip or fail)."""
    if not SHARED_DATA.is_dir():
        return []
    found = (path for pattern in GLOBS[fmt] for path in SHARED_DATA.glob(pattern))
    return sorted(str(path.relative_to(SHARED_DATA)) for path in found)


def count(path: Path, needle: bytes) -> int:
    """How often ``needle`` occurs in the file (a cheap cross-check of what an importer found)."""
    return path.read_bytes().count(needle)
