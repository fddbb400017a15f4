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

from agentlog.errors import SessionCorruptionError
from agentlog.store.records import Recovery

__all__ = ["DIGEST_BYTES", "Integrity", "check_rows", "digest_of", "row_digest"]

_CORRUPT: Final = "corrupt session log"
DIGEST_BYTES: Final = 16
"""Bytes of sha256 kept per span or row: 2^-128 odds that a change goes unseen."""


def digest_of(data: bytes | memoryview) -> bytes:
    """The integrity digest of stored bytes: sha256 (hardware-accelerated here, 1.8x blake2b's
    speed, measured in docs/design-notes.md), truncated to ``DIGEST_BYTES``."""
    return hashlib.sha256(data).digest()[:DIGEST_BYTES]


def row_digest(values: Iterable[object]) -> bytes:
    """The integrity digest of a database row's values (None, bool, int, str, bytes, a list of
    ints), each tagged and length-prefixed so that no two rows share an encoding."""
    hasher = hashlib.sha256()
    update = hasher.update
    for value in values:
        if value is None:
            update(b"n")
        elif type(value) is bool:
            update(b"t" if value else b"f")
        elif type(value) is list:  # an integer array (PostgreSQL's provenance column)
            update(b"a%d:" % len(value) + b",".join(b"%d" % item for item in value))
        elif type(value) is int:
            update(b"i%d;" % value)
        elif type(value) is str:
            encoded = value.encode("utf-8", "surrogatepass")
            update(b"s%d:" % len(encoded))
            update(encoded)
        elif isinstance(value, (bytes, memoryview)):
            update(b"b%d:" % len(value))
            update(value)
        else:
            raise TypeError(f"cannot digest a {type(value).__name__} column value")
    return hasher.digest()[:DIGEST_BYTES]


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
