"""agentlog: crash-safe, event-sourced sessions for LLM agents.

The public API lives here and only here; submodules are implementation.
"""

from agentlog.audit import AuditCheck, AuditReport, audit_session
from agentlog.compaction.config import CompactionConfig
from agentlog.compaction.engine import Compactor
from agentlog.compaction.fidelity import FidelityReport, compaction_fidelity
from agentlog.compaction.invariants import CompactionInvariantChecker
from agentlog.compaction.pruner import ToolResultPruner
from agentlog.compaction.result import CompactionResult
from agentlog.compaction.summarizers import ExtractiveSummarizer, OpenAICompatibleSummarizer
from agentlog.compaction.summary import Summarizer, SummaryRequest, SummaryResult
from agentlog.compaction.tokens import TokenMeter
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
    StoreError,
    SummarizerError,
    SurfaceError,
    TargetPressureConfigError,
    UsageError,
    WriteFailedError,
)
from agentlog.events import KNOWN_EVENT_TYPES, SURFACE_TYPES, Event, Replace, SurfaceOp
from agentlog.exporters import EXPORTERS, ExportSource
from agentlog.exporters import export as export_session
from agentlog.follow import follow
from agentlog.fork import fork
from agentlog.gc import Collected, collect_garbage
from agentlog.header import FORMAT_VERSION, SessionHeader
from agentlog.invariants import InvariantChecker, check_invariants
from agentlog.jsonvalue import FrozenDict, freeze, is_json_value, thaw
from agentlog.messages import Message, derive_event_message, transcript
from agentlog.recorder import Recorder, Step, Turn
from agentlog.redact import SecretFinding, find_secrets, redact_text, redact_value
from agentlog.repair import interrupted_turn_closers
from agentlog.request_header import canonical_header, fold_request_header, header_equals
from agentlog.search import Hit, SearchResult, search_store
from agentlog.session import EventsView, Session
from agentlog.stats import SessionStats, StoreStats, store_stats
from agentlog.store.base import Store
from agentlog.store.jsonl import JsonlStore
from agentlog.store.memory import MemoryStore
from agentlog.store.records import Inspection, Listing, RawArtifact, Recovery, Snapshot, Unreadable
from agentlog.store.sqlite import SqliteStore
from agentlog.store.urls import open_store
from agentlog.store.writer import LiveSession
from agentlog.surface import (
    Replacement,
    Surface,
    SurfaceFold,
    fold_surface,
    is_append_surface_event,
    is_replacement_surface_event,
    is_surface_event,
)
from agentlog.upgrade import UpgradeCheck, check_upgrade

__version__ = "0.1.0"

_LAZY = {"PostgresStore": "agentlog.store.postgres"}
"""Public names whose modules need an optional extra; imported on first access."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentlog' has no attribute {name!r}")
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise MissingExtraError(
            f"{name} needs the PostgreSQL driver: pip install 'agentlog[postgres]'"
        ) from exc


__all__ = [
    "EXPORTERS",
    "FORMAT_VERSION",
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
    "OpenAICompatibleSummarizer",
    "PersistenceIOError",
    "PostgresStore",
    "RawArtifact",
    "Recorder",
    "Recovery",
    "Replace",
    "Replacement",
    "SearchResult",
    "SecretFinding",
    "Session",
    "SessionCorruptionError",
    "SessionExistsError",
    "SessionFormatUnsupportedError",
    "SessionHeader",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionStats",
    "Snapshot",
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
    "search_store",
    "store_stats",
    "thaw",
    "transcript",
]
