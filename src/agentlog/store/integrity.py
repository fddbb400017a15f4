"""Integrity of stored bytes: what a backend's own hashes say about a session, for ``verify``.

Each durable backend keeps a digest beside what it writes (JSONL: per-batch spans in the seek
sidecar, ``store.jsonl.integrity``; SQL: a checksum per event row and header), computed on write.
``Integrity`` is the answer a check gives: every stored byte matched, some had no digest, none
had one, or some differ from what was written (a ``SessionCorruptionError`` naming where).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson

from agentlog.errors import SessionCorruptionError
from agentlog.store.records import Recovery

__all__ = ["DIGEST_BYTES", "Integrity", "check_rows", "digest_of", "row_digest", "torn_seq"]

_CORRUPT: Final = "corrupt session log"
DIGEST_BYTES: Final = 16
"""Bytes of sha256 kept per span or row: 2^-128 odds that a change goes unseen."""


def digest_of(data: bytes | memoryview) -> bytes:
    """The integrity digest of stored bytes: sha256 (hardware-accelerated here, 1.8x blake2b's
    speed, measured in docs/design-notes.md), truncated to ``DIGEST_BYTES``."""
    return hashlib.sha256(data).digest()[:DIGEST_BYTES]


def row_digest(values: Sequence[object]) -> bytes:
    """The integrity digest of a database row's values (None, bool, int, str, bytes, lists of ints):
    their JSON array as ``orjson`` writes it, the same canonical bytes the JSONL store writes (a
    bytes value as ``{"b": hex}``, which no column holds). Twice as fast as tagging each value in
    Python: 1.5 us a row."""
    return hashlib.sha256(orjson.dumps(values, default=_bytes_as_object)).digest()[:DIGEST_BYTES]


def _bytes_as_object(value: object) -> dict[str, str]:
    if isinstance(value, (bytes, memoryview)):
        return {"b": bytes(value).hex()}
    raise TypeError(f"cannot digest a {type(value).__name__} column value")


@dataclass(frozen=True, slots=True)
class Integrity:
    """What a session's integrity data says about its stored bytes (no damage: that raises)."""

    status: Literal["checked", "partial", "none"]
    """checked: every stored byte or row matched its digest; partial: all digests matched but
    some bytes or rows have none (``unchecked``); none: the session carries no integrity data."""
    detail: str
    """One line for people: what was checked, or why there is nothing to check."""
    unchecked: tuple[str, ...] = ()
    """Where no digest exists (byte spans of a file, or rows)."""

    def to_json(self) -> dict[str, Any]:
        """The ``verify --json`` shape."""
        return {"status": self.status, "detail": self.detail, "unchecked": list(self.unchecked)}


def torn_seq(torn: Recovery | None) -> int | None:
    """The first seq of a database's torn tail (the rows a load deletes), None without one."""
    return None if torn is None else torn.intact + len(torn.recovered)


def check_rows(session_id: str, header: Sequence[Any], rows: Iterable[Sequence[Any]],
               torn_from: int | None = None, *, where: str, file: str | None = None) -> Integrity:
    """Check a database session's header columns and event rows (``(seq, ...)``), each with its
    stored digest last (None: written before digests), against what was written; raises
    ``SessionCorruptionError`` naming the first row that differs. Rows from seq ``torn_from`` on
    are the torn tail ``verify`` reports as such. ``where``: the store, for people."""
    if header[-1] is not None and row_digest(header[:-1]) != bytes(header[-1]):
        raise SessionCorruptionError(f"{_CORRUPT}: the session row differs from what was written "
                                     f"(its digest) in {where}", session_id=session_id, file=file)
    checked, unchecked = 0, list[int]()
    torn = [] if torn_from is None else [f"the torn tail from seq {torn_from} is not checked"]
    for row in rows:
        seq, digest = row[0], row[-1]
        if torn_from is not None and seq >= torn_from:
            break
        if digest is None:
            unchecked.append(seq)
        elif row_digest((session_id, *row[:-1])) != bytes(digest):
            raise SessionCorruptionError(f"{_CORRUPT}: event row seq {seq} differs from what was written "
                                         f"(its digest) in {where}", session_id=session_id, seq=seq,
                                         file=file)
        else:
            checked += 1
    spans = (*(["the session row"] if header[-1] is None else []),
             *(f"event rows seq {start}..{end}" for start, end in _runs(unchecked)))
    if not checked and header[-1] is None:
        return Integrity("none", "; ".join([f"no integrity data: the rows were written before {where} "
                                            "kept digests", *torn]), spans)
    if not spans and not torn:
        return Integrity("checked", f"integrity checked: the session row and {checked} event rows")
    missing = [f"no digest for {', '.join(spans)} (written before {where} kept digests)"] if spans else []
    return Integrity("partial", "; ".join([f"integrity checked for {checked} event rows", *missing, *torn]),
                     spans)


def _runs(seqs: list[int]) -> list[tuple[int, int]]:
    """Increasing seqs as (first, last) runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for seq in seqs:
        if runs and runs[-1][1] == seq - 1:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    return runs
