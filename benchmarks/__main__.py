"""``python -m benchmarks [SUITE ...]``: run benchmark suites on the standard workload.

Prints a table (rich), and optionally writes JSON (``--out``) and Markdown (``--markdown``).
Exit status: 0 when every phase ran (missed targets are reported, not fatal), 1 when a phase
failed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from benchmarks.runner import Options, child_main, registered_suites, run_suites

__all__ = ["main"]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _parser(suites: Sequence[str], backends: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure agentlog on the standard workload (bench/WORKLOAD.md): every figure is the "
                    "median of --runs runs after a discarded warm-up, beside its ratio to a physical "
                    "baseline measured in the same run and its target.",
    )
    parser.add_argument("suite", nargs="*", help=f"suites to run: {', '.join(suites)}, or all (default)")
    parser.add_argument("--suites", action="append", default=[], metavar="LIST",
                        help="comma-separated suites (same as the positional names)")
    parser.add_argument("--turns", type=_positive, default=1000,
                        help="turns T of the workload (default 1000)")
    parser.add_argument("--runs", type=_positive, default=5, help="measured runs per phase (default 5)")
    parser.add_argument("--warmup", type=_non_negative, default=1, help="discarded warm-up runs (default 1)")
    parser.add_argument("--backends", action="append", default=[], metavar="LIST",
                        help=f"comma-separated store backends (default all: {', '.join(backends)})")
    parser.add_argument("--out", type=Path, metavar="FILE", help="write the report as JSON")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="write the report as a Markdown table")
    parser.add_argument("--tmp-dir", type=Path, metavar="DIR",
                        help="where temporary stores go (fsync cost depends on this disk)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--peer-timeout", type=float, metavar="SECONDS",
                        help="budget of one peer phase run (default $AGENTLOG_BENCH_PEER_TIMEOUT or 600)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, run the suites, print and write the report."""
    from benchmarks.store import BACKENDS

    suites = registered_suites()
    parser = _parser(list(suites), list(BACKENDS))
    args = parser.parse_args(argv)
    if args.child is not None:
        return child_main(args.child)
    names = _split([*args.suite, *args.suites]) or ["all"]
    if "all" in names:
        names = list(suites)
    unknown = [name for name in names if name not in suites]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(suites)}, all")
    if args.tmp_dir is not None and not args.tmp_dir.is_dir():
        parser.error(f"--tmp-dir {args.tmp_dir}: not a directory")
    for option, path in (("--out", args.out), ("--markdown", args.markdown)):
        if path is not None and not path.parent.is_dir():
            parser.error(f"{option} {path}: its directory does not exist")
    backends = _split(args.backends)
    bad = [name for name in backends if name not in BACKENDS]
    if bad:
        parser.error(f"unknown backend(s) {', '.join(bad)}; known: {', '.join(BACKENDS)}")
    options = Options(turns=args.turns, runs=args.runs, warmup=args.warmup,
                      backends=tuple(dict.fromkeys(backends)) or tuple(BACKENDS),
                      tmp_dir=args.tmp_dir, quiet=args.quiet, peer_timeout=args.peer_timeout)
    report = run_suites(list(dict.fromkeys(names)), options, Console(stderr=True))
    out = Console()
    if not out.is_terminal:
        out = Console(width=200)
    report.print_table(out)
    if args.out is not None:
        args.out.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    if args.markdown is not None:
        args.markdown.write_text(report.to_markdown(), encoding="utf-8")
    return 1 if report.errors() else 0


if __name__ == "__main__":
    sys.exit(main())
