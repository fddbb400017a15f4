"""Other tools' session files as agentlog sessions (DESIGN §8: one module per format, pure functions).

``IMPORTERS`` maps a format name to its importer: a pure function from a ``SourceFile`` (a
path and its bytes) to the ``Imported`` sessions it holds, each with the counts of what it
could not map. ``read_source`` reads a file to import (regular files only, up to a size cap);
``save_imported`` writes one into a store. The CLI (``agentlog import``) reads
the files and renders the summary.
"""

from __future__ import annotations

from collections.abc import Callable

from agentlog.io.importers.builder import Imported
from agentlog.io.importers.claude_code import import_claude_code
from agentlog.io.importers.codex import import_codex
from agentlog.io.importers.dsh import import_dsh
from agentlog.io.importers.mini_swe_agent import import_mini_swe_agent
from agentlog.io.importers.openai_chat import import_openai_chat
from agentlog.io.importers.openai_responses import import_openai_responses
from agentlog.io.importers.source import SourceFile, read_source
from agentlog.io.importers.swe_agent import import_swe_agent
from agentlog.io.importers.writing import Outcome, save_imported

__all__ = ["IMPORTERS", "Imported", "Importer", "Outcome", "SourceFile", "read_source", "save_imported"]

Importer = Callable[[SourceFile], list[Imported]]
"""A format's importer: the sessions one file holds (several for a batch of conversations)."""

IMPORTERS: dict[str, Importer] = {
    "claude-code": import_claude_code,
    "dsh": import_dsh,
    "openai-chat": import_openai_chat,
    "openai-responses": import_openai_responses,
    "codex": import_codex,
    "swe-agent": import_swe_agent,
    "mini-swe-agent": import_mini_swe_agent,
}
"""Format name -> importer, in the order ``agentlog import --help`` lists them."""
