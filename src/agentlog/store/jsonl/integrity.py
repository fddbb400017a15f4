"""Integrity of a JSONL transcript: its bytes checked against the digests in its seek sidecar.

Every append records in the sidecar (``store.jsonl.seek``, format 2) the digest of exactly the
bytes it wrote, so the transcript itself stays byte-identical to DSH's. ``check_transcript``
hashes each recorded span of the file again: a span that differs, or that the file no longer
holds, is damage (``SessionCorruptionError`` naming the file, the byte span and the batch's
first seq); bytes no record covers (written by DSH, before format 2, or after a crash that lost
the unsynced sidecar) are reported as unchecked, never as damage.
"""

from __future__ import annotations

from pathlib import Path

from agentlog.errors import SessionCorruptionError, SessionNotFoundError
from agentlog.store.integrity import Integrity, digest_of
from agentlog.store.jsonl.forks import JsonlForks
from agentlog.store.jsonl.seek import Batch, SeekIndex
from agentlog.store.records import Recovery

__all__ = ["JsonlIntegrity", "check_transcript"]


class JsonlIntegrity(JsonlForks):
    """The JSONL store's integrity check (``Store.check_integrity``)."""

    def _check_integrity(self, session_id: str, torn: Recovery | None) -> Integrity:
        """The transcript's bytes against its sidecar's digests (the sidecar is read first: an
        append in between only adds bytes no digest covers yet)."""
        path = self._find(session_id)
        records = self._seek.records(path) if path is not None else None
        read = self._read_file(path) if path is not None else None
        if path is None or read is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        return check_transcript(path, records, read[0], None if torn is None else torn.torn_offset,
                                session_id=session_id)


def check_transcript(transcript: Path, records: tuple[list[Batch | None], bool] | None, data: bytes,
                     torn_from: int | None = None, *, session_id: str | None = None) -> Integrity:
    """Check ``data`` (the transcript's bytes, read after its sidecar's ``records``) against the
    digests the sidecar holds; raises ``SessionCorruptionError`` for the first span that differs.

    Spans reaching the torn tail the log's scan found at ``torn_from``, or past the end of the
    file, are not held against it: that is how a crash leaves a file (the torn-tail report says
    what a load keeps); they are named in ``detail``."""
    sidecar = SeekIndex.path_of(transcript)
    if records is None:
        return Integrity("none", f"no integrity data: no sidecar {sidecar.name} (written by a writer "
                                 "that keeps none, such as DSH)")
    batches, hashed = records
    if not hashed:
        return Integrity("none", f"no integrity data: {sidecar.name} is of format 1 (written before "
                                 "agentlog kept digests)")
    limit = len(data) if torn_from is None else min(torn_from, len(data))
    view, covered, beyond = memoryview(data), [], 0
    for batch in batches:
        if batch is None or batch.hashed_from >= batch.after[2]:
            continue
        start, end = batch.hashed_from, batch.after[2]
        if end > limit:
            beyond = max(beyond, end)
            continue
        if digest_of(view[start:end]) != batch.digest:
            raise SessionCorruptionError(
                f"corrupt session log: bytes {start}..{end - 1} (the batch from seq {batch.seq}) differ "
                f"from what was written (their digest in {sidecar.name})", session_id=session_id,
                file=str(transcript), offset=start)
        covered.append((start, end))
    gaps = _gaps(covered, len(data))
    notes = [f"{damaged} damaged sidecar records skipped"
             for damaged in [sum(batch is None for batch in batches)] if damaged]
    if beyond:
        notes.append(f"bytes up to {beyond - 1} had been written whole, the "
                     + (f"torn tail from byte {limit} is not checked" if limit < len(data)
                        else f"file ends at byte {len(data)}"))
    unchecked = tuple(f"bytes {start}..{end - 1}" for start, end in gaps)
    if not covered:
        return Integrity("none", "; ".join([f"no integrity data: {sidecar.name} holds no digest", *notes]))
    if not gaps and not beyond:
        return Integrity("checked", "; ".join([f"integrity checked: all {len(data)} bytes, "
                                               f"{len(covered)} digests", *notes]))
    checked = len(data) - sum(end - start for start, end in gaps)
    lines = [f"integrity checked for {checked} of {len(data)} bytes",
             *([f"no digest for {', '.join(unchecked)}"] if unchecked else []), *notes]
    return Integrity("partial", "; ".join(lines), unchecked)


def _gaps(covered: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """The spans of ``0..size`` no span of ``covered`` holds."""
    gaps, reached = [], 0
    for start, end in sorted(covered):
        if start > reached:
            gaps.append((reached, start))
        reached = max(reached, end)
    if reached < size:
        gaps.append((reached, size))
    return gaps
