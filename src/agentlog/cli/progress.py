"""Progress of long commands, on stderr only: a transient bar on a terminal, else a line now and then.

When stderr is not a terminal (a log file, CI, a pipe), a command still working after
``$AGENTLOG_PROGRESS_INTERVAL`` seconds (default 5) prints where it is, and again after each
further interval (from a thread, so one long step is not silent): ``search: 812 of 4,000
sessions searched``, ``import: big.jsonl: 412 MB of 1.3 GB parsed``. 0 prints a line at every
step instead (what the tests use to see work under way). Nothing goes to stdout, so ``--json``
output stays one clean document.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from agentlog.cli.render import errors, visible

__all__ = ["INTERVAL_ENV", "Tally", "interval", "meter", "size"]

INTERVAL_ENV: Final = "AGENTLOG_PROGRESS_INTERVAL"
DEFAULT_INTERVAL: Final = 5.0


def interval() -> float:
    """Seconds between two progress lines off a terminal: ``$AGENTLOG_PROGRESS_INTERVAL``, else 5
    (a value that is not a number >= 0 is ignored: progress is never worth failing a command for)."""
    try:
        seconds = float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return seconds if 0 <= seconds < math.inf else DEFAULT_INTERVAL


def size(count: int) -> str:
    """A byte count for people, in decimal units: ``950 bytes``, ``41 kB``, ``412 MB``, ``1.3 GB``."""
    if count < 1000:
        return f"{count} byte{'' if count == 1 else 's'}"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12)):
        value = count / scale
        if value < 1000 or unit == "TB":
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


class Tally:
    """A ``progress(done, total)`` callback that remembers how far the work got (for the summary a
    Ctrl-C prints) and shows it: on the bar's task, or as the text the meter's lines repeat."""

    def __init__(self, command: str, what: Callable[[int, int | None], str],
                 bar: Progress | None, task: TaskID | None, lines: _Lines | None) -> None:
        self.command = command
        self.done = 0
        self.total: int | None = None
        self.text = ""
        self._what = what
        self._bar, self._task, self._lines = bar, task, lines

    def __call__(self, done: int, total: int | None) -> None:
        self.done, self.total = done, total
        self._show(self._what(done, total), total)

    @property
    def so_far(self) -> str:
        """``812 of 4,000`` (``0`` before the first step, when the total is not known yet)."""
        return f"{self.done:,}" if self.total is None else f"{self.done:,} of {self.total:,}"

    def phase(self, text: str) -> None:
        """A step without a count (``storing 120,001 events``), shown in place of the count."""
        self._show(text, None)

    def _show(self, text: str, total: int | None) -> None:
        self.text = text
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.done, total=total, detail=text)
        elif self._lines is not None and self._lines.every == 0:
            self._lines.say(self)


class _Lines:
    """Off a terminal: every ``every`` seconds, a line per tally under way (``every`` 0: a line at
    each step instead, from the caller's thread)."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.active: list[Tally] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if every > 0:
            self._thread = threading.Thread(target=self._run, name="agentlog-progress", daemon=True)
            self._thread.start()

    def say(self, tally: Tally) -> None:
        if tally.text:
            errors.print(visible(f"{tally.command}: {tally.text}"), soft_wrap=True, highlight=False)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            for tally in list(self.active):
                self.say(tally)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _counted(unit: str) -> Callable[[int, int | None], str]:
    return lambda done, total: f"{done:,} of {total:,} {unit}" if total is not None else f"{done:,} {unit}"


class Meter:
    """Where the progress of one command goes: a rich bar on a terminal, else lines."""

    def __init__(self, command: str, bar: Progress | None, lines: _Lines | None) -> None:
        self.command = command
        self.bar = bar
        self.lines = lines

    def tally(self, label: str, unit: str) -> Tally:
        """A count of ``unit`` (``sessions searched``), as a bar labelled ``label`` or as lines."""
        return self._tally(self.command, label, _counted(unit))

    def bytes(self, name: str) -> Tally:
        """Bytes of one file (``412 MB of 1.3 GB parsed``), named ``name``."""
        def what(done: int, total: int | None) -> str:
            return f"{size(done)} of {size(total)} parsed" if total is not None else f"{size(done)} parsed"

        return self._tally(f"{self.command}: {name}", name, what)

    def finish(self, tally: Tally) -> None:
        """Stop showing ``tally`` (a file's byte count, once the file is stored)."""
        if self.bar is not None and tally._task is not None:
            self.bar.remove_task(tally._task)
        if self.lines is not None and tally in self.lines.active:
            self.lines.active.remove(tally)

    def _tally(self, command: str, label: str, what: Callable[[int, int | None], str]) -> Tally:
        task = None if self.bar is None else self.bar.add_task(visible(label), total=None, detail="")
        tally = Tally(command, what, self.bar, task, self.lines)
        if self.lines is not None:
            self.lines.active.append(tally)
        return tally


@contextmanager
def meter(command: str) -> Iterator[Meter]:
    """The progress of ``command``: a transient bar on stderr when it is a terminal, else lines
    every ``interval()`` seconds."""
    if not errors.is_terminal:
        lines = _Lines(interval())
        try:
            yield Meter(command, None, lines)
        finally:
            lines.close()
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                  console=errors, transient=True) as bar:
        yield Meter(command, bar, None)
