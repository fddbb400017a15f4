"""agentlog: crash-safe, event-sourced sessions for LLM agents.

The public API lives here and only here; submodules are implementation.
"""

from typing import TYPE_CHECKING

from agentlog.core.events import KNOWN_EVENT_TYPES, SURFACE_TYPES, Event, Replace, SurfaceOp
from agentlog.core.fork import fork
from agentlog.core.header import FORMAT_VERSION, SessionHeader
from agentlog.core.invariants import InvariantChecker, check_invariants
from agentlog.core.jsonvalue import FrozenDict, freeze, is_json_value, thaw
from agentlog.core.messages import Message, derive_event_message, transcript
from agentlog.core.repair import interrupted_turn_closers
from agentlog.core.request_header import canonical_header, fold_request_header, header_equals
from agentlog.core.session import EventsView, Session
from agentlog.core.surface import (
    Replacement,
    Surface,
    SurfaceFold,
    fold_surface,
    is_append_surface_event,
    is_replacement_surface_event,
    is_surface_event,
)
from agentlog.errors import (
    AgentlogError,
    CompactionConfigError,
    CompactionError,
    ConcurrentWriterError,
    ForkError,
    InvalidEventError,
    InvalidHeaderError,
    InvariantError,
    MissingExtraError,
    PersistenceIOError,
    SessionCorruptionError,
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    SourceFormatError,
    StoreError,
    SummarizerError,
    SurfaceError,
    TargetPressureConfigError,
    UsageError,
    WriteFailedError,
)
from agentlog.ops.follow import follow
from agentlog.ops.gc import Collected, collect_garbage
from agentlog.ops.redact import SecretFinding, find_secrets, redact_text, redact_value
from agentlog.ops.search import Hit, SearchResult, search_store
from agentlog.ops.stats import SessionStats, StoreStats, store_stats
from agentlog.recording.recorder import Recorder, Step, Turn
from agentlog.store.base import Store
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.memory import MemoryStore
from agentlog.store.records import Inspection, Listing, RawArtifact, Recovery, Snapshot, Unreadable
from agentlog.store.urls import open_store
from agentlog.store.writer import LiveSession

if TYPE_CHECKING:
    from agentlog.audit import AuditCheck, AuditReport, audit_session
    from agentlog.compaction.config import CompactionConfig, ModelPolicy, PrunerConfig
    from agentlog.compaction.engine import Compactor
    from agentlog.compaction.fidelity_score import FidelityReport, compaction_fidelity
    from agentlog.compaction.invariants import CompactionInvariantChecker
    from agentlog.compaction.pruner import ToolResultPruner
    from agentlog.compaction.result import CompactionResult, CompactionSkipped
    from agentlog.compaction.summarizers import ExtractiveSummarizer, OpenAICompatibleSummarizer
    from agentlog.compaction.summary import Summarizer, SummaryRequest, SummaryResult, SyncSummarizer
    from agentlog.compaction.tokens import TokenMeter
    from agentlog.io.exporters import EXPORTERS, ExportSource
    from agentlog.io.exporters import export as export_session
    from agentlog.io.importers import IMPORTERS, Imported, SourceFile, save_imported
    from agentlog.ops.scrub import ScrubReport, secret_locations
    from agentlog.ops.scrub import scrub as scrub_store
    from agentlog.ops.scrub_text import Secrets
    from agentlog.ops.upgrade import UpgradeCheck, check_upgrade
    from agentlog.store.postgres.store import PostgresStore
    from agentlog.store.sqlite.store import SqliteStore

from agentlog.version import __version__

_LAZY: dict[str, tuple[str, str]] = {
    "AuditCheck": ("agentlog.audit", "AuditCheck"),
    "AuditReport": ("agentlog.audit", "AuditReport"),
    "audit_session": ("agentlog.audit", "audit_session"),
    "CompactionConfig": ("agentlog.compaction.config", "CompactionConfig"),
    "ModelPolicy": ("agentlog.compaction.config", "ModelPolicy"),
    "PrunerConfig": ("agentlog.compaction.config", "PrunerConfig"),
    "Compactor": ("agentlog.compaction.engine", "Compactor"),
    "FidelityReport": ("agentlog.compaction.fidelity_score", "FidelityReport"),
    "compaction_fidelity": ("agentlog.compaction.fidelity_score", "compaction_fidelity"),
    "CompactionInvariantChecker": ("agentlog.compaction.invariants", "CompactionInvariantChecker"),
    "ToolResultPruner": ("agentlog.compaction.pruner", "ToolResultPruner"),
    "CompactionResult": ("agentlog.compaction.result", "CompactionResult"),
    "CompactionSkipped": ("agentlog.compaction.result", "CompactionSkipped"),
    "ExtractiveSummarizer": ("agentlog.compaction.summarizers", "ExtractiveSummarizer"),
    "OpenAICompatibleSummarizer": ("agentlog.compaction.summarizers", "OpenAICompatibleSummarizer"),
    "Summarizer": ("agentlog.compaction.summary", "Summarizer"),
    "SummaryRequest": ("agentlog.compaction.summary", "SummaryRequest"),
    "SummaryResult": ("agentlog.compaction.summary", "SummaryResult"),
    "SyncSummarizer": ("agentlog.compaction.summary", "SyncSummarizer"),
    "TokenMeter": ("agentlog.compaction.tokens", "TokenMeter"),
    "EXPORTERS": ("agentlog.io.exporters", "EXPORTERS"),
    "ExportSource": ("agentlog.io.exporters", "ExportSource"),
    "export_session": ("agentlog.io.exporters", "export"),
    "IMPORTERS": ("agentlog.io.importers", "IMPORTERS"),
    "Imported": ("agentlog.io.importers", "Imported"),
    "SourceFile": ("agentlog.io.importers", "SourceFile"),
    "save_imported": ("agentlog.io.importers", "save_imported"),
    "PostgresStore": ("agentlog.store.postgres.store", "PostgresStore"),
    "SqliteStore": ("agentlog.store.sqlite.store", "SqliteStore"),
    "ScrubReport": ("agentlog.ops.scrub", "ScrubReport"),
    "scrub_store": ("agentlog.ops.scrub", "scrub"),
    "secret_locations": ("agentlog.ops.scrub", "secret_locations"),
    "Secrets": ("agentlog.ops.scrub_text", "Secrets"),
    "UpgradeCheck": ("agentlog.ops.upgrade", "UpgradeCheck"),
    "check_upgrade": ("agentlog.ops.upgrade", "check_upgrade"),
}
"""Public names loaded on first access, as (module, attribute): compaction, audit, import,
export, scrub, upgrade checks and the database stores load their modules (and asyncio, sqlite3) only
when used, so ``import agentlog`` stays light; ``PostgresStore`` needs the ``postgres`` extra."""


def __getattr__(name: str) -> object:
    place = _LAZY.get(name)
    if place is None:
        raise AttributeError(f"module 'agentlog' has no attribute {name!r}")
    import importlib

    try:
        module = importlib.import_module(place[0])
    except ImportError as exc:
        if name != "PostgresStore":
            raise
        raise MissingExtraError(
            f"{name} needs the PostgreSQL driver: pip install 'agentlog[postgres]'"
        ) from exc
    value = getattr(module, place[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "EXPORTERS",
    "FORMAT_VERSION",
    "IMPORTERS",
    "KNOWN_EVENT_TYPES",
    "SURFACE_TYPES",
    "AgentlogError",
    "AuditCheck",
    "AuditReport",
    "Collected",
    "CompactionConfig",
    "CompactionConfigError",
    "CompactionError",
    "CompactionInvariantChecker",
    "CompactionResult",
    "CompactionSkipped",
    "Compactor",
    "ConcurrentWriterError",
    "Event",
    "EventsView",
    "ExportSource",
    "ExtractiveSummarizer",
    "FidelityReport",
    "ForkError",
    "FrozenDict",
    "Hit",
    "Imported",
    "Inspection",
    "InvalidEventError",
    "InvalidHeaderError",
    "InvariantChecker",
    "InvariantError",
    "JsonlStore",
    "Listing",
    "LiveSession",
    "MemoryStore",
    "Message",
    "MissingExtraError",
    "ModelPolicy",
    "OpenAICompatibleSummarizer",
    "PersistenceIOError",
    "PostgresStore",
    "PrunerConfig",
    "RawArtifact",
    "Recorder",
    "Recovery",
    "Replace",
    "Replacement",
    "ScrubReport",
    "SearchResult",
    "SecretFinding",
    "Secrets",
    "Session",
    "SessionCorruptionError",
    "SessionExistsError",
    "SessionFormatUnsupportedError",
    "SessionHeader",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionStats",
    "Snapshot",
    "SourceFile",
    "SourceFormatError",
    "SqliteStore",
    "Step",
    "Store",
    "StoreError",
    "StoreStats",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "SummaryResult",
    "Surface",
    "SurfaceError",
    "SurfaceFold",
    "SurfaceOp",
    "SyncSummarizer",
    "TargetPressureConfigError",
    "TokenMeter",
    "ToolResultPruner",
    "Turn",
    "Unreadable",
    "UpgradeCheck",
    "UsageError",
    "WriteFailedError",
    "__version__",
    "audit_session",
    "canonical_header",
    "check_invariants",
    "check_upgrade",
    "collect_garbage",
    "compaction_fidelity",
    "derive_event_message",
    "export_session",
    "find_secrets",
    "fold_request_header",
    "fold_surface",
    "follow",
    "fork",
    "freeze",
    "header_equals",
    "interrupted_turn_closers",
    "is_append_surface_event",
    "is_json_value",
    "is_replacement_surface_event",
    "is_surface_event",
    "open_store",
    "redact_text",
    "redact_value",
    "save_imported",
    "scrub_store",
    "search_store",
    "secret_locations",
    "store_stats",
    "thaw",
    "transcript",
]
