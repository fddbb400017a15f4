"""Hypothesis strategies that damage bytes: flips, truncations, insertions, splices (fuzz inputs)."""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = ["mutated"]

_INTERESTING = (b"\n", b"\x00", b"{", b"}", b'"', b"\\", b"\xff", b"\xed\xa0\x80", b"-0", b"1e999",
                b'"type":"turn/end"', b"\x28\xb5\x2f\xfd", b"[" * 64)
"""Bytes that reach corners of the readers: line breaks, JSON syntax, bad UTF-8, zstd magic."""


@st.composite
def _mutation(draw: st.DrawFn, data: bytes, donors: tuple[bytes, ...]) -> bytes:
    if not data:
        return draw(st.binary(max_size=64))
    kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "splice", "overwrite"]))
    at = draw(st.integers(0, len(data)))
    if kind == "flip":
        at = min(at, len(data) - 1)
        bit = draw(st.integers(0, 7))
        return data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1:]
    if kind == "truncate":
        return data[:at]
    if kind == "insert":
        piece = draw(st.one_of(st.sampled_from(_INTERESTING), st.binary(min_size=1, max_size=16)))
        return data[:at] + piece + data[at:]
    if kind == "delete":
        return data[:at] + data[at + draw(st.integers(1, 64)):]
    if kind == "overwrite":
        piece = draw(st.one_of(st.sampled_from(_INTERESTING), st.binary(min_size=1, max_size=16)))
        return data[:at] + piece + data[at + len(piece):]
    donor = draw(st.sampled_from(donors)) if donors else data  # splice: our head, a donor's tail
    cut = draw(st.integers(0, len(donor)))
    return data[:at] + donor[cut:]


@st.composite
def mutated(draw: st.DrawFn, base: bytes, donors: tuple[bytes, ...] = (), max_mutations: int = 3) -> bytes:
    """``base`` after 1..``max_mutations`` random mutations (splices take tails of ``donors``)."""
    data = base
    for _ in range(draw(st.integers(1, max_mutations))):
        data = draw(_mutation(data, donors))
    return data
