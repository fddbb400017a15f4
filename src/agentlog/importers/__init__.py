"""Other tools' session files as agentlog sessions (DESIGN §8: one module per format, pure functions).

``IMPORTERS`` maps a format name to its importer: a pure function from a ``SourceFile`` (a
path and its bytes) to the ``Imported`` sessions it holds, each with the counts of what it
could not map. ``save_imported`` writes one into a store. The CLI (``agentlog import``) reads
the files and renders the summary.
"""

from __future__ import annotations

from collections.abc import Callable

from agentlog.importers.builder import Imported
from agentlog.importers.claude_code import import_claude_code
from agentlog.importers.source import SourceFile
from agentlog.importers.writing import Outcome, save_imported

__all__ = ["IMPORTERS", "Imported", "Importer", "Outcome", "SourceFile", "save_imported"]

Importer = Callable[[SourceFile], list[Imported]]
"""A format's importer: the sessions one file holds (several for a batch of conversations)."""

IMPORTERS: dict[str, Importer] = {
    "claude-code": import_claude_code,
}
"""Format name -> importer, in the order ``agentlog import --help`` lists them."""
