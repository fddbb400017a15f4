"""Coverage-guided fuzzing of the readers with atheris (libFuzzer), when it is installed.

Usage: python -m tests.fuzz.atheris_main [libFuzzer flags, e.g. -runs=20000 -max_len=100000]
The first input byte picks the target (a JSONL raw or zstd transcript put through every reader, a
storage line, a zstd frame scan); the rest is damage applied to a valid seed, so the fuzzer starts
from real sessions. A crash other than ``AgentlogError`` stops the run with the input saved.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from agentlog.store import codec
    from agentlog.store.jsonl.format import scan_log
    from agentlog.store.jsonl.zstd_frames import scan_zstd_frames
    from tests.fuzz.harness import Compression, check_jsonl_readers, jsonl_seeds

from agentlog import AgentlogError


def _damage(provider: atheris.FuzzedDataProvider, data: bytes) -> bytes:
    """Apply up to four edits the fuzzer chooses: byte overwrite, truncation, insertion."""
    for _ in range(provider.ConsumeIntInRange(1, 4)):
        if not data:
            break
        at = provider.ConsumeIntInRange(0, len(data) - 1)
        kind = provider.ConsumeIntInRange(0, 2)
        if kind == 0:
            data = data[:at] + bytes([provider.ConsumeInt(1) & 0xFF]) + data[at + 1:]
        elif kind == 1:
            data = data[:at]
        else:
            data = data[:at] + provider.ConsumeBytes(provider.ConsumeIntInRange(1, 16)) + data[at:]
    return data


def test_one_input(raw: bytes) -> None:
    provider = atheris.FuzzedDataProvider(raw)
    target = provider.ConsumeIntInRange(0, 3)
    compression: Compression = "zstd" if target in (1, 3) else "none"
    seeds = jsonl_seeds(compression)
    seed = seeds[provider.ConsumeIntInRange(0, len(seeds) - 1)]
    data = _damage(provider, seed.data)
    try:
        if target < 2:
            check_jsonl_readers(compression, seed, data)
        elif target == 2:
            for line in data.split(b"\n")[1:]:
                codec.decode_line_entry(line)
            scan_log(data, compressed=False, path="f", until_seq=3)
        else:
            scan_zstd_frames(data, path="f")
            scan_log(data, compressed=True, path="f")
    except AgentlogError:
        pass


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
